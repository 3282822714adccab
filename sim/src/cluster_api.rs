//! The simulated cluster as a [`Cluster`]: NodeClaims kept as the API server keeps them, the
//! kubelet's registration of a NodeClaim's Node, and writes carried out at once.

use crate::cluster::SimCluster;
use dovetail_dataflow::backend::{Cluster, ClusterReply, NodeClaim};
use dovetail_dataflow::model::labels::UNREGISTERED_TAINT;
use dovetail_dataflow::model::{Effect, Node, Pod, PodDisruptionBudget, Taint};

impl SimCluster {
    /// Enforces `pdb` on evictions from now on (replacing one of the same namespace and name).
    pub fn set_pdb(&mut self, pdb: PodDisruptionBudget) {
        self.pdbs
            .insert(format!("{}/{}", pdb.namespace, pdb.name), pdb);
    }

    /// Stops enforcing the budget `namespace/name`.
    pub fn remove_pdb(&mut self, key: &str) {
        self.pdbs.remove(key);
    }

    /// The kubelet registers the Node of the NodeClaim that will be `node` at `at_ms`, as the
    /// NodeClaim's status describes it (labels, taints, annotations, capacity, passed to it in
    /// user data) plus `karpenter.sh/unregistered:NoExecute` (`--register-with-taints`), which
    /// actuation's registration removes; not schedulable until [`SimCluster::mark_ready`].
    /// False when no launched NodeClaim names that Node.
    pub fn register(&mut self, node: &str, at_ms: i64) -> bool {
        let Some(claim) = self
            .claim_by_node
            .get(node)
            .and_then(|c| self.nodeclaims.get(c))
        else {
            return false;
        };
        let Some(mut n) = claim.status.clone() else {
            return false;
        };
        n.in_flight = false;
        n.created_ms = Some(at_ms);
        n.taints.push(Taint {
            key: UNREGISTERED_TAINT.to_string(),
            value: String::new(),
            effect: Effect::NoExecute,
        });
        let startup = claim.startup_taints.clone();
        self.add_node(n, startup).is_ok()
    }

    /// The NodeClaim that launched (or will register as) `node`.
    pub fn nodeclaim_of_node(&self, node: &str) -> Option<&NodeClaim> {
        self.nodeclaims.get(self.claim_by_node.get(node)?)
    }

    /// NodeClaims launched whose Node has not registered, as the Node each will be.
    pub fn in_flight(&self) -> impl Iterator<Item = &Node> {
        self.nodeclaims
            .values()
            .filter(|c| !c.registered)
            .filter_map(|c| c.status.as_ref())
    }

    /// Removes a Node and its NodeClaim (the instance is gone); its pods are pending again.
    pub fn remove_node_and_claim(&mut self, now_ms: i64, node: &str) -> Vec<Pod> {
        if let Some(claim) = self.claim_by_node.remove(node) {
            self.nodeclaims.remove(&claim);
        }
        self.touch_node(node);
        self.remove_node(now_ms, node).unwrap_or_default()
    }

    fn index(&mut self, claim: &NodeClaim) {
        if let Some(node) = claim.node_name() {
            self.claim_by_node
                .insert(node.to_string(), claim.name.clone());
            self.touch_node(node);
        }
    }

    fn unindex(&mut self, claim: &NodeClaim) {
        if let Some(node) = claim.node_name() {
            if self.claim_by_node.get(node) == Some(&claim.name) {
                self.claim_by_node.remove(node);
            }
            self.touch_node(node);
        }
    }
}

impl Cluster for SimCluster {
    fn nodeclaims(&self) -> Vec<&NodeClaim> {
        self.nodeclaims.values().collect()
    }

    fn nodeclaim(&self, name: &str) -> Option<&NodeClaim> {
        self.nodeclaims.get(name)
    }

    fn create_nodeclaim(&mut self, _now_ms: i64, claim: NodeClaim) {
        if self.nodeclaims.contains_key(&claim.name) {
            self.replies.push(ClusterReply::Failed {
                object: format!("NodeClaim/{}", claim.name),
                error: "already exists".to_string(),
            });
            return;
        }
        self.index(&claim);
        self.nodeclaims.insert(claim.name.clone(), claim);
    }

    fn update_nodeclaim(&mut self, _now_ms: i64, claim: NodeClaim) {
        let Some(old) = self.nodeclaims.remove(&claim.name) else {
            self.replies.push(ClusterReply::Failed {
                object: format!("NodeClaim/{}", claim.name),
                error: "not found".to_string(),
            });
            return;
        };
        self.unindex(&old);
        self.index(&claim);
        self.nodeclaims.insert(claim.name.clone(), claim);
    }

    fn delete_nodeclaim(&mut self, _now_ms: i64, name: &str) {
        if let Some(old) = self.nodeclaims.remove(name) {
            self.unindex(&old);
        }
    }

    fn node(&self, name: &str) -> Option<&Node> {
        SimCluster::node(self, name)
    }

    fn node_ready(&self, name: &str) -> bool {
        self.is_ready(name)
    }

    fn pods_on(&self, node: &str) -> Vec<&Pod> {
        SimCluster::pods_on(self, node)
    }

    fn taint_node(&mut self, _now_ms: i64, node: &str, taint: Taint) {
        if let Err(e) = self.taint(node, taint) {
            self.replies.push(failed(node, e));
        }
    }

    fn untaint_node(&mut self, _now_ms: i64, node: &str, key: &str) {
        if let Err(e) = self.untaint(node, key) {
            self.replies.push(failed(node, e));
        }
    }

    fn annotate_node(&mut self, _now_ms: i64, node: &str, key: &str, value: &str) {
        if let Err(e) = self.annotate(node, key, value) {
            self.replies.push(failed(node, e));
        }
    }

    fn cordon(&mut self, _now_ms: i64, node: &str) {
        if let Err(e) = self.set_unschedulable(node, true) {
            self.replies.push(failed(node, e));
        }
    }

    fn delete_node(&mut self, _now_ms: i64, node: &str) {
        match self.nodes.get_mut(node) {
            Some(n) => {
                n.node.deleting = true;
                self.touch_node(node);
            }
            None => self.touch_node(node),
        }
    }

    fn evict(&mut self, now_ms: i64, pod: &str) {
        if let Err(reason) = self.evict_pod(now_ms, pod) {
            self.replies.push(ClusterReply::EvictionRefused {
                pod: pod.to_string(),
                reason: reason.to_string(),
            });
        }
    }

    fn poll_replies(&mut self, _now_ms: i64) -> Vec<ClusterReply> {
        std::mem::take(&mut self.replies)
    }
}

fn failed(node: &str, e: impl std::fmt::Display) -> ClusterReply {
    ClusterReply::Failed {
        object: format!("Node/{node}"),
        error: e.to_string(),
    }
}
