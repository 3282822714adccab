//! The replay's cost above the lower bound, split by where the money went (issue 21; the parts
//! are defined in src/replay/breakdown.rs and the README's `dovetail replay` section).

mod common;
use common::*;
use dovetail::replay::CostBreakdown;

fn sum(b: &CostBreakdown) -> f64 {
    b.parts().iter().map(|(_, usd)| usd).sum()
}

/// Three 1-CPU pods on one on-demand node for 10 minutes, then deleted: the node boots, runs
/// them, and is removed empty (consolidateAfter 0s).
#[test]
fn boot_running_and_removal_fall_in_their_parts() {
    let mut lines: Vec<String> = (0..3).map(|i| pod_line(0, &format!("p{i}"), "1")).collect();
    lines.extend((0..3).map(|i| delete_line(10 * MINUTE, &format!("p{i}"))));
    let out = run_with(&lines, &m5_pool("on-demand"), quiet(), 10 * MINUTE);
    let s = &out.summary;
    let b = &s.cost_breakdown;
    assert_eq!(out.instances.len(), 1, "{:?}", out.instances);
    let i = &out.instances[0];
    let price = i.price.dollars();
    // Billed from running to ready: registration and initialisation.
    let boot_ms = quiet().running_to_registered_ms + quiet().registered_to_initialized_ms;
    assert!(
        (b.boot_usd - price * boot_ms as f64 / 3_600_000.0).abs() < 1e-9,
        "{b:?}"
    );
    // Never empty before a pod came: the empty time ended in the removal.
    assert_eq!(b.idle_usd, 0.0, "{s:?}");
    assert!(b.disruption_lag_usd > 0.0, "{b:?}");
    // The pool is on-demand only: no spot premium.
    assert_eq!(b.spot_premium_usd, 0.0, "{b:?}");
    // Three CPUs requested on a bigger node for the ~8.6 running minutes.
    let running_h = (10 * MINUTE - quiet().launch_to_ready_ms()) as f64 / 3_600_000.0;
    assert!(
        b.packing_waste_usd > 0.0 && b.packing_waste_usd < price * running_h,
        "{b:?}"
    );
    assert!((sum(b) - b.gap_usd).abs() < 1e-9, "{b:?}");
    assert!((b.gap_usd - (s.total_cost_usd - s.lower_bound_usd)).abs() < 1e-9);
}

/// The spot offering has no capacity, so the NodePool that allows spot gets on-demand: the
/// used share is priced against spot.
#[test]
fn on_demand_where_spot_was_allowed_is_a_spot_premium() {
    let (ty, _) = cheapest_m5_for(3);
    let mut sim = quiet();
    sim.capacity_overrides
        .insert(format!("{ty}/us-east-1a/spot"), 0);
    let pool = nodepool(
        &[
            "{key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}",
            &format!("{{key: node.kubernetes.io/instance-type, operator: In, values: [{ty}]}}"),
        ],
        "",
        "",
    );
    let lines: Vec<String> = (0..3).map(|i| pod_line(0, &format!("p{i}"), "1")).collect();
    let out = run_with(&lines, &pool, sim, 30 * MINUTE);
    let on_demand: Vec<_> = out
        .instances
        .iter()
        .filter(|i| i.capacity_type == "on-demand")
        .collect();
    assert_eq!(on_demand.len(), 1, "{:?}", out.instances);
    let b = &out.summary.cost_breakdown;
    assert!(b.spot_premium_usd > 0.0, "{b:?}");
    assert!((sum(b) - b.gap_usd).abs() < 1e-9, "{b:?}");
}

/// On-demand price per allocatable CPU of `ty` in us-east-1a, micro-dollars per hour per
/// milli-CPU, and its allocatable CPU.
fn per_cpu(ty: &str) -> (f64, i64) {
    let t = dovetail_dataflow::catalog::embedded("us-east-1")
        .expect("catalogue")
        .instance_types(&dovetail_dataflow::catalog::ResolveOptions::default())
        .into_iter()
        .find(|t| t.name == ty)
        .expect("type in the catalogue");
    let price = t
        .offerings
        .iter()
        .find(|o| o.zone == "us-east-1a" && o.capacity_type == "on-demand")
        .expect("on-demand offering")
        .price
        .0;
    let cpu = t.allocatable().cpu;
    (price as f64 / cpu as f64, cpu)
}

