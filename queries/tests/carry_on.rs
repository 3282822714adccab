//! A change that only adds or removes pods of classes already pending carries the last packing
//! run on (`solver::warm`) instead of rebuilding it from the last plan. The claim is that the
//! plan is the same: random changes, most of them such pods, some of them new classes, price
//! and NodePool edits that force a rebuild, are applied to an engine that carries on and to one
//! that always rebuilds, and after every epoch both must hold the same decisions.
//!
//! Its own test binary, so that the process-wide count of carried-on runs is this test's alone.

mod common;

use dovetail_dataflow::engine::Engine;
use dovetail_dataflow::facts::Fact;
use dovetail_dataflow::model::{NodePool, Price};
use dovetail_queries::solver::carried_on_runs;
use std::collections::BTreeMap;

/// xorshift64*: deterministic, so a failure replays from the seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

/// A NodePool with a CPU limit (so that copies fail and preferences are relaxed), one behind a
/// taint, and an existing node.
const WORLD: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  weight: 10
  limits: {cpu: "96"}
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5, r5, m6g]}
---
"#;

/// The pod shapes changes draw from: every copy of a shape is one class.
const SHAPES: [(&str, &str, &str, &str); 8] = [
    ("250m", "512Mi", "app: web", ""),
    ("1", "2Gi", "app: web", "  topologySpreadConstraints:\n    - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}\n"),
    ("500m", "1Gi", "app: api", "  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: api}}}\n"),
    ("2", "4Gi", "app: batch", "  nodeSelector: {kubernetes.io/arch: arm64}\n"),
    ("1", "1Gi", "app: iso", "  nodeSelector: {karpenter.sh/nodepool: isolated}\n  tolerations:\n    - {key: dedicated, operator: Equal, value: isolated, effect: NoSchedule}\n"),
    ("750m", "3Gi", "app: cache", "  affinity:\n    podAntiAffinity:\n      preferredDuringSchedulingIgnoredDuringExecution:\n        - weight: 50\n          podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: cache}}}\n"),
    ("4", "8Gi", "app: big", ""),
    ("100m", "128Mi", "app: tiny", "  topologySpreadConstraints:\n    - {maxSkew: 2, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: tiny}}}\n"),
];

fn pod(name: &str, cpu: &str, memory: &str, labels: &str, extra: &str) -> Fact {
    let yaml = common::pod(name, cpu, memory, labels, extra);
    let m = dovetail_ingest::load_str("pod.yaml", &yaml).expect("pod parses");
    Fact::Pod(m.pods.into_iter().next().expect("one pod").into())
}

fn shaped(shape: usize, i: usize) -> Fact {
    let (cpu, memory, labels, extra) = SHAPES[shape % SHAPES.len()];
    pod(&format!("s{shape}-{i}"), cpu, memory, labels, extra)
}

/// A pod of a shape of its own: a class no other pod has. Every other one spreads over zones
/// by a selector of its own, a topology group the last run did not have.
fn odd(i: usize) -> Fact {
    let cpu = format!("{}m", 130 + i);
    if i.is_multiple_of(2) {
        let labels = format!("app: odd-{i}");
        let spread = format!("  topologySpreadConstraints:\n    - {{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {{matchLabels: {{app: odd-{i}}}}}}}\n");
        pod(&format!("odd-{i}"), &cpu, "300Mi", &labels, &spread)
    } else {
        pod(&format!("odd-{i}"), &cpu, "300Mi", "app: odd", "")
    }
}

fn key(f: &Fact) -> String {
    f.describe()
}

