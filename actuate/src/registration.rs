//! Registration: the Node a launched instance registers as, as the kubelet and Karpenter label
//! and taint it. Actuation writes it into the NodeClaim's status when CreateFleet answers; the
//! kubelet (real or simulated) registers the Node from it, tainted `karpenter.sh/unregistered`;
//! [`register_node`] then removes that taint and marks the NodeClaim registered.
//!
//! Labels: every single-valued requirement of the instance type (instance type, arch, os,
//! region, family, size, cpu, memory, ...), the instance's zone, zone id and capacity type,
//! `kubernetes.io/hostname` (the node name), `karpenter.sh/nodepool`, the NodePool's template
//! labels and single-valued `In` requirements, and `karpenter.sh/registered=true`.
//! Taints: the NodePool's taints plus its startup taints; the startup taints are returned
//! separately so the cluster can remove them when the node is initialised.
//! Allocatable: the instance type's (capacity minus kube-reserved, system-reserved and the
//! eviction threshold).
//!
//! [`record_launch`] adds what the actuator records when it launches the NodeClaim — the drift
//! hashes of its NodePool and EC2NodeClass and what the instance was launched with — so that a
//! later change of either drifts the node.

use dovetail_dataflow::backend::Cluster;
use dovetail_dataflow::backend::Instance;
use dovetail_dataflow::model::labels::UNREGISTERED_TAINT;
use dovetail_dataflow::model::labels::{is_restricted, is_well_known};
use dovetail_dataflow::model::labels::{
    CAPACITY_RESERVATION_ID, CAPACITY_RESERVATION_TYPE, CAPACITY_TYPE, HOSTNAME, NODECLASS_HASH,
    NODEPOOL, NODEPOOL_HASH, REGISTERED, ZONE, ZONE_ID,
};
use dovetail_dataflow::model::{
    EC2NodeClass, InstanceType, LaunchedWith, Node, NodePool, Operator, Requirements, Taint,
};
use std::collections::BTreeMap;

/// The image recorded when the EC2NodeClass has no resolved AMI (manifests without a status,
/// the simulated cloud).
pub const UNRESOLVED_AMI_ID: &str = "ami-0d07e7a1100000000";

/// The single value of each key that `requirements` pins to exactly one value.
fn single_values(requirements: &Requirements) -> impl Iterator<Item = (&String, &String)> {
    requirements.0.iter().filter_map(|(k, r)| {
        if r.operator() == Operator::In && r.values.len() == 1 {
            r.values.iter().next().map(|v| (k, v))
        } else {
            None
        }
    })
}

