//! The live cluster as actuation's [`Cluster`]: reads come from a cache the watches keep (Nodes,
//! the pods the engine sees, NodePools) and from the NodeClaims this controller wrote or read
//! back at start; writes go to the API server through the [`ClusterWriter`] and are applied to
//! the cache at once, as the API server will have them, so the next decision sees them without
//! waiting for the watch to echo them.
//!
//! It also does what Karpenter's NodeClaim controllers do beside the engine: registration (a Node
//! whose NodeClaim launched joins: labels and taints synced, finalizer added, the unregistered
//! taint removed), initialisation (Ready, startup taints gone), and the end of a node (its
//! instance gone: finalizers off, Node and NodeClaim deleted). And it turns Nodes and in-flight
//! NodeClaims into the engine's node facts, as the replay's simulated cluster does.

use crate::eviction_backoff::EvictionBackoff;
use crate::nodeclaim::{ConditionTimes, NodeClaimTemplate};
use crate::watch::FactUpdate;
use crate::writes::ClusterWriter;
use dovetail_dataflow::backend::{Cluster, ClusterEvent, ClusterReply, NodeClaim};
use dovetail_dataflow::facts::Fact;
use dovetail_dataflow::model::duration::parse_duration;
use dovetail_dataflow::model::labels::{NODEPOOL, UNREGISTERED_TAINT};
use dovetail_dataflow::model::{Node, NodePool, Pod, Resources, SharedPod, Taint};
use std::collections::{BTreeMap, BTreeSet};

/// See the module documentation.
pub struct KubeCluster {
    writer: ClusterWriter,
    nodeclaims: BTreeMap<String, NodeClaim>,
    /// Node name → the NodeClaim launched for it.
    claim_by_node: BTreeMap<String, String>,
    /// When each NodeClaim's conditions became true (its status's `lastTransitionTime`s).
    times: BTreeMap<String, ConditionTimes>,
    /// Nodes as the watch last read them (with this controller's writes applied).
    nodes: BTreeMap<String, Node>,
    /// Pods the engine sees, by `namespace/name`.
    pods: BTreeMap<String, SharedPod>,
    pods_by_node: BTreeMap<String, BTreeSet<String>>,
    nodepools: BTreeMap<String, NodePool>,
    /// Every fact key passed on to the engine, by kind: what a relist replaces.
    keys_by_kind: BTreeMap<&'static str, BTreeSet<String>>,
    /// When a pod was last bound to or removed from each node (`status.lastPodEventTime`).
    pod_events: BTreeMap<String, i64>,
    /// Nodes whose engine fact must be sent again.
    dirty: BTreeSet<String>,
    replies: Vec<ClusterReply>,
    evictions: EvictionBackoff,
}

/// What the controller counts of the cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterCounts {
    pub nodeclaims: usize,
    pub nodes: usize,
    pub pods_bound: usize,
    pub pods_pending: usize,
}

fn kind_of(key: &str) -> &'static str {
    match key.split_once(' ').map(|(k, _)| k) {
        Some("Pod") => "Pod",
        Some("Node") => "Node",
        Some("NodePool") => "NodePool",
        Some("EC2NodeClass") => "EC2NodeClass",
        Some("NodeOverlay") => "NodeOverlay",
        Some("DaemonSet") => "DaemonSet",
        Some("PodDisruptionBudget") => "PodDisruptionBudget",
        _ => "other",
    }
}

impl KubeCluster {
    pub fn new(writer: ClusterWriter) -> KubeCluster {
        KubeCluster {
            writer,
            nodeclaims: BTreeMap::new(),
            claim_by_node: BTreeMap::new(),
            times: BTreeMap::new(),
            nodes: BTreeMap::new(),
            pods: BTreeMap::new(),
            pods_by_node: BTreeMap::new(),
            nodepools: BTreeMap::new(),
            keys_by_kind: BTreeMap::new(),
            pod_events: BTreeMap::new(),
            dirty: BTreeSet::new(),
            replies: Vec::new(),
            evictions: EvictionBackoff::default(),
        }
    }

