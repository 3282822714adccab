//! The replay loop: a trace drives the simulated cluster and cloud on the virtual clock; the real
//! engine (provisioning and disruption) makes every decision and the replay executes them.
//!
//! At each instant with something to do (a trace event, a cloud lifecycle event, an expiring
//! capacity error, or the disruption poll every 10 s while nodes exist) the driver applies it,
//! then repeats — up to a bound — letting the simulated kube-scheduler bind what it can, telling
//! the engine what changed and acting on its decisions, until nothing changes.
//!
//! After the last trace event (and at least `settle_ms` more) the replay ends at the first
//! instant the world has settled ([`World::finished`]): no launch booting, no disruption command
//! under way or waiting for its validation, no batch window open. A cap bounds it; a replay stopped at the cap says so, and counts apart the
//! pods still waiting for a node on its way.

use super::breakdown::CostLedger;
use super::error::ReplayError;
use super::idle;
use super::summary::{CapacityTypeUsage, Percentiles, ReplaySummary, TimelineRow};
use super::world::World;
use dovetail_actuate::{histogram, BatchWindow, POLL_INTERVAL_MS};
use dovetail_dataflow::decisions::Decision;
use dovetail_ingest::trace::{TimedEvent, MAX_TRACE_MS};
use dovetail_ingest::Manifests;
use dovetail_sim::SimConfig;
use std::time::Instant;

/// How many times the engine may replan at one instant.
const MAX_STEPS_PER_INSTANT: usize = 8;

/// The default bound on simulating past the last trace event: a launch takes ~85 s and a
/// disruption command a few minutes, so two hours means something never settles.
pub const SETTLE_CAP_MS: i64 = 2 * 60 * super::world::MINUTE_MS;

/// How to replay.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    pub sim: SimConfig,
    /// Keep simulating at least this long after the last trace event (e.g. for consolidation
    /// to act on the last deletions); the replay then ends once the world has settled.
    pub settle_ms: i64,
    /// Stop at most this long after the last trace event even if launches or disruption
    /// commands are still under way (the summary says so).
    pub settle_cap_ms: i64,
    /// Timely worker threads for the engine.
    pub workers: usize,
    /// Run at this multiple of real time (None: as fast as possible).
    pub speed: Option<f64>,
    /// A name for the trace in the summary.
    pub trace_name: String,
    /// Karpenter's provisioning batch window (new pending pods wait for it to close), or
    /// [`BatchWindow::OFF`]: provisioning reacts at once.
    pub batch_window: BatchWindow,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            sim: SimConfig::default(),
            settle_ms: 0,
            settle_cap_ms: SETTLE_CAP_MS,
            workers: 1,
            speed: None,
            trace_name: String::new(),
            batch_window: BatchWindow::OFF,
        }
    }
}

/// Periodic progress for a bar or log lines.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub now_ms: i64,
    pub end_ms: i64,
    pub nodes: u64,
    pub pods_pending: u64,
}

/// The result of a replay.
#[derive(Debug, Clone)]
pub struct ReplayOutcome {
    pub summary: ReplaySummary,
    pub timeline: Vec<TimelineRow>,
    /// Every instance the simulated cloud launched, in launch order.
    pub instances: Vec<dovetail_dataflow::backend::Instance>,
}

