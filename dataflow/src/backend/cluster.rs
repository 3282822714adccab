//! `Cluster`: what actuation asks of Kubernetes — NodeClaims, Node labels, taints and
//! annotations, evictions, events.

use super::nodeclaim::NodeClaim;
use crate::model::{Node, Pod, Taint};
use serde::{Deserialize, Serialize};

/// A Kubernetes Event actuation records (`kubectl get events`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterEvent {
    /// `Node/NAME`, `NodeClaim/NAME`, `Pod/NS/NAME`.
    pub object: String,
    pub reason: String,
    pub message: String,
}

/// What came of a call, collected by [`Cluster::poll_replies`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClusterReply {
    /// The eviction API refused (HTTP 429: a PodDisruptionBudget allows no disruption now).
    EvictionRefused { pod: String, reason: String },
    /// A write failed; `object` names what it was for.
    Failed { object: String, error: String },
}

/// Kubernetes, as actuation sees it. Writes are submitted and return at once; reads come from
/// the backend's watch cache. See [`crate::backend`].
pub trait Cluster {
    /// Every NodeClaim that exists.
    fn nodeclaims(&self) -> Vec<&NodeClaim>;
    fn nodeclaim(&self, name: &str) -> Option<&NodeClaim>;
    /// Creates a NodeClaim (its name must be unused).
    fn create_nodeclaim(&mut self, now_ms: i64, claim: NodeClaim);
    /// Replaces a NodeClaim's status, annotations and cordon.
    fn update_nodeclaim(&mut self, now_ms: i64, claim: NodeClaim);
    fn delete_nodeclaim(&mut self, now_ms: i64, name: &str);

    fn node(&self, name: &str) -> Option<&Node>;
    /// The Node's `Ready` condition is true (and it is initialised).
    fn node_ready(&self, name: &str) -> bool;
    /// Pods bound to a node, by key.
    fn pods_on(&self, node: &str) -> Vec<&Pod>;
    fn taint_node(&mut self, now_ms: i64, node: &str, taint: Taint);
    /// Removes every taint with this key.
    fn untaint_node(&mut self, now_ms: i64, node: &str, key: &str);
    fn annotate_node(&mut self, now_ms: i64, node: &str, key: &str, value: &str);
    /// `spec.unschedulable = true`.
    fn cordon(&mut self, now_ms: i64, node: &str);
    /// Marks the Node for deletion; it stays (finalizer) until its instance is gone.
    fn delete_node(&mut self, now_ms: i64, node: &str);
    /// Evicts a pod through the Eviction API: a PodDisruptionBudget may refuse it
    /// ([`ClusterReply::EvictionRefused`]).
    fn evict(&mut self, now_ms: i64, pod: &str);
    /// Records a Kubernetes Event.
    fn record_event(&mut self, _now_ms: i64, _event: ClusterEvent) {}
    /// The answers to writes submitted so far that have arrived by `now_ms`.
    fn poll_replies(&mut self, now_ms: i64) -> Vec<ClusterReply>;
}
