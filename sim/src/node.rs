//! The Node a simulated instance registers as, as the kubelet and Karpenter would label and
//! taint it.
//!
//! Labels: every single-valued requirement of the instance type (instance type, arch, os,
//! region, family, size, cpu, memory, ...), the instance's zone, zone id and capacity type,
//! `kubernetes.io/hostname` (the node name), `karpenter.sh/nodepool`, the NodePool's template
//! labels and single-valued `In` requirements, and `karpenter.sh/registered=true`.
//! Taints: the NodePool's taints plus its startup taints; the startup taints are returned
//! separately so the cluster can remove them when the node is initialised.
//! Allocatable: the instance type's (capacity minus kube-reserved, system-reserved and the
//! eviction threshold).

use crate::instance::Instance;
use dovetail_dataflow::model::labels::{CAPACITY_TYPE, HOSTNAME, NODEPOOL, ZONE, ZONE_ID};
use dovetail_dataflow::model::{InstanceType, Node, NodePool, Operator, Requirements, Taint};
use std::collections::BTreeMap;

/// Set when the Node registers (Karpenter's `karpenter.sh/registered`).
pub const REGISTERED_LABEL: &str = "karpenter.sh/registered";
/// Set when the Node is initialised (Karpenter's `karpenter.sh/initialized`).
pub const INITIALIZED_LABEL: &str = "karpenter.sh/initialized";

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
    labels.insert(HOSTNAME.to_string(), name.clone());
    labels.insert(NODEPOOL.to_string(), nodepool.name.clone());
    labels.insert(REGISTERED_LABEL.to_string(), "true".to_string());

    let mut taints = nodepool.taints.clone();
    for t in &nodepool.startup_taints {
        if !taints.contains(t) {
            taints.push(t.clone());
        }
    }
    let node = Node {
        name,
        nodeclaim: Some(instance.launch.clone()),
        labels,
        annotations: BTreeMap::new(),
        taints,
        allocatable: instance_type.allocatable(),
        in_flight: false,
        unschedulable: false,
        provider_id: Some(instance.provider_id()),
        created_ms: Some(registered_ms),
        ..Node::default()
    };
    (node, nodepool.startup_taints.clone())
}