/// Replays `events` (sorted by time) against the simulated world, starting from `initial`.
pub fn replay(
    events: &[TimedEvent],
    initial: &Manifests,
    opts: &ReplayOptions,
    mut progress: impl FnMut(Progress),
) -> Result<ReplayOutcome, ReplayError> {
    let wall = Instant::now();
    // The reader refuses these; events built in code are held to the same horizon, so the
    // signed clock below cannot wrap.
    if let Some(e) = events.iter().find(|e| e.t > MAX_TRACE_MS) {
        return Err(ReplayError::PastHorizon {
            line: e.line,
            t: e.t,
            horizon: MAX_TRACE_MS,
        });
    }
    // Disruption is decided once per poll, at multiples of the interval, as Karpenter's loop.
    let queries = dovetail_queries::standing_queries_polled(POLL_INTERVAL_MS as u64);
    let mut w = World::new(&opts.sim, queries, opts.workers)?;
    w.control.set_batch_window(opts.batch_window);
    w.apply_manifests(initial)?;

    let last_event_ms = events.last().map(|e| e.t as i64).unwrap_or(0);
    let min_end_ms = last_event_ms.saturating_add(opts.settle_ms.max(0));
    let cap_ms = last_event_ms.saturating_add(opts.settle_cap_ms.max(opts.settle_ms).max(0));
    // Where the replay ended: at the cap, or at the first instant after the last event (and
    // `settle_ms`) at which the world had settled.
    let mut end_ms = cap_ms;
    let mut settled_at: Option<i64> = None;
    let mut timeline: Vec<TimelineRow> = Vec::new();
    let mut next_minute: i64 = 0;
    let mut lower_bound_usd = 0.0;
    let mut last_t: i64 = 0;
    let mut idx = 0;
    // Progress goes out once a second of wall time: a step can take seconds at thousands of
    // nodes, so a count of steps left a big replay silent for minutes.
    let mut last_progress = Instant::now();
    // Consecutive poll instants that changed nothing in a settled world (see `idle`).
    let mut quiet_polls: u32 = 0;
    let mut polls_skipped: u64 = 0;
    let mut ledger = CostLedger::default();
    loop {
        let last = w.control.last_advance_ms();
        let poll = if !w.has_nodes() {
            None
        } else if quiet_polls >= idle::QUIET_POLLS_BEFORE_SKIPPING {
            let wake = [
                w.control.next_engine_timer_ms(),
                idle::next_budget_change_ms(
                    w.control.actuator().nodepools().values(),
                    last,
                    end_ms,
                ),
            ]
            .into_iter()
            .flatten()
            .min();
            wake.map(|t| idle::poll_at_or_after(last, t))
        } else {
            Some(idle::next_poll_after(last))
        };
        let candidates = [
            events.get(idx).map(|e| e.t as i64),
            w.cloud.next_event_ms(),
            w.control.actuator().next_expiry_ms(),
            poll,
            w.control.actuator().next_validation_ms(last_t),
            w.control.next_batch_close_ms(),
        ];
        let Some(now) = candidates.into_iter().flatten().min() else {
            // Nothing will ever happen again: the world has settled where it stands.
            let at = last_t.max(min_end_ms);
            settled_at = Some(at);
            end_ms = at;
            break;
        };
        if now > cap_ms {
            break;
        }
        // Nothing happens between `last_t` and `now`, so a world finished at `last_t` is the
        // same at `min_end_ms`.
        if idx >= events.len() && (last_t >= min_end_ms || now > min_end_ms) && w.finished() {
            end_ms = last_t.max(min_end_ms);
            settled_at = Some(end_ms);
            break;
        }
        if quiet_polls >= idle::QUIET_POLLS_BEFORE_SKIPPING && w.has_nodes() {
            // The regular polls in [regular, now) were not run.
            let regular = idle::next_poll_after(last);
            if now > regular {
                polls_skipped += ((now - regular + POLL_INTERVAL_MS - 1) / POLL_INTERVAL_MS) as u64;
            }
        }
        if let Some(speed) = opts.speed.filter(|s| *s > 0.0) {
            let wait = (now - last_t) as f64 / speed;
            if wait > 0.0 {
                std::thread::sleep(std::time::Duration::from_micros((wait * 1000.0) as u64));
            }
        }
        // The state that held until now is what the timeline shows for the minutes passed.
        w.timeline_until(now, &mut next_minute, &mut timeline);
        ledger.advance(&w, last_t, now);
        lower_bound_usd += w.lower_bound.dollars() * (now - last_t) as f64 / 3_600_000.0;
        last_t = now;
        w.control.set_clock(now);

        while let Some(e) = events.get(idx).filter(|e| e.t as i64 <= now) {
            w.event(now, e)?;
            idx += 1;
        }
        w.cloud_events(now);
        w.expire_unavailable(now);
        let changed = w.step(now, MAX_STEPS_PER_INSTANT)?;
        if changed || !w.settled() {
            quiet_polls = 0;
        } else if poll == Some(now) {
            if now > idle::next_poll_after(last) {
                // Woken past the regular polls: poll once more before skipping again, so the
                // engine's minute clock has caught up with the wake-up.
                quiet_polls = 1;
            } else {
                quiet_polls += 1;
            }
        }
        w.peak_nodes = w.peak_nodes.max(w.alive_nodes());
        if last_progress.elapsed().as_millis() >= 1000 {
            last_progress = Instant::now();
            progress(Progress {
                now_ms: now,
                // The end is not known until the world settles: the bar runs to the trace's
                // end, then stays full while it settles.
                end_ms: min_end_ms.max(now),
                nodes: w.alive_nodes(),
                pods_pending: w.pods_pending(),
            });
        }
    }
    w.timeline_until(end_ms + 1, &mut next_minute, &mut timeline);
    ledger.advance(&w, last_t, end_ms);
    lower_bound_usd += w.lower_bound.dollars() * (end_ms - last_t).max(0) as f64 / 3_600_000.0;
    progress(Progress {
        now_ms: end_ms,
        end_ms,
        nodes: w.alive_nodes(),
        pods_pending: w.pods_pending(),
    });
    let mut summary = summarise(&w, opts, end_ms, lower_bound_usd, wall);
    summary.cost_breakdown = ledger.finish(summary.total_cost_usd, lower_bound_usd);
    summary.disruption_polls_skipped = polls_skipped;
    summary.settle_cap_hit = settled_at.is_none();
    if summary.settle_cap_hit {
        summary.notes.push(format!(
            "the replay stopped at its cap, {} s after the last trace event, with launches or disruption commands still under way",
            (cap_ms - last_event_ms) / 1000
        ));
    }
    let mut instances: Vec<dovetail_dataflow::backend::Instance> =
        w.cloud.instances().cloned().collect();
    instances.sort_by(|a, b| {
        a.launched_ms
            .cmp(&b.launched_ms)
            .then_with(|| a.id.cmp(&b.id))
    });
    Ok(ReplayOutcome {
        summary,
        timeline,
        instances,
    })
}

