//! Single-node outcomes that stood on a whole-cluster run are re-checked at most
//! `WHOLE_RECHECK_NODES` nodes' worth per evaluation; the rest stand until their turn. Two
//! promises: a stale outcome is never acted on (the chosen option is checked again first), and
//! the later evaluations work through the rest, each on a tick of the clock, until the answer
//! is a fresh engine's.
//!
//! The cluster: 129 m5.2xlarge nodes over three zones, each with one pod of 3.5 CPUs that
//! spreads over zones (so every simulation reads the whole cluster) and keeps one per node
//! (so no two share a replacement and multi-node consolidation finds nothing). Each node alone
//! could be replaced by a cheaper m5.xlarge, unless the NodePool's CPU limit leaves no room.

mod common;

use common::{bound_pod_with, nodepool, MONDAY_MS, NODECLASS};
use dovetail_dataflow::decisions::{Decision, DisruptionReason};
use dovetail_dataflow::disruption_reasons::Blocker;
use dovetail_dataflow::engine::Engine;
use dovetail_dataflow::facts::Fact;
use dovetail_queries::disruption::commands::WHOLE_RECHECK_NODES;
use std::collections::BTreeMap;

const NODES: usize = 129;
// The cluster needs more re-checks than one evaluation makes, or the tests would pass without
// deferring anything.
const _: () = assert!(NODES * NODES > WHOLE_RECHECK_NODES + NODES);
const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
const CREATED: &str = "2026-11-29T00:00:00Z";

fn pool(limits: &str) -> String {
    nodepool(
        "default",
        0,
        "        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge, m5.2xlarge]}",
        "",
        limits,
    )
}

/// A pod of 3.5 CPUs bound to `node`, spread over zones and one per node with every other
/// (each pod's `app` label is its name; the selectors take any `app`).
fn spread_pod(name: &str, node: &str) -> String {
    let every_app = "{matchExpressions: [{key: app, operator: Exists}]}";
    let spec = format!(
        "  topologySpreadConstraints:
    - {{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {every_app}}}
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - {{topologyKey: kubernetes.io/hostname, labelSelector: {every_app}}}"
    );
    bound_pod_with(name, node, "3500m", "1Gi", Some("ReplicaSet"), "", &spec)
}

fn cluster() -> String {
    let mut yaml = NODECLASS.to_string();
    for i in 0..NODES {
        let node = format!("n{i:03}");
        yaml += &common::node(
            &node,
            "default",
            "m5.2xlarge",
            ZONES[i % ZONES.len()],
            "on-demand",
            CREATED,
            "",
        );
        yaml += &spread_pod(&format!("p{i:03}"), &node);
    }
    yaml
}

fn nodepool_fact(limits: &str) -> Fact {
    common::facts(&pool(limits))
        .into_iter()
        .find(|f| matches!(f, Fact::NodePool(_)))
        .expect("a NodePool fact")
}

/// Evaluations it takes to check every node once.
fn evaluations() -> usize {
    NODES.div_ceil(WHOLE_RECHECK_NODES.div_ceil(NODES))
}

/// The engine after the manifests (NodePool with `limits`) at `MONDAY_MS`, and enough ticks
/// of the clock for every node to be checked (the first evaluation checks only some), with
/// the time of the last.
fn started(limits: &str) -> (Engine, Vec<Fact>, u64) {
    let facts = common::facts(&(pool(limits) + &cluster()));
    let mut engine = Engine::start(1, dovetail_queries::standing_queries).expect("engine starts");
    engine.advance(MONDAY_MS, Vec::new()).expect("advance");
    engine
        .advance(
            MONDAY_MS + 1,
            facts.iter().cloned().map(|f| (f, 1)).collect(),
        )
        .expect("advance");
    let (listed, _) = listings(&engine.decisions());
    assert!(
        listed.len() < NODES,
        "the first evaluation checks only some: {} of {NODES}",
        listed.len()
    );
    let now = tick(&mut engine, MONDAY_MS + 1, evaluations() + 1);
    (engine, facts, now)
}

/// `ticks` more minutes, one epoch each (the engine's clock is the minute of the epoch it
/// leaves, so it moves one advance late); returns the time of the last.
fn tick(engine: &mut Engine, mut now: u64, ticks: usize) -> u64 {
    for _ in 0..ticks {
        now += 60_000;
        engine.advance(now, Vec::new()).expect("advance");
    }
    now
}

