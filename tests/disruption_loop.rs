//! Replays in which the engine's disruption decisions are executed: empty nodes deleted,
//! half-empty nodes consolidated, expired nodes replaced, interrupted nodes drained — on the
//! virtual clock, with the real catalogue.

mod common;
use common::*;
use dovetail::replay::ReplayOutcome;
use dovetail_sim::INTERRUPTION_WARNING_MS;

/// m5.xlarge on-demand only (4 vCPU, ~3.9 allocatable): no cheaper type to replace it with, so
/// consolidation can only delete.
fn xlarge_pool(template: &str, disruption: &str) -> dovetail_ingest::Manifests {
    nodepool(
        &[
            "{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}",
            "{key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge]}",
        ],
        template,
        disruption,
    )
}

const CONSOLIDATE_30S: &str =
    "disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 30s}";

fn terminated_by(out: &ReplayOutcome, reason: &str) -> u64 {
    out.summary
        .nodes_terminated_by_disruption
        .get(reason)
        .copied()
        .unwrap_or(0)
}

#[test]
fn empty_nodes_are_deleted_after_consolidate_after_and_the_cost_rate_falls() {
    let mut lines: Vec<String> = (0..3).map(|i| pod_line(0, &format!("p{i}"), "1")).collect();
    let deleted_at = 10 * MINUTE;
    lines.extend((0..3).map(|i| delete_line(deleted_at, &format!("p{i}"))));
    let out = run_with(
        &lines,
        &xlarge_pool("", CONSOLIDATE_30S),
        quiet(),
        10 * MINUTE,
    );
    assert_eq!(out.instances.len(), 1, "{:?}", out.instances);
    assert_eq!(terminated_by(&out, "Empty"), 1, "{:#?}", out.summary);
    // consolidateAfter counts from the last pod event; the engine's clock is advanced at least
    // every 10 s, so the engine decides 30 to 40 s after the pods went, and the command is
    // validated for 15 s more before it runs.
    let stopped = out.instances[0].stopped_ms.expect("terminated");
    assert!(
        (deleted_at + 45_000..=deleted_at + 55_000).contains(&stopped),
        "stopped at {stopped}"
    );
    let busy = &out.timeline[5];
    let last = out.timeline.last().expect("timeline");
    assert!(busy.cost_rate > 0.0 && busy.nodes == 1, "{busy:?}");
    assert_eq!((last.nodes, last.cost_rate), (0, 0.0), "{last:?}");
    assert_eq!(last.nodes_disrupted, 1);
}

#[test]
fn two_half_empty_nodes_are_consolidated_into_one() {
    // Two pods of 1.5 CPU fill most of one m5.xlarge; two more five minutes later need a
    // second. Deleting one pod from each leaves two half-empty nodes whose pods fit on one.
    let lines = vec![
        pod_line(0, "a1", "1500m"),
        pod_line(0, "a2", "1500m"),
        pod_line(5 * MINUTE, "b1", "1500m"),
        pod_line(5 * MINUTE, "b2", "1500m"),
        delete_line(10 * MINUTE, "a2"),
        delete_line(10 * MINUTE, "b2"),
    ];
    let out = run_with(
        &lines,
        &xlarge_pool("", CONSOLIDATE_30S),
        quiet(),
        10 * MINUTE,
    );
    let at_nine = &out.timeline[9];
    assert_eq!((at_nine.nodes, at_nine.pods_running), (2, 4), "{at_nine:?}");
    assert!(
        terminated_by(&out, "Underutilized") >= 1,
        "{:#?}",
        out.summary
    );
    let last = out.timeline.last().expect("timeline");
    assert_eq!(
        (last.nodes, last.pods_running, last.pods_pending),
        (1, 2, 0),
        "{last:?}"
    );
    assert!(last.cost_rate < at_nine.cost_rate, "{last:?} {at_nine:?}");
    assert_eq!(out.summary.pods_never_scheduled, 0);
}

