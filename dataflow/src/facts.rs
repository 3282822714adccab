//! Facts: what sources tell the engine. Each fact is inserted (+1) or retracted (−1) at an
//! epoch; an update is a retraction of the old fact and an insertion of the new one.

use crate::model::{
    DaemonSet, EC2NodeClass, InstanceType, Node, NodeOverlay, NodePool, Pod, PodDisruptionBudget,
};
use serde::{Deserialize, Serialize};

/// One input record of the engine.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Fact {
    Pod(Pod),
    Node(Node),
    NodePool(NodePool),
    NodeClass(EC2NodeClass),
    /// An instance type as a given EC2NodeClass resolves it (its kubelet settings change
    /// allocatable; its subnets restrict zones). Price and availability changes are updates of
    /// this fact.
    InstanceType {
        node_class: String,
        instance_type: InstanceType,
    },
    Overlay(NodeOverlay),
    DaemonSet(DaemonSet),
    Pdb(PodDisruptionBudget),
}

impl Fact {
    /// The kind and identity of the fact, for logs and errors.
    pub fn describe(&self) -> String {
        match self {
            Fact::Pod(p) => format!("Pod {}", p.key()),
            Fact::Node(n) => format!("Node {}", n.name),
            Fact::NodePool(p) => format!("NodePool {}", p.name),
            Fact::NodeClass(c) => format!("EC2NodeClass {}", c.name),
            Fact::InstanceType {
                node_class,
                instance_type,
            } => format!("instance type {} for {node_class}", instance_type.name),
            Fact::Overlay(o) => format!("NodeOverlay {}", o.name),
            Fact::DaemonSet(d) => format!("DaemonSet {}/{}", d.namespace, d.name),
            Fact::Pdb(p) => format!("PodDisruptionBudget {}/{}", p.namespace, p.name),
        }
    }
}