/// One epoch's changes, applied to `state` as they are drawn. Mostly pods of the shapes added
/// and removed (what carries on); now and then a class of its own, a price or a NodePool's
/// weight changed (what rebuilds).
fn changes(
    rng: &mut Rng,
    state: &mut BTreeMap<String, Fact>,
    next: &mut usize,
) -> Vec<(Fact, isize)> {
    let mut out = Vec::new();
    let n = if rng.below(4) == 0 {
        1 + rng.below(4)
    } else {
        1
    };
    for _ in 0..n {
        *next += 1;
        let change = match rng.below(20) {
            0..=8 => Some((shaped(rng.below(SHAPES.len() as u64) as usize, *next), 1)),
            9..=16 => {
                let pods: Vec<&String> = state.keys().filter(|k| k.starts_with("Pod ")).collect();
                let k = pods
                    .get(rng.below(pods.len() as u64) as usize)
                    .map(|k| (*k).clone());
                k.and_then(|k| state.get(&k).cloned()).map(|f| (f, -1))
            }
            17 => Some((odd(*next), 1)),
            18 => {
                let Some(Fact::NodePool(old)) = state.get("NodePool general").cloned() else {
                    continue;
                };
                let mut p: NodePool = old.clone();
                p.weight = rng.below(20) as i32;
                out.push((Fact::NodePool(old), -1));
                Some((Fact::NodePool(p), 1))
            }
            _ => {
                let types: Vec<&String> = state
                    .keys()
                    .filter(|k| k.starts_with("instance type "))
                    .collect();
                let k = types
                    .get(rng.below(types.len() as u64) as usize)
                    .map(|k| (*k).clone());
                match k.and_then(|k| state.get(&k).cloned()) {
                    Some(Fact::InstanceType {
                        node_class,
                        instance_type,
                    }) => {
                        let mut it = instance_type.clone();
                        for o in &mut it.offerings {
                            o.price = Price(o.price.0 * 3 / 4);
                        }
                        out.push((
                            Fact::InstanceType {
                                node_class: node_class.clone(),
                                instance_type,
                            },
                            -1,
                        ));
                        Some((
                            Fact::InstanceType {
                                node_class,
                                instance_type: it,
                            },
                            1,
                        ))
                    }
                    _ => None,
                }
            }
        };
        if let Some((f, r)) = change {
            for (g, _) in out.iter().filter(|(_, r)| *r < 0) {
                state.remove(&key(g));
            }
            if r > 0 {
                state.insert(key(&f), f.clone());
            } else {
                state.remove(&key(&f));
            }
            out.push((f, r));
        }
    }
    // A pod drawn twice for removal in one epoch is removed once.
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|(f, r)| *r > 0 || seen.insert(key(f)));
    out
}

#[test]
fn carrying_the_last_run_on_decides_as_rebuilding_from_the_last_plan() {
    for seed in [0xca11_ed0b, 7, 0x5eed_f00d] {
        same_decisions_after_every_epoch(seed);
    }
}

/// 198 epochs of random changes from `seed`, applied to both engines.
fn same_decisions_after_every_epoch(seed: u64) {
    let families = ["m5.", "c5.", "r5.", "m6g."];
    let mut state: BTreeMap<String, Fact> =
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
            .collect();
    for i in 0..160 {
        let f = shaped(i % SHAPES.len(), i);
        state.insert(key(&f), f);
    }
    let mut carried = Engine::start(1, dovetail_queries::provisioning).expect("engine");
    let mut rebuilt = Engine::start(1, dovetail_queries::provisioning_rebuilt).expect("engine");
    let initial: Vec<(Fact, isize)> = state.values().cloned().map(|f| (f, 1)).collect();
    carried.advance(1, initial.clone()).expect("advance");
    rebuilt.advance(1, initial).expect("advance");
    assert_eq!(carried.decisions(), rebuilt.decisions(), "the first plan");
    let runs_before = carried_on_runs();
    let mut rng = Rng(seed);
    let mut next = 1000;
    for epoch in 2..200u64 {
        let batch = changes(&mut rng, &mut state, &mut next);
        carried.advance(epoch, batch.clone()).expect("advance");
        rebuilt.advance(epoch, batch.clone()).expect("advance");
        let (a, b) = (carried.decisions(), rebuilt.decisions());
        if a != b {
            let only_a: Vec<_> = a.iter().filter(|d| !b.contains(d)).collect();
            let only_b: Vec<_> = b.iter().filter(|d| !a.contains(d)).collect();
            panic!(
                "seed {seed}, epoch {epoch} after {batch:?}:\ncarried on only: {only_a:#?}\nrebuilt only: {only_b:#?}"
            );
        }
    }
    let pending = state
        .values()
        .filter(|f| matches!(f, Fact::Pod(p) if p.node_name.is_none()))
        .count();
    assert!(
        pending > 100,
        "seed {seed}: {pending} pods pending at the end"
    );
    // Most epochs add or remove pods of existing classes only: they must have carried on.
    let runs = carried_on_runs() - runs_before;
    assert!(
        runs > 80,
        "seed {seed}: {runs} runs carried on in 198 epochs"
    );
}