    pub fn writer(&self) -> &ClusterWriter {
        &self.writer
    }

    /// A NodeClaim found on the API server at start (or on a take-over): kept as this
    /// controller's own, so recovery finishes its launch instead of launching again. `read` is
    /// what its conditions say ([`crate::nodeclaim::condition_times`]); a NodeClaim without
    /// conditions has its creation stand in, registered ones counting as initialised.
    pub fn adopt(&mut self, claim: NodeClaim, read: Option<ConditionTimes>) {
        let since = Some(claim.created_ms);
        let times = match read {
            Some(t) => ConditionTimes {
                launched_ms: claim.status.as_ref().and(t.launched_ms.or(since)),
                registered_ms: t.registered_ms.or(since).filter(|_| claim.registered),
                initialized_ms: t.initialized_ms.filter(|_| claim.registered),
                ..t
            },
            None => ConditionTimes {
                launched_ms: claim.status.as_ref().and(since),
                registered_ms: since.filter(|_| claim.registered),
                initialized_ms: since.filter(|_| claim.registered),
                drifted_ms: None,
                consolidatable_ms: None,
            },
        };
        self.times.insert(claim.name.clone(), times);
        if let Some(node) = &claim.status {
            if let Some(ms) = node.last_pod_event_ms {
                self.pod_events.entry(node.name.clone()).or_insert(ms);
            }
        }
        self.index(&claim);
        self.nodeclaims.insert(claim.name.clone(), claim);
    }

    /// Takes one watch update into the cache; returns the changes for the engine (a relist
    /// becomes the sets and removals it amounts to). Nodes are kept back: their engine facts
    /// come from [`KubeCluster::take_node_facts`], merged with their NodeClaims.
    pub fn observe(&mut self, now_ms: i64, update: FactUpdate) -> Vec<FactUpdate> {
        match update {
            FactUpdate::Set(fact) => self.set(now_ms, *fact, false).into_iter().collect(),
            FactUpdate::Remove(key) => self.remove(now_ms, &key).into_iter().collect(),
            FactUpdate::Replace { kind, facts } => {
                let kind_name = kind.kind;
                let mut stale = self
                    .keys_by_kind
                    .get(kind_name)
                    .cloned()
                    .unwrap_or_default();
                if kind_name == "Node" {
                    stale = self.nodes.keys().map(|n| format!("Node {n}")).collect();
                }
                let mut out = Vec::new();
                for fact in facts {
                    stale.remove(&fact.describe());
                    out.extend(self.set(now_ms, fact, true));
                }
                for key in stale {
                    out.extend(self.remove(now_ms, &key));
                }
                out
            }
        }
    }

    /// `listed`: the fact comes from a relist, where a pod seen bound for the first time was
    /// bound at some unknown earlier time (at start, every bound pod is), which is no pod
    /// event: the NodeClaim's `lastPodEventTime` read back says when the last one was.
    fn set(&mut self, now_ms: i64, fact: Fact, listed: bool) -> Option<FactUpdate> {
        let key = fact.describe();
        match &fact {
            Fact::Node(n) => {
                self.dirty.insert(n.name.clone());
                self.nodes.insert(n.name.clone(), n.clone());
                return None;
            }
            Fact::Pod(p) => {
                let pod_key = p.key();
                let old = self.pods.insert(pod_key.clone(), p.clone());
                let event = old.is_some() || !listed;
                let before = old.and_then(|o| o.node_name.clone());
                if before != p.node_name {
                    if let Some(b) = &before {
                        self.unbind(now_ms, &pod_key, b);
                    }
                    if let Some(n) = &p.node_name {
                        self.pods_by_node
                            .entry(n.clone())
                            .or_default()
                            .insert(pod_key);
                        if event {
                            self.pod_event(now_ms, n);
                        } else {
                            self.dirty.insert(n.clone());
                        }
                    }
                }
            }
            Fact::NodePool(p) => {
                self.nodepools.insert(p.name.clone(), p.clone());
            }
            _ => {}
        }
        self.keys_by_kind
            .entry(kind_of(&key))
            .or_default()
            .insert(key);
        Some(FactUpdate::Set(Box::new(fact)))
    }

