//! The interruption queue Karpenter's users already have: EventBridge rules deliver spot
//! interruption warnings, rebalance recommendations, scheduled changes, state changes and
//! capacity reservation warnings to an SQS queue. The consumer long-polls it (10 messages, 20 s
//! wait), hands every interruption to its sink (the loop's facts), and deletes each message once
//! handled. A body that cannot be read is logged, counted and deleted: one poison message never
//! stops the consumer or comes back forever.

use crate::calls::Calls;
use crate::error::{from_sdk, AwsError};
use dovetail_dataflow::facts::Interruption;
use dovetail_ingest::{parse_message, Reading};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the consumer has done.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QueueStats {
    pub received: u64,
    /// Interruptions handed to the sink.
    pub interruptions: u64,
    /// Messages Karpenter does not act on (another state, another service), deleted unread.
    pub ignored: u64,
    /// Bodies that could not be read, deleted.
    pub malformed: u64,
    pub deleted: u64,
    pub receive_errors: u64,
}

/// One queue and its consumer's counts.
pub struct InterruptionQueue {
    sqs: aws_sdk_sqs::Client,
    calls: Arc<Calls>,
    url: String,
    wait_seconds: i32,
    stats: Mutex<QueueStats>,
}

impl InterruptionQueue {
    /// The queue named `name_or_url` (`INTERRUPTION_QUEUE`: Karpenter takes the name; a URL is
    /// used as it is).
    pub async fn open(
        sqs: aws_sdk_sqs::Client,
        calls: Arc<Calls>,
        name_or_url: &str,
    ) -> Result<InterruptionQueue, AwsError> {
        let url = if name_or_url.starts_with("http://") || name_or_url.starts_with("https://") {
            name_or_url.to_string()
        } else {
            const ACTION: &str = "GetQueueUrl";
            let out = calls
                .run(ACTION, || async {
                    sqs.get_queue_url()
                        .queue_name(name_or_url)
                        .send()
                        .await
                        .map_err(|e| from_sdk(ACTION, e))
                })
                .await?;
            out.queue_url()
                .ok_or_else(|| {
                    AwsError::response(
                        ACTION,
                        format!("queue {name_or_url}"),
                        "QueueUrl",
                        "missing",
                    )
                })?
                .to_string()
        };
        Ok(InterruptionQueue {
            sqs,
            calls,
            url,
            wait_seconds: 20,
            stats: Mutex::new(QueueStats::default()),
        })
    }

    /// Long-polls for `seconds` (at most 20; tests use less).
    pub fn with_wait_seconds(mut self, seconds: i32) -> InterruptionQueue {
        self.wait_seconds = seconds.clamp(0, 20);
        self
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn stats(&self) -> QueueStats {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn count(&self, f: impl FnOnce(&mut QueueStats)) {
        if let Ok(mut s) = self.stats.lock() {
            f(&mut s);
        }
    }

    /// One receive: every message read, handed to `sink`, deleted. Returns how many arrived.
    pub async fn poll_once(&self, sink: &mut impl FnMut(Interruption)) -> Result<usize, AwsError> {
        const RECEIVE: &str = "ReceiveMessage";
        let out = self
            .calls
            .run(RECEIVE, || async {
                self.sqs
                    .receive_message()
                    .queue_url(&self.url)
                    .max_number_of_messages(10)
                    .wait_time_seconds(self.wait_seconds)
                    .send()
                    .await
                    .map_err(|e| from_sdk(RECEIVE, e))
            })
            .await;
        let out = match out {
            Ok(o) => o,
            Err(e) => {
                self.count(|s| s.receive_errors += 1);
                return Err(e);
            }
        };
        let messages = out.messages();
        for (i, m) in messages.iter().enumerate() {
            self.count(|s| s.received += 1);
            let body = m.body().unwrap_or_default();
            let id = m.message_id().unwrap_or("?");
            match parse_message(&format!("queue message {id}"), i + 1, body) {
                Ok(Reading::Interruptions(list)) => {
                    self.count(|s| s.interruptions += list.len() as u64);
                    for interruption in list {
                        sink(interruption);
                    }
                }
                Ok(Reading::Ignored(why)) => {
                    tracing::debug!(message = id, %why, "interruption message ignored");
                    self.count(|s| s.ignored += 1);
                }
                Err(e) => {
                    tracing::warn!(message = id, error = %e, "unreadable interruption message deleted");
                    self.count(|s| s.malformed += 1);
                }
            }
            let Some(handle) = m.receipt_handle() else {
                continue;
            };
            const DELETE: &str = "DeleteMessage";
            let deleted = self
                .calls
                .run(DELETE, || async {
                    self.sqs
                        .delete_message()
                        .queue_url(&self.url)
                        .receipt_handle(handle)
                        .send()
                        .await
                        .map_err(|e| from_sdk(DELETE, e))
                })
                .await;
            match deleted {
                Ok(_) => self.count(|s| s.deleted += 1),
                // Redelivered after the visibility timeout; handling it twice is harmless (a
                // fact set twice is one fact).
                Err(e) => {
                    tracing::warn!(message = id, error = %e, "deleting a handled message failed")
                }
            }
        }
        Ok(messages.len())
    }

    /// Consumes until `stop` is set: every interruption to `sink`. A failed receive is retried
    /// after a pause; nothing in a message stops the loop.
    pub async fn run(&self, stop: Arc<AtomicBool>, mut sink: impl FnMut(Interruption)) {
        while !stop.load(Ordering::Relaxed) {
            if let Err(e) = self.poll_once(&mut sink).await {
                tracing::warn!(error = %e, queue = %self.url, "receiving interruption messages failed");
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }
    }
}