/// The labels the kubelet of a NodeClaim's instance registers with, as Karpenter's user data
/// passes them: the NodePool's template labels, `karpenter.sh/nodepool`, the single-valued
/// requirements of the launch that Karpenter may inject (not the well-known labels the
/// kubelet and cloud set themselves, nor Kubernetes' own domains), and the capacity type.
pub fn nodeclaim_labels(
    nodepool: &NodePool,
    requirements: &Requirements,
    capacity_type: &str,
) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = single_values(requirements)
        .filter(|(k, _)| injectable(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in &nodepool.template_labels {
        labels.insert(k.clone(), v.clone());
    }
    labels.insert(NODEPOOL.to_string(), nodepool.name.clone());
    labels.insert(CAPACITY_TYPE.to_string(), capacity_type.to_string());
    labels
}

/// The taints a NodeClaim's kubelet registers with: the NodePool's taints, then its startup
/// taints.
pub fn nodeclaim_taints(nodepool: &NodePool) -> Vec<Taint> {
    let mut taints = nodepool.taints.clone();
    for t in &nodepool.startup_taints {
        if !taints.contains(t) {
            taints.push(t.clone());
        }
    }
    taints
}

/// Karpenter's `IsRestrictedNodeLabel`, inverted: a requirement's key the kubelet may be told to
/// set. Well-known labels come from the kubelet and the cloud; `kubernetes.io` / `k8s.io` keys
/// are refused by the kubelet unless under an allowed domain.
fn injectable(key: &str) -> bool {
    if is_well_known(key) || is_restricted(key) {
        return false;
    }
    let domain = key.split_once('/').map(|(d, _)| d).unwrap_or("");
    let allowed = [
        "node-restriction.kubernetes.io",
        "node.kubernetes.io",
        "kops.k8s.io",
    ];
    if allowed.iter().any(|a| domain.ends_with(a)) {
        return true;
    }
    !(domain.ends_with("kubernetes.io") || domain.ends_with("k8s.io"))
}

/// The Node `instance` registers as at `registered_ms`, and the startup taints to remove when it
/// is initialised.
pub fn node_for_instance(
    instance: &Instance,
    instance_type: &InstanceType,
    nodepool: &NodePool,
    registered_ms: i64,
) -> (Node, Vec<Taint>) {
    let name = instance.node_name();
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in single_values(&instance_type.requirements) {
        labels.insert(k.clone(), v.clone());
    }
    for (k, v) in single_values(&nodepool.requirements) {
        labels.insert(k.clone(), v.clone());
    }
    for (k, v) in &nodepool.template_labels {
        labels.insert(k.clone(), v.clone());
    }
    labels.insert(ZONE.to_string(), instance.zone.clone());
    if instance.zone_id.is_empty() {
        labels.remove(ZONE_ID);
    } else {
        labels.insert(ZONE_ID.to_string(), instance.zone_id.clone());
    }
    labels.insert(CAPACITY_TYPE.to_string(), instance.capacity_type.clone());
    if let Some(id) = &instance.capacity_reservation_id {
        labels.insert(CAPACITY_RESERVATION_ID.to_string(), id.clone());
    }
    if let Some(t) = &instance.capacity_reservation_type {
        labels.insert(CAPACITY_RESERVATION_TYPE.to_string(), t.clone());
    }
    labels.insert(HOSTNAME.to_string(), name.clone());
    labels.insert(NODEPOOL.to_string(), nodepool.name.clone());
    labels.insert(REGISTERED.to_string(), "true".to_string());

    let taints = nodeclaim_taints(nodepool);
    let node = Node {
        name,
        nodeclaim: Some(instance.launch.clone()),
        labels,
        annotations: BTreeMap::new(),
        taints,
        allocatable: instance_type.allocatable(),
        capacity: instance_type.capacity.clone(),
        in_flight: false,
        unschedulable: false,
        provider_id: Some(instance.provider_id()),
        created_ms: Some(registered_ms),
        ..Node::default()
    };
    (node, nodepool.startup_taints.clone())
}

/// What the actuator records on a NodeClaim at launch: the drift hashes
/// (`dovetail.sh/nodepool-hash`, `dovetail.sh/nodeclass-hash`) and the image, subnet, security
/// groups and enclave setting. The image is the EC2NodeClass's first resolved AMI (a placeholder
/// when none is resolved). The subnet is recorded only when the EC2NodeClass resolves a
/// single one: its status lists subnet ids and zones apart, so with several actuation cannot tell
/// which one a zone's instance used, and an unknown subnet is never drift where a wrong one
/// would be.
pub fn record_launch(node: &mut Node, nodepool: &NodePool, nodeclass: Option<&EC2NodeClass>) {
    node.annotations
        .insert(NODEPOOL_HASH.to_string(), nodepool.drift_hash());
    let Some(class) = nodeclass else {
        return;
    };
    node.annotations
        .insert(NODECLASS_HASH.to_string(), class.drift_hash());
    let status = &class.status;
    node.launched = LaunchedWith {
        image_id: Some(
            status
                .ami_ids
                .iter()
                .next()
                .cloned()
                .unwrap_or_else(|| UNRESOLVED_AMI_ID.to_string()),
        ),
        subnet_id: match status.subnet_ids.len() {
            1 => status.subnet_ids.iter().next().cloned(),
            _ => None,
        },
        security_group_ids: status.security_group_ids.iter().cloned().collect(),
        enclaves: Some(class.enclaves_enabled),
    };
}

/// Karpenter's registration: the Node of a launched NodeClaim has joined (with the
/// `karpenter.sh/unregistered:NoExecute` taint the kubelet registers it with). The taint is
/// removed and the NodeClaim marked `Registered`. False when no NodeClaim waits for this Node.
pub fn register_node(now_ms: i64, node: &str, cluster: &mut impl Cluster) -> bool {
    let claim = cluster
        .nodeclaims()
        .into_iter()
        .find(|c| !c.registered && c.node_name() == Some(node))
        .cloned();
    let Some(mut claim) = claim else {
        return false;
    };
    if cluster.node(node).is_none() {
        return false;
    }
    cluster.untaint_node(now_ms, node, UNREGISTERED_TAINT);
    claim.registered = true;
    cluster.update_nodeclaim(now_ms, claim);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_dataflow::model::{Effect, Requirement};

    #[test]
    fn nodeclaim_labels_are_what_karpenter_injects_into_user_data() {
        let pool = NodePool {
            name: "gpu".into(),
            template_labels: [("team".to_string(), "ml".to_string())].into(),
            ..Default::default()
        };
        let mut requirements = Requirements::new();
        for (key, values) in [
            ("example.com/tier", vec!["gold"]),
            ("example.com/any", vec!["a", "b"]),
            ("node.kubernetes.io/instance-type", vec!["p5.48xlarge"]),
            ("kubernetes.io/os", vec!["linux"]),
            ("topology.kubernetes.io/zone", vec!["us-east-1a"]),
            ("node-restriction.kubernetes.io/pool", vec!["secure"]),
            ("example.kubernetes.io/private", vec!["x"]),
        ] {
            requirements
                .0
                .insert(key.to_string(), Requirement::new(Operator::In, values));
        }
        let labels = nodeclaim_labels(&pool, &requirements, "spot");
        let expected: BTreeMap<String, String> = [
            ("example.com/tier", "gold"),
            ("karpenter.sh/capacity-type", "spot"),
            ("karpenter.sh/nodepool", "gpu"),
            ("node-restriction.kubernetes.io/pool", "secure"),
            ("team", "ml"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(labels, expected);
    }

    #[test]
    fn nodeclaim_taints_are_the_taints_then_the_startup_taints_once() {
        let taint = |key: &str| Taint {
            key: key.into(),
            value: String::new(),
            effect: Effect::NoSchedule,
        };
        let pool = NodePool {
            taints: vec![taint("a"), taint("b")],
            startup_taints: vec![taint("b"), taint("c")],
            ..Default::default()
        };
        let keys: Vec<String> = nodeclaim_taints(&pool).into_iter().map(|t| t.key).collect();
        assert_eq!(keys, ["a", "b", "c"]);
    }
}
