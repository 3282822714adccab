//! Shared harness for scenario tests: manifests (YAML) in, the engine's decisions out, using the
//! real embedded us-east-1 catalogue.

#![allow(dead_code)]

use dovetail_dataflow::catalog::{embedded, ResolveOptions};
use dovetail_dataflow::decisions::{Decision, Disruption, Launch};
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
    pub disruptions: Vec<Disruption>,
    /// NodeClaims to annotate with dovetail's drift hashes.
    pub adopted: Vec<String>,
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
                    o.unschedulable.insert(pod, reason.to_string());
                }
                Decision::LowerBound(p) => o.lower_bound += p.0,
                Decision::ClusterLowerBound(_) => {}
                Decision::Disruption(d) => o.disruptions.push(d),
                Decision::Adopt { nodeclaim, .. } => o.adopted.push(nodeclaim),
                Decision::NodeVerdict(_) | Decision::PodVerdict(_) | Decision::LaunchVerdict(_) => {
                }
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

/// A NodePool behind a taint (c5 only), the EC2NodeClass every test NodePool uses (three
/// zones), and one existing m5.xlarge node in us-east-1a: the rest of the random-change tests'
/// world, after their own NodePools and a `---`.
pub const ISOLATED_POOL_AND_NODE: &str = r#"
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

/// Loads manifests from YAML text and turns them into facts (us-east-1 catalogue).
pub fn facts(yaml: &str) -> Vec<Fact> {
    let m = dovetail_ingest::load_str("scenario.yaml", yaml).expect("scenario manifests parse");
    dovetail_ingest::facts::manifest_facts(
        &m,
        dovetail_dataflow::catalog::embedded("us-east-1").expect("us-east-1 catalogue loads"),
    )
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

/// Runs every standing query (provisioning and disruption) once over the manifests, with the
/// logical clock at `now_ms`.
pub fn plan_at(yaml: &str, now_ms: u64) -> Outcome {
    plan_facts_at(facts(yaml), now_ms)
}

pub fn plan_facts_at(facts: Vec<Fact>, now_ms: u64) -> Outcome {
    let mut engine = Engine::start(1, dovetail_queries::standing_queries).expect("engine starts");
    engine.advance(now_ms, Vec::new()).expect("engine advances");
    engine
        .advance(now_ms + 1, facts.into_iter().map(|f| (f, 1)).collect())
        .expect("engine advances");
    Outcome::from_decisions(engine.decisions())
}

/// 2026-11-30T00:00:00Z (a Monday), in ms.
pub const MONDAY_MS: u64 = 1_795_996_800_000;
pub const HOUR_MS: u64 = 3_600_000;

/// A registered node of NodePool `pool`, created at `created` (RFC 3339), with the labels
/// Karpenter gives it and the type's allocatable from the catalogue; `extra_meta` is indented
/// under `metadata:`.
pub fn node(
    name: &str,
    pool: &str,
    instance_type: &str,
    zone: &str,
    capacity_type: &str,
    created: &str,
    extra_meta: &str,
) -> String {
    let it = catalogue_by_name()
        .get(instance_type)
        .unwrap_or_else(|| panic!("{instance_type} in the catalogue"));
    let a = it.allocatable();
    format!(
        r#"
apiVersion: v1
kind: Node
metadata:
  name: {name}
  creationTimestamp: "{created}"
  labels:
    karpenter.sh/nodepool: {pool}
    node.kubernetes.io/instance-type: {instance_type}
    topology.kubernetes.io/zone: {zone}
    karpenter.sh/capacity-type: {capacity_type}
    kubernetes.io/hostname: {name}
    kubernetes.io/arch: {arch}
    kubernetes.io/os: linux
{extra_meta}
spec:
  providerID: aws:///{zone}/i-{name}
status:
  allocatable: {{cpu: "{cpu}m", memory: "{mem}Ki", pods: "{pods}"}}
---
"#,
        arch = label(it, "kubernetes.io/arch").unwrap_or("amd64"),
        cpu = a.cpu,
        mem = a.memory / 1000 / 1024,
        pods = a.pods / 1000,
    )
}

/// A pod bound to `node` with requests and extra metadata (indented under `metadata:`).
pub fn bound_pod(name: &str, node: &str, cpu: &str, memory: &str, extra_meta: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  labels: {{app: {name}}}
  ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: rs, uid: u, controller: true}}]
{extra_meta}
spec:
  nodeName: {node}
  containers:
    - name: app
      image: app
      resources:
        requests: {{cpu: "{cpu}", memory: "{memory}"}}
