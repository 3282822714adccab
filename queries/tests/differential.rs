//! Differential test: random changes applied to long-running engines in different epoch
//! batchings. Packing is sticky (a change starts from the last plan), so a long-running engine
//! need not decide what a fresh one would; what every batching must give, after every epoch, is
//! every pending pod accounted for exactly once and no node or planned NodeClaim over capacity.
//! All the changes in one epoch are one packing from nothing, so that batching must equal a
//! fresh engine.

mod common;

use dovetail_dataflow::cluster::Cluster;
use dovetail_dataflow::decisions::{Decision, Launch};
use dovetail_dataflow::engine::{serve, Engine, Placement};
use dovetail_dataflow::facts::Fact;
use dovetail_dataflow::model::{InstanceType, Node, NodePool, Pod, Price, Requirement, Resources};
use std::collections::BTreeMap;

/// xorshift64*: a small deterministic generator, so failures replay from the seed.
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
  weight: 10
  limits: {cpu: "64"}
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5, r5, m6g]}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: fallback}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, t3]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
"#;

fn random_pod(rng: &mut Rng, i: usize) -> Pod {
    let cpus = ["100m", "250m", "500m", "1", "2"];
    let mems = ["128Mi", "512Mi", "1Gi", "4Gi"];
    let app = ["web", "api", "batch"][rng.below(3) as usize];
    let extra = match rng.below(5) {
        0 => "  topologySpreadConstraints:\n    - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}\n".to_string(),
        1 => "  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: api}}}\n".to_string(),
        2 => "  nodeSelector: {kubernetes.io/arch: arm64}\n".to_string(),
        // A packing group of its own, unless a spread over its app joins it to others.
        3 => "  nodeSelector: {karpenter.sh/nodepool: isolated}\n  tolerations:\n    - {key: dedicated, operator: Equal, value: isolated, effect: NoSchedule}\n".to_string(),
        _ => String::new(),
    };
    let yaml = common::pod(
        &format!("p{i}"),
        cpus[rng.below(5) as usize],
        mems[rng.below(4) as usize],
        &format!("app: {app}"),
        &extra,
    );
    let m = dovetail_ingest::load_str("pod.yaml", &yaml).expect("pod parses");
    m.pods.into_iter().next().expect("one pod")
}

fn decisions_from_scratch(state: &BTreeMap<String, Fact>) -> Vec<Decision> {
    let mut engine = threads(1);
    engine
        .advance(1, state.values().cloned().map(|f| (f, 1)).collect())
        .expect("advance");
    engine.decisions()
}

fn key(f: &Fact) -> String {
    f.describe()
}

/// The world, with a catalogue small enough for quick runs.
fn world() -> BTreeMap<String, Fact> {
    let families = ["m5.", "c5.", "r5.", "m6g.", "t3."];
    common::facts(&format!("{WORLD}{}", common::ISOLATED_POOL_AND_NODE))
        .into_iter()
        .filter(|f| match f {
            Fact::InstanceType { instance_type, .. } => {
                families.iter().any(|p| instance_type.name.starts_with(p))
                    && !instance_type.name.contains("metal")
            }
            _ => true,
        })
        .map(|f| (key(&f), f))
        .collect()
}

