//! The disruption executor's steps: adopting NodeClaims (drift hashes), starting commands
//! (replacements first, then the taint), draining in order through the Eviction API, and
//! terminating. See the parent module for the rules.

use super::{consolidation, disrupted_taint, forceful, Command, Phase};
use crate::actuator::{Actuator, Purpose};
use dovetail_dataflow::backend::{Cloud, Cluster};
use dovetail_dataflow::decisions::{DisruptionReason, Launch};
use dovetail_dataflow::model::labels::{DISRUPTED_TAINT, NODECLASS_HASH, NODEPOOL_HASH};
use std::collections::BTreeSet;

impl Actuator {
    /// Writes the drift hashes on NodeClaims the engine saw without them (and on their Nodes).
    pub(crate) fn adopt(&mut self, now: i64, cloud: &mut impl Cloud, cluster: &mut impl Cluster) {
        for (claim, pool_hash, class_hash) in std::mem::take(&mut self.disruption.adopt) {
            let Some(name) = cloud.instance_for_nodeclaim(&claim).map(|i| i.node_name()) else {
                continue;
            };
            let hashes = [(NODEPOOL_HASH, pool_hash), (NODECLASS_HASH, class_hash)];
            if let Some(mut c) = cluster.nodeclaim(&claim).cloned() {
                if let Some(status) = c.status.as_mut().filter(|_| !c.registered) {
                    for (key, value) in &hashes {
                        status.annotations.insert(key.to_string(), value.clone());
                    }
                    cluster.update_nodeclaim(now, c);
                }
            }
            if cluster.node(&name).is_some() {
                for (key, value) in &hashes {
                    cluster.annotate_node(now, &name, key, value);
                }
            }
        }
    }

    /// Whether a command may take `node` now.
    fn may_disrupt(
        &self,
        node: &str,
        reason: DisruptionReason,
        claims: &BTreeSet<&str>,
        cluster: &impl Cluster,
    ) -> bool {
        let Some(n) = cluster.node(node) else {
            return false;
        };
        if n.deleting
            || self.disruption.busy(node)
            || n.taints.iter().any(|t| t.key == DISRUPTED_TAINT)
        {
            return false;
        }
        // Karpenter never consolidates a node that is not initialised, nor a replacement
        // another command is waiting for.
        forceful(reason)
            || (cluster.node_ready(node)
                && !n.nodeclaim.as_deref().is_some_and(|c| claims.contains(c)))
    }

    pub(crate) fn start_commands(
        &mut self,
        now: i64,
        cloud: &mut impl Cloud,
        cluster: &mut impl Cluster,
    ) {
        let period = self.settings.consolidation_validation_ms;
        for cmd in self.disruption.startable(now, period) {
            // One consolidation command per validation period, as Karpenter's loop waits.
            if !self
                .disruption
                .validated(now, cmd.reason, &cmd.nodes, period)
            {
                continue;
            }
            let claims = self.disruption.replacement_claims();
            if !cmd
                .nodes
                .iter()
                .all(|n| self.may_disrupt(n, cmd.reason, &claims, cluster))
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
            let mut submitted = Vec::new();
            let mut failed = false;
            for l in launches {
                match self.submit_launch(now, l, Purpose::Replacement, cloud, cluster) {
                    Ok(name) => submitted.push(name),
                    Err(_) => failed = true,
                }
            }
            let id = cmd.id.clone();
            self.disruption.active.insert(
                cmd.id,
                Command {
                    reason: cmd.reason,
                    nodes: cmd.nodes,
                    replacements: submitted,
                    phase: Phase::Launching,
                    drain_now: BTreeSet::new(),
                    failed,
                },
            );
            // A synchronous cloud has answered already: the command starts (or is abandoned)
            // before the next one is considered, as it would had the calls blocked.
            self.collect_replies(now, cloud, cluster);
            self.finish_launching(now, &id, cloud, cluster);
        }
    }

    /// A command whose replacements' answers are all in: taint its nodes and go on, or, if one
    /// failed, terminate what was launched and try again after a poll interval (Karpenter
    /// un-marks the candidates and tries again on a later loop).
    fn finish_launching(
        &mut self,
        now: i64,
        id: &str,
        cloud: &mut impl Cloud,
        cluster: &mut impl Cluster,
    ) {
        let Some(cmd) = self.disruption.active.get(id) else {
            return;
        };
        if cmd.phase != Phase::Launching
            || cmd
                .replacements
                .iter()
                .any(|r| !self.replacement_results.contains_key(r))
        {
            return;
        }
        let Some(mut cmd) = self.disruption.active.remove(id) else {
            return;
        };
        let mut launched = Vec::new();
        for r in &cmd.replacements {
            if self.replacement_results.remove(r) == Some(true) {
                launched.push(r.clone());
            } else {
                cmd.failed = true;
            }
        }
        self.stats.replacements_launched += launched.len() as u64;
        if cmd.failed {
            for name in &launched {
                self.terminate_claim(now, name, cloud, cluster);
            }
            self.stats.disruption_commands_abandoned += 1;
            self.disruption
                .retry_at
                .insert(id.to_string(), now + self.settings.disruption_poll_ms);
            return;
        }
        for n in &cmd.nodes {
            cluster.taint_node(now, n, disrupted_taint());
        }
        if consolidation(cmd.reason) {
            self.disruption.last_consolidation_ms = Some(now);
        }
        self.stats.disruption_commands_started += 1;
        *self
            .stats
            .disruptions_started_by_reason
            .entry(cmd.reason.as_str().to_string())
            .or_insert(0) += cmd.nodes.len() as u64;
        cmd.replacements = launched;
        cmd.phase = if forceful(cmd.reason) {
            Phase::Draining
        } else {
            Phase::Replacing
        };
        self.disruption.active.insert(id.to_string(), cmd);
    }