---
"#
    )
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
    // Karpenter's CRD takes weights 1..=100; 0 is written as no weight (which counts as 0).
    let weight = match weight {
        0 => String::new(),
        w => format!("weight: {w}"),
    };
    format!(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: {name}
spec:
  {weight}
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

// ---------------------------------------------------------------------------------------------
// Helpers for the scenario suites (scenarios_*.rs): expectations from the catalogue, and more
// manifest builders.

/// The zones of the default EC2NodeClass's subnets.
pub const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

/// Milli-units of `n` MiB of memory.
pub const fn mib(n: i64) -> i64 {
    n * 1024 * 1024 * 1000
}

/// [`catalogue`], resolved once per test binary.
pub fn cat() -> &'static [InstanceType] {
    static CATALOGUE: std::sync::OnceLock<Vec<InstanceType>> = std::sync::OnceLock::new();
    CATALOGUE.get_or_init(catalogue)
}

/// The catalogue by instance-type name.
pub fn catalogue_by_name() -> &'static BTreeMap<String, InstanceType> {
    static BY_NAME: std::sync::OnceLock<BTreeMap<String, InstanceType>> =
        std::sync::OnceLock::new();
    BY_NAME.get_or_init(|| {
        cat()
            .iter()
            .map(|it| (it.name.clone(), it.clone()))
            .collect()
    })
}

/// The single value of a label an instance type carries (`None` when absent or not single).
pub fn label<'a>(it: &'a InstanceType, key: &str) -> Option<&'a str> {
    let r = it.requirements.get(key)?;
    if r.complement || r.values.len() != 1 {
        return None;
    }
    r.values.iter().next().map(String::as_str)
}

/// The type's cheapest available offering price of `capacity_type` in the subnet zones `ZONES`.
pub fn price_in(it: &InstanceType, capacity_type: &str, zones: &[&str]) -> Option<i64> {
    it.offerings
        .iter()
        .filter(|o| {
            o.available && o.capacity_type == capacity_type && zones.contains(&o.zone.as_str())
        })
        .map(|o| o.price.0)
        .min()
}

/// The type's cheapest on-demand price in the default subnet zones.
pub fn od_price(it: &InstanceType) -> Option<i64> {
    price_in(it, "on-demand", &ZONES)
}

/// True when the type's allocatable has room for `cpu_m` millicores, `mem_mib` MiB and `pods` pods.
pub fn has_room(it: &InstanceType, cpu_m: i64, mem_mib: i64, pods: i64) -> bool {
    let a = it.allocatable();
    a.cpu >= cpu_m && a.memory >= mib(mem_mib) && a.pods >= pods * 1000
}

/// The lowest on-demand price (default zones) among catalogue types that `keep` admits.
pub fn cheapest_od(keep: impl Fn(&InstanceType) -> bool) -> i64 {
    cat()
        .iter()
        .filter(|it| keep(it))
        .filter_map(od_price)
        .min()
        .expect("some catalogue type qualifies")
}

/// The launch by name (panics with the outcome when missing).
pub fn launch<'a>(out: &'a Outcome, name: &str) -> &'a Launch {
    out.launches
        .iter()
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("no launch {name}: {out:?}"))
}

/// The instance types a launch lists, resolved from the catalogue.
pub fn launch_types(l: &Launch) -> Vec<InstanceType> {
    let by_name = catalogue_by_name();
    l.instance_types
        .iter()
        .map(|n| {
            by_name
                .get(n)
                .cloned()
                .unwrap_or_else(|| panic!("{n} is not in the catalogue"))
        })
        .collect()
}

/// A pod manifest with arbitrary container YAML (`containers` and `initContainers` lines, each
/// indented by 2 spaces) and extra spec YAML.
pub fn pod_with(name: &str, labels: &str, extra_spec: &str, containers: &str) -> String {
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
{containers}
---
"#
    )
}

/// `n` pending pods `{prefix}-{i}` of the same shape (one class).
pub fn pods(
    n: usize,
    prefix: &str,
    cpu: &str,
    memory: &str,
    labels: &str,
    extra_spec: &str,
) -> String {
    (0..n)
        .map(|i| pod(&format!("{prefix}-{i}"), cpu, memory, labels, extra_spec))
        .collect()
}

/// A DaemonSet whose pods request `cpu` and `memory` on every node.
pub fn daemonset(name: &str, cpu: &str, memory: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {name}
  namespace: kube-system
spec:
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
        - name: d
          image: d
          resources:
            requests: {{cpu: "{cpu}", memory: "{memory}"}}
---
"#
    )
}

/// Pods bound to each launch, by launch name.
pub fn pods_per_launch(out: &Outcome) -> BTreeMap<String, Vec<String>> {
    let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (pod, target) in &out.bindings {
        if out.launches.iter().any(|l| &l.name == target) {
            m.entry(target.clone()).or_default().push(pod.clone());
        }
    }
    m
}

