//! Facts: what sources tell the engine. Each fact is inserted (+1) or retracted (−1) at an
//! epoch; an update is a retraction of the old fact and an insertion of the new one.

use crate::backend::OfferingKey;
use crate::model::{
    DaemonSet, EC2NodeClass, InstanceType, Node, NodeOverlay, NodePool, PodDisruptionBudget,
    SharedPod,
};
use serde::{Deserialize, Serialize};

/// One input record of the engine.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Fact {
    /// Shared, not copied, between the fact set that holds it, the changes sent to the engine
    /// and the queries' pod stream: at 100,000 pods each copy was ~300 MiB.
    Pod(SharedPod),
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
    /// An EC2 event about one instance (from the SQS interruption queue, or the simulator).
    Interruption(Interruption),
    /// The engine's logical clock, to the minute (budget schedules are cron, minute-grained).
    /// The engine harness keeps exactly one, so queries never read a wall clock.
    Clock(Minute),
    /// A feature gate, as Karpenter's `--feature-gates` (e.g. `SpotToSpotConsolidation`).
    FeatureGate {
        name: String,
        enabled: bool,
    },
    /// An offering answered with a capacity error (or its spot instance was interrupted) at
    /// `at_ms`: unavailable on the engine's clock until `until_ms` (Karpenter's 3-minute
    /// unavailable-offerings cache), then offered again, with no one polling a wall clock.
    CapacityError {
        offering: OfferingKey,
        at_ms: i64,
        until_ms: i64,
    },
}

/// A point in time rounded down to the minute, in ms since the epoch.
pub type Minute = i64;

/// What EC2 said is about to happen to an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum InterruptionKind {
    /// Spot interruption warning (two minutes).
    SpotInterruption,
    /// An AWS Health scheduled change (maintenance, retirement).
    ScheduledChange,
    /// The instance is stopping or terminating.
    StateChange,
    /// An On-Demand Capacity Reservation is being reclaimed.
    CapacityReservationInterruption,
    /// A capacity block ends at `at_ms`; EC2 starts reclaiming 30 minutes before.
    CapacityBlockEnding,
    /// EC2 suggests rebalancing: recorded, no action (as Karpenter).
    RebalanceRecommendation,
}

/// An interruption message about one instance.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Interruption {
    /// The instance id (`i-0123…`), or a Node or NodeClaim name.
    pub target: String,
    pub kind: InterruptionKind,
    /// When the message was sent; for a capacity block, when the block ends.
    pub at_ms: i64,
}

impl Interruption {
    /// Whether the message is about this node: by instance id (the end of its provider id),
    /// node name or NodeClaim name.
    pub fn is_about(&self, node: &Node) -> bool {
        node.name == self.target
            || node.nodeclaim.as_deref() == Some(self.target.as_str())
            || node
                .provider_id
                .as_deref()
                .is_some_and(|p| p.rsplit('/').next() == Some(self.target.as_str()))
    }
}

/// How [`Fact::describe`] names the capacity error of an offering (one at a time per offering).
pub fn capacity_error_key(offering: &OfferingKey) -> String {
    format!("capacity error {offering}")
}

/// How [`Fact::describe`] names an applied object of Kubernetes `kind`: `name` for a
/// cluster-scoped object, `namespace/name` for a namespaced one. A driver that keeps facts by
/// this name (the replay) finds a deleted object's fact with it.
pub fn object_key(kind: &str, name: &str) -> String {
    format!("{kind} {name}")
}

impl Fact {
    /// The kind and identity of the fact, for logs and errors.
    pub fn describe(&self) -> String {
        match self {
            Fact::Pod(p) => format!("Pod {}", p.key()),
            Fact::Node(n) => format!("Node {}", n.name),
            Fact::NodePool(p) => object_key("NodePool", &p.name),
            Fact::NodeClass(c) => object_key("EC2NodeClass", &c.name),
            Fact::InstanceType {
                node_class,
                instance_type,
            } => format!("instance type {} for {node_class}", instance_type.name),
            Fact::Overlay(o) => object_key("NodeOverlay", &o.name),
            Fact::DaemonSet(d) => object_key("DaemonSet", &format!("{}/{}", d.namespace, d.name)),
            Fact::Pdb(p) => object_key(
                "PodDisruptionBudget",
                &format!("{}/{}", p.namespace, p.name),
            ),
            Fact::Interruption(i) => format!("{:?} for {}", i.kind, i.target),
            Fact::Clock(m) => format!("clock at {m} ms"),
            Fact::FeatureGate { name, enabled } => format!("feature gate {name}={enabled}"),
            Fact::CapacityError { offering, .. } => capacity_error_key(offering),
        }
    }
}
