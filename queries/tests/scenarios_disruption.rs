//! Disruption scenarios: each of Karpenter's disruption rules, through the whole engine.
//!
//! Expected values come from the rule and the embedded catalogue (prices of the node's own
//! offering, the cheapest type that holds the moved pods), never from a previous run.

mod common;
use common::*;
use dovetail_dataflow::decisions::{Decision, Disruption, DisruptionReason, Launch};
use dovetail_dataflow::disruption_reasons::Blocker;
use dovetail_dataflow::engine::Engine;
use dovetail_dataflow::facts::{Fact, Interruption, InterruptionKind};
use dovetail_dataflow::model::InstanceType;
use std::collections::{BTreeMap, BTreeSet};

const CREATED: &str = "2026-11-29T00:00:00Z";
const MINUTE_MS: u64 = 60_000;

const ON_DEMAND: &str =
    "        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}";
const SPOT: &str = "        - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}";
/// The m5 sizes a test pool is restricted to, so replacements have few, known candidates.
const M5: &str = "m5.large, m5.xlarge, m5.2xlarge";

fn of<'a>(o: &'a Outcome, node: &str) -> Vec<&'a Disruption> {
    o.disruptions.iter().filter(|d| d.node == node).collect()
}

/// The node's disruption that is part of a command (`None`: it is not disrupted now).
fn commanded<'a>(o: &'a Outcome, node: &str) -> Option<&'a Disruption> {
    let mut c = o
        .disruptions
        .iter()
        .filter(|d| d.node == node && d.command.is_some());
    let first = c.next();
    assert!(
        c.next().is_none(),
        "{node} is in two commands: {:#?}",
        o.disruptions
    );
    first
}

/// Why the node is blocked, in words, for each listing (empty: not listed as blocked).
fn blocked(o: &Outcome, node: &str) -> Vec<String> {
    o.disruptions
        .iter()
        .filter(|d| d.node == node)
        .filter_map(|d| d.blocked_by.as_ref().map(|b| b.to_string()))
        .collect()
}

/// Every node is in at most one command, and a command's nodes share its replacements.
fn assert_commands_consistent(o: &Outcome) {
    let mut seen = BTreeSet::new();
    let mut replacements: BTreeMap<&str, &Vec<String>> = BTreeMap::new();
    for d in &o.disruptions {
        let Some(cmd) = d.command.as_deref() else {
            assert!(
                d.replacements.is_empty(),
                "blocked with replacements: {d:#?}"
            );
            continue;
        };
        assert!(d.blocked_by.is_none(), "{d:#?}");
        assert!(
            seen.insert(d.node.as_str()),
            "{} is in two commands",
            d.node
        );
        let r = replacements.entry(cmd).or_insert(&d.replacements);
        assert_eq!(*r, &d.replacements, "one command, one set of replacements");
        for name in &d.replacements {
            assert!(
                o.launches.iter().any(|l| &l.name == name),
                "replacement {name} is not launched: {o:#?}"
            );
        }
    }
}

fn it(name: &str) -> &'static InstanceType {
    catalogue_by_name()
        .get(name)
        .unwrap_or_else(|| panic!("{name} in the catalogue"))
}

/// The price of a node's own offering (type, zone, capacity type).
fn node_price(instance_type: &str, zone: &str, capacity_type: &str) -> i64 {
    it(instance_type)
        .offerings
        .iter()
        .filter(|o| o.zone == zone && o.capacity_type == capacity_type)
        .map(|o| o.price.0)
        .min()
        .unwrap_or_else(|| panic!("{instance_type} has a {capacity_type} offering in {zone}"))
}

/// The most a launch limited to `zones` and `capacity_type` may pay for the type (the dearest
/// available offering: what a replacement must still undercut, as Karpenter filters them).
fn worst_price(it: &InstanceType, capacity_type: &str, zones: &[String]) -> Option<i64> {
    it.offerings
        .iter()
        .filter(|o| o.available && o.capacity_type == capacity_type && zones.contains(&o.zone))
        .map(|o| o.price.0)
        .max()
}

/// A NodePool with the default EC2NodeClass: requirement lines, extra template-spec lines
/// (`expireAfter`) and the lines of its `disruption` block.
fn pool(name: &str, requirements: &str, template: &str, disruption: &str) -> String {
    nodepool(
        name,
        0,
        requirements,
        template,
        &format!("  disruption:\n{disruption}"),
    )
}

/// A `disruption` block: policy, consolidateAfter, and budget list items (YAML flow maps).
fn disruption(policy: &str, after: &str, budgets: &[&str]) -> String {
    let mut s = format!("    consolidationPolicy: {policy}\n    consolidateAfter: {after}\n");
    s.push_str("    budgets:\n");
    for b in budgets {
        s.push_str(&format!("      - {b}\n"));
    }
    s
}

fn types_in(list: &str) -> String {
    format!("        - {{key: node.kubernetes.io/instance-type, operator: In, values: [{list}]}}")
}

/// An on-demand pool with a 100 % budget and no consolidateAfter delay.
fn open_pool(name: &str, extra_requirements: &str) -> String {
    pool(
        name,
        &format!("{ON_DEMAND}\n{extra_requirements}"),
        "",
        &disruption("WhenEmptyOrUnderutilized", "0s", &["{nodes: \"100%\"}"]),
    )
}

fn annotate(key: &str, value: &str) -> String {
    format!("  annotations: {{{key}: \"{value}\"}}")
}

const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";

// ---------------------------------------------------------------------------------------------
// Emptiness

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
    // The busy node is not empty. Consolidating it would need a replacement (its pod cannot
    // move onto the node being deleted), but the default budget (10 % of 2 nodes, rounded up:
    // 1) is used up by the empty node, so it waits.
    for d in of(&o, "busy") {
        assert_eq!(d.reason, DisruptionReason::Underutilized);
        match &d.blocked_by {
            None => assert_eq!(d.replacements.len(), 1, "{d:#?}"),
            Some(why) => assert!(matches!(**why, Blocker::Budget { .. }), "{d:#?}"),
        }
    }
    assert!(commanded(&o, "busy").is_none(), "{:#?}", o.disruptions);
}

/// A node's price is its own offering's: its type in its zone and capacity type, or the
/// cheapest of its type's offerings over whichever of the two it has no label for.
#[test]
fn a_node_is_priced_by_its_own_offering_or_the_cheapest_its_labels_allow() {
    // No capacity-type requirement: the NodePool's types keep their spot offerings.
    let any_capacity = pool(
        "default",
        "",
        "",
        &disruption("WhenEmptyOrUnderutilized", "0s", &["{nodes: \"100%\"}"]),
    );
    let yaml = any_capacity
        + NODECLASS
        + &node(
            "labelled",
            "default",
            "m5.xlarge",
            "us-east-1b",
            "on-demand",
            CREATED,
            "",
        )
        + &node(
            "no-zone",
            "default",
            "m5.2xlarge",
            "us-east-1b",
            "on-demand",
            CREATED,
            "",
        )
        + &node(
            "bare",
            "default",
            "m5.4xlarge",
            "us-east-1b",
            "on-demand",
            CREATED,
            "",
        );
    let mut facts = facts(&yaml);
    edit_node(&mut facts, "no-zone", |n| {
        n.labels.remove("topology.kubernetes.io/zone");
    });
    edit_node(&mut facts, "bare", |n| {
        n.labels.remove("topology.kubernetes.io/zone");
        n.labels.remove("karpenter.sh/capacity-type");
    });
    let o = plan_facts_at(facts, MONDAY_MS);
    let cheapest = |name: &str, capacity_type: Option<&str>| {
        it(name)
            .offerings
            .iter()
            .filter(|o| capacity_type.is_none_or(|c| o.capacity_type == c))
            .map(|o| o.price.0)
            .min()
            .unwrap_or_else(|| panic!("{name} has offerings"))
    };
    let expected = [
        (
            "labelled",
            node_price("m5.xlarge", "us-east-1b", "on-demand"),
        ),
        ("no-zone", cheapest("m5.2xlarge", Some("on-demand"))),
        ("bare", cheapest("m5.4xlarge", None)),
    ];
    let d = commanded(&o, "labelled").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    assert_eq!(d.reason, DisruptionReason::Empty);
    // The three go in one emptiness command, whose savings are their prices' sum.
    for (name, _) in &expected {
        let c = commanded(&o, name).unwrap_or_else(|| panic!("{name}: {:#?}", o.disruptions));
        assert_eq!(c.command, d.command, "{name}");
    }
    assert_eq!(
        d.savings_per_hour.0,
        expected.iter().map(|(_, p)| p).sum::<i64>(),
        "{expected:?}"
    );
}

