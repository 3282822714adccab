//! Executing the engine's disruption decisions, as Karpenter's disruption queue and termination
//! controller do.
//!
//! - A command starts when the engine decides it (a `Disruption` with a command and no blocker)
//!   and its nodes are registered and not disrupting already: its replacements are launched like
//!   any launch, then its nodes are tainted `karpenter.sh/disrupted:NoSchedule`. The taint takes
//!   them out of the engine's candidates, so the command's decisions are retracted at the next
//!   epoch; what started goes on.
//! - Consolidation commands (Empty, Underutilized) are validated as Karpenter validates them:
//!   one starts only once the engine has held it for 15 s, and at most one starts per 15 s
//!   (Karpenter's loop waits for the validation). Others start as soon as they are decided.
//! - Interrupted and Expired nodes are drained at once. Graceful commands (Empty, Drifted,
//!   Underutilized) touch only initialised nodes that are not another command's replacements,
//!   and wait until every replacement is initialised (Karpenter pre-spins them) before draining.
//!   A replacement that cannot be launched, or is gone before it is ready, abandons the command:
//!   the taint comes off, replacements without pods are terminated, and the engine decides again
//!   (the same command is retried after a poll interval, as Karpenter's next loop would).
//! - A graceful command waits while the engine plans a pending pod onto one of its nodes (a
//!   `Binding` to it): Karpenter keeps a node nominated for a pending pod out of disruption, so
//!   the pod is not left without the node kube-scheduler is about to bind it to.
//! - Draining evicts through the PodDisruptionBudgets; a pod they keep is retried at the next
//!   step. A node with no pods left is terminated. Evicted pods are pending and the engine
//!   rebinds them, e.g. onto the replacements.
//! - A node of a command still waiting for replacements that gets an interruption warning is
//!   drained at once: it is not a candidate any more, so the engine will not decide it.

mod execute;

use dovetail_dataflow::decisions::{Decision, Disruption, DisruptionReason, Launch};
use dovetail_dataflow::model::labels::DISRUPTED_TAINT;
use dovetail_dataflow::model::{Effect, Taint};
use std::collections::{BTreeMap, BTreeSet};

/// Karpenter's disruption loop polls this often; timers in the engine fire only when its
/// clock advances, so a driver advances it at least this often while nodes exist.
pub const POLL_INTERVAL_MS: i64 = 10_000;

pub(crate) fn disrupted_taint() -> Taint {
    Taint {
        key: DISRUPTED_TAINT.to_string(),
        value: String::new(),
        effect: Effect::NoSchedule,
    }
}

fn forceful(reason: DisruptionReason) -> bool {
    matches!(
        reason,
        DisruptionReason::Interrupted | DisruptionReason::Expired
    )
}