    fn remove(&mut self, now_ms: i64, key: &str) -> Option<FactUpdate> {
        if let Some(node) = key.strip_prefix("Node ") {
            self.nodes.remove(node);
            self.dirty.insert(node.to_string());
            return None;
        }
        if let Some(pod) = key.strip_prefix("Pod ") {
            self.evictions.forget(pod);
            if let Some(n) = self.pods.remove(pod).and_then(|p| p.node_name.clone()) {
                self.unbind(now_ms, pod, &n);
            }
        }
        if let Some(pool) = key.strip_prefix("NodePool ") {
            self.nodepools.remove(pool);
        }
        let known = self
            .keys_by_kind
            .get_mut(kind_of(key))
            .is_some_and(|keys| keys.remove(key));
        known.then(|| FactUpdate::Remove(key.to_string()))
    }

    fn unbind(&mut self, now_ms: i64, pod: &str, node: &str) {
        if let Some(set) = self.pods_by_node.get_mut(node) {
            set.remove(pod);
            if set.is_empty() {
                self.pods_by_node.remove(node);
            }
        }
        self.pod_event(now_ms, node);
    }

    fn pod_event(&mut self, now_ms: i64, node: &str) {
        self.pod_events.insert(node.to_string(), now_ms);
        self.dirty.insert(node.to_string());
    }

    fn index(&mut self, claim: &NodeClaim) {
        if let Some(node) = claim.node_name() {
            self.claim_by_node
                .insert(node.to_string(), claim.name.clone());
            self.dirty.insert(node.to_string());
        }
    }

    fn unindex(&mut self, claim: &NodeClaim) {
        if let Some(node) = claim.node_name() {
            if self.claim_by_node.get(node) == Some(&claim.name) {
                self.claim_by_node.remove(node);
            }
            self.dirty.insert(node.to_string());
        }
    }

    /// Marks the NodeClaim `claim` drifted or not (as [`crate::drifted::DriftedClaims`] says);
    /// its status is written when that changes.
    pub fn set_drifted(&mut self, now_ms: i64, claim: &str, drifted: bool) {
        let Some(c) = self.nodeclaims.get(claim) else {
            return;
        };
        let times = self.times.entry(claim.to_string()).or_default();
        if times.drifted_ms.is_some() == drifted {
            return;
        }
        times.drifted_ms = drifted.then_some(now_ms);
        self.writer.update_nodeclaim(c, times);
    }

    /// The NodeClaim launched for the Node `node`.
    pub fn nodeclaim_of_node(&self, node: &str) -> Option<&NodeClaim> {
        self.nodeclaims.get(self.claim_by_node.get(node)?)
    }

    /// The engine's view of every node changed since the last call: a joined Node as Karpenter's
    /// scheduler reads it (the unregistered and startup taints ignored, what its NodeClaim
    /// recorded at launch, its last pod event), or a launched NodeClaim not joined yet as its
    /// in-flight node; `None` retracts it.
    pub fn take_node_facts(&mut self) -> Vec<(String, Option<Node>)> {
        std::mem::take(&mut self.dirty)
            .into_iter()
            .map(|name| {
                let fact = self.node_fact(&name);
                (name, fact)
            })
            .collect()
    }

