//! The engine's view of nodes. A registered node is the cluster's Node as Karpenter reads it:
//! startup taints do not block scheduling (Karpenter ignores them when planning), `Ready` until
//! initialised is false, the NodeClaim's `lastPodEventTime` is carried. A NodeClaim launched and
//! not registered yet is its in-flight record. Changes are collected per node and sent once per
//! epoch.

use super::world::World;
use dovetail_dataflow::backend::Cloud;
use dovetail_dataflow::facts::Fact;
use dovetail_dataflow::model::labels::{INITIALIZED, NODEPOOL, UNREGISTERED_TAINT};
use dovetail_dataflow::model::Node;

impl<C: Cloud> World<C> {
    /// Sends the engine the current fact of every node changed since the last call.
    pub(crate) fn sync_nodes(&mut self) {
        for name in std::mem::take(&mut self.dirty_nodes) {
            match self.node_fact(&name) {
                Some(n) => self.control.set_fact(Fact::Node(n)),
                None => self.control.remove_fact(&format!("Node {name}")),
            }
        }
    }

    fn node_fact(&self, name: &str) -> Option<Node> {
        let Some(node) = self.cluster.node(name) else {
            // In flight: its startup taints do not block the pods planned onto it either.
            let claim = self
                .cluster
                .nodeclaim_of_node(name)
                .filter(|c| !c.registered)?;
            let mut n = claim.status.clone()?;
            n.taints.retain(|t| !claim.startup_taints.contains(t));
            return Some(n);
        };
        let mut n = node.clone();
        // Karpenter's scheduler ignores the ephemeral taint of a Node not registered yet.
        n.taints.retain(|t| t.key != UNREGISTERED_TAINT);
        if let Some(pool) = n
            .labels
            .get(NODEPOOL)
            .and_then(|p| self.control.actuator().nodepool(p))
        {
            n.taints.retain(|t| !pool.startup_taints.contains(t));
        }
        n.not_ready = !self.cluster.is_ready(name);
        // Expiry counts from the NodeClaim's creation, not the Node's registration.
        n.nodeclaim_created_ms = self.cluster.nodeclaim_of_node(name).map(|c| c.created_ms);
        // Joined but not initialized (`karpenter.sh/initialized` not yet `true`): still in
        // flight to disruption, as Karpenter's `StateNode.Initialized` reads it.
        n.in_flight = n.nodeclaim_created_ms.is_some()
            && n.labels.get(INITIALIZED).map(String::as_str) != Some("true");
        n.last_pod_event_ms = self.pod_events.get(name).copied();
        Some(n)
    }
}