#[test]
fn an_expired_node_is_replaced_and_its_pods_keep_running() {
    let lines: Vec<String> = (0..2).map(|i| pod_line(0, &format!("p{i}"), "1")).collect();
    let pools = xlarge_pool("expireAfter: 10m", CONSOLIDATE_30S);
    let out = run_with(&lines, &pools, quiet(), 15 * MINUTE);
    assert!(terminated_by(&out, "Expired") >= 1, "{:#?}", out.summary);
    let first = &out.instances[0];
    let second = out.instances.get(1).expect("a replacement was launched");
    // Expiry counts from the NodeClaim's creation (Karpenter's
    // pkg/controllers/nodeclaim/expiration/controller.go), at the launch at 0, not from the Node's
    // registration 70 s later; the replacement is launched at that instant.
    let expired = 10 * MINUTE;
    assert!(
        (expired..=expired + 10_000).contains(&second.launched_ms),
        "replacement launched at {}",
        second.launched_ms
    );
    assert_eq!(first.stopped_ms, Some(second.launched_ms));
    // The pods wait for the replacement once (drained at once, not lost).
    assert_eq!(out.summary.pods_never_scheduled, 0);
    assert_eq!(running_at_end(&out), 2);
    assert!(
        out.summary.pod_pending_seconds.count >= 4,
        "{:?}",
        out.summary
    );
    assert!(
        out.timeline.iter().all(|r| r.nodes <= 2),
        "{:?}",
        out.timeline
    );
}

#[test]
fn a_spot_interruption_drains_the_node_onto_a_replacement_without_losing_pods() {
    let lines = vec![
        pod_line(0, "p0", "1"),
        pod_line(0, "p1", "1"),
        r#"{"t":300000,"event":"interrupt","instance_type":"m5.xlarge","zone":"us-east-1a","capacity_type":"spot","kind":"spot"}"#
            .to_string(),
    ];
    let pools = nodepool(
        &[
            "{key: karpenter.sh/capacity-type, operator: In, values: [spot]}",
            "{key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge, m5.2xlarge]}",
        ],
        "",
        "",
    );
    let out = run_with(&lines, &pools, quiet(), 10 * MINUTE);
    assert_eq!(out.summary.interruptions_handled, 1, "{:#?}", out.summary);
    assert_eq!(
        out.summary.disruptions_by_reason.get("Interrupted"),
        Some(&1)
    );
    assert_eq!(terminated_by(&out, "Interrupted"), 1);
    assert_eq!(out.instances.len(), 2, "{:?}", out.instances);
    let (first, second) = (&out.instances[0], &out.instances[1]);
    // The replacement is launched at the warning; the node is drained and terminated before
    // EC2 would have reclaimed it.
    assert_eq!(second.launched_ms, 300_000);
    // Karpenter marks the reclaimed spot pool unavailable (interruption controller): the
    // replacement goes to the other type.
    assert_eq!(first.instance_type, "m5.xlarge");
    assert_eq!(second.instance_type, "m5.2xlarge");
    let stopped = first.stopped_ms.expect("terminated");
    assert!(
        (300_000..=300_000 + INTERRUPTION_WARNING_MS).contains(&stopped),
        "stopped at {stopped}"
    );
    assert_eq!(second.stopped_ms, None);
    assert_eq!(out.summary.pods_never_scheduled, 0);
    assert_eq!(running_at_end(&out), 2);
}

#[test]
fn a_changed_nodepool_template_drifts_the_node_and_it_is_replaced() {
    let pool = |annotations: &str| {
        format!(
            r#"{{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{{"name":"default"}},"spec":{{"template":{{"metadata":{{"annotations":{annotations}}},"spec":{{"nodeClassRef":{{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"}},"requirements":[{{"key":"karpenter.sh/capacity-type","operator":"In","values":["on-demand"]}},{{"key":"node.kubernetes.io/instance-type","operator":"In","values":["m5.xlarge"]}}]}}}}}}}}"#
        )
    };
    let lines = vec![
        pod_line(0, "p0", "1"),
        pod_line(0, "p1", "1"),
        format!(
            r#"{{"t":300000,"event":"apply","object":{}}}"#,
            pool(r#"{"example.com/revision":"2"}"#)
        ),
    ];
    let initial = xlarge_pool("", "");
    let out = run_with(&lines, &initial, quiet(), 10 * MINUTE);
    assert_eq!(terminated_by(&out, "Drifted"), 1, "{:#?}", out.summary);
    // One replacement, launched with the new template's hash, so it does not drift in turn.
    assert_eq!(out.instances.len(), 2, "{:?}", out.instances);
    let (first, second) = (&out.instances[0], &out.instances[1]);
    assert!(second.launched_ms >= 300_000);
    // Graceful: the node goes only once its replacement is initialised.
    let ready = second.launched_ms + quiet().launch_to_ready_ms();
    assert!(
        first.stopped_ms.is_some_and(|s| s >= ready),
        "{first:?} {second:?}"
    );
    assert_eq!(second.stopped_ms, None);
    assert_eq!(out.summary.pods_never_scheduled, 0);
    assert_eq!(running_at_end(&out), 2);
}
