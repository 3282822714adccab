//! When a replay ends: once the world has settled after the last trace event (issue 21: a fixed
//! 10-minute settle stopped replays in the middle of launches and disruption commands, and
//! reported the pods placed on booting nodes as never scheduled).

mod common;
use common::*;
use dovetail::replay::{replay, ReplayOptions, ReplayOutcome};
use dovetail_ingest::trace::read_trace;
use dovetail_sim::SimConfig;

fn run_opts(lines: &[String], opts: &ReplayOptions) -> ReplayOutcome {
    let text = std::iter::once(HEADER.to_string())
        .chain(lines.iter().cloned())
        .collect::<Vec<_>>()
        .join("\n");
    let trace = read_trace("test.jsonl", text.as_bytes(), false).expect("trace parses");
    replay(&trace.events, &m5_pool("on-demand"), opts, |_| {}).expect("replay runs")
}

/// A node that takes 15 minutes to register.
fn slow_boot() -> SimConfig {
    SimConfig {
        running_to_registered_ms: 15 * MINUTE,
        ..quiet()
    }
}

fn three_pods() -> Vec<String> {
    (0..3).map(|i| pod_line(0, &format!("p{i}"), "1")).collect()
}

#[test]
fn the_replay_waits_for_a_launch_that_boots_past_the_old_ten_minutes() {
    let sim = slow_boot();
    let ready_ms = sim.launch_to_ready_ms();
    let out = run_opts(
        &three_pods(),
        &ReplayOptions {
            sim,
            // The old fixed settle, now a minimum.
            settle_ms: 10 * MINUTE,
            ..ReplayOptions::default()
        },
    );
    let s = &out.summary;
    assert!(!s.settle_cap_hit, "{s:?}");
    assert_eq!(s.pods_never_scheduled, 0, "{s:?}");
    assert_eq!(s.pods_waiting_for_node, 0, "{s:?}");
    // All three were bound (each binding records its pending time).
    assert_eq!(s.pod_pending_seconds.count, 3, "{s:?}");
    // It ended at the instant the node was ready and the pods bound, not 10 minutes later.
    assert_eq!((s.simulated_hours * 3_600_000.0).round() as i64, ready_ms);
}

#[test]
fn a_replay_stopped_at_its_cap_counts_pods_waiting_for_a_booting_node_apart() {
    let out = run_opts(
        &three_pods(),
        &ReplayOptions {
            sim: slow_boot(),
            settle_cap_ms: 5 * MINUTE,
            ..ReplayOptions::default()
        },
    );
    let s = &out.summary;
    assert!(s.settle_cap_hit, "{s:?}");
    assert_eq!(s.pods_waiting_for_node, 3, "{s:?}");
    assert_eq!(s.pods_never_scheduled, 0, "{s:?}");
    assert_eq!((s.simulated_hours * 60.0).round() as i64, 5);
    assert!(s.notes.iter().any(|n| n.contains("cap")), "{:?}", s.notes);
}

#[test]
fn a_pod_no_node_can_take_is_never_scheduled_and_does_not_hold_the_end() {
    let mut lines = three_pods();
    lines.push(pod_line(60_000, "huge", "5000"));
    let out = run_opts(&lines, &ReplayOptions::default());
    let s = &out.summary;
    assert!(!s.settle_cap_hit, "{s:?}");
    assert_eq!(s.pods_never_scheduled, 1, "{s:?}");
    assert_eq!(s.pods_waiting_for_node, 0, "{s:?}");
    assert_eq!(s.pod_pending_seconds.count, 3, "{s:?}");
    // Ends when the three pods' node is ready (85 s), well before the old 10 minutes.
    assert_eq!(
        (s.simulated_hours * 3_600_000.0).round() as i64,
        quiet().launch_to_ready_ms()
    );
}
