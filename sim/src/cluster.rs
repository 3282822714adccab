//! `SimCluster`: a stand-in for kube-scheduler and the kubelet.
//!
//! - Nodes arrive when they register ([`SimCluster::add_node`]), are not schedulable until
//!   initialised ([`SimCluster::mark_ready`], which also removes the startup taints), and leave
//!   when their instance is gone ([`SimCluster::remove_node`]): their pods become pending again,
//!   as their controllers recreate them (DaemonSet pods go with the node).
//! - Pods arrive pending (or bound, if they name an existing node) and are bound by
//!   [`SimCluster::schedule`]: pending pods by priority (highest first), then arrival, each to the
//!   node it fits (see [`crate::fit`] for the filters) that kube-scheduler's default scores rank
//!   highest (see [`crate::score`]).
//! - Nodes can be tainted ([`SimCluster::taint`], e.g. `karpenter.sh/disrupted` while a
//!   disruption runs) and annotated; the scheduler honours the taints.
//! - Draining ([`SimCluster::evict_for_drain`]) cordons the node and evicts its pods through the
//!   eviction API's PodDisruptionBudget check (see [`crate::pdb`]); an evicted pod is pending
//!   again.
//! - Each time a pod goes from pending to bound, the time it waited is recorded
//!   ([`SimCluster::pending_durations`]).

use crate::bound_counts::BoundCounts;
use crate::fit::{effective_requests, MatchCache, PodFit, Unfit};
use crate::pdb::{disruptions_allowed, EvictionRefused};
use crate::score::{CpuMemory, PodScore};
use crate::state::{NodeState, PodState};
use dovetail_dataflow::backend::{ClusterReply, NodeClaim};
use dovetail_dataflow::model::{Node, Pod, PodDisruptionBudget, Resources, SharedPod, Taint};
use serde::{Deserialize, Serialize};
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};

/// Why a cluster call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    #[error("no node {0}")]
    UnknownNode(String),
    #[error("node {0} already exists")]
    DuplicateNode(String),
    #[error("no pod {0}")]
    UnknownPod(String),
    #[error("pod {0} already exists")]
    DuplicatePod(String),
}

/// A pod the drain could not evict, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocked {
    pub pod: String,
    pub reason: EvictionRefused,
}

/// What a drain did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainOutcome {
    /// Evicted pods, now pending (as their replacements would be).
    pub evicted: Vec<Pod>,
    /// Pods a PodDisruptionBudget kept on the node.
    pub blocked: Vec<Blocked>,
}

/// Simulated kube-scheduler and kubelet state.
#[derive(Debug, Clone, Default)]
pub struct SimCluster {
    pub(crate) nodes: BTreeMap<String, NodeState>,
    pub(crate) pods: BTreeMap<String, PodState>,
    /// Bound pods with required anti-affinity terms (for the symmetric check).
    anti_holders: BTreeSet<String>,
    /// Bound pods per node by the selectors scheduling has asked about, kept as pods bind.
    pub(crate) bound_counts: BoundCounts,
    pending_durations: Vec<i64>,
    next_seq: u64,
    /// The last [`NodeState::pods_version`] given out.
    pods_versions: u64,
    pub(crate) nodeclaims: BTreeMap<String, NodeClaim>,
    /// NodeClaim name by the name of the Node it registers as.
    pub(crate) claim_by_node: BTreeMap<String, String>,
    /// The PodDisruptionBudgets the Eviction API enforces, by `namespace/name`.
    pub(crate) pdbs: BTreeMap<String, PodDisruptionBudget>,
    /// What changed since the last [`SimCluster::take_changes`] (the cluster's watch).
    pub(crate) changes: ClusterChanges,
    pub(crate) replies: Vec<ClusterReply>,
}

/// What changed in the cluster, as a watch would report it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterChanges {
    /// Pods created, bound, unbound or deleted, by key.
    pub pods: BTreeSet<String>,
    /// Nodes (and in-flight NodeClaims, by the Node name they register as) changed.
    pub nodes: BTreeSet<String>,
    /// Nodes a pod other than a DaemonSet pod was bound to or removed from (Karpenter's
    /// `status.lastPodEventTime`).
    pub pod_events: BTreeSet<String>,
}

/// Pods with equal namespace, labels and scheduling spec fit the same nodes.
fn same_class(a: &Pod, b: &Pod) -> bool {
    a.namespace == b.namespace && a.labels == b.labels && a.scheduling == b.scheduling
}