    pub(crate) fn progress_commands(
        &mut self,
        now: i64,
        cloud: &mut impl Cloud,
        cluster: &mut impl Cluster,
    ) {
        let ids: Vec<String> = self.disruption.active.keys().cloned().collect();
        for id in ids {
            let Some(cmd) = self.disruption.active.get(&id) else {
                continue;
            };
            let mut phase = cmd.phase;
            if phase == Phase::Launching {
                self.finish_launching(now, &id, cloud, cluster);
                continue;
            }
            if phase == Phase::Replacing {
                let states: Vec<_> = cmd
                    .replacements
                    .iter()
                    .map(|r| cloud.instance_for_nodeclaim(r).map(|i| i.state))
                    .collect();
                if states.iter().any(|s| !s.is_some_and(|s| s.is_alive())) {
                    self.abandon(now, &id, cloud, cluster);
                    continue;
                }
                if states
                    .iter()
                    .all(|s| *s == Some(dovetail_dataflow::backend::InstanceState::Initialized))
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
                .filter(|n| cluster.node(n).is_none())
                .cloned()
                .collect();
            for n in to_drain {
                if cluster.node(&n).is_some() && self.drain(now, &n, cluster) {
                    self.terminate_node(now, &n, cloud, cluster);
                    *self
                        .stats
                        .disruptions_terminated_by_reason
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
    fn abandon(&mut self, now: i64, id: &str, cloud: &mut impl Cloud, cluster: &mut impl Cluster) {
        let Some(cmd) = self.disruption.active.remove(id) else {
            return;
        };
        for n in &cmd.nodes {
            self.drains.forget(n);
            if cluster.node(n).is_some() {
                cluster.untaint_node(now, n, DISRUPTED_TAINT);
            }
        }
        for r in &cmd.replacements {
            let empty = cloud
                .instance_for_nodeclaim(r)
                .map(|i| i.node_name())
                .is_some_and(|node| cluster.pods_on(&node).iter().all(|p| p.is_daemon));
            if empty {
                self.terminate_claim(now, r, cloud, cluster);
            }
        }
        self.stats.disruption_commands_abandoned += 1;
        self.disruption
            .retry_at
            .insert(id.to_string(), now + self.settings.disruption_poll_ms);
    }

    /// TerminateInstances for a node's instance, and the Node marked for deletion; it goes
    /// when the cloud reports the instance gone.
    pub fn terminate_node(
        &mut self,
        now: i64,
        node: &str,
        cloud: &mut impl Cloud,
        cluster: &mut impl Cluster,
    ) {
        let id = cluster
            .node(node)
            .and_then(|n| n.provider_id.as_deref())
            .and_then(|p| p.rsplit('/').next())
            .map(str::to_string);
        if let Some(id) = id {
            cloud.terminate(now, &id);
        }
        cluster.delete_node(now, node);
    }

    /// A NodeClaim someone deleted (`kubectl delete nodeclaim`): Karpenter's termination —
    /// its Node tainted `karpenter.sh/disrupted:NoSchedule`, cordoned and drained through the
    /// Eviction API (a PodDisruptionBudget may hold it: called again, it asks again), then its
    /// instance terminated. A NodeClaim not registered goes at once. True once terminated.
    pub fn terminate_deleted_claim(
        &mut self,
        now: i64,
        claim: &str,
        cloud: &mut impl Cloud,
        cluster: &mut impl Cluster,
    ) -> bool {
        let Some(c) = cluster.nodeclaim(claim).cloned() else {
            return true;
        };
        let node = c
            .node_name()
            .filter(|n| c.registered && cluster.node(n).is_some())
            .map(str::to_string);
        let Some(node) = node else {
            if cloud.instance_for_nodeclaim(claim).is_some() {
                self.terminate_claim(now, claim, cloud, cluster);
            } else {
                cluster.delete_nodeclaim(now, claim);
            }
            return true;
        };
        let tainted = cluster
            .node(&node)
            .is_some_and(|n| n.taints.iter().any(|t| t.key == DISRUPTED_TAINT));
        if !tainted {
            cluster.taint_node(now, &node, disrupted_taint());
        }
        if self.drain(now, &node, cluster) {
            self.terminate_node(now, &node, cloud, cluster);
            return true;
        }
        false
    }

    /// Terminates the instance launched for a NodeClaim: at once if its Node has not
    /// registered (the NodeClaim goes with it), else through its Node.
    pub fn terminate_claim(
        &mut self,
        now: i64,
        claim: &str,
        cloud: &mut impl Cloud,
        cluster: &mut impl Cluster,
    ) {
        let Some((node, id)) = cloud
            .instance_for_nodeclaim(claim)
            .map(|i| (i.node_name(), i.id.clone()))
        else {
            return;
        };
        let unregistered = cluster
            .nodeclaim(claim)
            .is_some_and(|c| c.status.is_some() && !c.registered);
        if unregistered {
            cluster.delete_nodeclaim(now, claim);
            cloud.terminate(now, &id);
        } else {
            self.terminate_node(now, &node, cloud, cluster);
        }
    }
}
