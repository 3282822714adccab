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
//! - Draining evicts through the PodDisruptionBudgets; a pod they keep is retried at the next
//!   step. A node with no pods left is terminated. Evicted pods are pending and the engine
//!   rebinds them, e.g. onto the replacements.
//! - A node of a command still waiting for replacements that gets an interruption warning is
//!   drained at once: it is not a candidate any more, so the engine will not decide it.

use super::world::World;
use dovetail_dataflow::decisions::{Decision, Disruption, DisruptionReason, Launch};
use dovetail_dataflow::model::labels::DISRUPTED_TAINT;
use dovetail_dataflow::model::{Effect, Taint};
use std::collections::{BTreeMap, BTreeSet};

/// Karpenter's disruption loop polls this often; timers in the engine fire only when its
/// clock advances, so the replay advances it at least this often while nodes exist.
pub(super) const POLL_INTERVAL_MS: i64 = 10_000;

/// Karpenter validates a consolidation command (Empty, Underutilized) by waiting this long and
/// simulating again before it acts; its disruption loop waits meanwhile, so at most one such
/// command starts per period.
pub(super) const CONSOLIDATION_TTL_MS: i64 = 15_000;

fn disrupted_taint() -> Taint {
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
}

/// What the replay reports about disruption.
#[derive(Debug, Clone, Default)]
pub(super) struct DisruptionStats {
    pub(super) commands_started: u64,
    pub(super) commands_abandoned: u64,
    /// Nodes whose disruption started, by reason.
    pub(super) started_by_reason: BTreeMap<String, u64>,
    /// Nodes the disruption terminated, by reason.
    pub(super) terminated_by_reason: BTreeMap<String, u64>,
    pub(super) replacements_launched: u64,
}

/// A command the engine decided and the replay has not started.
struct Decided {
    id: String,
    reason: DisruptionReason,
    nodes: BTreeSet<String>,
    replacements: Vec<String>,
}