fn class_hash(p: &Pod) -> u64 {
    let mut h = DefaultHasher::new();
    p.namespace.hash(&mut h);
    p.labels.hash(&mut h);
    p.scheduling.hash(&mut h);
    h.finish()
}

impl SimCluster {
    pub fn new() -> SimCluster {
        SimCluster::default()
    }

    /// A registered Node, not yet Ready. `startup_taints` are removed by [`Self::mark_ready`].
    pub fn add_node(&mut self, node: Node, startup_taints: Vec<Taint>) -> Result<(), ClusterError> {
        if self.nodes.contains_key(&node.name) {
            return Err(ClusterError::DuplicateNode(node.name));
        }
        self.touch_node(&node.name);
        self.pods_versions += 1;
        self.nodes.insert(
            node.name.clone(),
            NodeState {
                node,
                startup_taints,
                ready: false,
                requested: Resources::default(),
                non_zero_requested: CpuMemory::default(),
                pods: BTreeSet::new(),
                pods_version: self.pods_versions,
            },
        );
        Ok(())
    }

    /// The node is initialised: Ready, startup taints removed, `karpenter.sh/initialized=true`.
    pub fn mark_ready(&mut self, name: &str) -> Result<(), ClusterError> {
        let n = self.node_state_mut(name)?;
        n.ready = true;
        let startup = std::mem::take(&mut n.startup_taints);
        n.node.taints.retain(|t| !startup.contains(t));
        n.node.in_flight = false;
        n.node.labels.insert(
            dovetail_dataflow::model::labels::INITIALIZED.to_string(),
            "true".to_string(),
        );
        Ok(())
    }

    /// Cordons (`true`) or uncordons a node.
    pub fn set_unschedulable(
        &mut self,
        name: &str,
        unschedulable: bool,
    ) -> Result<(), ClusterError> {
        self.node_state_mut(name)?.node.unschedulable = unschedulable;
        Ok(())
    }

    /// Adds `taint` to a node, unless it already has a taint with the same key and effect.
    pub fn taint(&mut self, name: &str, taint: Taint) -> Result<(), ClusterError> {
        let node = &mut self.node_state_mut(name)?.node;
        if !node
            .taints
            .iter()
            .any(|t| t.key == taint.key && t.effect == taint.effect)
        {
            node.taints.push(taint);
        }
        Ok(())
    }

    /// Removes every taint with this key from a node.
    pub fn untaint(&mut self, name: &str, key: &str) -> Result<(), ClusterError> {
        self.node_state_mut(name)?
            .node
            .taints
            .retain(|t| t.key != key);
        Ok(())
    }

    /// Sets an annotation on a node.
    pub fn annotate(&mut self, name: &str, key: &str, value: &str) -> Result<(), ClusterError> {
        self.node_state_mut(name)?
            .node
            .annotations
            .insert(key.to_string(), value.to_string());
        Ok(())
    }

    /// Deletes a node. Its pods are pending again from `now_ms` (and returned), except DaemonSet
    /// pods, which are deleted with it.
    pub fn remove_node(&mut self, now_ms: i64, name: &str) -> Result<Vec<Pod>, ClusterError> {
        let state = self
            .nodes
            .remove(name)
            .ok_or_else(|| ClusterError::UnknownNode(name.to_string()))?;
        self.touch_node(name);
        self.bound_counts.node_removed(name);
        let mut repending = Vec::new();
        for key in state.pods {
            self.changes.pods.insert(key.clone());
            self.anti_holders.remove(&key);
            let daemon = self.pods.get(&key).is_some_and(|p| p.pod.is_daemon);
            if daemon {
                self.pods.remove(&key);
                continue;
            }
            if let Some(p) = self.pods.get_mut(&key) {
                p.pod.make_mut().node_name = None;
                p.pending_since_ms = Some(now_ms);
                repending.push(Pod::clone(&p.pod));
            }
        }
        Ok(repending)
    }

