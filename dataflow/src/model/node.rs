//! Existing capacity: Nodes and in-flight NodeClaims, and DaemonSets that put pods on them.

use super::pod::PodScheduling;
use super::resources::Resources;
use super::taints::Taint;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A Node, or a NodeClaim that has no Node yet (in flight): capacity pods can be bound to.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Node {
    pub name: String,
    /// The NodeClaim that launched it, if any.
    pub nodeclaim: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub allocatable: Resources,
    /// `status.capacity`: what NodePool limits count, as Karpenter sums node capacity into a
    /// NodePool's `status.resources`. Empty when unknown; allocatable counts instead.
    pub capacity: Resources,
    /// True for a NodeClaim not yet registered as a Node.
    pub in_flight: bool,
    /// `spec.unschedulable` (cordoned) or marked for deletion.
    pub unschedulable: bool,
    /// `spec.providerID`, e.g. `aws:///us-east-1a/i-0123`.
    pub provider_id: Option<String>,
    /// `metadata.creationTimestamp` in milliseconds since the epoch, when known.
    pub created_ms: Option<i64>,
    /// The NodeClaim's `metadata.creationTimestamp` (ms), when its NodeClaim was read: a node
    /// expires `expireAfter` after its NodeClaim was created, not after it registered.
    pub nodeclaim_created_ms: Option<i64>,
    /// Marked for deletion (`metadata.deletionTimestamp`): already being disrupted.
    pub deleting: bool,
    /// The `Ready` condition is not `True` (counts against disruption budgets).
    pub not_ready: bool,
    /// What the NodeClaim was launched with, for drift.
    pub launched: LaunchedWith,
    /// The NodeClaim's `status.lastPodEventTime` (ms): when a pod was last bound to or removed
    /// from the node. `None`: no pod event yet (the node's creation counts instead).
    pub last_pod_event_ms: Option<i64>,
    /// The NodeClaim's `spec.expireAfter` (`720h`, `Never`, …), which Karpenter copies from the
    /// NodePool when it creates the claim: a node expires by it, not by the NodePool's current
    /// value. `None`: not known (no NodeClaim read), and the NodePool's value counts.
    pub expire_after: Option<String>,
}

/// A node as the queries' streams carry it: one copy shared by the operators that read it.
pub type SharedNode = super::shared::Shared<Node>;

/// What an instance was launched with: the NodeClaim's `status.imageID`, and the subnet and
/// security groups dovetail's actuator records in its own annotations (`dovetail.sh/subnet-id`,
/// `dovetail.sh/security-group-ids`). Unknown values are never drift.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LaunchedWith {
    pub image_id: Option<String>,
    pub subnet_id: Option<String>,
    pub security_group_ids: Vec<String>,
    /// Whether Nitro Enclaves were enabled (`None`: unknown).
    pub enclaves: Option<bool>,
}

impl Node {
    /// What the node charges against its NodePool's limits: its capacity, or its allocatable
    /// when the capacity is not known.
    pub fn limit_usage(&self) -> &Resources {
        if self.capacity.is_zero() {
            &self.allocatable
        } else {
            &self.capacity
        }
    }
}

/// A DaemonSet's pod template: it lands on every node whose labels and taints admit it, and its
/// requests are per-node overhead.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DaemonSet {
    pub namespace: String,
    pub name: String,
    pub scheduling: PodScheduling,
}

/// A PodDisruptionBudget, reduced to its selector and how many disruptions it allows.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PodDisruptionBudget {
    pub namespace: String,
    pub name: String,
    pub selector: super::selector::LabelSelector,
    /// `minAvailable` / `maxUnavailable` as written (`"1"`, `"50%"`).
    pub min_available: Option<String>,
    pub max_unavailable: Option<String>,
}
