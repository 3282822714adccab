//! What the simulated cluster keeps per node and per pod; the scheduler's filters (`fit`) read
//! it as the cluster (`cluster`) writes it.

use crate::score::CpuMemory;
use dovetail_dataflow::model::{Node, Resources, SharedPod, Taint};
use std::collections::BTreeSet;

#[derive(Debug, Clone)]
pub(crate) struct NodeState {
    pub(crate) node: Node,
    pub(crate) startup_taints: Vec<Taint>,
    pub(crate) ready: bool,
    /// Sum of the effective requests of the pods bound here.
    pub(crate) requested: Resources,
    /// CPU and memory of the pods bound here as the LeastAllocated score counts them (a zero
    /// request as kube-scheduler's default).
    pub(crate) non_zero_requested: CpuMemory,
    pub(crate) pods: BTreeSet<String>,
    /// Changes whenever the pods bound here do, to a value no other node of the cluster has
    /// had: what is worked out from a node's pods can be kept by (name, version), even when a
    /// later node takes the name.
    pub(crate) pods_version: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct PodState {
    /// Shared with the facts the engine is told (see `Cluster::shared_pod`).
    pub(crate) pod: SharedPod,
    pub(crate) created_ms: i64,
    pub(crate) seq: u64,
    pub(crate) pending_since_ms: Option<i64>,
}