    /// A new pod at `now_ms`: bound at once if it names an existing node (the kubelet admitted
    /// it before the simulation saw it), pending otherwise.
    pub fn add_pod(&mut self, now_ms: i64, mut pod: Pod) -> Result<(), ClusterError> {
        let key = pod.key();
        if self.pods.contains_key(&key) {
            return Err(ClusterError::DuplicatePod(key));
        }
        let target = pod.node_name.take().filter(|n| self.nodes.contains_key(n));
        self.changes.pods.insert(key.clone());
        let seq = self.next_seq;
        self.next_seq += 1;
        self.pods.insert(
            key.clone(),
            PodState {
                pod: pod.into(),
                created_ms: now_ms,
                seq,
                pending_since_ms: Some(now_ms),
            },
        );
        if let Some(node) = target {
            self.bind(&key, &node, None);
        }
        Ok(())
    }

    /// Deletes a pod by `namespace/name` and returns it. A pod deleted while pending records no
    /// pending time.
    pub fn delete_pod(&mut self, key: &str) -> Result<Pod, ClusterError> {
        self.unbind(key, None);
        self.changes.pods.insert(key.to_string());
        self.anti_holders.remove(key);
        self.pods
            .remove(key)
            .map(|p| p.pod.into_inner())
            .ok_or_else(|| ClusterError::UnknownPod(key.to_string()))
    }