fn consolidation(reason: DisruptionReason) -> bool {
    matches!(
        reason,
        DisruptionReason::Empty | DisruptionReason::Underutilized
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Its replacements' CreateFleet calls are not all answered yet; nothing is tainted.
    Launching,
    /// Waiting for every replacement to be initialised.
    Replacing,
    Draining,
}

#[derive(Debug)]
struct Command {
    reason: DisruptionReason,
    nodes: BTreeSet<String>,
    /// Launch names of the replacements, as launched.
    replacements: Vec<String>,
    phase: Phase,
    /// Nodes to drain before the phase says so (an interruption warning came).
    drain_now: BTreeSet<String>,
    /// A replacement could not be launched.
    failed: bool,
}

/// A command the engine decided and actuation has not started.
struct Decided {
    id: String,
    reason: DisruptionReason,
    nodes: BTreeSet<String>,
    replacements: Vec<String>,
}

/// The engine's current disruption decisions and the commands in progress.
#[derive(Default)]
pub(crate) struct Disruptions {
    /// Unblocked disruptions the engine holds now, with multiplicity.
    decided: BTreeMap<Disruption, isize>,
    /// Replacement launches the engine holds now, by name.
    replacements: BTreeMap<String, BTreeMap<Launch, isize>>,
    /// NodeClaims to annotate with drift hashes: (NodeClaim, NodePool hash, EC2NodeClass hash).
    adopt: Vec<(String, String, String)>,
    active: BTreeMap<String, Command>,
    /// Commands that failed, not to be retried before the given time.
    retry_at: BTreeMap<String, i64>,
    /// Since when the engine has held each (node, reason) in an unblocked disruption.
    decided_since: BTreeMap<(String, DisruptionReason), i64>,
    /// When the last consolidation command started.
    last_consolidation_ms: Option<i64>,
    /// Pending pods the engine plans onto each node or launch now (its `Binding`s), with
    /// multiplicity.
    nominated: BTreeMap<String, isize>,
}

fn bump<K: Ord + Clone>(m: &mut BTreeMap<K, isize>, k: &K, r: isize) {
    let e = m.entry(k.clone()).or_insert(0);
    *e += r;
    if *e == 0 {
        m.remove(k);
    }
}

impl Disruptions {
    /// Takes in one epoch's diffs; returns the names of the replacement launches the engine
    /// holds, which only their command may launch.
    pub(crate) fn observe(&mut self, now: i64, diffs: &[(Decision, isize)]) -> BTreeSet<String> {
        for (d, r) in diffs {
            match d {
                Decision::Disruption(x) if x.command.is_some() && x.blocked_by.is_none() => {
                    bump(&mut self.decided, x, *r)
                }
                Decision::Binding { target, .. } => bump(&mut self.nominated, target, *r),
                Decision::Adopt {
                    nodeclaim,
                    nodepool_hash,
                    nodeclass_hash,
                } if *r > 0 => self.adopt.push((
                    nodeclaim.clone(),
                    nodepool_hash.clone(),
                    nodeclass_hash.clone(),
                )),
                _ => {}
            }
        }
        let current: BTreeSet<(String, DisruptionReason)> = self
            .decided
            .keys()
            .map(|d| (d.node.clone(), d.reason))
            .collect();
        self.decided_since.retain(|k, _| current.contains(k));
        for k in current {
            self.decided_since.entry(k).or_insert(now);
        }
        let mut held: BTreeSet<String> = self
            .decided
            .keys()
            .flat_map(|d| d.replacements.iter().cloned())
            .collect();
        for (d, r) in diffs {
            let Decision::Launch(l) = d else {
                continue;
            };
            if held.contains(&l.name) || self.replacements.contains_key(&l.name) {
                let versions = self.replacements.entry(l.name.clone()).or_default();
                bump(versions, l, *r);
                if versions.is_empty() {
                    self.replacements.remove(&l.name);
                }
            }
        }
        held.extend(self.replacements.keys().cloned());
        held
    }

    /// The current version of a replacement launch.
    fn replacement(&self, name: &str) -> Option<Launch> {
        self.replacements
            .get(name)?
            .iter()
            .find(|(_, r)| **r > 0)
            .map(|(l, _)| l.clone())
    }

    /// Whether a consolidation command has been decided for its whole validation period, and
    /// none started during the last one.
    /// A consolidation command still launching holds the period too: its start is not known yet.
    fn validated(
        &self,
        now: i64,
        reason: DisruptionReason,
        nodes: &BTreeSet<String>,
        period: i64,
    ) -> bool {
        if !consolidation(reason) {
            return true;
        }
        let settled = nodes.iter().all(|n| {
            self.decided_since
                .get(&(n.clone(), reason))
                .is_some_and(|t| now - t >= period)
        });
        let launching = self
            .active
            .values()
            .any(|c| c.phase == Phase::Launching && consolidation(c.reason));
        settled && !launching && self.last_consolidation_ms.is_none_or(|t| now - t >= period)
    }

    /// When a consolidation command decided now would be validated, for waking up then.
    pub(crate) fn next_validation_ms(&self, now: i64, period: i64) -> Option<i64> {
        self.decided_since
            .iter()
            .filter(|((_, r), _)| consolidation(*r))
            .map(|(_, t)| {
                let after_last = self.last_consolidation_ms.map_or(i64::MIN, |l| l + period);
                (t + period).max(after_last)
            })
            .filter(|t| *t > now)
            .min()
    }

    /// Commands decided and not started, retried no earlier than allowed.
    fn startable(&self, now: i64, period: i64) -> Vec<Decided> {
        let mut by_id: BTreeMap<&str, Decided> = BTreeMap::new();
        for d in self.decided.keys() {
            let Some(id) = d.command.as_deref() else {
                continue;
            };
            if self.active.contains_key(id) || self.retry_at.get(id).is_some_and(|t| *t > now) {
                continue;
            }
            by_id
                .entry(id)
                .or_insert_with(|| Decided {
                    id: id.to_string(),
                    reason: d.reason,
                    nodes: BTreeSet::new(),
                    replacements: d.replacements.clone(),
                })
                .nodes
                .insert(d.node.clone());
        }
        by_id
            .into_values()
            .filter(|c| forceful(c.reason) || !c.nodes.iter().any(|n| self.is_nominated(n)))
            .filter(|c| self.validated(now, c.reason, &c.nodes, period))
            .collect()
    }

    /// Whether the engine plans a pending pod onto `node`: as Karpenter keeps nominated nodes
    /// out of graceful disruption, so the pod does not lose the node it is about to bind to.
    fn is_nominated(&self, node: &str) -> bool {
        self.nominated.contains_key(node)
    }

    fn busy(&self, node: &str) -> bool {
        self.active.values().any(|c| c.nodes.contains(node))
    }

    /// Launch names of the replacements of commands in progress.
    fn replacement_claims(&self) -> BTreeSet<&str> {
        self.active
            .values()
            .flat_map(|c| c.replacements.iter().map(String::as_str))
            .collect()
    }

    /// An interruption warning for `node`: if a command holds it, drain it now.
    pub(crate) fn drain_now(&mut self, node: &str) {
        for c in self.active.values_mut() {
            if c.nodes.contains(node) {
                c.drain_now.insert(node.to_string());
            }
        }
    }

    pub(crate) fn nodes_disrupting(&self) -> u64 {
        self.active.values().map(|c| c.nodes.len() as u64).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_dataflow::model::Price;

    fn empty(node: &str) -> Decision {
        Decision::Disruption(Disruption {
            node: node.into(),
            nodeclaim: Some(format!("{node}-claim")),
            nodepool: "default".into(),
            reason: DisruptionReason::Empty,
            command: Some(format!("empty-{node}")),
            replacements: Vec::new(),
            savings_per_hour: Price(96_000),
            blocked_by: None,
        })
    }

    fn binding(pod: &str, target: &str) -> Decision {
        Decision::Binding {
            pod: pod.into(),
            target: target.into(),
        }
    }

    fn startable_nodes(d: &Disruptions, now: i64) -> Vec<String> {
        d.startable(now, 15_000)
            .into_iter()
            .flat_map(|c| c.nodes)
            .collect()
    }

    #[test]
    fn a_node_a_pending_pod_is_planned_onto_is_not_consolidated() {
        let mut d = Disruptions::default();
        d.observe(
            0,
            &[
                (empty("a"), 1),
                (empty("b"), 1),
                (binding("team/web-1", "a"), 1),
            ],
        );
        // Validated (held 15 s), but `a` is about to get a pod: only `b` goes.
        assert_eq!(startable_nodes(&d, 20_000), vec!["b".to_string()]);
        // The pod bound (the engine drops its binding): `a` may go.
        d.observe(20_000, &[(binding("team/web-1", "a"), -1)]);
        assert_eq!(
            startable_nodes(&d, 20_000),
            vec!["a".to_string(), "b".to_string()]
        );
    }
}
