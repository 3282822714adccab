//! Differential test of the disruption queries: random changes to a cluster of managed nodes
//! (pods binding and leaving, nodes coming and going, NodePool edits that drift, PDBs,
//! do-not-disrupt annotations, interruptions, prices) on a clock that moves 20 s per epoch, so
//! consolidateAfter, expireAfter, do-not-disrupt durations and budget windows fire during the
//! run. After every epoch the long-running engine's disruption decisions equal a fresh engine's
//! given the same facts at the same clock. (Provisioning is sticky, so its decisions depend on
//! the path taken; `differential.rs` checks those.)

mod common;

use dovetail_dataflow::decisions::Decision;
use dovetail_dataflow::engine::Engine;
use dovetail_dataflow::facts::{Fact, Interruption, InterruptionKind};
use dovetail_dataflow::model::labels::{
    CAPACITY_TYPE, HOSTNAME, INSTANCE_TYPE, NODECLASS_HASH, NODEPOOL, NODEPOOL_HASH, ZONE,
};
use dovetail_dataflow::model::{EC2NodeClass, Node, NodePool, Pod, PodDisruptionBudget, Price};
use std::collections::BTreeMap;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const WORLD: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    metadata:
      labels: {team: a}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      expireAfter: 15m
      requirements:
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5, t3]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
    budgets:
      - nodes: "50%"
      - nodes: "0"
        schedule: "*/5 * * * *"
        duration: 2m
        reasons: [Drifted]
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec: {role: r}
status:
  subnets:
    - {id: a, zone: us-east-1a}
    - {id: b, zone: us-east-1b}
  amis:
    - {id: ami-1, name: al2023}
"#;

const TYPES: [&str; 4] = ["m5.large", "m5.xlarge", "c5.xlarge", "t3.medium"];
const ZONES: [&str; 2] = ["us-east-1a", "us-east-1b"];

fn pool(state: &BTreeMap<String, Fact>) -> Option<NodePool> {
    match state.get("NodePool general") {
        Some(Fact::NodePool(p)) => Some(p.clone()),
        _ => None,
    }
}

fn class(state: &BTreeMap<String, Fact>) -> Option<EC2NodeClass> {
    match state.get("EC2NodeClass default") {
        Some(Fact::NodeClass(c)) => Some(c.clone()),
        _ => None,
    }
}

/// A managed node created at `created`, annotated with the current hashes unless `adopt`.
fn managed_node(rng: &mut Rng, i: usize, created: i64, state: &BTreeMap<String, Fact>) -> Node {
    let t = TYPES[rng.below(TYPES.len() as u64) as usize];
    let zone = ZONES[rng.below(2) as usize];
    let it = common::catalogue_by_name()
        .get(t)
        .expect("type in catalogue");
    let name = format!("node-{i}");
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in [
        (NODEPOOL, "general"),
        (INSTANCE_TYPE, t),
        (ZONE, zone),
        (CAPACITY_TYPE, "on-demand"),
        (HOSTNAME, name.as_str()),
        ("kubernetes.io/arch", "amd64"),
        ("kubernetes.io/os", "linux"),
        ("team", "a"),
        (
            "karpenter.k8s.aws/instance-family",
            t.split('.').next().unwrap_or(""),
        ),
    ] {
        labels.insert(k.to_string(), v.to_string());
    }
    let mut annotations = BTreeMap::new();
    if rng.below(4) != 0 {
        if let (Some(p), Some(c)) = (pool(state), class(state)) {
            annotations.insert(NODEPOOL_HASH.to_string(), p.drift_hash());
            annotations.insert(NODECLASS_HASH.to_string(), c.drift_hash());
        }
    }
    let mut n = Node {
        name: name.clone(),
        nodeclaim: Some(format!("claim-{i}")),
        labels,
        annotations,
        allocatable: it.allocatable(),
        provider_id: Some(format!("aws:///{zone}/i-{i:04}")),
        created_ms: Some(created),
        ..Node::default()
    };
    n.launched.image_id = Some(if rng.below(5) == 0 { "ami-0" } else { "ami-1" }.to_string());
    n
}

fn pod(rng: &mut Rng, i: usize, node: Option<String>, now: i64) -> Pod {
    let cpus = ["100m", "250m", "500m", "1"];
    let mems = ["128Mi", "512Mi", "1Gi"];
    let app = ["web", "api", "batch"][rng.below(3) as usize];
    let yaml = common::pod(
        &format!("p{i}"),
        cpus[rng.below(4) as usize],
        mems[rng.below(3) as usize],
        &format!("app: {app}"),
        "",
    );
    let m = dovetail_ingest::load_str("pod.yaml", &yaml).expect("pod parses");
    let mut p = m.pods.into_iter().next().expect("one pod");
    p.node_name = node;
    p.owner = Some(("ReplicaSet".into(), app.into()));
    p.created_ms = Some(now);
    p
}