    /// Binds pending pods (highest priority first, then oldest), each to the Ready node it fits
    /// that kube-scheduler's default scores rank highest (see [`crate::score`]; the first by
    /// name among equals). Returns the bindings made, `(pod key, node name)`, in order.
    pub fn schedule(&mut self, now_ms: i64) -> Vec<(String, String)> {
        let mut order: Vec<(std::cmp::Reverse<i32>, i64, u64, String)> = self
            .pods
            .iter()
            .filter(|(_, p)| p.pod.node_name.is_none())
            .map(|(k, p)| {
                (
                    std::cmp::Reverse(p.pod.scheduling.priority),
                    p.created_ms,
                    p.seq,
                    k.clone(),
                )
            })
            .collect();
        order.sort();
        let candidates: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.ready && !n.node.unschedulable)
            .map(|(k, _)| k.clone())
            .collect();
        let mut out = Vec::new();
        // Classes that fit nowhere since the last binding (nothing has changed for them).
        let mut failed: HashMap<u64, Vec<String>> = HashMap::new();
        let mut cache = MatchCache::default();
        for (_, _, _, key) in order {
            let Some(state) = self.pods.get(&key) else {
                continue;
            };
            let pod = &state.pod;
            let class = class_hash(pod);
            let known_failure = failed.get(&class).is_some_and(|reps| {
                reps.iter()
                    .filter_map(|r| self.pods.get(r))
                    .any(|r| same_class(&r.pod, pod))
            });
            if known_failure {
                continue;
            }
            let target = {
                let fit = PodFit::new(
                    pod,
                    &self.nodes,
                    &self.pods,
                    &self.anti_holders,
                    &mut self.bound_counts,
                    &mut cache,
                );
                let score = PodScore::new(pod);
                // The highest score wins; among equals the first by name (candidates are in
                // name order and only a strictly higher score replaces the best).
                let mut best: Option<(i64, &String)> = None;
                for name in &candidates {
                    let Some(s) = self.nodes.get(name) else {
                        continue;
                    };
                    if fit.check(s).is_err() {
                        continue;
                    }
                    let total = score.score(s);
                    if best.is_none_or(|(b, _)| total > b) {
                        best = Some((total, name));
                    }
                }
                best.map(|(_, n)| n.clone())
            };
            match target {
                Some(node) => {
                    self.bind(&key, &node, Some(now_ms));
                    if let (Some(p), Some(n)) = (self.pods.get(&key), self.nodes.get(&node)) {
                        cache.on_bind(&p.pod, &n.node.labels);
                    }
                    out.push((key, node));
                    failed.clear();
                }
                None => failed.entry(class).or_default().push(key),
            }
        }
        out
    }

    /// Drains a node: cordons it, then evicts its pods (by key; DaemonSet pods stay) through the
    /// PodDisruptionBudgets `pdbs` (see [`SimCluster::eviction_verdict`]).
    pub fn evict_for_drain(
        &mut self,
        now_ms: i64,
        node: &str,
        pdbs: &[PodDisruptionBudget],
    ) -> Result<DrainOutcome, ClusterError> {
        let state = self.node_state_mut(node)?;
        state.node.unschedulable = true;
        let keys: Vec<String> = state.pods.iter().cloned().collect();
        let mut outcome = DrainOutcome::default();
        for key in keys {
            match self.pods.get(&key) {
                Some(p) if !p.pod.is_daemon => {}
                _ => continue,
            }
            match self.eviction_verdict(&key, pdbs.iter()) {
                Ok(()) => {
                    self.unbind(&key, Some(now_ms));
                    if let Some(p) = self.pods.get(&key) {
                        outcome.evicted.push(Pod::clone(&p.pod));
                    }
                }
                Err(reason) => outcome.blocked.push(Blocked { pod: key, reason }),
            }
        }
        Ok(outcome)
    }

    /// Whether the Eviction API lets pod `key` go now. A pod that more than one budget selects
    /// cannot be evicted (the API refuses it), nor one whose budget allows no disruption now or
    /// cannot be read.
    pub(crate) fn eviction_verdict<'a>(
        &self,
        key: &str,
        pdbs: impl Iterator<Item = &'a PodDisruptionBudget>,
    ) -> Result<(), EvictionRefused> {
        let Some(p) = self.pods.get(key) else {
            return Err(EvictionRefused::UnknownPod {
                pod: key.to_string(),
            });
        };
        let selecting: Vec<&PodDisruptionBudget> = pdbs
            .filter(|b| b.namespace == p.pod.namespace && b.selector.matches(&p.pod.labels))
            .collect();
        match selecting.as_slice() {
            [] => Ok(()),
            [b] => {
                let (expected, healthy) = self.budget_counts(b);
                match disruptions_allowed(b, expected, healthy) {
                    Ok(n) if n >= 1 => Ok(()),
                    Ok(_) => Err(EvictionRefused::NoDisruptionAllowed {
                        namespace: b.namespace.clone(),
                        name: b.name.clone(),
                        healthy,
                        expected,
                    }),
                    Err(e) => Err(e),
                }
            }
            many => Err(EvictionRefused::SeveralBudgets { count: many.len() }),
        }
    }

    /// Evicts one pod through the budgets the cluster holds: it is pending again from `now_ms`.
    pub fn evict_pod(&mut self, now_ms: i64, key: &str) -> Result<(), EvictionRefused> {
        self.eviction_verdict(key, self.pdbs.values())?;
        self.unbind(key, Some(now_ms));
        Ok(())
    }

    /// Why a pod does not fit a node now (`None`: it fits).
    pub fn why_not(&self, pod_key: &str, node: &str) -> Result<Option<Unfit>, ClusterError> {
        let p = self
            .pods
            .get(pod_key)
            .ok_or_else(|| ClusterError::UnknownPod(pod_key.to_string()))?;
        let n = self
            .nodes
            .get(node)
            .ok_or_else(|| ClusterError::UnknownNode(node.to_string()))?;
        // Read-only: the kept counts are not to hand, so this one call works them out.
        let fit = PodFit::new(
            &p.pod,
            &self.nodes,
            &self.pods,
            &self.anti_holders,
            &mut BoundCounts::default(),
            &mut MatchCache::default(),
        );
        Ok(fit.check(n).err())
    }

    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.get(name).map(|n| &n.node)
    }

    /// Every node, by name.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values().map(|n| &n.node)
    }

    pub fn is_ready(&self, name: &str) -> bool {
        self.nodes.get(name).is_some_and(|n| n.ready)
    }

    /// A value that changes whenever the pods bound to the node do, and that no other node of
    /// this cluster ever had (see [`NodeState::pods_version`]).
    pub fn pods_version(&self, name: &str) -> Option<u64> {
        self.nodes.get(name).map(|n| n.pods_version)
    }

    /// What the pods bound to a node request in total.
    pub fn requested_on(&self, name: &str) -> Option<&Resources> {
        self.nodes.get(name).map(|n| &n.requested)
    }

    pub fn pod(&self, key: &str) -> Option<&Pod> {
        self.pods.get(key).map(|p| &*p.pod)
    }

    /// [`Cluster::pod`] as the engine's facts share it, not copied.
    pub fn shared_pod(&self, key: &str) -> Option<&SharedPod> {
        self.pods.get(key).map(|p| &p.pod)
    }

    /// Every pod, by key.
    pub fn pods(&self) -> impl Iterator<Item = &Pod> {
        self.pods.values().map(|p| &*p.pod)
    }

    /// Whether a pod other than a DaemonSet pod is bound to the node.
    pub fn runs_workload(&self, node: &str) -> bool {
        self.nodes.get(node).is_some_and(|n| {
            n.pods
                .iter()
                .any(|k| self.pods.get(k).is_some_and(|p| !p.pod.is_daemon))
        })
    }

    /// Pods bound to a node, by key.
    pub fn pods_on(&self, node: &str) -> Vec<&Pod> {
        self.nodes
            .get(node)
            .map(|n| {
                n.pods
                    .iter()
                    .filter_map(|k| self.pods.get(k).map(|p| &*p.pod))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Pending pods with the time each became pending, by key.
    pub fn pending(&self) -> Vec<(&Pod, i64)> {
        self.pods
            .values()
            .filter(|p| p.pod.node_name.is_none())
            .filter_map(|p| p.pending_since_ms.map(|t| (&*p.pod, t)))
            .collect()
    }

    /// How long each binding waited (ms from becoming pending to bound), in binding order.
    pub fn pending_durations(&self) -> &[i64] {
        &self.pending_durations
    }

    /// A node to change: recorded as changed.
    fn node_state_mut(&mut self, name: &str) -> Result<&mut NodeState, ClusterError> {
        if self.nodes.contains_key(name) {
            self.changes.nodes.insert(name.to_string());
        }
        self.nodes
            .get_mut(name)
            .ok_or_else(|| ClusterError::UnknownNode(name.to_string()))
    }

    pub(crate) fn touch_node(&mut self, name: &str) {
        self.changes.nodes.insert(name.to_string());
    }

    /// What changed since the last call (pods, nodes, pod events), as a watch reports it.
    pub fn take_changes(&mut self) -> ClusterChanges {
        std::mem::take(&mut self.changes)
    }

    /// (selected pods, selected pods bound to a Ready node) for a budget.
    fn budget_counts(&self, b: &PodDisruptionBudget) -> (i64, i64) {
        let mut expected = 0;
        let mut healthy = 0;
        for p in self.pods.values() {
            if p.pod.namespace != b.namespace || !b.selector.matches(&p.pod.labels) {
                continue;
            }
            expected += 1;
            if p.pod.node_name.as_ref().is_some_and(|n| self.is_ready(n)) {
                healthy += 1;
            }
        }
        (expected, healthy)
    }

    /// Binds a pod; with `now_ms`, records how long it was pending.
    fn bind(&mut self, key: &str, node: &str, now_ms: Option<i64>) {
        let (Some(p), Some(n)) = (self.pods.get_mut(key), self.nodes.get_mut(node)) else {
            return;
        };
        n.requested.add_assign(&effective_requests(&p.pod));
        n.non_zero_requested = n
            .non_zero_requested
            .plus(CpuMemory::non_zero(&p.pod.scheduling.requests));
        n.pods.insert(key.to_string());
        self.pods_versions += 1;
        n.pods_version = self.pods_versions;
        self.bound_counts.bound(&p.pod, node);
        p.pod.make_mut().node_name = Some(node.to_string());
        self.changes.pods.insert(key.to_string());
        self.changes.nodes.insert(node.to_string());
        if !p.pod.is_daemon {
            self.changes.pod_events.insert(node.to_string());
        }
        let since = p.pending_since_ms.take();
        if let (Some(now), Some(since)) = (now_ms, since) {
            self.pending_durations.push(now - since);
        }
        if !p.pod.scheduling.pod_anti_affinity.is_empty() {
            self.anti_holders.insert(key.to_string());
        }
    }

    /// Unbinds a bound pod; with `now_ms`, it is pending from then.
    fn unbind(&mut self, key: &str, now_ms: Option<i64>) {
        let Some(p) = self.pods.get_mut(key) else {
            return;
        };
        let Some(node) = p.pod.node_name.clone() else {
            return;
        };
        self.bound_counts.unbound(&p.pod, &node);
        p.pod.make_mut().node_name = None;
        p.pending_since_ms = now_ms;
        self.changes.pods.insert(key.to_string());
        self.changes.nodes.insert(node.clone());
        if !p.pod.is_daemon {
            self.changes.pod_events.insert(node.clone());
        }
        self.anti_holders.remove(key);
        if let Some(n) = self.nodes.get_mut(&node) {
            n.requested = n.requested.sub(&effective_requests(&p.pod));
            n.non_zero_requested = n
                .non_zero_requested
                .minus(CpuMemory::non_zero(&p.pod.scheduling.requests));
            n.pods.remove(key);
            self.pods_versions += 1;
            n.pods_version = self.pods_versions;
        }
    }
}