    fn node_fact(&self, name: &str) -> Option<Node> {
        let claim = self.nodeclaim_of_node(name);
        let Some(node) = self.nodes.get(name) else {
            // In flight: its startup taints do not block the pods planned onto it either.
            let claim = claim.filter(|c| !c.registered)?;
            let mut n = claim.status.clone()?;
            n.taints.retain(|t| !claim.startup_taints.contains(t));
            return Some(n);
        };
        let mut n = node.clone();
        n.taints.retain(|t| t.key != UNREGISTERED_TAINT);
        let startup: Vec<Taint> = match claim {
            Some(c) => c.startup_taints.clone(),
            None => n
                .labels
                .get(NODEPOOL)
                .and_then(|p| self.nodepools.get(p))
                .map(|p| p.startup_taints.clone())
                .unwrap_or_default(),
        };
        n.taints.retain(|t| !startup.contains(t));
        if let Some(c) = claim {
            // Joined but not initialized: still in flight to disruption, as Karpenter's
            // `StateNode.Initialized` reads it (not a candidate, not counted in budgets, and a
            // command whose pods would land on it waits).
            n.in_flight = !self.is_initialized(&c.name);
            n.nodeclaim = Some(c.name.clone());
            n.nodeclaim_created_ms = Some(c.created_ms);
            if let Some(launched) = &c.status {
                for (k, v) in &launched.annotations {
                    n.annotations.entry(k.clone()).or_insert_with(|| v.clone());
                }
                n.launched = launched.launched.clone();
                n.expire_after = launched.expire_after.clone();
            }
        }
        n.last_pod_event_ms = self.pod_events.get(name).copied();
        Some(n)
    }

    /// Karpenter's registration of every Node that joined for a launched NodeClaim: its labels
    /// and taints (not its startup taints) synced onto the Node, the finalizer added, the unregistered taint removed, the
    /// NodeClaim marked `Registered`. Returns the Nodes registered.
    pub fn register_joined(&mut self, now_ms: i64) -> Vec<String> {
        let joined: Vec<String> = self
            .nodeclaims
            .values()
            .filter(|c| !c.registered)
            .filter_map(|c| c.node_name())
            .filter(|n| self.nodes.contains_key(*n))
            .map(str::to_string)
            .collect();
        for node in &joined {
            let Some(mut claim) = self.nodeclaim_of_node(node).cloned() else {
                continue;
            };
            let Some(launched) = &claim.status else {
                continue;
            };
            // The kubelet registered with the startup taints; whatever owns them may have
            // removed them already, so they are not put back.
            let taints: Vec<Taint> = launched
                .taints
                .iter()
                .filter(|t| !claim.startup_taints.contains(t))
                .cloned()
                .collect();
            self.writer
                .register_node(node, launched.labels.clone(), taints);
            if let Some(n) = self.nodes.get_mut(node) {
                n.taints.retain(|t| t.key != UNREGISTERED_TAINT);
                for (k, v) in &launched.labels {
                    n.labels.insert(k.clone(), v.clone());
                }
            }
            claim.registered = true;
            if let Some(s) = claim.status.as_mut() {
                s.in_flight = false;
            }
            let times = self.times.entry(claim.name.clone()).or_default();
            times.registered_ms = Some(now_ms);
            self.writer.update_nodeclaim(&claim, times);
            self.nodeclaims.insert(claim.name.clone(), claim);
            self.dirty.insert(node.clone());
            tracing::info!(node = %node, "registered");
        }
        joined
    }

    /// Marks `Initialized` (and `Ready`) every registered NodeClaim whose Node is Ready with its
    /// startup taints gone. Returns the NodeClaims initialised.
    pub fn initialize_ready(&mut self, now_ms: i64) -> Vec<String> {
        let ready: Vec<String> = self
            .nodeclaims
            .values()
            .filter(|c| c.registered && !self.is_initialized(&c.name))
            .filter(|c| {
                c.node_name()
                    .and_then(|n| self.nodes.get(n))
                    .is_some_and(|n| {
                        !n.not_ready && !n.taints.iter().any(|t| c.startup_taints.contains(t))
                    })
            })
            .map(|c| c.name.clone())
            .collect();
        for name in &ready {
            let times = self.times.entry(name.clone()).or_default();
            times.initialized_ms = Some(now_ms);
            if let Some(claim) = self.nodeclaims.get(name) {
                self.writer.update_nodeclaim(claim, times);
                // Its node fact is no longer in flight.
                if let Some(node) = claim.node_name() {
                    self.dirty.insert(node.to_string());
                }
            }
        }
        ready
    }