/// How dovetail splits `n` identical pods (`cpu_m` millicores, `mem_mib` MiB, default on-demand
/// pool, nothing else pending) over new NodeClaims, recomputed from the catalogue: each NodeClaim
/// takes the number of copies k whose cheapest holder costs least per pod (ties: more copies).
/// Sorted ascending.
pub fn lowest_price_per_pod_split(n: i64, cpu_m: i64, mem_mib: i64) -> Vec<usize> {
    let priced: Vec<(i64, i64)> = cat()
        .iter()
        .filter_map(|it| {
            let a = it.allocatable();
            let k = (a.cpu / cpu_m)
                .min(a.memory / mib(mem_mib))
                .min(a.pods / 1000);
            Some((k, od_price(it)?))
        })
        .filter(|(k, _)| *k > 0)
        .collect();
    let mut left = n;
    let mut split = Vec::new();
    while left > 0 {
        let mut best: Option<(i64, i64)> = None; // (price, copies)
        for k in (1..=left).rev() {
            let Some(price) = priced
                .iter()
                .filter(|(c, _)| *c >= k)
                .map(|(_, p)| *p)
                .min()
            else {
                continue;
            };
            if best
                .is_none_or(|(bp, bk)| (price as i128) * (bk as i128) < (bp as i128) * (k as i128))
            {
                best = Some((price, k));
            }
        }
        let (_, k) = best.expect("some type holds a pod");
        split.push(k as usize);
        left -= k;
    }
    split.sort_unstable();
    split
}

// ---------------------------------------------------------------------------------------------
// Helpers for the disruption scenarios (scenarios_disruption.rs).

/// `ms` since the epoch as an RFC 3339 UTC timestamp with milliseconds
/// (`2026-11-30T00:00:00.000Z`), for manifest fields.
pub fn rfc3339(ms: u64) -> String {
    dovetail_ingest::format_rfc3339_ms(ms as i64)
}

/// [`node`] with extra lines (taints, `unschedulable`) indented under `spec:`.
#[allow(clippy::too_many_arguments)]
pub fn node_with_spec(
    name: &str,
    pool: &str,
    instance_type: &str,
    zone: &str,
    capacity_type: &str,
    created: &str,
    extra_meta: &str,
    extra_spec: &str,
) -> String {
    node(
        name,
        pool,
        instance_type,
        zone,
        capacity_type,
        created,
        extra_meta,
    )
    .replacen(
        "spec:\n  providerID:",
        &format!("spec:\n{extra_spec}\n  providerID:"),
        1,
    )
}

/// A `karpenter.sh/v1` NodeClaim of the registered node `node` (matched by `status.nodeName`),
/// with extra lines indented under `metadata:` (annotations) and under `status:` (`imageID`,
/// `lastPodEventTime`).
pub fn nodeclaim(name: &str, node: &str, extra_meta: &str, extra_status: &str) -> String {
    format!(
        r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: {name}
{extra_meta}
spec:
  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  requirements: []
status:
  nodeName: {node}
{extra_status}
---
"#
    )
}

/// A pod bound to `node`, owned by a controller of kind `owner` (`None`: no owner), with extra
/// lines indented under `metadata:` and under `spec:`.
pub fn bound_pod_with(
    name: &str,
    node: &str,
    cpu: &str,
    memory: &str,
    owner: Option<&str>,
    extra_meta: &str,
    extra_spec: &str,
) -> String {
    let owner = match owner {
        Some(kind) => format!(
            "  ownerReferences: [{{apiVersion: apps/v1, kind: {kind}, name: owner, uid: u, controller: true}}]"
        ),
        None => String::new(),
    };
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  labels: {{app: {name}}}
{owner}
{extra_meta}
spec:
  nodeName: {node}
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

/// A PodDisruptionBudget in `default` selecting the pods labelled `app: {app}`; `limit` is its
/// `minAvailable: …` or `maxUnavailable: …` line.
pub fn pdb(name: &str, app: &str, limit: &str) -> String {
    format!(
        r#"
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {name}
  namespace: default
spec:
  {limit}
  selector:
    matchLabels: {{app: {app}}}
---
"#
    )
}

/// Applies `edit` to the `Fact::Node` named `name` (panics when there is none), for node
/// fields a manifest cannot set directly.
pub fn edit_node(
    facts: &mut [Fact],
    name: &str,
    edit: impl FnOnce(&mut dovetail_dataflow::model::Node),
) {
    let node = facts
        .iter_mut()
        .find_map(|f| match f {
            Fact::Node(n) if n.name == name => Some(n),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no Fact::Node {name}"));
    edit(node);
}

/// A launched, not yet joined on-demand m5.xlarge NodeClaim of NodePool "default" in `zone`
/// (an in-flight node), with 3 CPUs and 12Gi allocatable.
pub fn in_flight_nodeclaim(name: &str, zone: &str) -> String {
    format!(
        r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: {name}
  labels:
    karpenter.sh/nodepool: default
spec:
  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  requirements:
    - {{key: topology.kubernetes.io/zone, operator: In, values: [{zone}]}}
    - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge]}}
    - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
    - {{key: kubernetes.io/arch, operator: In, values: [amd64]}}
    - {{key: kubernetes.io/os, operator: In, values: [linux]}}
status:
  capacity: {{cpu: "4", memory: 16Gi, pods: "58"}}
  allocatable: {{cpu: "3", memory: 12Gi, pods: "58"}}
---
"#
    )
}
