//! Shared harness for scenario tests: manifests (YAML) in, the engine's decisions out, using the
//! real embedded us-east-1 catalogue.

#![allow(dead_code)]

use dovetail_dataflow::catalog::{embedded, ResolveOptions};
use dovetail_dataflow::decisions::{Decision, Launch};
use dovetail_dataflow::engine::Engine;
use dovetail_dataflow::facts::Fact;
use dovetail_dataflow::model::InstanceType;
use std::collections::BTreeMap;

/// What one run decided.
#[derive(Debug, Default)]
pub struct Outcome {
    pub launches: Vec<Launch>,
    /// pod -> node or launch name
    pub bindings: BTreeMap<String, String>,
    /// pod -> reason
    pub unschedulable: BTreeMap<String, String>,
    pub lower_bound: i64,
}

impl Outcome {
    pub fn from_decisions(decisions: Vec<Decision>) -> Outcome {
        let mut o = Outcome::default();
        for d in decisions {
            match d {
                Decision::Launch(l) => o.launches.push(l),
                Decision::Binding { pod, target } => {
                    o.bindings.insert(pod, target);
                }
                Decision::Unschedulable { pod, reason } => {
                    o.unschedulable.insert(pod, reason);
                }
                Decision::LowerBound(p) => o.lower_bound += p.0,
            }
        }
        o.launches.sort_by(|a, b| a.name.cmp(&b.name));
        o
    }

    /// The launch a pod is bound to.
    pub fn launch_of(&self, pod: &str) -> Option<&Launch> {
        let target = self.bindings.get(pod)?;
        self.launches.iter().find(|l| &l.name == target)
    }

    /// Pods bound to a launch or node.
    pub fn pods_on(&self, target: &str) -> Vec<&str> {
        self.bindings
            .iter()
            .filter(|(_, t)| t.as_str() == target)
            .map(|(p, _)| p.as_str())
            .collect()
    }

    pub fn total_price(&self) -> i64 {
        self.launches.iter().map(|l| l.price.0).sum()
    }
}

/// Loads manifests from YAML text and turns them into facts (us-east-1 catalogue).
pub fn facts(yaml: &str) -> Vec<Fact> {
    let m = dovetail_ingest::load_str("scenario.yaml", yaml).expect("scenario manifests parse");
    dovetail_ingest::facts::manifest_facts(&m, "us-east-1").expect("us-east-1 catalogue loads")
}

/// Runs the provisioning engine once over the manifests.
pub fn plan(yaml: &str) -> Outcome {
    plan_facts(facts(yaml))
}

pub fn plan_facts(facts: Vec<Fact>) -> Outcome {
    let mut engine = Engine::start(1, dovetail_queries::provisioning).expect("engine starts");
    engine
        .advance(1, facts.into_iter().map(|f| (f, 1)).collect())
        .expect("engine advances");
    Outcome::from_decisions(engine.decisions())
}

/// The us-east-1 catalogue resolved with default kubelet settings, for computing expectations
/// independently of the engine.
pub fn catalogue() -> Vec<InstanceType> {
    embedded("us-east-1")
        .expect("catalogue")
        .instance_types(&ResolveOptions::default())
}

/// A NodePool + EC2NodeClass pair with the given extra requirements YAML (indented list items)
/// and optional extra spec lines.
pub fn nodepool(name: &str, weight: i32, requirements: &str, taints: &str, limits: &str) -> String {
    format!(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: {name}
spec:
  weight: {weight}
  template:
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements:
{requirements}
{taints}
{limits}
---
"#
    )
}

pub const NODECLASS: &str = r#"
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
---
"#;

/// A NodePool "default" allowing everything on-demand, with the default EC2NodeClass.
pub fn default_pool() -> String {
    nodepool(
        "default",
        0,
        "        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}",
        "",
        "",
    ) + NODECLASS
}

/// A pending pod with requests and extra spec YAML (indented under `spec:` by 2 spaces).
pub fn pod(name: &str, cpu: &str, memory: &str, labels: &str, extra_spec: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  labels: {{{labels}}}
spec:
{extra_spec}
  containers:
    - name: app
      image: app
      resources:
        requests: {{cpu: "{cpu}", memory: "{memory}"}}
---
"#
    )
}
