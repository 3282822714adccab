//! Draining a node, as Karpenter's terminator does: it is cordoned, then its pods are evicted
//! through the Eviction API (a PodDisruptionBudget may refuse; asked again on a later step) in
//! groups: pods that are not critical first, then critical ones (priority of
//! `system-cluster-critical` or above), a group only once the one before it has left.
//! DaemonSet pods stay: their controller would put them back, and they go with the instance.
//!
//! The NodePool's `terminationGracePeriod` bounds the wait: once it has passed since the drain
//! started, the drain is over whatever is left, and the node is terminated. Karpenter deletes
//! those pods first; here they go with the instance (the API server's pod garbage collector
//! removes them once the Node is gone).

use crate::actuator::Actuator;
use dovetail_dataflow::backend::Cluster;
use dovetail_dataflow::model::duration::parse_duration;
use dovetail_dataflow::model::labels::NODEPOOL;
use dovetail_dataflow::model::Pod;
use std::collections::BTreeMap;

/// `system-cluster-critical`'s priority: pods at or above it are evicted last.
const CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// When each node's drain started, for its NodePool's `terminationGracePeriod`.
#[derive(Debug, Default)]
pub(crate) struct Drains {
    started: BTreeMap<String, i64>,
}

impl Drains {
    /// The node goes back to service: a later drain starts its grace period afresh.
    pub(crate) fn forget(&mut self, node: &str) {
        self.started.remove(node);
    }
}

impl Actuator {
    /// One step of draining `node`; true when it may be terminated (no pod but DaemonSet pods
    /// is left, or its `terminationGracePeriod` has passed).
    pub fn drain(&mut self, now: i64, node: &str, cluster: &mut impl Cluster) -> bool {
        let started = *self.drains.started.entry(node.to_string()).or_insert(now);
        cluster.cordon(now, node);
        let left: Vec<(bool, String)> = cluster
            .pods_on(node)
            .iter()
            .filter(|p| !p.is_daemon)
            .map(|p| (critical(p), p.key()))
            .collect();
        if left.is_empty() {
            self.drains.started.remove(node);
            return true;
        }
        if let Some(grace) = self.termination_grace_ms(node, cluster) {
            if now.saturating_sub(started) >= grace {
                tracing::warn!(
                    %node,
                    pods = left.len(),
                    "terminationGracePeriod has passed: terminating with pods still on it"
                );
                self.stats.drains_forced += 1;
                self.drains.started.remove(node);
                return true;
            }
        }
        let group = left.iter().any(|(c, _)| !c);
        for (_, pod) in left.iter().filter(|(c, _)| *c != group) {
            cluster.evict(now, pod);
        }
        // A cluster that evicts at once (the simulated one) may be empty already.
        let empty = cluster.pods_on(node).iter().all(|p| p.is_daemon);
        if empty {
            self.drains.started.remove(node);
        }
        empty
    }

    /// The node's NodePool's `terminationGracePeriod` in ms; `None` when it has none (drains
    /// wait as long as they must).
    fn termination_grace_ms(&self, node: &str, cluster: &impl Cluster) -> Option<i64> {
        let pool = cluster.node(node)?.labels.get(NODEPOOL)?;
        let text = self
            .nodepools
            .get(pool)?
            .termination_grace_period
            .as_deref()?;
        parse_duration(text).ok().flatten()
    }
}

fn critical(pod: &Pod) -> bool {
    pod.scheduling.priority >= CRITICAL_PRIORITY
}