/// Each node's single-node consolidation listing (its blocker), and the nodes commanded.
fn listings(decisions: &[Decision]) -> (BTreeMap<String, Blocker>, Vec<String>) {
    let mut listed = BTreeMap::new();
    let mut commanded = Vec::new();
    for d in decisions {
        if let Decision::Disruption(d) = d {
            match (&d.command, &d.blocked_by) {
                (Some(_), _) => commanded.push(d.node.clone()),
                (None, Some(b)) if d.reason == DisruptionReason::Underutilized => {
                    listed.insert(d.node.clone(), (**b).clone());
                }
                _ => {}
            }
        }
    }
    (listed, commanded)
}

/// A fresh engine's decisions over `facts` from `now`, once every node has been checked, and
/// the time then.
fn fresh_engine_decisions(facts: &[Fact], now: u64) -> (Vec<Decision>, u64) {
    let mut engine = Engine::start(1, dovetail_queries::standing_queries).expect("engine starts");
    engine.advance(now - 1, Vec::new()).expect("advance");
    engine
        .advance(now, facts.iter().cloned().map(|f| (f, 1)).collect())
        .expect("advance");
    let then = tick(&mut engine, now, evaluations() + 1);
    (engine.decisions(), then)
}

fn swap_nodepool(facts: &mut [Fact], limits: &str) -> Vec<(Fact, isize)> {
    let new = nodepool_fact(limits);
    let at = facts
        .iter()
        .position(|f| matches!(f, Fact::NodePool(_)))
        .expect("the NodePool fact");
    let old = std::mem::replace(&mut facts[at], new.clone());
    vec![(old, -1), (new, 1)]
}

#[test]
fn a_stale_consolidation_is_checked_again_before_it_becomes_a_command() {
    let (mut engine, mut facts, now) = started("");
    let (listed, commanded) = listings(&engine.decisions());
    assert_eq!(commanded.len(), 1, "one replacement at a time: {listed:#?}");
    assert_eq!(listed.len(), NODES - 1, "{listed:#?}");
    assert!(
        listed.values().all(|b| *b == Blocker::Waiting),
        "{listed:#?}"
    );
    // Every node could be replaced; the CPU limit then leaves no room for any replacement.
    // The outcomes past the budget still say "replace" until checked: none may be acted on.
    let change = swap_nodepool(&mut facts, "  limits: {cpu: \"100\"}");
    engine.advance(now + 1, change).expect("advance");
    let (listed, now_commanded) = listings(&engine.decisions());
    assert!(
        now_commanded.is_empty(),
        "no command from a stale outcome: {now_commanded:?}"
    );
    let not_fitting = listed
        .values()
        .filter(|b| matches!(b, Blocker::PodsWouldNotFit { .. }))
        .count();
    assert_eq!(
        not_fitting, NODES,
        "every node says its pod would not fit: {listed:#?}"
    );
}

#[test]
fn stale_outcomes_are_worked_through_on_later_ticks_until_the_answer_is_a_fresh_engines() {
    let (mut engine, mut facts, mut now) = started("  limits: {cpu: \"100\"}");
    let (listed, commanded) = listings(&engine.decisions());
    assert!(commanded.is_empty(), "{commanded:?}");
    assert_eq!(listed.len(), NODES, "{listed:#?}");
    // The limit goes: every outcome is stale, and one evaluation re-checks only some.
    let change = swap_nodepool(&mut facts, "");
    now += 1;
    engine.advance(now, change).expect("advance");
    let still_stale = |decisions: &[Decision]| {
        listings(decisions)
            .0
            .values()
            .filter(|b| matches!(b, Blocker::PodsWouldNotFit { .. }))
            .count()
    };
    let first = still_stale(&engine.decisions());
    assert!(
        first > 0 && first < NODES,
        "some outcomes wait their turn: {first} of {NODES} stale"
    );
    // Each tick of the clock (a minute) evaluates again and re-checks the next ones.
    let mut stale = first;
    for _ in 0..evaluations() + 1 {
        now = tick(&mut engine, now, 1);
        let next = still_stale(&engine.decisions());
        assert!(next <= stale, "{stale} -> {next}");
        stale = next;
    }
    assert_eq!(stale, 0, "every stale outcome had its turn");
    let (fresh, then) = fresh_engine_decisions(&facts, now);
    tick(&mut engine, now, ((then - now) / 60_000) as usize);
    assert_eq!(listings(&engine.decisions()), listings(&fresh));
}
