//! Karpenter kinds (NodePool, EC2NodeClass, NodeOverlay, NodeClaim) and Nodes.

use dovetail_dataflow::model::quantity::{mib, units};
use dovetail_dataflow::model::{ConsolidationPolicy, Effect, Threshold};
use dovetail_ingest::{load_str, Manifests};
use std::collections::BTreeSet;

fn load(text: &str) -> Manifests {
    match load_str("test.yaml", text) {
        Ok(m) => m,
        Err(e) => panic!("load failed: {e}"),
    }
}

#[test]
fn nodepool_fields_and_defaults() {
    let m = load(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  weight: 20
  limits: {cpu: "1000", memory: 1000Gi}
  template:
    metadata:
      labels: {team: a}
      annotations: {x: y}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      expireAfter: 168h
      terminationGracePeriod: 48h
      taints: [{key: dedicated, value: a, effect: NoSchedule}]
      startupTaints: [{key: init, effect: NoExecute}]
      requirements:
      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r], minValues: 2}
      - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["4"]}
      - {key: team, operator: In, values: [a, b]}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 5m
    budgets:
    - {nodes: "0", schedule: "0 9 * * 1-5", duration: 8h, reasons: [Drifted]}
    - {nodes: 3}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: minimal}
spec:
  template:
    spec:
      nodeClassRef: {name: default}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: static}
spec:
  replicas: 3
  template:
    spec:
      nodeClassRef: {name: default}
"#,
    );
    assert_eq!(m.nodepools.len(), 3);
    let np = &m.nodepools[0];
    assert_eq!(np.name, "general");
    assert_eq!(np.weight, 20);
    assert_eq!(
        np.template_labels.get("team").map(String::as_str),
        Some("a")
    );
    assert_eq!(
        np.template_annotations.get("x").map(String::as_str),
        Some("y")
    );
    assert_eq!(np.node_class.as_deref(), Some("default"));
    assert_eq!(np.expire_after.as_deref(), Some("168h"));
    assert_eq!(np.termination_grace_period.as_deref(), Some("48h"));
    assert_eq!(np.taints.len(), 1);
    assert_eq!(np.taints[0].effect, Effect::NoSchedule);
    assert_eq!(np.startup_taints[0].key, "init");
    assert_eq!(np.startup_taints[0].effect, Effect::NoExecute);
    let cat = np
        .requirements
        .get("karpenter.k8s.aws/instance-category")
        .unwrap();
    assert_eq!(cat.min_values, Some(2));
    assert!(np
        .requirements
        .allows("karpenter.k8s.aws/instance-generation", "5"));
    assert!(!np
        .requirements
        .allows("karpenter.k8s.aws/instance-generation", "4"));
    // The template label narrows the requirement on the same key.
    assert!(np.requirements.allows("team", "a"));
    assert!(!np.requirements.allows("team", "b"));
    assert_eq!(np.limits.get("cpu"), Some(&units(1000)));
    assert_eq!(np.limits.get("memory"), Some(&mib(1000 * 1024)));
    let d = &np.disruption;
    assert_eq!(d.consolidation_policy, ConsolidationPolicy::WhenEmpty);
    assert_eq!(d.consolidate_after.as_deref(), Some("5m"));
    assert_eq!(d.budgets.len(), 2);
    assert_eq!(d.budgets[0].nodes, "0");
    assert_eq!(d.budgets[0].schedule.as_deref(), Some("0 9 * * 1-5"));
    assert_eq!(d.budgets[0].duration.as_deref(), Some("8h"));
    assert_eq!(d.budgets[0].reasons, vec!["Drifted".to_string()]);
    assert_eq!(d.budgets[1].nodes, "3");
    assert_eq!(np.replicas, None);

    let min = &m.nodepools[1];
    assert_eq!(min.weight, 0);
    assert_eq!(min.expire_after.as_deref(), Some("720h"));
    assert_eq!(min.disruption, Default::default());
    assert_eq!(
        min.disruption.consolidation_policy,
        ConsolidationPolicy::WhenEmptyOrUnderutilized
    );
    assert_eq!(min.disruption.budgets[0].nodes, "10%");

    assert_eq!(m.nodepools[2].replicas, Some(3));
    assert!(m.notes.contains(
        &"NodePool static: spec.replicas (static NodePool) is not supported yet".to_string()
    ));
}

#[test]
fn nodepool_requirement_values_are_validated() {
    for (req, reason) in [
        ("{key: a, operator: In, values: []}", "at least one value"),
        (
            "{key: a, operator: Gt, values: [\"1\", \"2\"]}",
            "exactly one integer",
        ),
        (
            "{key: a, operator: Lt, values: [big]}",
            "exactly one integer",
        ),
    ] {
        let text = format!(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: np}}\nspec:\n  template:\n    spec:\n      requirements:\n      - {{key: ok, operator: Exists}}\n      - {req}\n"
        );
        let err = load_str("np.yaml", &text).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "np.yaml: document 1: NodePool np: spec.template.spec.requirements[1].values: "
            ),
            "{err}"
        );
        assert!(err.contains(reason), "{err}");
    }
}

