//! Differential test: random changes applied epoch by epoch to one long-running engine; after
//! every epoch its decisions equal those of a fresh engine given the same state from scratch.

mod common;

use dovetail_dataflow::engine::Engine;
use dovetail_dataflow::facts::Fact;
use dovetail_dataflow::model::{InstanceType, NodePool, Pod, Price, Requirement};
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
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: isolated}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      taints:
        - {key: dedicated, value: isolated, effect: NoSchedule}
      requirements:
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c5]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec: {}
status:
  subnets:
    - {id: a, zone: us-east-1a}
    - {id: b, zone: us-east-1b}
    - {id: c, zone: us-east-1c}
---
apiVersion: v1
kind: Node
metadata:
  name: existing-1
  labels:
    topology.kubernetes.io/zone: us-east-1a
    kubernetes.io/arch: amd64
    karpenter.sh/capacity-type: on-demand
    node.kubernetes.io/instance-type: m5.xlarge
status:
  allocatable: {cpu: 3920m, memory: 14Gi, pods: "58"}
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

fn decisions_from_scratch(
    state: &BTreeMap<String, Fact>,
) -> Vec<dovetail_dataflow::decisions::Decision> {
    let mut engine = Engine::start(1, dovetail_queries::provisioning).expect("engine");
    engine
        .advance(1, state.values().cloned().map(|f| (f, 1)).collect())
        .expect("advance");
    engine.decisions()
}

fn key(f: &Fact) -> String {
    f.describe()
}

#[test]
fn incremental_equals_from_scratch_after_every_epoch() {
    let mut rng = Rng(0x05ee_dd0e_7a11);
    // Keep the catalogue small so that each from-scratch run is quick.
    let families = ["m5.", "c5.", "r5.", "m6g.", "t3."];
    let mut state: BTreeMap<String, Fact> = common::facts(WORLD)
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
    let mut engine = Engine::start(2, dovetail_queries::provisioning).expect("engine");
    engine
        .advance(1, state.values().cloned().map(|f| (f, 1)).collect())
        .expect("advance");
    let mut next_pod = 0usize;
    for epoch in 2..40u64 {
        let mut changes: Vec<(Fact, isize)> = Vec::new();
        for _ in 0..1 + rng.below(4) {
            match rng.below(10) {
                // add a pod
                0..=3 => {
                    let p = Fact::Pod(random_pod(&mut rng, next_pod));
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
        engine.advance(epoch, changes).expect("advance");
        let incremental = engine.decisions();
        let scratch = decisions_from_scratch(&state);
        assert_eq!(
            incremental, scratch,
            "epoch {epoch}: incremental and from-scratch decisions differ"
        );
    }
    // The run must have exercised the solver, not just agreed on nothing.
    assert!(engine.decisions().len() > 3, "{:?}", engine.decisions());
}