/// `epochs` batches of random changes to `state` (pods added and removed, a NodePool edited,
/// a price or an offering changed), applied to `state` as they are drawn.
fn random_changes(
    rng: &mut Rng,
    state: &mut BTreeMap<String, Fact>,
    epochs: usize,
) -> Vec<Vec<(Fact, isize)>> {
    let mut next_pod = 0usize;
    let mut out = Vec::new();
    for _ in 0..epochs {
        let mut changes: Vec<(Fact, isize)> = Vec::new();
        for _ in 0..1 + rng.below(4) {
            match rng.below(10) {
                // add a pod
                0..=3 => {
                    let p = Fact::Pod(random_pod(rng, next_pod).into());
                    next_pod += 1;
                    changes.push((p.clone(), 1));
                    state.insert(key(&p), p);
                }
                // remove a pod
                4 | 5 => {
                    let pods: Vec<String> = state
                        .keys()
                        .filter(|k| k.starts_with("Pod "))
                        .cloned()
                        .collect();
                    if let Some(k) = pods.get(rng.below(pods.len() as u64) as usize) {
                        if let Some(f) = state.remove(k) {
                            changes.push((f, -1));
                        }
                    }
                }
                // edit a NodePool: weight or limits
                6 => {
                    if let Some(Fact::NodePool(old)) = state.get("NodePool general").cloned() {
                        let mut p: NodePool = old.clone();
                        if rng.below(2) == 0 {
                            p.weight = rng.below(20) as i32;
                        } else {
                            p.limits
                                .insert("cpu".into(), (8 + rng.below(64) as i64) * 1000);
                        }
                        p.requirements.add(
                            "karpenter.k8s.aws/instance-family",
                            Requirement::new(dovetail_dataflow::model::Operator::NotIn, ["t3"]),
                        );
                        changes.push((Fact::NodePool(old), -1));
                        changes.push((Fact::NodePool(p.clone()), 1));
                        state.insert("NodePool general".into(), Fact::NodePool(p));
                    }
                }
                // change a price or an offering's availability
                _ => {
                    let types: Vec<String> = state
                        .keys()
                        .filter(|k| k.starts_with("instance type "))
                        .cloned()
                        .collect();
                    if let Some(k) = types.get(rng.below(types.len() as u64) as usize).cloned() {
                        if let Some(Fact::InstanceType {
                            node_class,
                            instance_type,
                        }) = state.get(&k).cloned()
                        {
                            let mut it: InstanceType = instance_type.clone();
                            let n = it.offerings.len() as u64;
                            if let Some(o) = it.offerings.get_mut(rng.below(n) as usize) {
                                if rng.below(2) == 0 {
                                    o.price = Price(o.price.0 / 2 + rng.below(1000) as i64);
                                } else {
                                    o.available = !o.available;
                                }
                            }
                            changes.push((
                                Fact::InstanceType {
                                    node_class: node_class.clone(),
                                    instance_type,
                                },
                                -1,
                            ));
                            let new = Fact::InstanceType {
                                node_class,
                                instance_type: it,
                            };
                            changes.push((new.clone(), 1));
                            state.insert(k, new);
                        }
                    }
                }
            }
        }
        out.push(changes);
    }
    out
}

/// Checks that every pending pod of `state` has exactly one decision (a binding or
/// unschedulable), that nothing else does, that each launch holds the pods bound to it and
/// fits them in every instance type it lists, and that no node is asked to take more than it
/// has free.
fn check_accounting(state: &BTreeMap<String, Fact>, decisions: &[Decision], when: &str) {
    let pods: BTreeMap<String, &Pod> = state
        .values()
        .filter_map(|f| match f {
            Fact::Pod(p) if !p.is_daemon => Some((p.key(), &**p)),
            _ => None,
        })
        .collect();
    let types: BTreeMap<&str, &InstanceType> = state
        .values()
        .filter_map(|f| match f {
            Fact::InstanceType { instance_type, .. } => {
                Some((instance_type.name.as_str(), instance_type))
            }
            _ => None,
        })
        .collect();
    let nodes: BTreeMap<&str, &Node> = state
        .values()
        .filter_map(|f| match f {
            Fact::Node(n) => Some((n.name.as_str(), n)),
            _ => None,
        })
        .collect();
    let mut decided: BTreeMap<&str, usize> = BTreeMap::new();
    let mut onto: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
    let mut launches: BTreeMap<&str, &Launch> = BTreeMap::new();
    for d in decisions {
        match d {
            Decision::Binding { pod, target } => {
                *decided.entry(pod).or_insert(0) += 1;
                let p = pods.get(pod.as_str());
                assert!(p.is_some(), "{when}: {pod} is bound but is no pod");
                onto.entry(target).or_default().extend(p);
            }
            Decision::Unschedulable { pod, .. } => *decided.entry(pod).or_insert(0) += 1,
            Decision::Launch(l) => {
                assert!(
                    launches.insert(&l.name, l).is_none(),
                    "{when}: two launches named {}",
                    l.name
                );
            }
            _ => {}
        }
    }
    for (key, p) in &pods {
        let want = usize::from(p.node_name.is_none());
        let got = decided.get(key.as_str()).copied().unwrap_or(0);
        assert_eq!(got, want, "{when}: pod {key} has {got} decisions");
    }
    for (target, planned) in &onto {
        let sum = planned.iter().fold(Resources::default(), |acc, p| {
            acc.add(&p.scheduling.requests)
        });
        if let Some(l) = launches.get(target) {
            let held: i64 = l.pods_by_class.iter().map(|(_, n)| n).sum();
            assert_eq!(held, planned.len() as i64, "{when}: launch {target}'s pods");
            for t in &l.instance_types {
                let it = types.get(t.as_str()).expect("a listed type exists");
                assert!(
                    sum.fits_in(&it.allocatable()),
                    "{when}: launch {target}'s pods do not fit its type {t}"
                );
            }
        } else {
            let node = nodes
                .get(target)
                .expect("a binding's target is a launch or node");
            let bound = pods
                .values()
                .filter(|p| p.node_name.as_deref() == Some(target))
                .fold(sum, |acc, p| acc.add(&p.scheduling.requests));
            assert!(
                bound.fits_in(&node.allocatable),
                "{when}: node {target} is asked to hold more than it has"
            );
        }
    }
    for (name, l) in &launches {
        assert!(
            onto.contains_key(name),
            "{when}: launch {name} holds no pod ({:?})",
            l.pods_by_class
        );
    }
}

