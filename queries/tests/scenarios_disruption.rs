//! Disruption scenarios: each of Karpenter's disruption rules, through the whole engine.

mod common;
use common::*;
use dovetail_dataflow::decisions::{Disruption, DisruptionReason};

const CREATED: &str = "2026-11-29T00:00:00Z";

fn of<'a>(o: &'a Outcome, node: &str) -> Vec<&'a Disruption> {
    o.disruptions.iter().filter(|d| d.node == node).collect()
}

#[test]
fn an_empty_node_is_deleted_and_a_busy_one_is_not() {
    let yaml = default_pool()
        + &node(
            "empty",
            "default",
            "m5.large",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &node(
            "busy",
            "default",
            "m5.large",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &bound_pod("web", "busy", "1500m", "1Gi", "");
    let o = plan_at(&yaml, MONDAY_MS);
    let empty = of(&o, "empty");
    assert_eq!(empty.len(), 1, "{:#?}", o.disruptions);
    assert_eq!(empty[0].reason, DisruptionReason::Empty);
    assert!(empty[0].blocked_by.is_none());
    assert!(empty[0].command.is_some());
    assert!(empty[0].savings_per_hour.0 > 0);
    // The busy node may be consolidated, but it is not empty, and its pod cannot move onto
    // the node that is being deleted.
    for d in of(&o, "busy") {
        assert_eq!(d.reason, DisruptionReason::Underutilized);
        assert_eq!(d.replacements.len(), 1, "{d:#?}");
    }
}
