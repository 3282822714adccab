//! Draining as Karpenter's terminator (`actuate/src/drain.rs`), on the simulated cluster, whose
//! evictions go through its PodDisruptionBudgets: pods that are not critical leave first, the
//! critical ones only once those are gone; a NodePool's `terminationGracePeriod` ends a drain a
//! budget holds, and without one the drain waits.

use dovetail_actuate::{ActuationSettings, Actuator};
use dovetail_dataflow::backend::Cluster;
use dovetail_sim::SimCluster;

const MANIFESTS: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
      terminationGracePeriod: 60s
---
apiVersion: v1
kind: Node
metadata:
  name: n1
  labels: {karpenter.sh/nodepool: general, node.kubernetes.io/instance-type: m5.xlarge}
status:
  allocatable: {cpu: "4", memory: 16Gi, pods: "58"}
  conditions: [{type: Ready, status: "True"}]
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default, labels: {app: web}}
spec:
  nodeName: n1
  containers: [{name: c, image: i, resources: {requests: {cpu: 500m}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: db, namespace: default, labels: {app: db}}
spec:
  nodeName: n1
  containers: [{name: c, image: i, resources: {requests: {cpu: 500m}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: dns, namespace: default, labels: {app: dns}}
spec:
  nodeName: n1
  priorityClassName: system-cluster-critical
  containers: [{name: c, image: i, resources: {requests: {cpu: 100m}}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: db, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: db}}
"#;

/// The node with its pods and the budget, and an actuator that knows the NodePool
/// (`terminationGracePeriod` as given, or none).
fn setup(grace: Option<&str>) -> (Actuator, SimCluster) {
    let text = match grace {
        Some(g) => MANIFESTS.replace(
            "terminationGracePeriod: 60s",
            &format!("terminationGracePeriod: {g}"),
        ),
        None => MANIFESTS.replace("      terminationGracePeriod: 60s\n", ""),
    };
    let m = dovetail_ingest::load_str("drain.yaml", &text).expect("manifests");
    let mut cluster = SimCluster::new();
    for n in m.nodes {
        cluster.add_node(n, Vec::new()).expect("node");
    }
    for p in m.pods {
        cluster.add_pod(0, p).expect("pod");
    }
    for b in m.pdbs {
        cluster.set_pdb(b);
    }
    let mut actuator = Actuator::new(ActuationSettings::default());
    for p in m.nodepools {
        actuator.set_nodepool(p);
    }
    (actuator, cluster)
}

fn on_node(cluster: &SimCluster) -> Vec<String> {
    let mut names: Vec<String> = Cluster::pods_on(cluster, "n1")
        .iter()
        .map(|p| p.name.clone())
        .collect();
    names.sort();
    names
}

#[test]
fn critical_pods_wait_for_the_rest_and_the_grace_period_ends_a_held_drain() {
    let (mut actuator, mut cluster) = setup(Some("60s"));
    assert_eq!(on_node(&cluster), ["db", "dns", "web"]);

    // web leaves; db's budget refuses; dns, critical, is not asked while db is there.
    assert!(!actuator.drain(0, "n1", &mut cluster));
    assert_eq!(on_node(&cluster), ["db", "dns"]);
    assert!(Cluster::node(&cluster, "n1").is_some_and(|n| n.unschedulable));
    assert!(!actuator.drain(30_000, "n1", &mut cluster));
    assert_eq!(on_node(&cluster), ["db", "dns"]);
    assert_eq!(actuator.stats().drains_forced, 0);

    // The NodePool's terminationGracePeriod has passed since the drain started.
    assert!(actuator.drain(60_000, "n1", &mut cluster));
    assert_eq!(actuator.stats().drains_forced, 1);
}

#[test]
fn without_a_grace_period_a_held_drain_waits_and_ends_once_the_budget_allows() {
    let (mut actuator, mut cluster) = setup(None);
    assert!(!actuator.drain(0, "n1", &mut cluster));
    // A day later the budget still holds db: still draining.
    assert!(!actuator.drain(86_400_000, "n1", &mut cluster));
    assert_eq!(on_node(&cluster), ["db", "dns"]);

    // The budget goes: db leaves, then (the next step) the critical pod, then it is done.
    cluster.remove_pdb("default/db");
    assert!(!actuator.drain(86_401_000, "n1", &mut cluster));
    assert_eq!(on_node(&cluster), ["dns"]);
    assert!(actuator.drain(86_402_000, "n1", &mut cluster));
    assert_eq!(on_node(&cluster), Vec::<String>::new());
    assert_eq!(actuator.stats().drains_forced, 0);
}