/// Applies `batches` to `engine`, freshly started, over `world` (epoch 1), grouped into epochs
/// by `group_sizes` (how many batches each epoch takes), checking the accounting after each
/// epoch. Returns the decisions after each epoch.
fn run(
    mut engine: Engine,
    world: &BTreeMap<String, Fact>,
    batches: &[Vec<(Fact, isize)>],
    group_sizes: &[usize],
    label: &str,
) -> Vec<Vec<Decision>> {
    let mut state = world.clone();
    engine
        .advance(1, state.values().cloned().map(|f| (f, 1)).collect())
        .expect("advance");
    let mut rest = batches;
    let mut epoch = 1;
    let mut after_each = Vec::new();
    for &size in group_sizes {
        let (now, later) = rest.split_at(size.min(rest.len()));
        rest = later;
        let changes: Vec<(Fact, isize)> = now.iter().flatten().cloned().collect();
        for (f, r) in &changes {
            if *r > 0 {
                state.insert(key(f), f.clone());
            } else {
                state.remove(&key(f));
            }
        }
        epoch += 1;
        engine.advance(epoch, changes).expect("advance");
        let decisions = engine.decisions();
        check_accounting(&state, &decisions, &format!("{label}, epoch {epoch}"));
        after_each.push(decisions);
    }
    assert!(rest.is_empty(), "{label}: every batch applied");
    after_each
}

fn threads(workers: usize) -> Engine {
    Engine::start(workers, dovetail_queries::provisioning).expect("engine")
}

/// Applies `batches` one per epoch on two processes of one worker each, talking over
/// 127.0.0.1 as `--processes 2` does: this test is the driver, a thread the follower.
fn run_on_two_processes(
    world: &BTreeMap<String, Fact>,
    batches: &[Vec<(Fact, isize)>],
    label: &str,
) -> Vec<Vec<Decision>> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    // Process 1 only dials process 0, so its own address is never bound.
    let hosts = vec![format!("127.0.0.1:{port}"), "127.0.0.1:1".to_string()];
    let placement = |index| Placement {
        threads: 1,
        cluster: Some(Cluster::new(hosts.clone(), index).expect("two hosts")),
    };
    let follower_placement = placement(1);
    let follower =
        std::thread::spawn(move || serve(&follower_placement, dovetail_queries::provisioning));
    let driver =
        Engine::start_on(&placement(0), dovetail_queries::provisioning).expect("the driver starts");
    let after_each = run(driver, world, batches, &vec![1; batches.len()], label);
    follower
        .join()
        .expect("the follower does not panic")
        .expect("the follower ends cleanly once the driver is done");
    after_each
}

#[test]
fn every_batching_accounts_for_every_pod_once_within_capacity() {
    let mut rng = Rng(0x05ee_dd0e_7a11);
    let world = world();
    let mut end = world.clone();
    let batches = random_changes(&mut rng, &mut end, 38);
    let one_each = vec![1; batches.len()];
    let after_each = run(
        threads(2),
        &world,
        &batches,
        &one_each,
        "one change per epoch",
    );
    let decisions = after_each.last().cloned().unwrap_or_default();
    // The run must have exercised the solver, not just agreed on nothing.
    assert!(
        decisions
            .iter()
            .filter(|d| matches!(d, Decision::Launch(_)))
            .count()
            > 1,
        "{decisions:?}"
    );
    let mut groupings = Vec::new();
    let mut left = batches.len();
    while left > 0 {
        let k = (1 + rng.below(6) as usize).min(left);
        groupings.push(k);
        left -= k;
    }
    run(threads(1), &world, &batches, &groupings, "random groupings");
    let all_at_once = run(
        threads(2),
        &world,
        &batches,
        &[batches.len()],
        "all in one epoch",
    );
    assert_eq!(
        all_at_once.last(),
        Some(&decisions_from_scratch(&end)),
        "all changes in one epoch are one packing from nothing"
    );
}

/// The same changes, one per epoch, on two processes of one worker each decide, epoch by
/// epoch, what two workers in one process decide: records go to the same workers, only
/// across a socket.
#[test]
fn two_processes_decide_what_two_workers_decide_after_every_change() {
    let mut rng = Rng(0x2b0c_e55e_5eed);
    let world = world();
    let mut end = world.clone();
    let batches = random_changes(&mut rng, &mut end, 30);
    let one_each = vec![1; batches.len()];
    let in_one = run(threads(2), &world, &batches, &one_each, "two workers");
    let in_two = run_on_two_processes(&world, &batches, "two processes");
    assert_eq!(in_one.len(), batches.len());
    assert_eq!(in_two.len(), batches.len());
    for (epoch, (one, two)) in in_one.iter().zip(&in_two).enumerate() {
        assert_eq!(one, two, "epoch {}: two processes differ", epoch + 2);
    }
    let launched = |decisions: &Vec<Decision>| launches_in(decisions).len();
    // The processes must have packed pods between them, not agreed on nothing.
    assert!(
        in_one.iter().filter(|d| launched(d) > 1).count() > batches.len() / 2,
        "{in_one:?}"
    );
}

