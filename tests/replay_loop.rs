//! Replays of small hand-written traces with exact expected outcomes, on the real catalogue.

mod common;
use common::*;
use dovetail::replay::{replay, ReplayOptions, ReplayOutcome};
use dovetail_ingest::trace::read_trace;
use dovetail_sim::SimConfig;

fn run(lines: &[String], capacity_type: &str, sim: SimConfig) -> ReplayOutcome {
    run_with(
        lines,
        &m5_pool(capacity_type),
        sim,
        ReplayOptions::default().settle_ms,
    )
}

#[test]
fn scale_up_launches_one_node_for_three_pods_and_binds_them_when_ready() {
    let lines: Vec<String> = (0..3).map(|i| pod_line(0, &format!("p{i}"), "1")).collect();
    let out = run(&lines, "on-demand", quiet());
    let (three, three_price) = cheapest_m5_for(3);
    let (_, one_price) = cheapest_m5_for(1);
    // One node for all three is cheaper than three single-pod nodes here; check the premise.
    assert!(three_price < 3 * one_price);
    assert_eq!(out.instances.len(), 1, "{:?}", out.instances);
    assert_eq!(out.instances[0].instance_type, three);
    assert_eq!(out.summary.pods_never_scheduled, 0);
    // Pods wait exactly for the node: launch → running → registered → initialised.
    let ready_s = (quiet().launch_to_ready_ms() / 1000) as u64;
    assert_eq!(out.summary.pod_pending_seconds.max, ready_s);
    assert_eq!(out.summary.pod_pending_seconds.count, 3);
}

#[test]
fn insufficient_capacity_falls_back_to_the_next_offering() {
    let (cheapest, _) = cheapest_m5_for(3);
    let mut sim = quiet();
    sim.capacity_overrides
        .insert(format!("{cheapest}/us-east-1a/on-demand"), 0);
    let lines: Vec<String> = (0..3).map(|i| pod_line(0, &format!("p{i}"), "1")).collect();
    let out = run(&lines, "on-demand", sim);
    assert!(out.summary.capacity_errors >= 1, "{:?}", out.summary);
    assert!(!out.instances.is_empty());
    assert!(out.instances.iter().all(|i| i.instance_type != cheapest));
    assert_eq!(out.summary.pods_never_scheduled, 0);
}

/// A trace `capacity` line without a zone empties the offering in every zone from its time on:
/// the launch that would have used it fails as insufficient capacity and falls back.
#[test]
fn a_trace_capacity_event_limits_the_offering_from_its_time() {
    let (cheapest, _) = cheapest_m5_for(3);
    let mut lines = vec![format!(
        r#"{{"t":0,"event":"capacity","instance_type":"{cheapest}","capacity_type":"on-demand","instances":0}}"#
    )];
    lines.extend((0..3).map(|i| pod_line(0, &format!("p{i}"), "1")));
    let out = run(&lines, "on-demand", quiet());
    assert!(out.summary.capacity_errors >= 1, "{:?}", out.summary);
    assert!(!out.instances.is_empty());
    assert!(out.instances.iter().all(|i| i.instance_type != cheapest));
    assert_eq!(out.summary.pods_never_scheduled, 0);
    assert!(
        out.summary.notes.iter().all(|n| !n.contains("capacity")),
        "{:?}",
        out.summary.notes
    );
}

/// A trace `delete` of the only NodePool takes it away with its nodes (NodeClaims are owned by
/// their NodePool, as in Karpenter): their pods are pending again, and neither they nor a pod
/// created later find a NodePool to launch from.
#[test]
fn a_trace_delete_of_the_nodepool_takes_its_nodes_and_stops_launches() {
    let mut lines: Vec<String> = (0..2)
        .map(|i| pod_line(0, &format!("early{i}"), "1"))
        .collect();
    lines.push(r#"{"t":300000,"event":"delete","kind":"NodePool","name":"default"}"#.to_string());
    lines.push(pod_line(360_000, "late", "1"));
    let out = run(&lines, "on-demand", quiet());
    assert_eq!(out.instances.len(), 1, "{:?}", out.instances);
    assert!(
        out.instances.iter().all(|i| !i.state.is_alive()),
        "{:?}",
        out.instances
    );
    assert_eq!(out.summary.pods_never_scheduled, 3, "{:?}", out.summary);
}

#[test]
fn same_trace_and_seed_same_result() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/data/traces/dlrm-sample.jsonl"
    ))
    .expect("sample trace");
    let trace = read_trace("dlrm-sample.jsonl", text.as_bytes(), false).expect("sample parses");
    let events = &trace.events[..trace.events.len().min(300)];
    let initial = dovetail_ingest::load_paths(&[concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/data/traces/nodepools.yaml"
    )
    .into()])
    .expect("nodepools");
    let opts = ReplayOptions {
        sim: SimConfig {
            seed: 7,
            interruption_rate_scale: 50.0,
            ..SimConfig::default()
        },
        ..ReplayOptions::default()
    };
    let a = replay(events, &initial, &opts, |_| {}).expect("first run");
    let b = replay(events, &initial, &opts, |_| {}).expect("second run");
    let strip = |o: &ReplayOutcome| {
        let mut s = o.summary.clone();
        s.wall_seconds = 0.0;
        s.engine_update_micros = Default::default();
        // The process's peak RSS, which the second run inherits from the first.
        s.peak_rss_bytes = Default::default();
        serde_json::to_string(&s).expect("summary serialises")
    };
    assert_eq!(strip(&a), strip(&b));
    assert_eq!(a.instances, b.instances);
    assert!(a.summary.nodes_launched > 10, "{:?}", a.summary);
    // Every launch is a decision added in some epoch.
    let diffs = &a.summary.engine_decision_diffs;
    assert!(
        diffs.count > 0 && diffs.max > 0,
        "decision diffs per epoch not counted: {diffs:?}"
    );
}

/// Three pods 400 ms apart: without a window each is planned as it arrives, and the first
/// launch cannot hold the later ones; with Karpenter's window (1 s idle, 10 s max) they are
/// planned together 1 s after the last, onto one node, as Karpenter's batcher would.
#[test]
fn karpenter_batch_window_plans_a_burst_together() {
    let lines: Vec<String> = (0..3)
        .map(|i| pod_line(i * 400, &format!("p{i}"), "1"))
        .collect();
    let text = std::iter::once(HEADER.to_string())
        .chain(lines.iter().cloned())
        .collect::<Vec<_>>()
        .join("\n");
    let trace = read_trace("burst.jsonl", text.as_bytes(), false).expect("trace parses");
    let run = |window| {
        let opts = ReplayOptions {
            sim: quiet(),
            batch_window: window,
            ..ReplayOptions::default()
        };
        replay(&trace.events, &m5_pool("on-demand"), &opts, |_| {}).expect("replay runs")
    };
    let off = run(dovetail_actuate::BatchWindow::OFF);
    assert_eq!(off.instances[0].launched_ms, 0, "{:?}", off.instances);
    assert!(off.instances.len() > 1, "{:?}", off.instances);

    let batched = run(dovetail_actuate::BatchWindow::KARPENTER);
    assert_eq!(batched.instances.len(), 1, "{:?}", batched.instances);
    assert_eq!(batched.instances[0].launched_ms, 800 + 1_000);
    assert_eq!(batched.instances[0].instance_type, cheapest_m5_for(3).0);
    assert_eq!(batched.summary.pods_never_scheduled, 0);
}