/// Up to a few pods left pending: what the engine decided for them, and why the simulated
/// kube-scheduler did not follow.
fn explain_pending(w: &World) -> Vec<String> {
    let decisions = w.control.engine().decisions();
    let stuck: Vec<String> = w
        .cluster
        .pods()
        .filter(|p| p.node_name.is_none())
        .map(|p| p.key())
        .take(5)
        .collect();
    let mut notes = Vec::new();
    for pod in stuck {
        let engine = decisions.iter().find_map(|d| match d {
            Decision::Binding { pod: p, target } if *p == pod => {
                Some(format!("engine placed it on {target}"))
            }
            Decision::Unschedulable { pod: p, reason } if *p == pod => {
                Some(format!("engine: unschedulable: {reason}"))
            }
            _ => None,
        });
        let engine = engine.unwrap_or_else(|| "engine has no decision for it".to_string());
        let sim = match decisions.iter().find_map(|d| match d {
            Decision::Binding { pod: p, target } if *p == pod => Some(target.clone()),
            _ => None,
        }) {
            Some(node) => match w.cluster.why_not(&pod, &node) {
                Ok(Some(unfit)) => format!("; the simulated scheduler says: {unfit}"),
                Ok(None) => "; the simulated scheduler says it fits".to_string(),
                Err(e) => format!("; {e}"),
            },
            None => String::new(),
        };
        notes.push(format!("pending at the end: {pod}: {engine}{sim}"));
    }
    notes
}

fn summarise(
    w: &World,
    opts: &ReplayOptions,
    end_ms: i64,
    lower_bound_usd: f64,
    wall: Instant,
) -> ReplaySummary {
    let cost = w.cloud.cost_so_far(end_ms);
    let mut pending = histogram();
    for ms in w.cluster.pending_durations() {
        let _ = pending.record(((*ms).max(0) as u64) / 1000);
    }
    let mut notes: Vec<String> = w.notes.iter().cloned().collect();
    notes.extend(w.control.actuator().notes().iter().cloned());
    notes.sort();
    notes.dedup();
    notes.extend(explain_pending(w));
    let d = w.control.actuator().stats();
    let never = w.cluster.pods().filter(|p| p.node_name.is_none()).count() as u64;
    let waiting = w.pods_waiting_for_node();
    ReplaySummary {
        trace: opts.trace_name.clone(),
        seed: opts.sim.seed,
        simulated_hours: end_ms as f64 / 3_600_000.0,
        wall_seconds: wall.elapsed().as_secs_f64(),
        total_cost_usd: cost.total_usd,
        lower_bound_usd,
        cost_over_lower_bound: if lower_bound_usd > 0.0 {
            cost.total_usd / lower_bound_usd
        } else {
            0.0
        },
        cost_breakdown: Default::default(),
        by_capacity_type: cost
            .by_capacity_type
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    CapacityTypeUsage {
                        usd: v.usd,
                        node_hours: v.node_hours,
                        instances: v.instances,
                    },
                )
            })
            .collect(),
        nodes_launched: d.nodes_launched,
        nodes_terminated: w.nodes_terminated,
        peak_nodes: w.peak_nodes,
        disruptions_by_reason: d.disruptions_started_by_reason.clone(),
        disruption_commands: d.disruption_commands_started,
        disruption_commands_abandoned: d.disruption_commands_abandoned,
        disruption_replacements_launched: d.replacements_launched,
        nodes_terminated_by_disruption: d.disruptions_terminated_by_reason.clone(),
        capacity_errors: d.capacity_errors,
        interruptions_handled: w.interruptions,
        pods_created: w.pods_created,
        pod_pending_seconds: Percentiles::of(&pending),
        pods_never_scheduled: never.saturating_sub(waiting),
        pods_waiting_for_node: waiting,
        settle_cap_hit: false,
        engine_epochs: w.control.advances(),
        disruption_polls_skipped: 0,
        engine_update_micros: Percentiles::of(w.control.latency_micros()),
        engine_decision_diffs: Percentiles::of(w.control.decision_diffs()),
        peak_rss_bytes: super::summary::peak_rss_bytes(),
        notes,
    }
}