    /// Karpenter's `Consolidatable` condition: an initialised NodeClaim is consolidatable once
    /// its NodePool's `consolidateAfter` (not `Never`) has passed since its last pod event (a pod
    /// bound to or removed from its Node), or since it was initialised if it has had none. Its
    /// status (with `lastPodEventTime`) is written when that changes; returns how many changed.
    pub fn mark_consolidatable(&mut self, now_ms: i64) -> usize {
        let mut changed = Vec::new();
        for (name, claim) in &self.nodeclaims {
            let times = self.times.get(name).copied().unwrap_or_default();
            let after = self
                .nodepools
                .get(&claim.nodepool)
                .and_then(|p| p.disruption.consolidate_after.as_deref())
                .and_then(|d| parse_duration(d).ok().flatten());
            let last_event = claim.node_name().and_then(|n| self.pod_events.get(n));
            let since = last_event.copied().or(times.initialized_ms);
            let now = claim.registered
                && times.initialized_ms.is_some()
                && after.is_some_and(|a| since.is_some_and(|s| now_ms.saturating_sub(s) >= a));
            if now != times.consolidatable_ms.is_some() {
                changed.push((name.clone(), now, last_event.copied()));
            }
        }
        for (name, consolidatable, last_event) in &changed {
            let times = self.times.entry(name.clone()).or_default();
            times.consolidatable_ms = consolidatable.then_some(now_ms);
            if let Some(mut claim) = self.nodeclaims.get(name).cloned() {
                if let Some(node) = claim.status.as_mut() {
                    node.last_pod_event_ms = *last_event;
                }
                self.writer.update_nodeclaim(&claim, times);
            }
        }
        changed.len()
    }

    /// NodeClaims launched (an instance recorded) whose Node has not joined within `ttl_ms` of
    /// their creation: Karpenter's registration timeout gives them up.
    pub fn unregistered_past(&self, now_ms: i64, ttl_ms: i64) -> Vec<String> {
        self.nodeclaims
            .values()
            .filter(|c| c.status.is_some() && !c.registered)
            .filter(|c| now_ms.saturating_sub(c.created_ms) > ttl_ms)
            .map(|c| c.name.clone())
            .collect()
    }

    /// Each NodePool's NodeClaims: their capacity summed, and how many (launched ones only:
    /// one not launched has no size yet), for every NodePool the watch knows.
    pub fn nodepool_usage(&self) -> BTreeMap<String, (Resources, usize)> {
        let mut usage: BTreeMap<String, (Resources, usize)> = self
            .nodepools
            .keys()
            .map(|p| (p.clone(), (Resources::default(), 0)))
            .collect();
        for c in self.nodeclaims.values() {
            let (Some(node), Some(u)) = (&c.status, usage.get_mut(&c.nodepool)) else {
                continue;
            };
            let size = if node.capacity.is_zero() {
                &node.allocatable
            } else {
                &node.capacity
            };
            u.0.add_assign(size);
            u.1 += 1;
        }
        usage
    }

    /// Whether the NodeClaim's Node is initialised.
    pub fn is_initialized(&self, claim: &str) -> bool {
        self.times
            .get(claim)
            .is_some_and(|t| t.initialized_ms.is_some())
    }

    /// The instance behind Node `node` is gone: its finalizers come off and the Node and its
    /// NodeClaim are deleted.
    pub fn instance_gone(&mut self, node: &str) {
        if let Some(claim) = self.claim_by_node.get(node).cloned() {
            self.forget_claim(&claim);
            self.writer.delete_nodeclaim(&claim);
        }
        if self.nodes.remove(node).is_some() {
            self.writer.remove_node(node);
        }
        self.dirty.insert(node.to_string());
    }

    fn forget_claim(&mut self, name: &str) {
        if let Some(old) = self.nodeclaims.remove(name) {
            self.unindex(&old);
        }
        self.times.remove(name);
    }

    /// What the cache holds now.
    pub fn counts(&self) -> ClusterCounts {
        // Per node, not per pod: the metrics read this every second.
        let bound = self.pods_by_node.values().map(BTreeSet::len).sum();
        ClusterCounts {
            nodeclaims: self.nodeclaims.len(),
            nodes: self.nodes.len(),
            pods_bound: bound,
            pods_pending: self.pods.len() - bound,
        }
    }
}