#[test]
fn ec2nodeclass_fields() {
    let m = load(
        r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  kubelet:
    maxPods: 58
    podsPerCore: 4
    kubeReserved: {cpu: 100m, memory: 500Mi}
    systemReserved: {memory: 100Mi}
    evictionHard: {memory.available: 100Mi, nodefs.available: 10%}
    evictionSoft: {memory.available: 2.5%}
  enclaveOptions: {enabled: true}
  blockDeviceMappings:
  - deviceName: /dev/xvdb
    ebs: {volumeSize: 500Gi}
  - deviceName: /dev/xvda
    rootVolume: true
    ebs: {volumeSize: 100G, volumeType: gp3}
status:
  subnets:
  - {id: subnet-1, zone: us-east-1a, zoneID: use1-az1}
  - {id: subnet-2, zone: us-east-1b}
  securityGroups: [{id: sg-1}]
  amis: [{id: ami-1, name: x}, {id: ami-2}]
"#,
    );
    let nc = &m.nodeclasses[0];
    assert_eq!(nc.name, "default");
    assert_eq!(nc.kubelet.max_pods, Some(58));
    assert_eq!(nc.kubelet.pods_per_core, Some(4));
    assert_eq!(nc.kubelet.kube_reserved.get("cpu"), Some(&100));
    assert_eq!(nc.kubelet.kube_reserved.get("memory"), Some(&mib(500)));
    assert_eq!(nc.kubelet.system_reserved.get("memory"), Some(&mib(100)));
    assert_eq!(
        nc.kubelet.eviction_hard.get("memory.available"),
        Some(&Threshold::Quantity(mib(100)))
    );
    assert_eq!(
        nc.kubelet.eviction_hard.get("nodefs.available"),
        Some(&Threshold::PercentHundredths(1000))
    );
    assert_eq!(
        nc.kubelet.eviction_soft.get("memory.available"),
        Some(&Threshold::PercentHundredths(250))
    );
    assert!(nc.enclaves_enabled);
    // 100G = 93.1 GiB, rounded up.
    assert_eq!(nc.root_volume_gib, Some(94));
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(nc.status.subnet_zones, s(&["us-east-1a", "us-east-1b"]));
    assert_eq!(nc.status.subnet_ids, s(&["subnet-1", "subnet-2"]));
    assert_eq!(nc.status.security_group_ids, s(&["sg-1"]));
    assert_eq!(nc.status.ami_ids, s(&["ami-1", "ami-2"]));
    // Canonical: keys sorted at every level.
    assert!(nc
        .spec_json
        .starts_with(r#"{"amiSelectorTerms":[{"alias":"al2023@latest"}],"blockDeviceMappings":"#));
    assert!(nc.spec_json.contains(r#"{"deviceName":"/dev/xvda","ebs":{"volumeSize":"100G","volumeType":"gp3"},"rootVolume":true}"#));
}

#[test]
fn spec_json_does_not_depend_on_key_order() {
    let a = load("apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: a}\nspec: {role: r, kubelet: {maxPods: 3, podsPerCore: 1}}\n");
    let b = load("apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: a}\nspec: {kubelet: {podsPerCore: 1, maxPods: 3}, role: r}\n");
    assert_eq!(a.nodeclasses[0].spec_json, b.nodeclasses[0].spec_json);
    assert_eq!(a.nodeclasses[0].root_volume_gib, None);
}

#[test]
fn nodeoverlay_fields() {
    let m = load(
        r#"
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: fuse}
spec:
  weight: 10
  requirements:
  - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5]}
  capacity: {smarter-devices/fuse: "1", hugepages-2Mi: 100Mi}
  price: "0.0432"
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: discount}
spec:
  priceAdjustment: "-10%"
"#,
    );
    let o = &m.overlays[0];
    assert_eq!(o.name, "fuse");
    assert_eq!(o.weight, 10);
    assert!(o
        .requirements
        .allows("karpenter.k8s.aws/instance-family", "m5"));
    assert!(!o
        .requirements
        .allows("karpenter.k8s.aws/instance-family", "r5"));
    assert_eq!(o.capacity.get("smarter-devices/fuse"), Some(&units(1)));
    assert_eq!(o.capacity.get("hugepages-2Mi"), Some(&mib(100)));
    assert_eq!(o.price, Some(43_200));
    assert_eq!(o.price_adjustment, None);
    let d = &m.overlays[1];
    assert_eq!(d.price, None);
    assert_eq!(d.price_adjustment.as_deref(), Some("-10%"));
    assert_eq!(d.weight, 0);
}