fn from_scratch(state: &BTreeMap<String, Fact>, prev: u64, epoch: u64) -> Vec<Decision> {
    let mut engine = Engine::start(1, dovetail_queries::standing_queries).expect("engine");
    engine.advance(prev, Vec::new()).expect("advance");
    engine
        .advance(epoch, state.values().cloned().map(|f| (f, 1)).collect())
        .expect("advance");
    disruption_only(engine.decisions())
}

/// The disruption half's decisions: disruptions, their replacement launches, adoptions and the
/// cluster's lower bound (pending pods' bindings and launches are provisioning's).
fn disruption_only(decisions: Vec<Decision>) -> Vec<Decision> {
    let replacements: std::collections::BTreeSet<String> = decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Disruption(d) => Some(d.replacements.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    decisions
        .into_iter()
        .filter(|d| match d {
            Decision::Launch(l) => replacements.contains(&l.name),
            Decision::Binding { .. } | Decision::Unschedulable { .. } | Decision::LowerBound(_) => {
                false
            }
            _ => true,
        })
        .collect()
}

/// Replaces a fact in the state and records the change.
fn replace(state: &mut BTreeMap<String, Fact>, changes: &mut Vec<(Fact, isize)>, new: Fact) {
    let k = new.describe();
    if let Some(old) = state.insert(k, new.clone()) {
        changes.push((old, -1));
    }
    changes.push((new, 1));
}

fn remove(state: &mut BTreeMap<String, Fact>, changes: &mut Vec<(Fact, isize)>, key: &str) {
    if let Some(old) = state.remove(key) {
        changes.push((old, -1));
    }
}

/// A pod event on a node: its NodeClaim's lastPodEventTime moves to now.
fn touch_node(
    state: &mut BTreeMap<String, Fact>,
    changes: &mut Vec<(Fact, isize)>,
    node: &str,
    now: i64,
) {
    if let Some(Fact::Node(n)) = state.get(&format!("Node {node}")).cloned() {
        let mut n = n;
        n.last_pod_event_ms = Some(now);
        replace(state, changes, Fact::Node(n));
    }
}

fn keys(state: &BTreeMap<String, Fact>, prefix: &str) -> Vec<String> {
    state
        .keys()
        .filter(|k| k.starts_with(prefix))
        .cloned()
        .collect()
}

#[test]
fn disruption_incremental_equals_from_scratch_after_every_epoch() {
    let mut rng = Rng(0x000d_1520_0007);
    let start = common::MONDAY_MS as i64;
    let mut state: BTreeMap<String, Fact> = common::facts(WORLD)
        .into_iter()
        .filter(|f| match f {
            Fact::InstanceType { instance_type, .. } => {
                ["m5.", "c5.", "t3."]
                    .iter()
                    .any(|p| instance_type.name.starts_with(p))
                    && !instance_type.name.contains("metal")
            }
            _ => true,
        })
        .map(|f| (f.describe(), f))
        .collect();
    let mut next = 0usize;
    let mut initial = Vec::new();
    for _ in 0..8 {
        let created = start - 60_000 * rng.below(14) as i64;
        let n = managed_node(&mut rng, next, created, &state);
        next += 1;
        let f = Fact::Node(n);
        state.insert(f.describe(), f);
    }
    for node in keys(&state, "Node ") {
        let name = node.trim_start_matches("Node ").to_string();
        for _ in 0..rng.below(4) {
            let p = Fact::Pod(pod(&mut rng, next, Some(name.clone()), start - 120_000).into());
            next += 1;
            state.insert(p.describe(), p);
        }
    }
    initial.extend(state.values().cloned().map(|f| (f, 1)));

    let mut engine = Engine::start(2, dovetail_queries::standing_queries).expect("engine");
    let mut prev = start as u64;
    engine.advance(prev, Vec::new()).expect("advance");
    let mut epoch = prev + 20_000;
    engine.advance(epoch, initial).expect("advance");
    assert_eq!(
        engine.decisions(),
        from_scratch(&state, prev, epoch),
        "initial state"
    );
    let mut seen_disruptions = 0;
    let mut reasons = std::collections::BTreeSet::new();
    for step in 0..36 {
        prev = epoch;
        epoch += 20_000;
        let now = prev as i64;
        let mut changes: Vec<(Fact, isize)> = Vec::new();
        for _ in 0..1 + rng.below(3) {
            let nodes = keys(&state, "Node ");
            let pods = keys(&state, "Pod ");
            match rng.below(12) {
                0 | 1 => {
                    if let Some(n) = nodes.get(rng.below(nodes.len() as u64) as usize) {
                        let name = n.trim_start_matches("Node ").to_string();
                        let p = Fact::Pod(pod(&mut rng, next, Some(name.clone()), now).into());
                        next += 1;
                        replace(&mut state, &mut changes, p);
                        touch_node(&mut state, &mut changes, &name, now);
                    }
                }
                2 | 3 => {
                    if let Some(k) = pods.get(rng.below(pods.len() as u64) as usize) {
                        let node = match state.get(k) {
                            Some(Fact::Pod(p)) => p.node_name.clone(),
                            _ => None,
                        };
                        remove(&mut state, &mut changes, k);
                        if let Some(n) = node {
                            touch_node(&mut state, &mut changes, &n, now);
                        }
                    }
                }
                4 => {
                    let p = Fact::Pod(pod(&mut rng, next, None, now).into());
                    next += 1;
                    replace(&mut state, &mut changes, p);
                }
                5 => {
                    let n = managed_node(&mut rng, next, now, &state);
                    next += 1;
                    replace(&mut state, &mut changes, Fact::Node(n));
                }
                6 => {
                    if let Some(k) = nodes.get(rng.below(nodes.len() as u64) as usize) {
                        let name = k.trim_start_matches("Node ").to_string();
                        for pk in keys(&state, "Pod ") {
                            if matches!(state.get(&pk), Some(Fact::Pod(p)) if p.node_name.as_deref() == Some(name.as_str()))
                            {
                                remove(&mut state, &mut changes, &pk);
                            }
                        }
                        remove(&mut state, &mut changes, k);
                    }
                }
                7 => {
                    // A template label change drifts every annotated node; a consolidateAfter
                    // or budget change re-times the rest.
                    if let Some(mut p) = pool(&state) {
                        match rng.below(3) {
                            0 => {
                                p.template_labels
                                    .insert("rev".into(), format!("{}", rng.below(3)));
                            }
                            1 => {
                                p.disruption.consolidate_after =
                                    Some(["30s", "1m", "Never"][rng.below(3) as usize].into());
                            }
                            _ => {
                                if let Some(b) = p.disruption.budgets.first_mut() {
                                    b.nodes = ["1", "50%", "0"][rng.below(3) as usize].into();
                                }
                            }
                        }
                        replace(&mut state, &mut changes, Fact::NodePool(p));
                    }
                }
                8 => {
                    let key = "PodDisruptionBudget default/web".to_string();
                    if state.contains_key(&key) {
                        remove(&mut state, &mut changes, &key);
                    } else {
                        let m = dovetail_ingest::load_str(
                            "pdb.yaml",
                            "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web, namespace: default}\nspec:\n  minAvailable: 100%\n  selector: {matchLabels: {app: web}}\n",
                        )
                        .expect("pdb parses");
                        let pdb: PodDisruptionBudget = m.pdbs.into_iter().next().expect("one pdb");
                        replace(&mut state, &mut changes, Fact::Pdb(pdb));
                    }
                }
                9 => {
                    if let Some(k) = pods.get(rng.below(pods.len() as u64) as usize) {
                        if let Some(Fact::Pod(p)) = state.get(k).cloned() {
                            let mut p = p.into_inner();
                            let v = ["true", "1m", "10m"][rng.below(3) as usize];
                            if p.annotations
                                .remove("karpenter.sh/do-not-disrupt")
                                .is_none()
                            {
                                p.annotations
                                    .insert("karpenter.sh/do-not-disrupt".into(), v.into());
                            }
                            replace(&mut state, &mut changes, Fact::Pod(p.into()));
                        }
                    }
                }
                10 => {
                    if let Some(k) = nodes.get(rng.below(nodes.len() as u64) as usize) {
                        let target = k.trim_start_matches("Node ").to_string();
                        let kind = [
                            InterruptionKind::SpotInterruption,
                            InterruptionKind::RebalanceRecommendation,
                            InterruptionKind::CapacityBlockEnding,
                        ][rng.below(3) as usize];
                        let at_ms = now + 60_000 * rng.below(60) as i64;
                        let i = Fact::Interruption(Interruption {
                            target,
                            kind,
                            at_ms,
                        });
                        replace(&mut state, &mut changes, i);
                    }
                }
                _ => {
                    let types = keys(&state, "instance type ");
                    if let Some(k) = types.get(rng.below(types.len() as u64) as usize).cloned() {
                        if let Some(Fact::InstanceType {
                            node_class,
                            instance_type,
                        }) = state.get(&k).cloned()
                        {
                            let mut it = instance_type;
                            for o in it.offerings.iter_mut() {
                                o.price = Price(o.price.0 / 2 + rng.below(1000) as i64);
                            }
                            replace(
                                &mut state,
                                &mut changes,
                                Fact::InstanceType {
                                    node_class,
                                    instance_type: it,
                                },
                            );
                        }
                    }
                }
            }
        }
        engine.advance(epoch, changes).expect("advance");
        let incremental = disruption_only(engine.decisions());
        for d in &incremental {
            if let Decision::Disruption(d) = d {
                seen_disruptions += 1;
                reasons.insert((d.reason, d.blocked_by.is_some()));
            }
        }
        assert_eq!(
            incremental,
            from_scratch(&state, prev, epoch),
            "step {step} (clock {prev}): incremental and from-scratch decisions differ"
        );
    }
    eprintln!("disruptions seen: {seen_disruptions}, (reason, blocked): {reasons:?}");
    // Commands and blocked candidates of several kinds, or the test proves little.
    assert!(reasons.len() >= 4, "{reasons:?}");
    assert!(
        seen_disruptions > 10,
        "the run must exercise the disruption queries, saw {seen_disruptions} disruptions"
    );
}