/// The engine's current disruption decisions and the commands in progress.
#[derive(Default)]
pub(super) struct Disruptions {
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
    pub(super) stats: DisruptionStats,
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
    pub(super) fn observe(&mut self, now: i64, diffs: &[(Decision, isize)]) -> BTreeSet<String> {
        for (d, r) in diffs {
            match d {
                Decision::Disruption(x) if x.command.is_some() && x.blocked_by.is_none() => {
                    bump(&mut self.decided, x, *r)
                }
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
    fn validated(&self, now: i64, reason: DisruptionReason, nodes: &BTreeSet<String>) -> bool {
        if !consolidation(reason) {
            return true;
        }
        let settled = nodes.iter().all(|n| {
            self.decided_since
                .get(&(n.clone(), reason))
                .is_some_and(|t| now - t >= CONSOLIDATION_TTL_MS)
        });
        settled
            && self
                .last_consolidation_ms
                .is_none_or(|t| now - t >= CONSOLIDATION_TTL_MS)
    }

    /// When a consolidation command decided now would be validated, for waking up then.
    pub(super) fn next_validation_ms(&self, now: i64) -> Option<i64> {
        self.decided_since
            .iter()
            .filter(|((_, r), _)| consolidation(*r))
            .map(|(_, t)| {
                let after_last = self
                    .last_consolidation_ms
                    .map_or(i64::MIN, |l| l + CONSOLIDATION_TTL_MS);
                (t + CONSOLIDATION_TTL_MS).max(after_last)
            })
            .filter(|t| *t > now)
            .min()
    }

    /// Commands decided and not started, retried no earlier than allowed.
    fn startable(&self, now: i64) -> Vec<Decided> {
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
            .filter(|c| self.validated(now, c.reason, &c.nodes))
            .collect()
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
    pub(super) fn drain_now(&mut self, node: &str) {
        for c in self.active.values_mut() {
            if c.nodes.contains(node) {
                c.drain_now.insert(node.to_string());
            }
        }
    }

    pub(super) fn nodes_disrupting(&self) -> u64 {
        self.active.values().map(|c| c.nodes.len() as u64).sum()
    }

    pub(super) fn nodes_terminated(&self) -> u64 {
        self.stats.terminated_by_reason.values().sum()
    }
}

impl World {
    /// Acts on one epoch's diffs: provisioning launches, drift-hash adoption, new disruption
    /// commands, and the progress of those under way.
    pub(super) fn act(&mut self, now: i64, diffs: &[(Decision, isize)]) {
        let held = self.disruption.observe(now, diffs);
        self.execute_launches(now, diffs, &held);
        self.adopt();
        self.start_commands(now);
        self.progress_commands(now);
    }

    fn adopt(&mut self) {
        for (claim, pool_hash, class_hash) in std::mem::take(&mut self.disruption.adopt) {
            let Some(name) = self
                .cloud
                .instance_for_launch(&claim)
                .map(|i| i.node_name())
            else {
                continue;
            };
            let hashes = [
                (dovetail_dataflow::model::labels::NODEPOOL_HASH, pool_hash),
                (dovetail_dataflow::model::labels::NODECLASS_HASH, class_hash),
            ];
            for (key, value) in hashes {
                if let Some(n) = self.in_flight.get_mut(&name) {
                    n.annotations.insert(key.to_string(), value.clone());
                }
                let _ = self.cluster.annotate(&name, key, &value);
            }
            self.dirty_nodes.insert(name);
        }
    }

    /// Whether a command may take `node` now.
    fn may_disrupt(&self, node: &str, reason: DisruptionReason, claims: &BTreeSet<&str>) -> bool {
        let Some(n) = self.cluster.node(node) else {
            return false;
        };
        if self.deleting.contains(node)
            || self.disruption.busy(node)
            || n.taints.iter().any(|t| t.key == DISRUPTED_TAINT)
        {
            return false;
        }
        // Karpenter never consolidates a node that is not initialised, nor a replacement
        // another command is waiting for.
        forceful(reason)
            || (self.cluster.is_ready(node)
                && !n.nodeclaim.as_deref().is_some_and(|c| claims.contains(c)))
    }

    fn start_commands(&mut self, now: i64) {
        for cmd in self.disruption.startable(now) {
            // One consolidation command per validation period, as Karpenter's loop waits.
            if !self.disruption.validated(now, cmd.reason, &cmd.nodes) {
                continue;
            }
            let claims = self.disruption.replacement_claims();
            if !cmd
                .nodes
                .iter()
                .all(|n| self.may_disrupt(n, cmd.reason, &claims))
            {
                continue;
            }
            let Some(launches) = cmd
                .replacements
                .iter()
                .map(|name| self.disruption.replacement(name))
                .collect::<Option<Vec<Launch>>>()
            else {
                continue;
            };
            let mut launched = Vec::new();
            let mut failed = false;
            for l in launches {
                match self.launch(now, l) {
                    Some(name) => launched.push(name),
                    None => failed = true,
                }
            }
            self.disruption.stats.replacements_launched += launched.len() as u64;
            if failed {
                // Karpenter un-marks the candidates and tries again on a later loop.
                for name in &launched {
                    self.terminate_claim(now, name);
                }
                self.disruption.stats.commands_abandoned += 1;
                self.disruption
                    .retry_at
                    .insert(cmd.id, now + POLL_INTERVAL_MS);
                continue;
            }
            for n in &cmd.nodes {
                let _ = self.cluster.taint(n, disrupted_taint());
                self.dirty_nodes.insert(n.clone());
            }
            if consolidation(cmd.reason) {
                self.disruption.last_consolidation_ms = Some(now);
            }
            let stats = &mut self.disruption.stats;
            stats.commands_started += 1;
            *stats
                .started_by_reason
                .entry(cmd.reason.as_str().to_string())
                .or_insert(0) += cmd.nodes.len() as u64;
            self.disruption.active.insert(
                cmd.id,
                Command {
                    reason: cmd.reason,
                    nodes: cmd.nodes,
                    replacements: launched,
                    phase: if forceful(cmd.reason) {
                        Phase::Draining
                    } else {
                        Phase::Replacing
                    },
                    drain_now: BTreeSet::new(),
                },
            );
        }
    }

    fn progress_commands(&mut self, now: i64) {
        let ids: Vec<String> = self.disruption.active.keys().cloned().collect();
        for id in ids {
            let Some(cmd) = self.disruption.active.get(&id) else {
                continue;
            };
            let mut phase = cmd.phase;
            if phase == Phase::Replacing {
                let states: Vec<_> = cmd
                    .replacements
                    .iter()
                    .map(|r| self.cloud.instance_for_launch(r).map(|i| i.state))
                    .collect();
                if states.iter().any(|s| !s.is_some_and(|s| s.is_alive())) {
                    self.abandon(now, &id);
                    continue;
                }
                if states
                    .iter()
                    .all(|s| *s == Some(crate::InstanceState::Initialized))
                {
                    phase = Phase::Draining;
                }
            }
            let Some(cmd) = self.disruption.active.get_mut(&id) else {
                continue;
            };
            cmd.phase = phase;
            let reason = cmd.reason;
            let to_drain: Vec<String> = cmd
                .nodes
                .iter()
                .filter(|n| phase == Phase::Draining || cmd.drain_now.contains(*n))
                .cloned()
                .collect();
            let mut done: Vec<String> = cmd
                .nodes
                .iter()
                .filter(|n| self.cluster.node(n).is_none())
                .cloned()
                .collect();
            for n in to_drain {
                if self.cluster.node(&n).is_some() && self.drain(now, &n) {
                    self.terminate_node(now, &n);
                    *self
                        .disruption
                        .stats
                        .terminated_by_reason
                        .entry(reason.as_str().to_string())
                        .or_insert(0) += 1;
                    done.push(n);
                }
            }
            if let Some(cmd) = self.disruption.active.get_mut(&id) {
                for n in &done {
                    cmd.nodes.remove(n);
                }
                if cmd.nodes.is_empty() {
                    self.disruption.active.remove(&id);
                }
            }
        }
    }

    /// Drops a command whose replacements failed: its nodes go back to service.
    fn abandon(&mut self, now: i64, id: &str) {
        let Some(cmd) = self.disruption.active.remove(id) else {
            return;
        };
        for n in &cmd.nodes {
            if self.cluster.untaint(n, DISRUPTED_TAINT).is_ok() {
                self.dirty_nodes.insert(n.clone());
            }
        }
        for r in &cmd.replacements {
            let empty = self
                .cloud
                .instance_for_launch(r)
                .map(|i| i.node_name())
                .is_some_and(|node| self.cluster.pods_on(&node).iter().all(|p| p.is_daemon));
            if empty {
                self.terminate_claim(now, r);
            }
        }
        self.disruption.stats.commands_abandoned += 1;
        self.disruption
            .retry_at
            .insert(id.to_string(), now + POLL_INTERVAL_MS);
    }

    /// Evicts what the PodDisruptionBudgets allow; true when no pod but DaemonSet pods is
    /// left.
    fn drain(&mut self, now: i64, node: &str) -> bool {
        let pdbs: Vec<_> = self.pdbs.values().cloned().collect();
        if let Ok(outcome) = self.cluster.evict_for_drain(now, node, &pdbs) {
            if !outcome.evicted.is_empty() {
                self.sync_pods(&outcome.evicted);
                self.pod_events.insert(node.to_string(), now);
            }
        }
        self.dirty_nodes.insert(node.to_string());
        self.cluster.pods_on(node).iter().all(|p| p.is_daemon)
    }

    /// TerminateInstances for a node's instance; the Node goes when EC2 reports it gone.
    fn terminate_node(&mut self, now: i64, node: &str) {
        let id = self
            .cluster
            .node(node)
            .and_then(|n| n.provider_id.as_deref())
            .and_then(|p| p.rsplit('/').next())
            .map(str::to_string);
        if let Some(id) = id {
            if let Err(e) = self.cloud.terminate(now, &id) {
                self.notes.insert(format!("terminating {node}: {e}"));
            }
        }
        self.deleting.insert(node.to_string());
        self.dirty_nodes.insert(node.to_string());
    }

    /// Terminates the instance launched for a NodeClaim.
    pub(super) fn terminate_claim(&mut self, now: i64, claim: &str) {
        let Some(node) = self.cloud.instance_for_launch(claim).map(|i| i.node_name()) else {
            return;
        };
        if self.in_flight.remove(&node).is_some() {
            self.dirty_nodes.insert(node.clone());
            if let Some(id) = self.cloud.instance_for_launch(claim).map(|i| i.id.clone()) {
                let _ = self.cloud.terminate(now, &id);
            }
        } else {
            self.terminate_node(now, &node);
        }
    }
}