/// A NodePool of c5.large (cheapest per CPU, 2 vCPUs) and m5.4xlarge (16 vCPUs, dearer per CPU).
fn small_and_big_pool() -> dovetail_ingest::Manifests {
    nodepool(
        &[
            "{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}",
            "{key: node.kubernetes.io/instance-type, operator: In, values: [c5.large, m5.4xlarge]}",
        ],
        "",
        "",
    )
}

/// A 6-CPU pod fits only m5.4xlarge; the 1-CPU pods created with it ride along on that node and
/// pay its rate, where the lower bound prices them at c5.large's: that difference is "too
/// large". Karpenter has no such breakdown; the rule is dovetail's (src/replay/too_large.rs).
#[test]
fn pods_riding_on_a_type_bought_for_a_large_pod_are_too_large() {
    let (cheap, cheap_cpu) = per_cpu("c5.large");
    let (dear, _) = per_cpu("m5.4xlarge");
    assert!(
        cheap < dear,
        "c5.large {cheap} is not cheaper per CPU than m5.4xlarge {dear}"
    );
    assert!(cheap_cpu < 6000, "a 6-CPU pod must not fit c5.large");
    let mut lines = vec![pod_line(0, "big", "6")];
    lines.extend((0..4).map(|i| pod_line(0, &format!("small{i}"), "1")));
    let out = run_with(&lines, &small_and_big_pool(), quiet(), 30 * MINUTE);
    assert!(
        out.instances
            .iter()
            .any(|i| i.instance_type == "m5.4xlarge"),
        "{:?}",
        out.instances
    );
    let b = &out.summary.cost_breakdown;
    assert!(b.too_large_usd > 0.0, "{b:?}");
    assert!((sum(b) - b.gap_usd).abs() < 1e-9, "{b:?}");
}

/// Small pods only: every one fits the cheapest type, so nothing is too large, whatever types
/// the packer chose.
#[test]
fn small_pods_are_never_too_large() {
    let lines: Vec<String> = (0..5).map(|i| pod_line(0, &format!("p{i}"), "1")).collect();
    let out = run_with(&lines, &small_and_big_pool(), quiet(), 30 * MINUTE);
    assert!(!out.instances.is_empty());
    let b = &out.summary.cost_breakdown;
    assert_eq!(b.too_large_usd, 0.0, "{b:?}");
    assert!((sum(b) - b.gap_usd).abs() < 1e-9, "{b:?}");
}

/// The large pod leaves at ten minutes and six small pods take its room on the node, which stays
/// (consolidation off): from then on every pod there fits the cheap type and nothing more is too
/// large. The part is worked out from the node's pods only when they change, so it must see
/// the change (the node requests more than the large pod did, before and after).
#[test]
fn the_too_large_part_stops_when_the_large_pod_leaves() {
    let pool = nodepool(
        &[
            "{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}",
            "{key: node.kubernetes.io/instance-type, operator: In, values: [c5.large, m5.4xlarge]}",
        ],
        "",
        "disruption: {consolidateAfter: Never}",
    );
    let mut lines = vec![pod_line(0, "big", "6")];
    lines.extend((0..4).map(|i| pod_line(0, &format!("small{i}"), "1")));
    let stays = run_with(&lines, &pool, quiet(), 30 * MINUTE);
    lines.push(delete_line(10 * MINUTE, "big"));
    lines.extend((0..6).map(|i| pod_line(10 * MINUTE, &format!("later{i}"), "1")));
    let leaves = run_with(&lines, &pool, quiet(), 30 * MINUTE);
    let (stays, leaves) = (
        stays.summary.cost_breakdown.too_large_usd,
        leaves.summary.cost_breakdown.too_large_usd,
    );
    assert!(leaves > 0.0, "{leaves}");
    // About the first third of the stretch: ten of thirty minutes, less the boot.
    assert!(leaves < stays * 0.6, "{leaves} of {stays}");
}