#[test]
fn a_pod_added_or_removed_moves_only_its_own_decisions() {
    let mut state = world();
    let mut engine = threads(1);
    let mut rng = Rng(7);
    let pods: Vec<Fact> = (0..120)
        .map(|i| Fact::Pod(random_pod(&mut rng, i).into()))
        .collect();
    for p in &pods {
        state.insert(key(p), p.clone());
    }
    engine
        .advance(1, state.values().cloned().map(|f| (f, 1)).collect())
        .expect("advance");
    let before = engine.decisions().len();
    // One pod more, then one pod less: each moves a handful of decisions, not the ~120
    // bindings a re-packing would shift.
    let extra = Fact::Pod(random_pod(&mut rng, 1000).into());
    let added = engine
        .advance(2, vec![(extra.clone(), 1)])
        .expect("advance");
    state.insert(key(&extra), extra);
    check_accounting(&state, &engine.decisions(), "after the addition");
    let gone = pods[17].clone();
    state.remove(&key(&gone));
    let removed = engine.advance(3, vec![(gone, -1)]).expect("advance");
    check_accounting(&state, &engine.decisions(), "after the removal");
    assert!(before > 100, "{before} decisions");
    for (what, diffs) in [("addition", &added), ("removal", &removed)] {
        let moved = diffs
            .iter()
            .filter(|(d, _)| matches!(d, Decision::Binding { .. } | Decision::Launch(_)))
            .count();
        assert!(moved <= 12, "the {what} moved {moved} decisions: {diffs:?}");
    }
}

fn launches_in(decisions: &[Decision]) -> Vec<&Launch> {
    decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Launch(l) => Some(l),
            _ => None,
        })
        .collect()
}

#[test]
fn a_launch_whose_nodeclaim_appears_hands_its_pods_to_that_node() {
    let mut state = world();
    let pods: Vec<Fact> = (0..3)
        .flat_map(|i| common::facts(&common::pod(&format!("q{i}"), "2", "4Gi", "app: web", "")))
        .filter(|f| matches!(f, Fact::Pod(_)))
        .collect();
    for p in &pods {
        state.insert(key(p), p.clone());
    }
    let mut engine = threads(1);
    engine
        .advance(1, state.values().cloned().map(|f| (f, 1)).collect())
        .expect("advance");
    let decisions = engine.decisions();
    check_accounting(&state, &decisions, "before the NodeClaim");
    let launches = launches_in(&decisions);
    assert!(!launches.is_empty(), "{decisions:?}");
    let launch = launches[0].clone();
    let others: Vec<Launch> = launches[1..].iter().map(|l| (*l).clone()).collect();
    let waiting: Vec<String> = decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Binding { pod, target } if *target == launch.name => Some(pod.clone()),
            _ => None,
        })
        .collect();
    assert!(!waiting.is_empty());
    // The actuator executed it as `name-2` (a NodeClaim of its name existed), and the NodeClaim
    // shows up as an in-flight node of the launch's cheapest type.
    let node_yaml = common::node(
        "ip-10-0-0-9",
        &launch.nodepool,
        &launch.instance_types[0],
        &launch.zones[0],
        &launch.capacity_types[0],
        "2026-12-03T00:00:00Z",
        "",
    );
    let mut node = common::facts(&node_yaml)
        .into_iter()
        .find_map(|f| match f {
            Fact::Node(n) => Some(n),
            _ => None,
        })
        .expect("a node");
    node.nodeclaim = Some(format!("{}-2", launch.name));
    node.in_flight = true;
    let fact = Fact::Node(node);
    state.insert(key(&fact), fact.clone());
    engine.advance(2, vec![(fact, 1)]).expect("advance");
    let decisions = engine.decisions();
    check_accounting(&state, &decisions, "after the NodeClaim");
    let after = launches_in(&decisions);
    assert_eq!(
        after,
        others.iter().collect::<Vec<_>>(),
        "the executed launch is gone and nothing else moved"
    );
    for pod in &waiting {
        assert!(
            decisions.contains(&Decision::Binding {
                pod: pod.clone(),
                target: "ip-10-0-0-9".to_string(),
            }),
            "{pod} follows its launch onto the node: {decisions:?}"
        );
    }
}