impl Cluster for KubeCluster {
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
        let template = NodeClaimTemplate::of(self.nodepools.get(&claim.nodepool));
        if let Err(error) = self.writer.create_nodeclaim_now(&claim, template) {
            tracing::warn!(nodeclaim = %claim.name, %error, "creating the NodeClaim failed");
            self.replies.push(ClusterReply::Failed {
                object: format!("NodeClaim/{}", claim.name),
                error: error.to_string(),
            });
            return;
        }
        self.index(&claim);
        self.nodeclaims.insert(claim.name.clone(), claim);
    }

    fn update_nodeclaim(&mut self, now_ms: i64, claim: NodeClaim) {
        let Some(old) = self.nodeclaims.remove(&claim.name) else {
            self.replies.push(ClusterReply::Failed {
                object: format!("NodeClaim/{}", claim.name),
                error: "not found".to_string(),
            });
            return;
        };
        self.unindex(&old);
        let times = self.times.entry(claim.name.clone()).or_default();
        if claim.status.is_some() && times.launched_ms.is_none() {
            times.launched_ms = Some(now_ms);
        }
        if claim.registered && times.registered_ms.is_none() {
            times.registered_ms = Some(now_ms);
        }
        self.writer.update_nodeclaim(&claim, times);
        self.index(&claim);
        self.nodeclaims.insert(claim.name.clone(), claim);
    }

    fn delete_nodeclaim(&mut self, _now_ms: i64, name: &str) {
        self.forget_claim(name);
        self.writer.delete_nodeclaim(name);
    }

    fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.get(name)
    }

    fn node_ready(&self, name: &str) -> bool {
        self.nodes.get(name).is_some_and(|n| !n.not_ready)
    }

    fn pods_on(&self, node: &str) -> Vec<&Pod> {
        self.pods_by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|k| self.pods.get(k).map(|p| &**p))
            .collect()
    }

    fn taint_node(&mut self, _now_ms: i64, node: &str, taint: Taint) {
        if let Some(n) = self.nodes.get_mut(node) {
            if !n.taints.contains(&taint) {
                n.taints.push(taint.clone());
            }
            self.dirty.insert(node.to_string());
        }
        self.writer.taint_node(node, taint);
    }

    fn untaint_node(&mut self, _now_ms: i64, node: &str, key: &str) {
        if let Some(n) = self.nodes.get_mut(node) {
            n.taints.retain(|t| t.key != key);
            self.dirty.insert(node.to_string());
        }
        self.writer.untaint_node(node, key);
    }

    fn annotate_node(&mut self, _now_ms: i64, node: &str, key: &str, value: &str) {
        if let Some(n) = self.nodes.get_mut(node) {
            n.annotations.insert(key.to_string(), value.to_string());
            self.dirty.insert(node.to_string());
        }
        self.writer.annotate_node(node, key, value);
    }

    fn cordon(&mut self, _now_ms: i64, node: &str) {
        if let Some(n) = self.nodes.get_mut(node) {
            if n.unschedulable {
                return;
            }
            n.unschedulable = true;
            self.dirty.insert(node.to_string());
        }
        self.writer.cordon(node);
    }

    fn delete_node(&mut self, _now_ms: i64, node: &str) {
        if let Some(n) = self.nodes.get_mut(node) {
            n.deleting = true;
            n.unschedulable = true;
            self.dirty.insert(node.to_string());
        }
        self.writer.delete_node(node);
    }

    fn evict(&mut self, now_ms: i64, pod: &str) {
        if self.evictions.due(now_ms, pod) {
            self.writer.evict(pod);
        }
    }

    fn record_event(&mut self, now_ms: i64, event: ClusterEvent) {
        self.writer.record_event(&event, now_ms);
    }

    fn poll_replies(&mut self, _now_ms: i64) -> Vec<ClusterReply> {
        let mut out = std::mem::take(&mut self.replies);
        out.extend(self.writer.poll_replies());
        out
    }
}
