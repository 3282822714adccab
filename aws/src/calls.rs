//! Every AWS call goes through [`Calls::run`]: paced by a per-action token bucket, retried with
//! exponential backoff and jitter on throttling (RequestLimitExceeded, HTTP 503) and transient
//! failures, and counted by action and result code with latency percentiles. A call that still
//! fails is returned to its caller, which keeps the decision pending (see [`crate::cloud`]).

use crate::error::AwsError;
use crate::settings::AwsSettings;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Actions that change something: paced at the mutating rate.
const MUTATING: &[&str] = &[
    "CreateFleet",
    "TerminateInstances",
    "CreateTags",
    "CreateLaunchTemplate",
    "DeleteLaunchTemplate",
    "DeleteMessage",
];

/// Calls, errors and retries of one action with one result code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallCount {
    pub action: String,
    /// `OK`, or the error code.
    pub code: String,
    pub calls: u64,
    /// Attempts with this result that were followed by another attempt.
    pub retried: u64,
    pub latency_ms_p50: u64,
    pub latency_ms_p99: u64,
    pub latency_ms_max: u64,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

#[derive(Default)]
struct State {
    buckets: BTreeMap<&'static str, Bucket>,
    counts: BTreeMap<(&'static str, String), (u64, u64, Histogram<u64>)>,
    jitter: u64,
}

/// The shared call layer (one per process; cheap to share behind an `Arc`).
pub struct Calls {
    mutating_per_second: f64,
    describe_per_second: f64,
    burst: f64,
    max_attempts: u32,
    retry_base: Duration,
    retry_max: Duration,
    state: Mutex<State>,
}

impl Calls {
    pub fn new(settings: &AwsSettings) -> Calls {
        Calls {
            mutating_per_second: settings.mutating_calls_per_second.max(0.001),
            describe_per_second: settings.describe_calls_per_second.max(0.001),
            burst: settings.burst.max(1.0),
            max_attempts: settings.max_attempts.max(1),
            retry_base: settings.retry_base,
            retry_max: settings.retry_max,
            state: Mutex::new(State {
                jitter: 0x9e37_79b9_7f4a_7c15,
                ..State::default()
            }),
        }
    }

    /// Runs `call` (one attempt per invocation) until it succeeds, fails for good, or runs out
    /// of attempts.
    pub async fn run<T, F, Fut>(&self, action: &'static str, mut call: F) -> Result<T, AwsError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, AwsError>>,
    {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let wait = self.take_token(action);
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            let started = Instant::now();
            let result = call().await;
            let code = match &result {
                Ok(_) => "OK".to_string(),
                Err(e) => e.code().unwrap_or("invalid-response").to_string(),
            };
            let retry =
                matches!(&result, Err(e) if e.is_retryable()) && attempt < self.max_attempts;
            self.record(action, code, started.elapsed(), retry);
            if !retry {
                return result;
            }
            let backoff = self.backoff(attempt);
            tracing::debug!(
                action,
                attempt,
                ?backoff,
                "retrying after a throttled or transient failure"
            );
            tokio::time::sleep(backoff).await;
        }
    }

    /// Every page of a paginated call: `page` is called with each page's next token (`None`
    /// first) until an answer has none, or `max_pages` were read; each page is one paced,
    /// retried call.
    pub async fn pages<P, F, Fut>(
        &self,
        action: &'static str,
        max_pages: usize,
        mut page: F,
        next_token: impl Fn(&P) -> Option<&str>,
    ) -> Result<Vec<P>, AwsError>
    where
        F: FnMut(Option<String>) -> Fut,
        Fut: Future<Output = Result<P, AwsError>>,
    {
        let mut pages = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let answer = self.run(action, || page(token.clone())).await?;
            token = next_token(&answer)
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            pages.push(answer);
            if token.is_none() || pages.len() >= max_pages {
                return Ok(pages);
            }
        }
    }

    /// How long to wait for this action's next token (taking it).
    fn take_token(&self, action: &'static str) -> Duration {
        let rate = if MUTATING.contains(&action) {
            self.mutating_per_second
        } else {
            self.describe_per_second
        };
        let burst = self.burst;
        let now = Instant::now();
        let mut state = self.lock();
        let bucket = state.buckets.entry(action).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        let refill = now.saturating_duration_since(bucket.at).as_secs_f64() * rate;
        bucket.tokens = (bucket.tokens + refill).min(burst) - 1.0;
        bucket.at = now;
        if bucket.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-bucket.tokens / rate)
        }
    }

    /// Full jitter over an exponential ceiling.
    fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self
            .retry_base
            .saturating_mul(1u32 << attempt.min(16).saturating_sub(1))
            .min(self.retry_max);
        let mut state = self.lock();
        // xorshift64: jitter needs spread, not quality.
        let mut x = state.jitter;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        state.jitter = x;
        let fraction = (x % 1000) as f64 / 1000.0;
        ceiling.mul_f64(0.5 + fraction / 2.0)
    }

    fn record(&self, action: &'static str, code: String, latency: Duration, retried: bool) {
        let mut state = self.lock();
        let entry = state
            .counts
            .entry((action, code))
            .or_insert_with(|| (0, 0, dovetail_histogram()));
        entry.0 += 1;
        if retried {
            entry.1 += 1;
        }
        let _ = entry.2.record(latency.as_millis().max(1) as u64);
    }

    /// Counts so far, by action and code.
    pub fn counts(&self) -> Vec<CallCount> {
        let state = self.lock();
        state
            .counts
            .iter()
            .map(|((action, code), (calls, retried, h))| CallCount {
                action: action.to_string(),
                code: code.clone(),
                calls: *calls,
                retried: *retried,
                latency_ms_p50: h.value_at_quantile(0.5),
                latency_ms_p99: h.value_at_quantile(0.99),
                latency_ms_max: h.max(),
            })
            .collect()
    }

    /// Calls of `action` with result `code` so far.
    pub fn count(&self, action: &str, code: &str) -> u64 {
        self.counts()
            .iter()
            .filter(|c| c.action == action && c.code == code)
            .map(|c| c.calls)
            .sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while counting leaves counts that are still counts.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn dovetail_histogram() -> Histogram<u64> {
    // A constant configuration that cannot fail.
    Histogram::new(3).expect("3 significant figures is a valid histogram precision")
}