const NODE: &str = r#"
apiVersion: v1
kind: Node
metadata:
  name: ip-10-0-0-1.ec2.internal
  creationTimestamp: "2024-03-01T12:30:15Z"
  labels: {karpenter.sh/nodepool: general, topology.kubernetes.io/zone: us-east-1a}
  annotations: {own: node}
spec:
  providerID: aws:///us-east-1a/i-0123
  unschedulable: true
  taints: [{key: karpenter.sh/disrupted, effect: NoSchedule}]
status:
  capacity: {cpu: "4", memory: 16Gi, pods: "58"}
  allocatable: {cpu: 3920m, memory: 15Gi, pods: "58", ephemeral-storage: 18Gi}
"#;

#[test]
fn node_fields() {
    let m = load(NODE);
    let n = &m.nodes[0];
    assert_eq!(n.name, "ip-10-0-0-1.ec2.internal");
    assert_eq!(n.labels.len(), 2);
    assert_eq!(n.annotations.get("own").map(String::as_str), Some("node"));
    assert_eq!(n.taints[0].key, "karpenter.sh/disrupted");
    assert_eq!(n.allocatable.cpu, 3920);
    assert_eq!(n.allocatable.memory, mib(15 * 1024));
    assert_eq!(n.allocatable.pods, units(58));
    assert_eq!(n.allocatable.ephemeral_storage, mib(18 * 1024));
    assert!(n.unschedulable);
    assert!(!n.in_flight);
    assert_eq!(n.provider_id.as_deref(), Some("aws:///us-east-1a/i-0123"));
    assert_eq!(n.created_ms, Some(1_709_296_215_000));
    assert_eq!(n.nodeclaim, None);
}

#[test]
fn node_allocatable_falls_back_to_capacity() {
    let m =
        load("apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {capacity: {cpu: '2'}}\n");
    assert_eq!(m.nodes[0].allocatable.cpu, 2000);
    assert!(!m.nodes[0].unschedulable);
}

#[test]
fn nodeclaims_match_nodes_or_are_in_flight() {
    let text = format!(
        r#"{NODE}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: general-abcde
  annotations: {{own: claim, claim-only: yes}}
spec:
  nodeClassRef: {{name: default}}
  requirements: []
status:
  providerID: aws:///us-east-1a/i-0123
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: general-fghij
  creationTimestamp: "2024-03-01T12:31:00Z"
  labels: {{karpenter.sh/nodepool: general}}
spec:
  nodeClassRef: {{name: default}}
  taints: [{{key: dedicated, value: a, effect: NoSchedule}}]
  startupTaints: [{{key: init, effect: NoSchedule}}]
  requirements:
  - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}
  - {{key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}}
  - {{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1b]}}
status:
  providerID: aws:///us-east-1b/i-0456
  capacity: {{cpu: "2", memory: 8Gi, pods: "29"}}
  allocatable: {{cpu: 1930m, memory: 7Gi, pods: "29"}}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {{name: general-launching}}
spec:
  nodeClassRef: {{name: default}}
  requirements: []
"#
    );
    let m = load(&text);
    assert_eq!(m.nodes.len(), 2);
    let real = &m.nodes[0];
    assert_eq!(real.nodeclaim.as_deref(), Some("general-abcde"));
    assert!(!real.in_flight);
    assert_eq!(
        real.annotations.get("own").map(String::as_str),
        Some("node")
    );
    assert_eq!(
        real.annotations.get("claim-only").map(String::as_str),
        Some("yes")
    );

    let fl = &m.nodes[1];
    assert!(fl.in_flight);
    assert_eq!(fl.name, "general-fghij");
    assert_eq!(fl.nodeclaim.as_deref(), Some("general-fghij"));
    assert_eq!(
        fl.labels.get("karpenter.sh/nodepool").map(String::as_str),
        Some("general")
    );
    assert_eq!(
        fl.labels
            .get("node.kubernetes.io/instance-type")
            .map(String::as_str),
        Some("m5.large")
    );
    assert_eq!(
        fl.labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some("us-east-1b")
    );
    assert!(!fl.labels.contains_key("karpenter.sh/capacity-type"));
    assert_eq!(fl.taints.len(), 1, "startup taints are left out");
    assert_eq!(fl.taints[0].key, "dedicated");
    assert_eq!(fl.allocatable.cpu, 1930);
    assert_eq!(fl.provider_id.as_deref(), Some("aws:///us-east-1b/i-0456"));
    assert_eq!(fl.created_ms, Some(1_709_296_260_000));
    assert!(m
        .notes
        .iter()
        .any(|n| n.starts_with("NodeClaim general-launching: skipped")));
}