/// Karpenter's Consolidatable condition: `consolidateAfter` counts from the NodeClaim's
/// `status.lastPodEventTime`, not from the node's creation.
#[test]
fn an_empty_node_goes_once_consolidate_after_has_passed_since_its_last_pod_event() {
    let last_event = MONDAY_MS - 30 * MINUTE_MS;
    let yaml = pool(
        "idle",
        ON_DEMAND,
        "",
        &disruption("WhenEmptyOrUnderutilized", "1h", &["{nodes: \"100%\"}"]),
    ) + NODECLASS
        + &node(
            "idle",
            "idle",
            "m5.large",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &nodeclaim(
            "idle-claim",
            "idle",
            "",
            &format!("  lastPodEventTime: \"{}\"", rfc3339(last_event)),
        );
    let mut facts = facts(&yaml);
    // The reader carries the claim's last pod event to the node; if it did not, the node's
    // creation (two days ago) would make it consolidatable at once and this test meaningless.
    edit_node(&mut facts, "idle", |n| {
        assert_eq!(n.last_pod_event_ms, Some(last_event as i64));
        assert!(n
            .created_ms
            .is_some_and(|c| c < last_event as i64 - 3_600_000));
    });
    let deadline = last_event + HOUR_MS;

    for now in [MONDAY_MS, deadline - 1] {
        let o = plan_facts_at(facts.clone(), now);
        assert!(of(&o, "idle").is_empty(), "at {now}: {:#?}", o.disruptions);
    }
    let o = plan_facts_at(facts, deadline);
    let d = commanded(&o, "idle").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    assert_eq!(d.reason, DisruptionReason::Empty);
    assert_eq!(d.nodeclaim.as_deref(), Some("idle-claim"));
    assert!(d.replacements.is_empty());
    assert_eq!(
        d.savings_per_hour.0,
        node_price("m5.large", "us-east-1a", "on-demand")
    );
}

#[test]
fn daemonset_pods_do_not_make_a_node_non_empty() {
    let yaml = open_pool("default", "")
        + NODECLASS
        + &node(
            "daemons-only",
            "default",
            "m5.large",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &bound_pod_with(
            "agent",
            "daemons-only",
            "100m",
            "128Mi",
            Some("DaemonSet"),
            "",
            "",
        )
        + &node(
            "with-app",
            "default",
            "m5.large",
            "us-east-1b",
            "on-demand",
            CREATED,
            "",
        )
        + &bound_pod("app", "with-app", "100m", "128Mi", "");
    let o = plan_at(&yaml, MONDAY_MS);
    assert_commands_consistent(&o);
    let d = commanded(&o, "daemons-only").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    assert_eq!(d.reason, DisruptionReason::Empty);
    // The node with an ordinary pod is not empty (it may be consolidated otherwise).
    for d in of(&o, "with-app") {
        assert_ne!(d.reason, DisruptionReason::Empty, "{d:#?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Consolidation: delete, replace, m → 1, m → n

#[test]
fn a_node_whose_pods_fit_elsewhere_is_deleted_without_replacement() {
    // `keeper` cannot be disrupted (node annotation) and has room; `spare`'s pod fits there.
    let yaml = default_pool()
        + &node(
            "keeper",
            "default",
            "m5.2xlarge",
            "us-east-1a",
            "on-demand",
            CREATED,
            &annotate(DO_NOT_DISRUPT, "true"),
        )
        + &bound_pod("keeper-app", "keeper", "1", "1Gi", "")
        + &node(
            "spare",
            "default",
            "m5.large",
            "us-east-1b",
            "on-demand",
            CREATED,
            "",
        )
        + &bound_pod("spare-app", "spare", "500m", "512Mi", "");
    let o = plan_at(&yaml, MONDAY_MS);
    assert_commands_consistent(&o);
    let d = commanded(&o, "spare").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    assert_eq!(d.reason, DisruptionReason::Underutilized);
    assert!(d.replacements.is_empty(), "{d:#?}");
    assert!(o.launches.is_empty(), "{:#?}", o.launches);
    assert_eq!(
        d.savings_per_hour.0,
        node_price("m5.large", "us-east-1b", "on-demand")
    );
    assert!(commanded(&o, "keeper").is_none());
    assert!(
        blocked(&o, "keeper")
            .iter()
            .all(|b| b.contains(DO_NOT_DISRUPT) && b.contains("keeper")),
        "{:#?}",
        o.disruptions
    );
}

/// Karpenter's `SimulateScheduling` (pkg/controllers/disruption/helpers.go) schedules the
/// pending pods together with the candidates' pods: a node is not consolidated into room that
/// pending pods need. `spare`'s pod fits on `keeper` only while no pending pod is planned there.
#[test]
fn consolidation_leaves_the_room_pending_pods_need() {
    let yaml = default_pool()
        + &node(
            "keeper",
            "default",
            "m5.2xlarge",
            "us-east-1a",
            "on-demand",
            CREATED,
            &annotate(DO_NOT_DISRUPT, "true"),
        )
        + &bound_pod("keeper-app", "keeper", "1", "1Gi", "")
        + &node(
            "spare",
            "default",
            "m5.large",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &bound_pod("spare-app", "spare", "500m", "512Mi", "");
    let o = plan_at(&yaml, MONDAY_MS);
    let d = commanded(&o, "spare").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    assert!(d.replacements.is_empty(), "deleted onto keeper: {d:#?}");

    // A pending pod that only `keeper` can hold leaves it less than spare-app's 500m.
    let keeper_cpu = it("m5.2xlarge").allocatable().cpu;
    let pending_cpu = keeper_cpu - 1000 - 400;
    let yaml = yaml + &pod("big", &format!("{pending_cpu}m"), "1Gi", "app: big", "");
    let o = plan_at(&yaml, MONDAY_MS);
    assert_eq!(
        o.bindings.get("default/big").map(String::as_str),
        Some("keeper"),
        "provisioning places the pending pod on keeper"
    );
    assert!(
        commanded(&o, "spare").is_none_or(|d| !d.replacements.is_empty()),
        "spare-app no longer fits on keeper: {:#?}",
        o.disruptions
    );
}

#[test]
fn a_node_is_replaced_by_one_strictly_cheaper_nodeclaim() {
    let yaml = default_pool()
        + &node(
            "big",
            "default",
            "m5.2xlarge",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &bound_pod("small-app", "big", "1", "1Gi", "");
    let o = plan_at(&yaml, MONDAY_MS);
    assert_commands_consistent(&o);
    let d = commanded(&o, "big").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    assert_eq!(d.reason, DisruptionReason::Underutilized);
    assert_eq!(d.replacements.len(), 1, "{d:#?}");
    let l = launch(&o, &d.replacements[0]);
    let old = node_price("m5.2xlarge", "us-east-1a", "on-demand");
    // The cheapest on-demand type that holds the pod, anywhere in the pool's zones.
    let cheapest = cheapest_od(|it| has_room(it, 1000, 1024, 1));
    assert_eq!(l.price.0, cheapest, "{l:#?}");
    assert!(l.price.0 < old);
    assert_eq!(d.savings_per_hour.0, old - l.price.0);
    assert_eq!(l.capacity_types, ["on-demand"]);
    // Strictly cheaper whichever listed type and zone EC2 picks.
    for t in launch_types(l) {
        let worst = worst_price(&t, "on-demand", &l.zones).expect("an offering");
        assert!(
            worst < old,
            "{} at {worst} is not cheaper than {old}",
            t.name
        );
    }
}

/// Karpenter keeps only the replacement's types that undercut the node at their worst price:
/// whichever EC2 picks, the new node is cheaper.
#[test]
fn a_replacement_lists_only_types_cheaper_than_the_node() {
    let allowed = ["m5.large", "m5.xlarge", "m5.2xlarge", "m5.4xlarge"];
    let yaml = open_pool("default", &types_in(&allowed.join(", ")))
        + NODECLASS
        + &node(
            "big",
            "default",
            "m5.2xlarge",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &bound_pod("small-app", "big", "1", "1Gi", "");
    let o = plan_at(&yaml, MONDAY_MS);
    let d = commanded(&o, "big").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    let l = launch(&o, &d.replacements[0]);
    let old = node_price("m5.2xlarge", "us-east-1a", "on-demand");
    let zones: Vec<String> = ZONES.iter().map(|z| z.to_string()).collect();
    let mut expected: Vec<(i64, &str)> = allowed
        .iter()
        .map(|n| it(n))
        .filter(|it| has_room(it, 1000, 1024, 1))
        .filter(|it| worst_price(it, "on-demand", &zones).is_some_and(|w| w < old))
        .filter_map(|it| Some((od_price(it)?, it.name.as_str())))
        .collect();
    expected.sort();
    // m5.2xlarge and m5.4xlarge hold the pod too, but are not cheaper.
    assert_eq!(
        l.instance_types,
        expected.iter().map(|(_, n)| *n).collect::<Vec<_>>()
    );
    assert_eq!(l.instance_types, ["m5.large", "m5.xlarge"]);
}

/// A replacement that may be spot or on-demand is priced as spot, so it must be spot: if spot
/// runs out the launch fails instead of buying on-demand at more than the node costs.
#[test]
fn an_on_demand_node_replaced_by_a_spot_priced_node_is_narrowed_to_spot() {
    let yaml = pool(
        "both",
        &format!(
            "        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand, spot]}}\n{}",
            types_in(M5)
        ),
        "",
        &disruption("WhenEmptyOrUnderutilized", "0s", &["{nodes: \"100%\"}"]),
    ) + NODECLASS
        + &node(
            "od",
            "both",
            "m5.2xlarge",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &bound_pod("od-app", "od", "1", "1Gi", "");
    let o = plan_at(&yaml, MONDAY_MS);
    assert_commands_consistent(&o);
    let d = commanded(&o, "od").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    let l = launch(&o, &d.replacements[0]);
    assert_eq!(l.capacity_types, ["spot"], "{l:#?}");
    let old = node_price("m5.2xlarge", "us-east-1a", "on-demand");
    let cheapest = price_in(it("m5.large"), "spot", &ZONES).expect("m5.large spot");
    assert_eq!(l.price.0, cheapest);
    assert_eq!(d.savings_per_hour.0, old - cheapest);
    for t in launch_types(l) {
        let worst = worst_price(&t, "spot", &l.zones).expect("a spot offering");
        assert!(worst < old, "{} at {worst}", t.name);
    }
}

/// With a budget of two, multi-node consolidation tries the two nodes with the highest price
/// per unit of disruption cost: the big node and one small one merge into a new node, rather
/// than the two small ones (which sort first by disruption cost alone) being deleted.
#[test]
fn multi_node_consolidation_tries_the_nodes_most_worth_removing_first() {
    let yaml = pool(
        "multi",
        &format!(
            "{ON_DEMAND}\n{}",
            types_in("m5.large, m5.xlarge, m5.2xlarge, m5.4xlarge")
        ),
        "",
        &disruption("WhenEmptyOrUnderutilized", "0s", &["{nodes: \"2\"}"]),
    ) + NODECLASS
        + &node(
            "a-big",
            "multi",
            "m5.4xlarge",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &bound_pod("a-0", "a-big", "1", "1Gi", "")
        + &bound_pod("a-1", "a-big", "1", "1Gi", "")
        + &node(
            "b-small",
            "multi",
            "m5.large",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &bound_pod("b-0", "b-small", "1", "1Gi", "")
        + &node(
            "c-small",
            "multi",
            "m5.large",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &bound_pod("c-0", "c-small", "1", "1Gi", "");
    let o = plan_at(&yaml, MONDAY_MS);
    assert_commands_consistent(&o);
    let a = commanded(&o, "a-big").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    let b = commanded(&o, "b-small").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    assert_eq!(a.command, b.command);
    assert!(commanded(&o, "c-small").is_none(), "{:#?}", o.disruptions);
    // Three 1-CPU pods: the cheapest pool type holding them (c-small has no room left).
    let l = launch(&o, &a.replacements[0]);
    assert_eq!(l.instance_types[0], "m5.xlarge");
    let old = node_price("m5.4xlarge", "us-east-1a", "on-demand")
        + node_price("m5.large", "us-east-1a", "on-demand");
    assert_eq!(a.savings_per_hour.0, old - l.price.0);
}

/// Three m5.2xlarge nodes with a 1-CPU pod each become one m5.xlarge. Removing any two would
/// already work (their pods fit on the third), so the binary search grows to all three.
#[test]
fn several_nodes_merge_into_one() {
    let mut yaml = open_pool("merge", &types_in(M5)) + NODECLASS;
    for (i, zone) in ZONES.iter().enumerate() {
        let n = format!("n{i}");
        yaml += &node(&n, "merge", "m5.2xlarge", zone, "on-demand", CREATED, "");
        yaml += &bound_pod(&format!("app{i}"), &n, "1", "1Gi", "");
    }
    let o = plan_at(&yaml, MONDAY_MS);
    assert_commands_consistent(&o);
    let ds: Vec<&Disruption> = ["n0", "n1", "n2"]
        .iter()
        .map(|n| commanded(&o, n).unwrap_or_else(|| panic!("{n}: {:#?}", o.disruptions)))
        .collect();
    assert!(ds
        .iter()
        .all(|d| d.reason == DisruptionReason::Underutilized));
    assert!(ds.iter().all(|d| d.command == ds[0].command), "{ds:#?}");
    assert_eq!(ds[0].replacements.len(), 1, "{ds:#?}");
    let l = launch(&o, &ds[0].replacements[0]);
    // The pool's cheapest type with room for the three pods; m5.2xlarge would also hold them,
    // but it is what is being removed, so keeping one node would be the better move.
    let expected = ["m5.large", "m5.xlarge"]
        .iter()
        .map(|n| it(n))
        .filter(|it| has_room(it, 3000, 3072, 3))
        .filter_map(od_price)
        .min()
        .expect("m5.xlarge holds three 1-CPU pods");
    assert_eq!(l.price.0, expected);
    assert_eq!(l.instance_types, ["m5.xlarge"]);
    let old: i64 = ZONES
        .iter()
        .map(|z| node_price("m5.2xlarge", z, "on-demand"))
        .sum();
    assert_eq!(ds[0].savings_per_hour.0, old - expected);
}

/// m → n with 2 ≤ n < m (Karpenter stops at n = 1): four nodes, two per zone, whose pods are
/// pinned to their zone, become one node per zone.
#[test]
fn four_nodes_in_two_zones_merge_into_two() {
    let mut yaml = open_pool("merge", &types_in(M5)) + NODECLASS;
    let nodes = [
        ("a1", "us-east-1a"),
        ("a2", "us-east-1a"),
        ("b1", "us-east-1b"),
        ("b2", "us-east-1b"),
    ];
    for (n, zone) in nodes {
        yaml += &node(n, "merge", "m5.2xlarge", zone, "on-demand", CREATED, "");
        yaml += &bound_pod_with(
            &format!("{n}-app"),
            n,
            "1",
            "1Gi",
            Some("ReplicaSet"),
            "",
            &format!("  nodeSelector: {{topology.kubernetes.io/zone: {zone}}}"),
        );
    }
    let o = plan_at(&yaml, MONDAY_MS);
    assert_commands_consistent(&o);
    let ds: Vec<&Disruption> = nodes
        .iter()
        .map(|(n, _)| commanded(&o, n).unwrap_or_else(|| panic!("{n}: {:#?}", o.disruptions)))
        .collect();
    assert!(ds.iter().all(|d| d.command == ds[0].command), "{ds:#?}");
    // Fewer nodes than it takes. Two (one per zone) is what Karpenter's order gives; the fill
    // type (`queries/src/solver/shape.rs`) weighs both zones' pods when it sizes a zone-pinned
    // NodeClaim, so one zone may get two m5.large for the price of one m5.xlarge: the same
    // price (asserted below), one NodeClaim more.
    assert!((2..4).contains(&ds[0].replacements.len()), "{ds:#?}");
    let launches: Vec<&Launch> = ds[0].replacements.iter().map(|r| launch(&o, r)).collect();
    let zones: BTreeSet<&str> = launches
        .iter()
        .flat_map(|l| l.zones.iter().map(String::as_str))
        .collect();
    assert_eq!(zones, BTreeSet::from(["us-east-1a", "us-east-1b"]));
    // Two 1-CPU pods per zone: the cheapest pool type holding both, which is not a removed one.
    let per_zone = |zone: &str| {
        ["m5.large", "m5.xlarge"]
            .iter()
            .map(|n| it(n))
            .filter(|it| has_room(it, 2000, 2048, 2))
            .filter_map(|it| price_in(it, "on-demand", &[zone]))
            .min()
            .expect("m5.xlarge holds two 1-CPU pods")
    };
    let new = per_zone("us-east-1a") + per_zone("us-east-1b");
    assert_eq!(launches.iter().map(|l| l.price.0).sum::<i64>(), new);
    let old: i64 = nodes
        .iter()
        .map(|(_, z)| node_price("m5.2xlarge", z, "on-demand"))
        .sum();
    assert_eq!(ds[0].savings_per_hour.0, old - new);
}

// ---------------------------------------------------------------------------------------------
// Spot-to-spot

/// A spot-only pool (all types unless `requirements` restricts them) with one m5.2xlarge spot
/// node holding a 1-CPU pod.
fn spot_node_yaml(requirements: &str) -> String {
    pool(
        "spot",
        &format!("{SPOT}\n{requirements}"),
        "",
        &disruption("WhenEmptyOrUnderutilized", "0s", &["{nodes: \"100%\"}"]),
    ) + NODECLASS
        + &node(
            "spotty",
            "spot",
            "m5.2xlarge",
            "us-east-1a",
            "spot",
            CREATED,
            "",
        )
        + &bound_pod("spot-app", "spotty", "1", "1Gi", "")
}

fn with_spot_to_spot(mut facts: Vec<Fact>) -> Vec<Fact> {
    facts.push(Fact::FeatureGate {
        name: "SpotToSpotConsolidation".to_string(),
        enabled: true,
    });
    facts
}

/// Types (among `names`, or the whole catalogue) with room for the 1-CPU pod whose every spot
/// offering in the default zones is cheaper than the spot node's: (cheapest spot price, name).
fn cheaper_spot_types(names: Option<&[&str]>) -> Vec<(i64, String)> {
    let node = node_price("m5.2xlarge", "us-east-1a", "spot");
    let zones: Vec<String> = ZONES.iter().map(|z| z.to_string()).collect();
    let mut out: Vec<(i64, String)> = cat()
        .iter()
        .filter(|it| names.is_none_or(|n| n.contains(&it.name.as_str())))
        .filter(|it| has_room(it, 1000, 1024, 1))
        .filter(|it| worst_price(it, "spot", &zones).is_some_and(|w| w < node))
        .filter_map(|it| Some((price_in(it, "spot", &ZONES)?, it.name.clone())))
        .collect();
    out.sort();
    out
}

#[test]
fn spot_is_not_replaced_by_spot_without_the_feature_gate() {
    let o = plan_at(&spot_node_yaml(""), MONDAY_MS);
    assert!(commanded(&o, "spotty").is_none(), "{:#?}", o.disruptions);
    assert!(o.launches.is_empty(), "{:#?}", o.launches);
    for why in blocked(&o, "spotty") {
        assert!(why.contains("SpotToSpotConsolidation"), "{why}");
    }
}

#[test]
fn spot_is_replaced_by_the_15_cheapest_cheaper_spot_types_with_the_gate() {
    let cheaper = cheaper_spot_types(None);
    assert!(cheaper.len() >= 15, "precondition: {cheaper:?}");
    let o = plan_facts_at(with_spot_to_spot(facts(&spot_node_yaml(""))), MONDAY_MS);
    assert_commands_consistent(&o);
    let d = commanded(&o, "spotty").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    assert_eq!(d.reason, DisruptionReason::Underutilized);
    assert_eq!(d.replacements.len(), 1);
    let l = launch(&o, &d.replacements[0]);
    assert_eq!(l.capacity_types, ["spot"]);
    let expected: Vec<String> = cheaper.iter().take(15).map(|(_, n)| n.clone()).collect();
    assert_eq!(l.instance_types, expected);
    assert_eq!(l.price.0, cheaper[0].0);
    assert_eq!(
        d.savings_per_hour.0,
        node_price("m5.2xlarge", "us-east-1a", "spot") - cheaper[0].0
    );
}

/// With `minValues` above 15 on the instance type, the launch list keeps that many.
#[test]
fn spot_to_spot_keeps_min_values_types_when_above_15() {
    let cheaper = cheaper_spot_types(None);
    assert!(cheaper.len() >= 20, "precondition: {cheaper:?}");
    let yaml = spot_node_yaml(
        "        - {key: node.kubernetes.io/instance-type, operator: Exists, minValues: 20}",
    );
    let o = plan_facts_at(with_spot_to_spot(facts(&yaml)), MONDAY_MS);
    let d = commanded(&o, "spotty").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    let l = launch(&o, &d.replacements[0]);
    let expected: Vec<String> = cheaper.iter().take(20).map(|(_, n)| n.clone()).collect();
    assert_eq!(l.instance_types, expected);
}

#[test]
fn spot_is_not_replaced_by_spot_with_fewer_than_15_cheaper_types() {
    let allowed = [
        "m5.large",
        "m5.xlarge",
        "m5.2xlarge",
        "c5.large",
        "c5.xlarge",
        "c5.2xlarge",
        "r5.large",
    ];
    let cheaper = cheaper_spot_types(Some(&allowed));
    // Some type is cheaper, so only the 15-type rule stands in the way.
    assert!(
        !cheaper.is_empty() && cheaper.len() < 15,
        "precondition: {cheaper:?}"
    );
    let yaml = spot_node_yaml(&types_in(&allowed.join(", ")));
    let o = plan_facts_at(with_spot_to_spot(facts(&yaml)), MONDAY_MS);
    assert!(commanded(&o, "spotty").is_none(), "{:#?}", o.disruptions);
    assert!(o.launches.is_empty(), "{:#?}", o.launches);
}

/// Multi-node spot-to-spot needs the gate but not 15 cheaper types (Karpenter). Without the
/// gate the three spot nodes cannot become one spot node; deleting two (their pods fit on the
/// third) is still allowed.
#[test]
fn spot_nodes_merge_into_a_spot_node_only_with_the_gate() {
    let mut yaml = pool(
        "spot",
        &format!("{SPOT}\n{}", types_in(M5)),
        "",
        &disruption("WhenEmptyOrUnderutilized", "0s", &["{nodes: \"100%\"}"]),
    ) + NODECLASS;
    for (i, zone) in ZONES.iter().enumerate() {
        let n = format!("s{i}");
        yaml += &node(&n, "spot", "m5.2xlarge", zone, "spot", CREATED, "");
        yaml += &bound_pod(&format!("s{i}-app"), &n, "1", "1Gi", "");
    }
    let o = plan_at(&yaml, MONDAY_MS);
    assert_commands_consistent(&o);
    let s0 = commanded(&o, "s0").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    let s1 = commanded(&o, "s1").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    assert_eq!(s0.command, s1.command);
    assert!(s0.replacements.is_empty(), "{s0:#?}");
    assert!(commanded(&o, "s2").is_none(), "{:#?}", o.disruptions);

    let o = plan_facts_at(with_spot_to_spot(facts(&yaml)), MONDAY_MS);
    assert_commands_consistent(&o);
    let ds: Vec<&Disruption> = ["s0", "s1", "s2"]
        .iter()
        .map(|n| commanded(&o, n).unwrap_or_else(|| panic!("{n}: {:#?}", o.disruptions)))
        .collect();
    assert!(ds.iter().all(|d| d.command == ds[0].command));
    assert_eq!(ds[0].replacements.len(), 1);
    let l = launch(&o, &ds[0].replacements[0]);
    assert_eq!(l.capacity_types, ["spot"]);
    // m5.large cannot hold three 1-CPU pods; m5.2xlarge is what is being removed.
    assert_eq!(l.instance_types, ["m5.xlarge"]);
}

// ---------------------------------------------------------------------------------------------
// Balanced policy and ranking

/// A Balanced (or other policy) pool: `big` (m5.2xlarge) holds three 500m pods with the given
/// extra metadata; `w1` and `w2` (m5.xlarge, do-not-disrupt) are nearly full, so `big`'s pods
/// can only move to a new m5.large.
fn balanced_yaml(policy: &str, pod_meta: &str) -> String {
    let mut yaml = pool(
        "bal",
        &format!("{ON_DEMAND}\n{}", types_in(M5)),
        "",
        &disruption(policy, "0s", &["{nodes: \"100%\"}"]),
    ) + NODECLASS
        + &node(
            "big",
            "bal",
            "m5.2xlarge",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        );
    for i in 0..3 {
        yaml += &bound_pod(&format!("big-{i}"), "big", "500m", "512Mi", pod_meta);
    }
    for w in ["w1", "w2"] {
        yaml += &node(
            w,
            "bal",
            "m5.xlarge",
            "us-east-1a",
            "on-demand",
            CREATED,
            &annotate(DO_NOT_DISRUPT, "true"),
        );
        yaml += &bound_pod(&format!("{w}-app"), w, "3500m", "1Gi", "");
    }
    yaml
}

/// The Balanced score of replacing `big` by an m5.large: (savings / pool price) / (big's
/// disruption cost / pool disruption cost), each node costing 1 plus its pods' eviction costs.
fn balanced_score(big_pod_cost: f64) -> f64 {
    let big = node_price("m5.2xlarge", "us-east-1a", "on-demand") as f64;
    let w = node_price("m5.xlarge", "us-east-1a", "on-demand") as f64;
    let small = price_in(it("m5.large"), "on-demand", &ZONES).expect("m5.large") as f64;
    let big_cost = 1.0 + 3.0 * big_pod_cost;
    let savings_share = (big - small) / (big + 2.0 * w);
    let disruption_share = big_cost / (big_cost + 2.0 * 2.0);
    savings_share / disruption_share
}

#[test]
fn balanced_replaces_when_savings_outweigh_half_the_disruption() {
    assert!(balanced_score(1.0) >= 0.5, "precondition");
    let o = plan_at(&balanced_yaml("Balanced", ""), MONDAY_MS);
    assert_commands_consistent(&o);
    let d = commanded(&o, "big").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    assert_eq!(d.reason, DisruptionReason::Underutilized);
    let l = launch(&o, &d.replacements[0]);
    assert_eq!(l.instance_types[0], "m5.large");
}

#[test]
fn balanced_keeps_a_node_whose_pods_are_costly_to_evict() {
    // pod-deletion-cost 2^31 − 1 makes each pod's eviction cost 1 + 16, clamped to 10.
    let costly = annotate("controller.kubernetes.io/pod-deletion-cost", "2147483647");
    assert!(balanced_score(10.0) < 0.5, "precondition");
    let o = plan_at(&balanced_yaml("Balanced", &costly), MONDAY_MS);
    assert!(commanded(&o, "big").is_none(), "{:#?}", o.disruptions);
    let why = blocked(&o, "big");
    assert!(
        why.iter().any(|b| b.contains("Balanced")),
        "{:#?}",
        o.disruptions
    );
    // The same move under WhenEmptyOrUnderutilized goes ahead: only the policy holds it.
    let o = plan_at(
        &balanced_yaml("WhenEmptyOrUnderutilized", &costly),
        MONDAY_MS,
    );
    assert!(commanded(&o, "big").is_some(), "{:#?}", o.disruptions);
}

/// Every node of the NodePool counts towards its totals, at least 1 each for cordoning and
/// draining it: four empty nodes that cannot take `big`'s pods (tainted) and cannot go
/// (do-not-disrupt) halve `big`'s disruption share, so replacing it passes.
#[test]
fn balanced_counts_every_node_of_the_pool_at_least_once() {
    let mut yaml = pool(
        "bal",
        &format!("{ON_DEMAND}\n{}", types_in(M5)),
        "",
        &disruption("Balanced", "0s", &["{nodes: \"100%\"}"]),
    ) + NODECLASS
        + &node(
            "big",
            "bal",
            "m5.2xlarge",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        );
    for i in 0..3 {
        yaml += &bound_pod(&format!("big-{i}"), "big", "500m", "512Mi", "");
    }
    for i in 0..4 {
        yaml += &node_with_spec(
            &format!("idle{i}"),
            "bal",
            "m5.large",
            "us-east-1a",
            "on-demand",
            CREATED,
            &annotate(DO_NOT_DISRUPT, "true"),
            "  taints: [{key: dedicated, value: x, effect: NoSchedule}]",
        );
    }
    let big = node_price("m5.2xlarge", "us-east-1a", "on-demand") as f64;
    let idle = node_price("m5.large", "us-east-1a", "on-demand") as f64;
    let small = price_in(it("m5.large"), "on-demand", &ZONES).expect("m5.large") as f64;
    let savings_share = (big - small) / (big + 4.0 * idle);
    // big: 1 + 3 pods; each idle node: 1.
    let score = savings_share / (4.0 / (4.0 + 4.0));
    assert!(score >= 0.5, "precondition: {score}");
    // Counting pods only, big would carry all the disruption and the move would fail.
    assert!(savings_share / 1.0 < 0.5, "precondition");
    let o = plan_at(&yaml, MONDAY_MS);
    let d = commanded(&o, "big").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    assert_eq!(d.reason, DisruptionReason::Underutilized);
}

/// Balanced scores multi-node moves too: deleting three nodes whose pods are costly to evict
/// (their pods fit on an idle node) saves too little for the disruption.
#[test]
fn balanced_scores_multi_node_moves_too() {
    let yaml = |policy: &str| {
        let mut yaml = pool(
            "bal",
            &format!("{ON_DEMAND}\n{}", types_in("m5.large, m5.4xlarge")),
            "",
            &disruption(policy, "0s", &["{nodes: \"100%\"}"]),
        ) + NODECLASS
            + &node(
                "sink",
                "bal",
                "m5.4xlarge",
                "us-east-1a",
                "on-demand",
                CREATED,
                &annotate(DO_NOT_DISRUPT, "true"),
            );
        for i in 0..3 {
            let n = format!("x{i}");
            yaml += &node(
                &n,
                "bal",
                "m5.large",
                "us-east-1a",
                "on-demand",
                CREATED,
                "",
            );
            yaml += &bound_pod(
                &format!("x{i}-app"),
                &n,
                "1",
                "1Gi",
                &annotate("controller.kubernetes.io/pod-deletion-cost", "2147483647"),
            );
        }
        yaml
    };
    let x = node_price("m5.large", "us-east-1a", "on-demand") as f64;
    let sink = node_price("m5.4xlarge", "us-east-1a", "on-demand") as f64;
    // Deleting k of the x nodes: savings k·x, disruption k·(1 + 10), totals 3x + sink and
    // 3·11 + 1; the score does not depend on k.
    let score = (x / (3.0 * x + sink)) / (11.0 / 34.0);
    assert!(score < 0.5, "precondition: {score}");

    let o = plan_at(&yaml("WhenEmptyOrUnderutilized"), MONDAY_MS);
    let ds: Vec<&Disruption> = ["x0", "x1", "x2"]
        .iter()
        .map(|n| commanded(&o, n).unwrap_or_else(|| panic!("{n}: {:#?}", o.disruptions)))
        .collect();
    assert!(
        ds.iter().all(|d| d.command == ds[0].command),
        "one multi-node command: {ds:#?}"
    );

    let o = plan_at(&yaml("Balanced"), MONDAY_MS);
    assert!(
        o.disruptions.iter().all(|d| d.command.is_none()),
        "{:#?}",
        o.disruptions
    );
    for n in ["x0", "x1", "x2"] {
        assert!(
            blocked(&o, n).iter().any(|b| b.contains("Balanced")),
            "{n}: {:#?}",
            o.disruptions
        );
    }
}

/// Two nodes save the same by going (each one's pod fits on the other); the budget allows one.
/// The one whose pod is cheaper to evict goes, although the other sorts first by name.
#[test]
fn consolidation_ranks_by_savings_over_disruption_cost() {
    for costly in [
        // A high priority raises the pod's eviction cost …
        ("", "  priority: 1000000000"),
        // … and so does a pod-deletion-cost.
        (
            "  annotations: {controller.kubernetes.io/pod-deletion-cost: \"1000000000\"}",
            "",
        ),
    ] {
        let yaml = pool(
            "rank",
            ON_DEMAND,
            "",
            &disruption("WhenEmptyOrUnderutilized", "0s", &["{nodes: \"1\"}"]),
        ) + NODECLASS
            + &node(
                "a-precious",
                "rank",
                "m5.2xlarge",
                "us-east-1a",
                "on-demand",
                CREATED,
                "",
            )
            + &bound_pod_with(
                "precious",
                "a-precious",
                "1",
                "1Gi",
                Some("ReplicaSet"),
                costly.0,
                costly.1,
            )
            + &node(
                "b-plain",
                "rank",
                "m5.2xlarge",
                "us-east-1a",
                "on-demand",
                CREATED,
                "",
            )
            + &bound_pod("plain", "b-plain", "1", "1Gi", "");
        let o = plan_at(&yaml, MONDAY_MS);
        assert_commands_consistent(&o);
        let d = commanded(&o, "b-plain").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
        assert!(
            d.replacements.is_empty(),
            "its pod fits on a-precious: {d:#?}"
        );
        assert!(
            commanded(&o, "a-precious").is_none(),
            "{:#?}",
            o.disruptions
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Drift

const DRIFT_CLASS: &str = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiSelectorTerms:
    - alias: al2023@latest
status:
  subnets:
    - {id: subnet-a, zone: us-east-1a}
    - {id: subnet-b, zone: us-east-1b}
    - {id: subnet-c, zone: us-east-1c}
  securityGroups: [{id: sg-1}, {id: sg-2}]
  amis: [{id: ami-current}]
---
"#;

/// What a drift scenario's NodeClaim says; `Default` is a NodeClaim launched from the current
/// NodePool and EC2NodeClass.
#[derive(Clone)]
struct Claim {
    nodepool_hash: Option<String>,
    nodeclass_hash: Option<String>,
    image: &'static str,
    subnet: &'static str,
    groups: &'static str,
    enclaves: &'static str,
}

impl Default for Claim {
    fn default() -> Claim {
        Claim {
            nodepool_hash: None,
            nodeclass_hash: None,
            image: "ami-current",
            subnet: "subnet-a",
            groups: "sg-2,sg-1",
            enclaves: "false",
        }
    }
}

fn drift_pool(requirements: &str) -> String {
    pool(
        "drifty",
        requirements,
        "",
        &disruption("WhenEmptyOrUnderutilized", "0s", &["{nodes: \"100%\"}"]),
    ) + DRIFT_CLASS
}

/// The current drift hashes of the pool and class in `yaml`.
fn hashes(yaml: &str) -> (String, String) {
    let f = facts(yaml);
    let pool = f
        .iter()
        .find_map(|f| match f {
            Fact::NodePool(p) => Some(p.drift_hash()),
            _ => None,
        })
        .expect("a NodePool");
    let class = f
        .iter()
        .find_map(|f| match f {
            Fact::NodeClass(c) => Some(c.drift_hash()),
            _ => None,
        })
        .expect("an EC2NodeClass");
    (pool, class)
}

/// An m5.large in `drifty` with a pod and the NodeClaim `claim` (hashes default to current).
fn drift_yaml(pool_yaml: &str, claim: &Claim) -> String {
    let (pool_hash, class_hash) = hashes(pool_yaml);
    let meta = format!(
        "  annotations:\n    dovetail.sh/nodepool-hash: \"{}\"\n    dovetail.sh/nodeclass-hash: \"{}\"\n    dovetail.sh/subnet-id: {}\n    dovetail.sh/security-group-ids: \"{}\"\n    dovetail.sh/enclaves: \"{}\"",
        claim.nodepool_hash.clone().unwrap_or(pool_hash),
        claim.nodeclass_hash.clone().unwrap_or(class_hash),
        claim.subnet,
        claim.groups,
        claim.enclaves,
    );
    pool_yaml.to_string()
        + &node(
            "n",
            "drifty",
            "m5.large",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &nodeclaim(
            "n-claim",
            "n",
            &meta,
            &format!("  imageID: {}", claim.image),
        )
        + &bound_pod("n-app", "n", "1", "1Gi", "")
}

fn drifted(o: &Outcome) -> bool {
    let d = of(o, "n");
    let drifted = d.iter().any(|d| d.reason == DisruptionReason::Drifted);
    if drifted {
        let c = commanded(o, "n").unwrap_or_else(|| panic!("{d:#?}"));
        assert_eq!(c.reason, DisruptionReason::Drifted);
        assert_eq!(c.nodeclaim.as_deref(), Some("n-claim"));
        // Its pod has nowhere else to go: one replacement.
        assert_eq!(c.replacements.len(), 1, "{c:#?}");
    }
    drifted
}

#[test]
fn a_node_launched_from_the_current_templates_is_not_drifted() {
    let o = plan_at(
        &drift_yaml(&drift_pool(ON_DEMAND), &Claim::default()),
        MONDAY_MS,
    );
    assert!(!drifted(&o), "{:#?}", o.disruptions);
    assert!(o.adopted.is_empty(), "{:?}", o.adopted);
}

#[test]
fn nodepool_template_change_drifts() {
    let claim = Claim {
        nodepool_hash: Some("0123456789abcdef".to_string()),
        ..Claim::default()
    };
    let o = plan_at(&drift_yaml(&drift_pool(ON_DEMAND), &claim), MONDAY_MS);
    assert!(drifted(&o), "{:#?}", o.disruptions);
}

#[test]
fn ec2nodeclass_change_drifts() {
    let claim = Claim {
        nodeclass_hash: Some("0123456789abcdef".to_string()),
        ..Claim::default()
    };
    let o = plan_at(&drift_yaml(&drift_pool(ON_DEMAND), &claim), MONDAY_MS);
    assert!(drifted(&o), "{:#?}", o.disruptions);
}

#[test]
fn requirements_no_longer_satisfied_drift() {
    // The on-demand node in a pool that now asks for spot; m5.large is still offered as spot,
    // so it is the requirement, not a missing type, that drifts it.
    let yaml = drift_yaml(&drift_pool(SPOT), &Claim::default());
    assert!(it("m5.large")
        .offerings
        .iter()
        .any(|o| o.capacity_type == "spot"));
    let o = plan_at(&yaml, MONDAY_MS);
    assert!(drifted(&o), "{:#?}", o.disruptions);
}

#[test]
fn ami_no_longer_selected_drifts() {
    let claim = Claim {
        image: "ami-previous",
        ..Claim::default()
    };
    let o = plan_at(&drift_yaml(&drift_pool(ON_DEMAND), &claim), MONDAY_MS);
    assert!(drifted(&o), "{:#?}", o.disruptions);
}

#[test]
fn subnet_no_longer_selected_drifts() {
    let claim = Claim {
        subnet: "subnet-gone",
        ..Claim::default()
    };
    let o = plan_at(&drift_yaml(&drift_pool(ON_DEMAND), &claim), MONDAY_MS);
    assert!(drifted(&o), "{:#?}", o.disruptions);
}

#[test]
fn security_groups_changed_drift() {
    let claim = Claim {
        groups: "sg-1",
        ..Claim::default()
    };
    let o = plan_at(&drift_yaml(&drift_pool(ON_DEMAND), &claim), MONDAY_MS);
    assert!(drifted(&o), "{:#?}", o.disruptions);
}

#[test]
fn enclaves_setting_changed_drifts() {
    let claim = Claim {
        enclaves: "true",
        ..Claim::default()
    };
    let o = plan_at(&drift_yaml(&drift_pool(ON_DEMAND), &claim), MONDAY_MS);
    assert!(drifted(&o), "{:#?}", o.disruptions);
}

#[test]
fn instance_type_no_longer_offered_drifts() {
    let mut f = facts(&drift_yaml(&drift_pool(ON_DEMAND), &Claim::default()));
    let before = f.len();
    f.retain(|f| !matches!(f, Fact::InstanceType { instance_type, .. } if instance_type.name == "m5.large"));
    assert!(f.len() < before, "the catalogue offered m5.large");
    let o = plan_facts_at(f, MONDAY_MS);
    assert!(drifted(&o), "{:#?}", o.disruptions);
}

/// A NodeClaim without dovetail's hash annotations is adopted (they are written), not drifted.
#[test]
fn a_nodeclaim_without_hashes_is_adopted_not_drifted() {
    let yaml = drift_pool(ON_DEMAND)
        + &node(
            "n",
            "drifty",
            "m5.large",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &nodeclaim("n-claim", "n", "", "  imageID: ami-current")
        + &bound_pod("n-app", "n", "1", "1Gi", "");
    let o = plan_at(&yaml, MONDAY_MS);
    assert_eq!(o.adopted, ["n-claim"]);
    assert!(!drifted(&o), "{:#?}", o.disruptions);
}

// ---------------------------------------------------------------------------------------------
// Expiration

fn expiring_yaml(expire_after: &str, created_ms: &[(&str, u64)]) -> String {
    let mut yaml = pool(
        "exp",
        ON_DEMAND,
        &format!("      expireAfter: {expire_after}"),
        // No graceful disruption at all: expiry must not need the budget.
        &disruption("WhenEmptyOrUnderutilized", "0s", &["{nodes: \"0\"}"]),
    ) + NODECLASS;
    for (name, created) in created_ms {
        yaml += &node(
            name,
            "exp",
            "m5.large",
            "us-east-1a",
            "on-demand",
            &rfc3339(*created),
            &annotate(DO_NOT_DISRUPT, "true"),
        );
        yaml += &bound_pod(&format!("{name}-app"), name, "1", "1Gi", "");
    }
    yaml
}

#[test]
fn a_node_expires_after_expire_after_despite_do_not_disrupt_and_budget() {
    let yaml = expiring_yaml(
        "24h",
        &[
            ("old", MONDAY_MS - 25 * HOUR_MS),
            ("exactly", MONDAY_MS - 24 * HOUR_MS),
            ("young", MONDAY_MS - 24 * HOUR_MS + 1),
        ],
    );
    let o = plan_at(&yaml, MONDAY_MS);
    assert_commands_consistent(&o);
    for n in ["old", "exactly"] {
        let d = commanded(&o, n).unwrap_or_else(|| panic!("{n}: {:#?}", o.disruptions));
        assert_eq!(d.reason, DisruptionReason::Expired);
        assert_eq!(d.replacements.len(), 1, "its pod needs a new node: {d:#?}");
    }
    assert!(commanded(&o, "young").is_none(), "{:#?}", o.disruptions);
}

#[test]
fn expire_after_never_never_expires() {
    let yaml = expiring_yaml("Never", &[("ancient", MONDAY_MS - 400 * 24 * HOUR_MS)]);
    let o = plan_at(&yaml, MONDAY_MS);
    assert!(commanded(&o, "ancient").is_none(), "{:#?}", o.disruptions);
}

/// Karpenter copies `expireAfter` into each NodeClaim when it creates it, and expires the node
/// by the claim's value: a NodePool changed since does not move an existing node's expiry.
#[test]
fn a_node_expires_by_its_nodeclaims_expire_after_not_the_nodepools_current_one() {
    let claim = |name: &str, node: &str, expire_after: &str| {
        nodeclaim(name, node, "", "").replace(
            "  requirements: []\n",
            &format!("  requirements: []\n  expireAfter: {expire_after}\n"),
        )
    };
    // The NodePool now says 24h; both nodes are 25 h old.
    let created = MONDAY_MS - 25 * HOUR_MS;
    let yaml = expiring_yaml("24h", &[("kept-48h", created), ("claimed-1h", created)])
        + &claim("kept-claim", "kept-48h", "48h")
        + &claim("short-claim", "claimed-1h", "1h");
    let o = plan_at(&yaml, MONDAY_MS);
    assert!(commanded(&o, "kept-48h").is_none(), "{:#?}", o.disruptions);
    let d = commanded(&o, "claimed-1h").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    assert_eq!(d.reason, DisruptionReason::Expired);
    // Its claim's 48h pass a day later.
    let o = plan_at(&yaml, created + 48 * HOUR_MS);
    let d = commanded(&o, "kept-48h").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    assert_eq!(d.reason, DisruptionReason::Expired);
}

/// Karpenter's expiration controller (pkg/controllers/nodeclaim/expiration/controller.go)
/// expires a NodeClaim at its own `creationTimestamp` + `expireAfter`, however late its Node
/// registered; a Node without a NodeClaim counts from its own creation.
#[test]
fn expiry_counts_from_the_nodeclaims_creation_not_the_nodes() {
    let claimed_ms = MONDAY_MS - 30 * HOUR_MS;
    // Both nodes registered 2 h ago; only `late`'s NodeClaim was created 30 h ago.
    let registered_ms = MONDAY_MS - 2 * HOUR_MS;
    let yaml = expiring_yaml("24h", &[("late", registered_ms), ("bare", registered_ms)])
        + &nodeclaim(
            "late-claim",
            "late",
            &format!("  creationTimestamp: \"{}\"", rfc3339(claimed_ms)),
            "",
        );
    // One millisecond before the claim's 24 h: nothing yet.
    let o = plan_at(&yaml, claimed_ms + 24 * HOUR_MS - 1);
    assert!(commanded(&o, "late").is_none(), "{:#?}", o.disruptions);
    let o = plan_at(&yaml, claimed_ms + 24 * HOUR_MS);
    let d = commanded(&o, "late").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    assert_eq!(d.reason, DisruptionReason::Expired);
    assert!(commanded(&o, "bare").is_none(), "{:#?}", o.disruptions);
    // The claimless node expires by its own creation.
    let o = plan_at(&yaml, registered_ms + 24 * HOUR_MS);
    let d = commanded(&o, "bare").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    assert_eq!(d.reason, DisruptionReason::Expired);
}

// ---------------------------------------------------------------------------------------------
// Interruption

fn interruption(target: &str, kind: InterruptionKind, at_ms: u64) -> Fact {
    Fact::Interruption(Interruption {
        target: target.to_string(),
        kind,
        at_ms: at_ms as i64,
    })
}

/// Protected nodes with a pod each (do-not-disrupt, budget 0), so nothing but an interruption
/// can disrupt them.
fn protected_nodes(names: &[&str]) -> String {
    let mut yaml = pool(
        "int",
        ON_DEMAND,
        "",
        &disruption("WhenEmptyOrUnderutilized", "0s", &["{nodes: \"0\"}"]),
    ) + NODECLASS;
    for n in names {
        yaml += &node(
            n,
            "int",
            "m5.large",
            "us-east-1a",
            "on-demand",
            CREATED,
            &annotate(DO_NOT_DISRUPT, "true"),
        );
        yaml += &bound_pod(&format!("{n}-app"), n, "1", "1Gi", "");
    }
    yaml
}

#[test]
fn each_interruption_kind_disrupts_its_node_by_instance_id_node_or_nodeclaim_name() {
    let names = ["n1", "n2", "n3", "n4", "n5", "n6"];
    let yaml = protected_nodes(&names) + &nodeclaim("claim-3", "n3", "", "");
    let mut f = facts(&yaml);
    f.extend([
        // Matched by the instance id at the end of the provider id `aws:///us-east-1a/i-n1`.
        interruption("i-n1", InterruptionKind::SpotInterruption, MONDAY_MS),
        interruption("n2", InterruptionKind::ScheduledChange, MONDAY_MS),
        interruption("claim-3", InterruptionKind::StateChange, MONDAY_MS),
        interruption(
            "i-n4",
            InterruptionKind::CapacityReservationInterruption,
            MONDAY_MS,
        ),
        // Recorded, never acted on.
        interruption("i-n5", InterruptionKind::RebalanceRecommendation, MONDAY_MS),
        // About an instance that is not in the cluster.
        interruption("i-unknown", InterruptionKind::SpotInterruption, MONDAY_MS),
    ]);
    let o = plan_facts_at(f, MONDAY_MS);
    assert_commands_consistent(&o);
    for n in ["n1", "n2", "n3", "n4"] {
        let d = commanded(&o, n).unwrap_or_else(|| panic!("{n}: {:#?}", o.disruptions));
        assert_eq!(d.reason, DisruptionReason::Interrupted);
        assert_eq!(d.replacements.len(), 1, "{d:#?}");
    }
    for n in ["n5", "n6"] {
        assert!(commanded(&o, n).is_none(), "{n}: {:#?}", o.disruptions);
    }
}

#[test]
fn a_capacity_block_node_is_disrupted_from_40_minutes_before_the_block_ends() {
    let end = MONDAY_MS + 2 * HOUR_MS;
    let mut f = facts(&protected_nodes(&["blocky"]));
    f.push(interruption(
        "i-blocky",
        InterruptionKind::CapacityBlockEnding,
        end,
    ));
    let lead = 40 * MINUTE_MS;
    for now in [MONDAY_MS, end - lead - 1] {
        let o = plan_facts_at(f.clone(), now);
        assert!(
            commanded(&o, "blocky").is_none(),
            "at {now}: {:#?}",
            o.disruptions
        );
    }
    for now in [end - lead, end - 5 * MINUTE_MS] {
        let o = plan_facts_at(f.clone(), now);
        let d = commanded(&o, "blocky").unwrap_or_else(|| panic!("at {now}: {:#?}", o.disruptions));
        assert_eq!(d.reason, DisruptionReason::Interrupted);
    }
}

// ---------------------------------------------------------------------------------------------
// Budgets

/// `n` empty m5.large nodes `e0…` in a pool with the given budgets.
fn empty_nodes(budgets: &[&str], n: usize) -> String {
    let mut yaml = pool(
        "b",
        ON_DEMAND,
        "",
        &disruption("WhenEmptyOrUnderutilized", "0s", budgets),
    ) + NODECLASS;
    for i in 0..n {
        yaml += &node(
            &format!("e{i}"),
            "b",
            "m5.large",
            ZONES[i % 3],
            "on-demand",
            CREATED,
            "",
        );
    }
    yaml
}

/// (commanded, blocked by a budget) among `e0…e{n-1}`; commanded ones share one command.
fn empty_split(o: &Outcome, n: usize) -> (usize, usize) {
    assert_commands_consistent(o);
    let (mut go, mut held) = (0, 0);
    let mut commands = BTreeSet::new();
    for i in 0..n {
        let name = format!("e{i}");
        if let Some(d) = commanded(o, &name) {
            assert_eq!(d.reason, DisruptionReason::Empty);
            commands.insert(d.command.clone());
            go += 1;
        } else {
            let why = blocked(o, &name);
            assert!(
                why.iter()
                    .any(|b| b.contains("budget") && b.contains("Empty")),
                "{name}: {:#?}",
                o.disruptions
            );
            held += 1;
        }
    }
    assert!(commands.len() <= 1, "empty nodes go in one command");
    (go, held)
}

#[test]
fn a_budget_count_limits_how_many_nodes_go() {
    let o = plan_at(&empty_nodes(&["{nodes: \"2\"}"], 4), MONDAY_MS);
    assert_eq!(empty_split(&o, 4), (2, 2));
}

#[test]
fn a_budget_percentage_is_rounded_up() {
    // 30 % of 5 nodes is 1.5: two may go (rounding down would allow one).
    let o = plan_at(&empty_nodes(&["{nodes: \"30%\"}"], 5), MONDAY_MS);
    assert_eq!(empty_split(&o, 5), (2, 3));
}

#[test]
fn the_most_restrictive_budget_wins() {
    let o = plan_at(
        &empty_nodes(&["{nodes: \"3\"}", "{nodes: \"40%\"}"], 5),
        MONDAY_MS,
    );
    assert_eq!(empty_split(&o, 5), (2, 3));
}

#[test]
fn a_budget_with_reasons_applies_only_to_those_reasons() {
    // Underutilized is frozen; emptiness is not.
    let mut yaml = empty_nodes(&["{nodes: \"0\", reasons: [Underutilized]}"], 1);
    yaml += &node(
        "big",
        "b",
        "m5.2xlarge",
        "us-east-1a",
        "on-demand",
        CREATED,
        "",
    );
    yaml += &bound_pod("big-app", "big", "1", "1Gi", "");
    let o = plan_at(&yaml, MONDAY_MS);
    assert_eq!(empty_split(&o, 1), (1, 0));
    assert!(commanded(&o, "big").is_none(), "{:#?}", o.disruptions);
    assert!(
        blocked(&o, "big")
            .iter()
            .any(|b| b.contains("budget") && b.contains("Underutilized")),
        "{:#?}",
        o.disruptions
    );
    // With the reason Empty instead, the same budget holds the empty node and frees the other.
    let mut yaml = empty_nodes(&["{nodes: \"0\", reasons: [Empty]}"], 1);
    yaml += &node(
        "big",
        "b",
        "m5.2xlarge",
        "us-east-1a",
        "on-demand",
        CREATED,
        "",
    );
    yaml += &bound_pod("big-app", "big", "1", "1Gi", "");
    let o = plan_at(&yaml, MONDAY_MS);
    assert_eq!(empty_split(&o, 1), (0, 1));
    assert!(commanded(&o, "big").is_some(), "{:#?}", o.disruptions);
}

#[test]
fn a_scheduled_budget_holds_only_while_its_window_is_open() {
    // Nothing may go during business hours, Monday to Friday 09:00–17:00 UTC.
    let yaml = empty_nodes(
        &["{nodes: \"0\", schedule: \"0 9 * * mon-fri\", duration: 8h}"],
        2,
    );
    for hour in [9, 12, 16] {
        let o = plan_at(&yaml, MONDAY_MS + hour * HOUR_MS);
        assert_eq!(empty_split(&o, 2), (0, 2), "Monday {hour}:00");
    }
    for hour in [8, 17, 20] {
        let o = plan_at(&yaml, MONDAY_MS + hour * HOUR_MS);
        assert_eq!(empty_split(&o, 2), (2, 0), "Monday {hour}:00");
    }
    // Saturday noon: the schedule does not fire at weekends.
    let o = plan_at(&yaml, MONDAY_MS + (5 * 24 + 12) * HOUR_MS);
    assert_eq!(empty_split(&o, 2), (2, 0), "Saturday");
}

/// A budget without reasons bounds all methods together: Karpenter counts a node marked for
/// deletion by one method against every budget before the next method runs.
#[test]
fn a_budget_without_reasons_bounds_all_methods_together() {
    let mut yaml = empty_nodes(&["{nodes: \"1\"}"], 1);
    yaml += &node(
        "big",
        "b",
        "m5.2xlarge",
        "us-east-1b",
        "on-demand",
        CREATED,
        "",
    );
    yaml += &bound_pod("big-app", "big", "1", "1Gi", "");
    let o = plan_at(&yaml, MONDAY_MS);
    // Emptiness comes first and takes the one disruption allowed.
    assert_eq!(empty_split(&o, 1), (1, 0));
    assert!(commanded(&o, "big").is_none(), "{:#?}", o.disruptions);
    assert!(
        blocked(&o, "big")
            .iter()
            .any(|b| b.contains("budget") && b.contains("Underutilized")),
        "{:#?}",
        o.disruptions
    );
}

/// Expiry ignores budgets but uses them up: the expired node is being disrupted, so the empty
/// node waits.
#[test]
fn forceful_disruptions_use_up_the_budget() {
    let mut yaml = pool(
        "b",
        ON_DEMAND,
        "      expireAfter: 24h",
        &disruption("WhenEmptyOrUnderutilized", "0s", &["{nodes: \"1\"}"]),
    ) + NODECLASS;
    yaml += &node(
        "e0",
        "b",
        "m5.large",
        "us-east-1a",
        "on-demand",
        &rfc3339(MONDAY_MS - HOUR_MS),
        "",
    );
    // Its pod is too big for e0 (an m5.large), so e0 does not become its landing place (which
    // would keep e0 out of this evaluation for another reason).
    yaml += &node(
        "old",
        "b",
        "m5.xlarge",
        "us-east-1b",
        "on-demand",
        &rfc3339(MONDAY_MS - 48 * HOUR_MS),
        "",
    );
    yaml += &bound_pod("old-app", "old", "3", "1Gi", "");
    let o = plan_at(&yaml, MONDAY_MS);
    let d = commanded(&o, "old").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    assert_eq!(d.reason, DisruptionReason::Expired);
    assert_eq!(d.replacements.len(), 1, "{d:#?}");
    assert_eq!(empty_split(&o, 1), (0, 1));
}

#[test]
fn nodes_already_disrupting_count_against_the_budget() {
    let mut yaml = empty_nodes(&["{nodes: \"3\"}"], 3);
    yaml += &node_with_spec(
        "tainted",
        "b",
        "m5.large",
        "us-east-1a",
        "on-demand",
        CREATED,
        "",
        "  taints: [{key: karpenter.sh/disrupted, effect: NoSchedule}]",
    );
    yaml += &node(
        "deleting",
        "b",
        "m5.large",
        "us-east-1b",
        "on-demand",
        CREATED,
        "  deletionTimestamp: \"2026-11-29T23:59:00Z\"",
    );
    let o = plan_at(&yaml, MONDAY_MS);
    // 3 allowed, 2 already under way: one more.
    assert_eq!(empty_split(&o, 3), (1, 2));
    // Nodes already disrupting are not disrupted again.
    assert!(of(&o, "tainted").is_empty() && of(&o, "deleting").is_empty());
}

// ---------------------------------------------------------------------------------------------
// Blockers

/// An m5.2xlarge in an open pool whose single 1-CPU pod has the given extra metadata: without
/// blockers it is replaced by a cheaper node.
fn lone_node(pod_meta: &str, extra: &str) -> String {
    open_pool("default", "")
        + NODECLASS
        + &node(
            "lone",
            "default",
            "m5.2xlarge",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &bound_pod("lone-app", "lone", "1", "1Gi", pod_meta)
        + extra
}

#[test]
fn a_lone_node_without_blockers_is_replaced() {
    let o = plan_at(&lone_node("", ""), MONDAY_MS);
    let d = commanded(&o, "lone").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    assert_eq!(d.replacements.len(), 1);
}

#[test]
fn a_do_not_disrupt_pod_blocks_its_node() {
    let o = plan_at(&lone_node(&annotate(DO_NOT_DISRUPT, "true"), ""), MONDAY_MS);
    assert!(commanded(&o, "lone").is_none(), "{:#?}", o.disruptions);
    let why = blocked(&o, "lone");
    assert!(
        why.iter()
            .any(|b| b.contains(DO_NOT_DISRUPT) && b.contains("default/lone-app")),
        "{:#?}",
        o.disruptions
    );
}

#[test]
fn a_do_not_disrupt_duration_blocks_until_that_long_after_the_pod_was_created() {
    let created = MONDAY_MS - HOUR_MS;
    let meta = format!(
        "  creationTimestamp: \"{}\"\n{}",
        rfc3339(created),
        annotate(DO_NOT_DISRUPT, "2h")
    );
    let yaml = lone_node(&meta, "");
    for now in [MONDAY_MS, created + 2 * HOUR_MS - 1] {
        let o = plan_at(&yaml, now);
        assert!(
            commanded(&o, "lone").is_none(),
            "at {now}: {:#?}",
            o.disruptions
        );
        // The blocker carries the end of its window: the pod's creation plus 2h.
        let until = Some(created as i64 + 2 * HOUR_MS as i64);
        assert!(
            o.disruptions.iter().any(|d| d.node == "lone"
                && matches!(d.blocked_by.as_deref(), Some(Blocker::PodDoNotDisrupt { until_ms, .. })
                    if *until_ms == until)),
            "{:#?}",
            o.disruptions
        );
    }
    for now in [created + 2 * HOUR_MS, MONDAY_MS + 3 * HOUR_MS] {
        let o = plan_at(&yaml, now);
        assert!(
            commanded(&o, "lone").is_some(),
            "at {now}: {:#?}",
            o.disruptions
        );
    }
}

#[test]
fn a_do_not_disrupt_node_or_nodeclaim_blocks() {
    let claim = nodeclaim("lone-claim", "lone", &annotate(DO_NOT_DISRUPT, "true"), "");
    let o = plan_at(&lone_node("", &claim), MONDAY_MS);
    assert!(commanded(&o, "lone").is_none(), "{:#?}", o.disruptions);
    assert!(
        blocked(&o, "lone")
            .iter()
            .any(|b| b.contains(DO_NOT_DISRUPT) && b.contains("node lone")),
        "{:#?}",
        o.disruptions
    );
}

/// Karpenter checks the annotation on every pod of the node, DaemonSet pods included.
#[test]
fn a_do_not_disrupt_daemonset_pod_blocks_an_otherwise_empty_node() {
    let yaml = open_pool("default", "")
        + NODECLASS
        + &node(
            "ds-node",
            "default",
            "m5.large",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &bound_pod_with(
            "agent",
            "ds-node",
            "100m",
            "128Mi",
            Some("DaemonSet"),
            &annotate(DO_NOT_DISRUPT, "true"),
            "",
        );
    let o = plan_at(&yaml, MONDAY_MS);
    assert!(commanded(&o, "ds-node").is_none(), "{:#?}", o.disruptions);
    assert!(
        blocked(&o, "ds-node")
            .iter()
            .any(|b| b.contains("default/agent")),
        "{:#?}",
        o.disruptions
    );
}

#[test]
fn a_pdb_allowing_no_disruption_blocks_and_one_allowing_some_does_not() {
    let o = plan_at(
        &lone_node("", &pdb("guard", "lone-app", "minAvailable: 1")),
        MONDAY_MS,
    );
    assert!(commanded(&o, "lone").is_none(), "{:#?}", o.disruptions);
    assert!(
        blocked(&o, "lone")
            .iter()
            .any(|b| b.contains("PodDisruptionBudget default/guard")),
        "{:#?}",
        o.disruptions
    );
    let o = plan_at(
        &lone_node("", &pdb("guard", "lone-app", "maxUnavailable: 1")),
        MONDAY_MS,
    );
    assert!(commanded(&o, "lone").is_some(), "{:#?}", o.disruptions);
}

/// Two budgets that each allow a disruption still block when they select the same pod: the
/// eviction API refuses a pod under more than one PodDisruptionBudget.
#[test]
fn a_pod_under_two_pdbs_blocks_even_when_each_allows_a_disruption() {
    let two = pdb("first", "lone-app", "maxUnavailable: 1")
        + &pdb("second", "lone-app", "maxUnavailable: 1");
    let o = plan_at(&lone_node("", &two), MONDAY_MS);
    assert!(commanded(&o, "lone").is_none(), "{:#?}", o.disruptions);
    assert!(
        blocked(&o, "lone")
            .iter()
            .any(|b| b.contains("more than one PodDisruptionBudget")
                && b.contains("default/first")
                && b.contains("default/second")),
        "{:#?}",
        o.disruptions
    );
    // One of them alone does not block (the test above shows the same for maxUnavailable: 1).
    let o = plan_at(
        &lone_node("", &pdb("first", "lone-app", "maxUnavailable: 1")),
        MONDAY_MS,
    );
    assert!(commanded(&o, "lone").is_some(), "{:#?}", o.disruptions);
}

/// Karpenter v1 evicts pods without a controller; they do not block consolidation.
#[test]
fn a_pod_without_an_owner_does_not_block() {
    let yaml = open_pool("default", "")
        + NODECLASS
        + &node(
            "bare",
            "default",
            "m5.2xlarge",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &bound_pod_with("orphan", "bare", "1", "1Gi", None, "", "");
    let o = plan_at(&yaml, MONDAY_MS);
    assert!(commanded(&o, "bare").is_some(), "{:#?}", o.disruptions);
    assert!(blocked(&o, "bare").is_empty(), "{:#?}", o.disruptions);
}

#[test]
fn consolidate_after_never_disables_consolidation() {
    let yaml = pool(
        "never",
        ON_DEMAND,
        // Nor do the nodes expire, so a year later nothing at all has happened.
        "      expireAfter: Never",
        &disruption("WhenEmptyOrUnderutilized", "Never", &["{nodes: \"100%\"}"]),
    ) + NODECLASS
        + &node(
            "empty",
            "never",
            "m5.large",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &node(
            "big",
            "never",
            "m5.2xlarge",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &bound_pod("big-app", "big", "1", "1Gi", "");
    // A year later still nothing.
    let o = plan_at(&yaml, MONDAY_MS + 365 * 24 * HOUR_MS);
    assert!(
        o.disruptions.iter().all(|d| d.command.is_none()),
        "{:#?}",
        o.disruptions
    );
}

#[test]
fn when_empty_deletes_empty_nodes_only() {
    let yaml = pool(
        "lazy",
        ON_DEMAND,
        "",
        &disruption("WhenEmpty", "0s", &["{nodes: \"100%\"}"]),
    ) + NODECLASS
        + &node(
            "empty",
            "lazy",
            "m5.large",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &node(
            "big",
            "lazy",
            "m5.2xlarge",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &bound_pod("big-app", "big", "1", "1Gi", "");
    let o = plan_at(&yaml, MONDAY_MS);
    assert_eq!(
        commanded(&o, "empty").map(|d| d.reason),
        Some(DisruptionReason::Empty)
    );
    assert!(commanded(&o, "big").is_none(), "{:#?}", o.disruptions);
    assert!(
        blocked(&o, "big")
            .iter()
            .any(|b| b.contains("consolidationPolicy: WhenEmpty")),
        "{:#?}",
        o.disruptions
    );
}

// ---------------------------------------------------------------------------------------------
// Commands

/// Each node qualifies for the methods its name lists; it is disrupted by the first of them in
/// Karpenter's order, and only once.
#[test]
fn methods_run_in_karpenters_order_and_a_node_is_in_one_command() {
    let yaml_pool = pool(
        "mix",
        ON_DEMAND,
        "      expireAfter: 24h",
        &disruption("WhenEmptyOrUnderutilized", "0s", &["{nodes: \"100%\"}"]),
    ) + DRIFT_CLASS;
    let old = rfc3339(MONDAY_MS - 48 * HOUR_MS);
    let new = rfc3339(MONDAY_MS - HOUR_MS);
    let stale =
        "  annotations: {dovetail.sh/nodepool-hash: stale, dovetail.sh/nodeclass-hash: stale}";
    let mut yaml = yaml_pool;
    let m = |name: &str, t: &str, created: &str| {
        node(name, "mix", t, "us-east-1a", "on-demand", created, "")
    };
    yaml += &m("a-interrupted-expired-empty", "m5.large", &old);
    yaml += &m("b-expired-empty-drifted", "m5.large", &old);
    yaml += &nodeclaim("b-claim", "b-expired-empty-drifted", stale, "");
    yaml += &m("c-empty-drifted", "m5.large", &new);
    yaml += &nodeclaim("c-claim", "c-empty-drifted", stale, "");
    yaml += &m("d-drifted-underutilized", "m5.large", &new);
    yaml += &nodeclaim("d-claim", "d-drifted-underutilized", stale, "");
    yaml += &bound_pod("d-app", "d-drifted-underutilized", "1500m", "1Gi", "");
    yaml += &m("e-underutilized", "m5.2xlarge", &new);
    yaml += &bound_pod("e-app", "e-underutilized", "7", "1Gi", "");
    let mut f = facts(&yaml);
    f.push(interruption(
        "a-interrupted-expired-empty",
        InterruptionKind::SpotInterruption,
        MONDAY_MS,
    ));
    let o = plan_facts_at(f, MONDAY_MS);
    assert_commands_consistent(&o);
    let reason = |n: &str| {
        commanded(&o, n)
            .unwrap_or_else(|| panic!("{n}: {:#?}", o.disruptions))
            .reason
    };
    assert_eq!(
        reason("a-interrupted-expired-empty"),
        DisruptionReason::Interrupted
    );
    assert_eq!(reason("b-expired-empty-drifted"), DisruptionReason::Expired);
    assert_eq!(reason("c-empty-drifted"), DisruptionReason::Empty);
    assert_eq!(reason("d-drifted-underutilized"), DisruptionReason::Drifted);
    assert_eq!(reason("e-underutilized"), DisruptionReason::Underutilized);
    // Forced and drift commands are one node each.
    let mut by_command: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for d in o.disruptions.iter().filter(|d| d.command.is_some()) {
        by_command
            .entry(d.command.clone().unwrap_or_default())
            .or_default()
            .push(&d.node);
    }
    assert_eq!(by_command.len(), 5, "{by_command:#?}");
}

// ---------------------------------------------------------------------------------------------
// Timers on the logical clock

fn empty_disruptions(diffs: &[(Decision, isize)], node: &str) -> Vec<isize> {
    diffs
        .iter()
        .filter_map(|(d, r)| match d {
            Decision::Disruption(x)
                if x.node == node && x.reason == DisruptionReason::Empty && x.command.is_some() =>
            {
                Some(*r)
            }
            _ => None,
        })
        .collect()
}

/// An empty on-demand node of a NodePool with `consolidateAfter: 10m`, its last pod event at
/// `last_event`.
fn idle_node_consolidating_after_10m(last_event: u64) -> String {
    pool(
        "idle",
        ON_DEMAND,
        "",
        &disruption("WhenEmptyOrUnderutilized", "10m", &["{nodes: \"100%\"}"]),
    ) + NODECLASS
        + &node(
            "idle",
            "idle",
            "m5.large",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &nodeclaim(
            "idle-claim",
            "idle",
            "",
            &format!("  lastPodEventTime: \"{}\"", rfc3339(last_event)),
        )
}

/// The engine reports the Empty disruption in the epoch that reaches lastPodEvent +
/// consolidateAfter, not one before, without any fact arriving then.
#[test]
fn an_empty_node_becomes_disruptable_when_the_clock_passes_its_deadline() {
    let t0 = MONDAY_MS;
    let last_event = t0 - 5 * MINUTE_MS;
    let yaml = idle_node_consolidating_after_10m(last_event);
    let deadline = last_event + 10 * MINUTE_MS;
    let mut e = Engine::start(1, dovetail_queries::standing_queries).expect("engine starts");
    e.advance(t0, vec![]).expect("advance");
    let d = e
        .advance(t0 + 1, facts(&yaml).into_iter().map(|f| (f, 1)).collect())
        .expect("advance");
    assert!(empty_disruptions(&d, "idle").is_empty(), "{d:#?}");
    // Epochs up to the deadline (exclusive: `advance(t)` reports what holds before t).
    let d = e.advance(deadline - MINUTE_MS, vec![]).expect("advance");
    assert!(empty_disruptions(&d, "idle").is_empty(), "{d:#?}");
    let d = e.advance(deadline, vec![]).expect("advance");
    assert!(empty_disruptions(&d, "idle").is_empty(), "{d:#?}");
    // The epoch that includes the deadline.
    let d = e.advance(deadline + 1, vec![]).expect("advance");
    assert_eq!(empty_disruptions(&d, "idle"), [1], "{d:#?}");
    // It stays (nothing retracts it later).
    let d = e.advance(deadline + HOUR_MS, vec![]).expect("advance");
    assert!(empty_disruptions(&d, "idle").is_empty(), "{d:#?}");
    assert!(e.decisions().iter().any(|d| matches!(
        d,
        Decision::Disruption(x) if x.node == "idle" && x.command.is_some()
    )));
}

/// With `standing_queries_polled(60 s)` (how a replay runs the engine, like Karpenter's
/// disruption loop), a deadline that falls between polls is acted on at the next poll: the
/// decision appears in the epoch that reaches the next multiple of the interval, not before.
#[test]
fn a_polled_engine_decides_disruption_at_the_next_poll() {
    const POLL_MS: u64 = 60_000;
    let t0 = MONDAY_MS;
    // The deadline (last event + 10m) is 25 s past a poll.
    let last_event = t0 - 5 * MINUTE_MS + 25_000;
    let yaml = idle_node_consolidating_after_10m(last_event);
    let deadline = last_event + 10 * MINUTE_MS;
    let next_poll = deadline.div_ceil(POLL_MS) * POLL_MS;
    assert!(next_poll > deadline);
    let mut e = Engine::start(1, dovetail_queries::standing_queries_polled(POLL_MS))
        .expect("engine starts");
    e.advance(t0, vec![]).expect("advance");
    let d = e
        .advance(t0 + 1, facts(&yaml).into_iter().map(|f| (f, 1)).collect())
        .expect("advance");
    assert!(empty_disruptions(&d, "idle").is_empty(), "{d:#?}");
    // Past the deadline but before the poll: nothing yet.
    let d = e.advance(next_poll, vec![]).expect("advance");
    assert!(empty_disruptions(&d, "idle").is_empty(), "{d:#?}");
    // The epoch that includes the poll.
    let d = e.advance(next_poll + 1, vec![]).expect("advance");
    assert_eq!(empty_disruptions(&d, "idle"), [1], "{d:#?}");
}

/// A node that has never seen a pod event (no NodeClaim status) counts from its creation.
#[test]
fn without_a_pod_event_consolidate_after_counts_from_creation() {
    let created = MONDAY_MS - 30 * MINUTE_MS;
    let yaml = pool(
        "idle",
        ON_DEMAND,
        "",
        &disruption("WhenEmptyOrUnderutilized", "1h", &["{nodes: \"100%\"}"]),
    ) + NODECLASS
        + &node(
            "fresh",
            "idle",
            "m5.large",
            "us-east-1a",
            "on-demand",
            &rfc3339(created),
            "",
        );
    let f = facts(&yaml);
    let o = plan_facts_at(f.clone(), created + HOUR_MS - 1);
    assert!(commanded(&o, "fresh").is_none(), "{:#?}", o.disruptions);
    let o = plan_facts_at(f, created + HOUR_MS);
    assert!(commanded(&o, "fresh").is_some(), "{:#?}", o.disruptions);
}

/// A node that takes the pods of an earlier command in the same evaluation is not removed by a
/// later one: the drifted node's pod can only land on `underused`, so consolidating
/// `underused` at the same time would leave that pod nowhere to run.
#[test]
fn a_node_receiving_pods_from_a_command_is_not_consolidated_in_the_same_evaluation() {
    let drifted_meta = "  annotations: {dovetail.sh/nodepool-hash: \"0000000000000000\"}";
    let yaml = default_pool()
        + &node(
            "drifted",
            "default",
            "m5.xlarge",
            "us-east-1a",
            "on-demand",
            CREATED,
            drifted_meta,
        )
        + &bound_pod("search", "drifted", "2", "6Gi", "")
        + &node(
            "underused",
            "default",
            "m5.xlarge",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &bound_pod("small", "underused", "500m", "512Mi", "")
        + &node(
            "pinned",
            "default",
            "m5.xlarge",
            "us-east-1a",
            "on-demand",
            CREATED,
            "",
        )
        + &bound_pod("busy", "pinned", "3", "2Gi", "");
    let o = plan_at(&yaml, MONDAY_MS);
    let drift = commanded(&o, "drifted").expect("the drifted node has a command");
    assert_eq!(
        drift.reason,
        DisruptionReason::Drifted,
        "{:#?}",
        o.disruptions
    );
    assert!(
        drift.replacements.is_empty(),
        "its pod fits on underused, no replacement needed: {drift:#?}"
    );
    assert!(
        commanded(&o, "underused").is_none(),
        "underused takes the drifted node's pod, it must stay: {:#?}",
        o.disruptions
    );
}

// ---------------------------------------------------------------------------------------------
// Candidate order: disruption cost scaled by remaining lifetime

/// Three equal m5.2xlarge nodes of a 100h-`expireAfter` NodePool, one pod each (each fits on the
/// others), a budget of one: single-node consolidation takes the first in its order. Each entry
/// is (node, created, pod priority).
fn lifetime_yaml(nodes: &[(&str, u64, &str)]) -> String {
    let mut yaml = pool(
        "life",
        ON_DEMAND,
        "      expireAfter: 100h",
        &disruption("WhenEmptyOrUnderutilized", "0s", &["{nodes: \"1\"}"]),
    ) + NODECLASS;
    for (name, created, priority) in nodes {
        yaml += &node(
            name,
            "life",
            "m5.2xlarge",
            "us-east-1a",
            "on-demand",
            &rfc3339(*created),
            "",
        );
        yaml += &bound_pod_with(
            &format!("{name}-app"),
            name,
            "1",
            "1Gi",
            Some("ReplicaSet"),
            "",
            priority,
        );
    }
    yaml
}

fn chosen(o: &Outcome) -> Vec<String> {
    o.disruptions
        .iter()
        .filter(|d| d.command.is_some())
        .map(|d| d.node.clone())
        .collect()
}

/// Karpenter pkg/controllers/disruption/types.go (`NewCandidate`: ReschedulingCost ×
/// pkg/utils/disruption/disruption.go `LifetimeRemaining`): of two equal nodes, the one nearer
/// expiry is consolidated first, although the other sorts first by name.
#[test]
fn the_node_nearer_expiry_is_consolidated_first() {
    let yaml = lifetime_yaml(&[
        ("a-young", MONDAY_MS - 10 * HOUR_MS, ""),
        ("z-old", MONDAY_MS - 90 * HOUR_MS, ""),
    ]);
    let o = plan_at(&yaml, MONDAY_MS);
    assert_commands_consistent(&o);
    assert_eq!(chosen(&o), ["z-old"], "{:#?}", o.disruptions);
}

/// Karpenter pkg/controllers/disruption/types.go: the cost is the product of the pods' eviction
/// cost (priority) and the lifetime left. `a` (young, plain pod: 2 × 1.0), `b` (half its life
/// left, high-priority pod: 11 × 0.5) and `c` (90 % left, plain: 2 × 0.9): by cost alone `a`
/// would go (name order among equals), by lifetime alone `b`; by their product `c`.
#[test]
fn pod_priority_still_orders_candidates_scaled_by_lifetime() {
    let yaml = lifetime_yaml(&[
        ("a", MONDAY_MS, ""),
        ("b", MONDAY_MS - 50 * HOUR_MS, "  priority: 1000000000"),
        ("c", MONDAY_MS - 10 * HOUR_MS, ""),
    ]);
    let o = plan_at(&yaml, MONDAY_MS);
    assert_commands_consistent(&o);
    assert_eq!(chosen(&o), ["c"], "{:#?}", o.disruptions);
}

/// Karpenter pkg/utils/disruption/disruption.go (`LifetimeRemaining` reads the clock at each
/// disruption poll): the order changes as time passes, in one running engine. `x` (high
/// priority, half its life left: 11 × 0.5) loses to `y` (plain, new: 2 × 1.0) now; 45 h later
/// `x` has 5 % left (0.55) and `y` 55 % (1.1), and `x` goes first.
#[test]
fn the_order_changes_as_the_clock_advances() {
    let yaml = lifetime_yaml(&[
        ("x", MONDAY_MS - 50 * HOUR_MS, "  priority: 1000000000"),
        ("y", MONDAY_MS, ""),
    ]);
    let mut e = Engine::start(1, dovetail_queries::standing_queries).expect("engine starts");
    e.advance(MONDAY_MS, vec![]).expect("advance");
    e.advance(
        MONDAY_MS + 1,
        facts(&yaml).into_iter().map(|f| (f, 1)).collect(),
    )
    .expect("advance");
    let o = Outcome::from_decisions(e.decisions());
    assert_eq!(chosen(&o), ["y"], "{:#?}", o.disruptions);
    let later = MONDAY_MS + 45 * HOUR_MS;
    e.advance(later, vec![]).expect("advance");
    e.advance(later + 1, vec![]).expect("advance");
    let o = Outcome::from_decisions(e.decisions());
    assert_eq!(chosen(&o), ["x"], "{:#?}", o.disruptions);
    assert_eq!(
        chosen(&plan_at(&yaml, later)),
        ["x"],
        "as a fresh engine says"
    );
}

/// Karpenter's `SimulateScheduling` (pkg/controllers/disruption/helpers.go) schedules a
/// candidate's pods onto in-flight NodeClaims too — initialized nodes first
/// (`scheduler.go`, `sortExistingNodes`), then uninitialized ones, then new NodeClaims — and
/// refuses the command when any land on a NodeClaim not yet initialized
/// (`UninitializedNodeError`): that room may never come up.
#[test]
fn a_node_waits_while_its_pods_would_land_on_an_in_flight_nodeclaim() {
    waits_for_the_in_flight_nodeclaim(&bound_pod("spare-app", "spare", "500m", "512Mi", ""));
}

/// A pod labelled `app: {app}` bound to `node`, under a zone spread (maxSkew 1) over the pods
/// labelled `app: web`: its class needs the whole cluster in a simulation.
fn zone_spread_pod(name: &str, node: &str, app: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  labels: {{app: {app}}}
  ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: {app}, uid: u, controller: true}}]
spec:
  nodeName: {node}
  topologySpreadConstraints:
    - {{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {{matchLabels: {{app: web}}}}}}
  containers:
    - name: app
      image: app
      resources:
        requests: {{cpu: "500m", memory: "512Mi"}}
---
"#
    )
}

/// A node's `metadata.annotations` line that keeps it out of disruption.
const NOT_DISRUPTED: &str = "  annotations: {karpenter.sh/do-not-disrupt: \"true\"}";

/// As `a_node_waits_while_its_pods_would_land_on_an_in_flight_nodeclaim`, for a pod under a
/// zone spread, whose simulation runs over the whole cluster: Karpenter's `SimulateScheduling`
/// (pkg/controllers/disruption/helpers.go) makes no such distinction — its scheduler
/// (pkg/controllers/provisioning/scheduling/scheduler.go) tries initialized nodes, then
/// uninitialized ones, then new NodeClaims, for every pod — and refuses the command with
/// `UninitializedNodeError`.
#[test]
fn a_node_whose_zone_spread_pods_would_land_on_an_in_flight_nodeclaim_waits() {
    waits_for_the_in_flight_nodeclaim(&zone_spread_pod("web-1", "spare", "web"));
}

/// Karpenter's topology (pkg/controllers/provisioning/scheduling/topology.go, `countDomains`)
/// counts every pod the selector matches on the node it is bound to, whatever that node's
/// state: a `web` pod on a cordoned node in us-east-1a counts toward that zone. So `web-1`
/// cannot move from `spare` to `dest-a` (also us-east-1a: 2 there against 0 in b and c, over
/// maxSkew 1) and needs a new node in another zone; with the cordoned node's pod outside the
/// selector it moves to `dest-a` and `spare` is deleted.
#[test]
fn a_zone_spread_in_a_simulation_counts_pods_on_cordoned_nodes() {
    let scenario = |cordoned_app: &str| {
        let yaml = default_pool()
            + &node(
                "spare",
                "default",
                "m5.large",
                "us-east-1a",
                "on-demand",
                CREATED,
                "",
            )
            + &zone_spread_pod("web-1", "spare", "web")
            + &node(
                "dest-a",
                "default",
                "m5.xlarge",
                "us-east-1a",
                "on-demand",
                CREATED,
                NOT_DISRUPTED,
            )
            + &bound_pod("filler", "dest-a", "500m", "512Mi", "")
            + &node(
                "cordoned",
                "default",
                "m5.large",
                "us-east-1a",
                "on-demand",
                CREATED,
                NOT_DISRUPTED,
            )
            + &zone_spread_pod("web-0", "cordoned", cordoned_app);
        let mut f = facts(&yaml);
        edit_node(&mut f, "cordoned", |n| n.unschedulable = true);
        plan_facts_at(f, MONDAY_MS)
    };
    let o = scenario("other");
    let d = commanded(&o, "spare").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    assert!(
        d.replacements.is_empty(),
        "web-1 fits on dest-a: {:#?}",
        o.disruptions
    );

    let o = scenario("web");
    assert!(
        commanded(&o, "spare").is_none_or(|d| !d.replacements.is_empty()),
        "web-1 must not join the web pod's zone: {:#?}",
        o.disruptions
    );
}

/// Karpenter's `StateNode.Initialized` (pkg/controllers/state/statenode.go): a managed node is
/// initialized only once its Node carries `karpenter.sh/initialized=true`, set with the
/// NodeClaim's `Initialized` condition. Until then `SimulateScheduling`
/// (pkg/controllers/disruption/helpers.go) refuses a command whose pods would land on it
/// (`UninitializedNodeError`), as for a NodeClaim that has not joined. `joining` has joined
/// (a Node with its NodeClaim) and has room for `spare`'s pod.
#[test]
fn a_joined_node_not_yet_initialized_is_still_in_flight() {
    let spare = node(
        "spare",
        "default",
        "m5.large",
        "us-east-1a",
        "on-demand",
        CREATED,
        "",
    ) + &bound_pod("spare-app", "spare", "500m", "512Mi", "");
    let joining = |initialized: &str| {
        node(
            "joining",
            "default",
            "m5.xlarge",
            "us-east-1a",
            "on-demand",
            CREATED,
            NOT_DISRUPTED,
        ) + &nodeclaim(
            "joining-claim",
            "joining",
            "",
            &format!("  conditions:\n    - {{type: Initialized, status: \"{initialized}\"}}"),
        )
    };
    let o = plan_at(&(default_pool() + &spare + &joining("True")), MONDAY_MS);
    let d = commanded(&o, "spare").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    assert!(
        d.replacements.is_empty(),
        "its pod moves to joining: {d:#?}"
    );

    let o = plan_at(&(default_pool() + &spare + &joining("False")), MONDAY_MS);
    assert!(commanded(&o, "spare").is_none(), "{:#?}", o.disruptions);
    assert!(
        o.disruptions.iter().any(|d| d.node == "spare"
            && matches!(d.blocked_by.as_deref(), Some(Blocker::Waiting))),
        "{:#?}",
        o.disruptions
    );
}

/// Node `spare` holding `pod` is replaced when alone, and waits (as an option not chosen does)
/// beside an in-flight NodeClaim its pod would land on.
fn waits_for_the_in_flight_nodeclaim(pod: &str) {
    let spare = node(
        "spare",
        "default",
        "m5.large",
        "us-east-1a",
        "on-demand",
        CREATED,
        "",
    ) + pod;
    let o = plan_at(&(default_pool() + &spare), MONDAY_MS);
    let d = commanded(&o, "spare").unwrap_or_else(|| panic!("{:#?}", o.disruptions));
    assert_eq!(d.replacements.len(), 1, "alone, it is replaced: {d:#?}");

    let in_flight = in_flight_nodeclaim("default-inflight", "us-east-1a");
    let o = plan_at(&(default_pool() + &spare + &in_flight), MONDAY_MS);
    assert!(commanded(&o, "spare").is_none(), "{:#?}", o.disruptions);
    assert!(
        o.disruptions.iter().any(|d| d.node == "spare"
            && matches!(d.blocked_by.as_deref(), Some(Blocker::Waiting))),
        "{:#?}",
        o.disruptions
    );
}

/// A pod bound to `node` that keeps off any node with another of the pair `pair-1`, `pair-2`
/// (required hostname anti-affinity over their `app` labels).
fn pair_pod(name: &str, node: &str) -> String {
    let anti_affinity = "  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - {topologyKey: kubernetes.io/hostname, labelSelector: {matchExpressions: [{key: app, operator: In, values: [pair-1, pair-2]}]}}";
    bound_pod_with(
        name,
        node,
        "2500m",
        "4Gi",
        Some("ReplicaSet"),
        "",
        anti_affinity,
    )
}

/// A candidate that no in-flight NodeClaim could make consolidatable says what keeps it
/// whether one is launching or not: here its two pods need two new NodeClaims, one of which
/// the in-flight NodeClaim could stand in for. Karpenter refuses the command either way; saying
/// "waiting for that NodeClaim" instead would flip the node's listing to that and back as every
/// other command launches and initializes its replacement (issue 20: hundreds of listings per
/// command in the 100k churn replay).
#[test]
fn a_node_whose_pods_need_two_nodeclaims_says_so_beside_an_in_flight_one() {
    let spare = node(
        "spare",
        "default",
        "m5.2xlarge",
        "us-east-1a",
        "on-demand",
        CREATED,
        "",
    ) + &pair_pod("pair-1", "spare")
        + &pair_pod("pair-2", "spare");
    let in_flight = in_flight_nodeclaim("default-inflight", "us-east-1a");
    for (extra, with) in [
        ("", "alone"),
        (in_flight.as_str(), "beside the in-flight one"),
    ] {
        let o = plan_at(&(default_pool() + &spare + extra), MONDAY_MS);
        assert!(
            commanded(&o, "spare").is_none(),
            "{with}: {:#?}",
            o.disruptions
        );
        assert!(
            o.disruptions.iter().any(|d| d.node == "spare"
                && matches!(
                    d.blocked_by.as_deref(),
                    Some(Blocker::NeedsNewNodes { count: 2 })
                )),
            "{with}: {:#?}",
            o.disruptions
        );
    }
}
