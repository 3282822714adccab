//! The engine's view of nodes. A registered node is the cluster's Node as Karpenter reads it:
//! startup taints do not block scheduling (Karpenter ignores them when planning), `Ready` until
//! initialised is false, the NodeClaim's `lastPodEventTime` is carried, and a node whose
//! instance is terminating is being deleted. A NodeClaim not registered yet is its in-flight
//! record. Changes are collected per node and sent once per epoch.

use super::world::World;
use dovetail_dataflow::facts::Fact;
use dovetail_dataflow::model::labels::NODEPOOL;
use dovetail_dataflow::model::Node;

impl World {
    /// Pod `key` was bound to `node` or left it at `now`. DaemonSet pods do not count, as in
    /// Karpenter's pod-events controller.
    pub(super) fn pod_event(&mut self, key: &str, node: &str, now: i64) {
        if self.cluster.pod(key).is_some_and(|p| p.is_daemon) {
            return;
        }
        self.pod_events.insert(node.to_string(), now);
        self.dirty_nodes.insert(node.to_string());
    }

    /// Sends the engine the current fact of every node changed since the last call.
    pub(super) fn sync_nodes(&mut self) {
        for name in std::mem::take(&mut self.dirty_nodes) {
            match self.node_fact(&name) {
                Some(n) => self.facts.set(Fact::Node(n)),
                None => self.facts.remove(&format!("Node {name}")),
            }
        }
    }

    fn node_fact(&self, name: &str) -> Option<Node> {
        let Some(node) = self.cluster.node(name) else {
            return self.in_flight.get(name).cloned();
        };
        let mut n = node.clone();
        if let Some(pool) = n.labels.get(NODEPOOL).and_then(|p| self.nodepools.get(p)) {
            n.taints.retain(|t| !pool.startup_taints.contains(t));
        }
        n.not_ready = !self.cluster.is_ready(name);
        n.last_pod_event_ms = self.pod_events.get(name).copied();
        n.deleting = self.deleting.contains(name);
        Some(n)
    }
}
