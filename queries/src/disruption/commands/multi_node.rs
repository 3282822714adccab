//! Multi-node consolidation: several nodes removed for fewer, cheaper new NodeClaims.

use super::super::lifetime::scaled_cost;
use super::super::types::Candidate;
use super::parts::Slot;
use super::{price_of, Command, Evaluation, MAX_MULTI_NODE};
use crate::solver::Stop;
use dovetail_dataflow::decisions::DisruptionReason;
use dovetail_dataflow::disruption_reasons::Blocker;
use rustc_hash::FxHashSet;
use std::collections::BTreeMap;

impl<'a> Evaluation<'a> {
    /// Takes the multi-node command's budget and returns its nodes and the single-node options
    /// it leaves waiting.
    pub(super) fn take_multi_node(
        &mut self,
        cmd: Command,
        options: &[(&'a Slot, i64)],
    ) -> (Vec<String>, Vec<&'a Slot>) {
        for n in &cmd.nodes {
            if let Some(c) = self.candidate(n) {
                let pool = c.nodepool.clone();
                self.take_budget(&pool, DisruptionReason::Underutilized);
            }
        }
        let chosen = cmd.nodes.clone();
        self.commands.push(cmd);
        let taken: FxHashSet<&str> = chosen.iter().map(String::as_str).collect();
        let waiting = options
            .iter()
            .map(|(c, _)| *c)
            .filter(|c| !taken.contains(c.node.as_str()))
            .collect();
        (chosen, waiting)
    }

    /// Multi-node consolidation over unblocked, consolidatable candidates within budget.
    pub(super) fn multi_node(&mut self) -> Option<Command> {
        let mut pool_left: BTreeMap<String, i64> = BTreeMap::new();
        let mut list: Vec<&'a Candidate> = Vec::new();
        // Best first (see [`Rank`]): the prefix the binary search tries holds the nodes most
        // worth removing.
        for (_, node) in self.ranked {
            if self.taken.contains(node) {
                continue;
            }
            let Some(c) = self.candidate(node) else {
                continue;
            };
            let left = match pool_left.get(&c.nodepool) {
                Some(l) => *l,
                None => {
                    let l = self.budget_left(&c.nodepool, DisruptionReason::Underutilized);
                    pool_left.insert(c.nodepool.clone(), l);
                    l
                }
            };
            if left <= 0 {
                continue;
            }
            pool_left.insert(c.nodepool.clone(), left - 1);
            list.push(c);
            if list.len() == MAX_MULTI_NODE {
                break;
            }
        }
        if list.len() < 2 {
            return None;
        }
        let (mut lo, mut hi) = (2usize, list.len());
        let mut best: Option<Command> = None;
        // Runs first when due, and stops at half the evaluation's budget with the best found so
        // far (as Karpenter's search stops at its timeout): the other half is the single-node
        // re-checks', which would otherwise never get a turn in a quiet cluster, where every
        // evaluation is a new minute's.
        while lo <= hi && self.whole_spent.get() < super::WHOLE_RECHECK_NODES / 2 {
            let mid = (lo + hi) / 2;
            let started = std::time::Instant::now();
            let option = self.multi_option(&list[..mid]);
            tracing::trace!(
                nodes = mid,
                outcome = match &option {
                    Ok(cmd) => format!("{} launches, saves {}", cmd.launches.len(), cmd.savings),
                    Err(why) => why.to_string(),
                },
                micros = started.elapsed().as_micros() as u64,
                "multi-node prefix tried"
            );
            if list[..mid]
                .iter()
                .any(|c| self.world.reads_whole_cluster(&c.pods))
            {
                self.spend_whole_run();
            }
            match option {
                Ok(cmd) => {
                    best = Some(cmd);
                    lo = mid + 1;
                }
                Err(_) => hi = mid - 1,
            }
        }
        best
    }

    /// Removing all of `nodes` for fewer, cheaper new ones, if that works; if not, why not.
    pub(super) fn multi_option(&self, nodes: &[&'a Candidate]) -> Result<Command, MultiRefusal> {
        // Any pod left without a place, as many launches as nodes, or pods an in-flight
        // NodeClaim would take refuse the prefix: the run may stop there.
        let stop = Stop {
            at_failure: true,
            at_new_nodeclaims: Some(nodes.len()),
            at_in_flight: true,
        };
        let mut launches = self.simulate_until(nodes, stop).map_err(|b| match b {
            Blocker::UninitializedDestination { .. } => MultiRefusal::WaitsForNodeClaim,
            _ => MultiRefusal::PodsWouldNotMove,
        })?;
        if launches.len() >= nodes.len() {
            return Err(MultiRefusal::AsManyLaunches(launches.len()));
        }
        let old: i64 = nodes.iter().map(|c| price_of(c)).sum();
        let cheapest: i64 = launches.iter().map(|l| l.price.0).sum();
        if cheapest >= old {
            return Err(MultiRefusal::NotCheaper);
        }
        // Each replacement must stay cheaper whatever offering it gets: it keeps the types under
        // its cheapest price plus an equal share of the savings (for one replacement, under
        // the removed nodes' total, as Karpenter). A replacement that could be one of the
        // removed nodes' types must be cheaper than that node, or keeping the node and only
        // deleting the others disrupts less (Karpenter's `filterOutSameInstanceType`).
        let share = (old - cheapest) / launches.len().max(1) as i64;
        for l in &mut launches {
            let mut limit = l.price.0 + share;
            for c in nodes {
                if l.instance_types.contains(&c.instance_type) {
                    limit = limit.min(price_of(c));
                }
            }
            self.price_replacement(nodes, l, limit)
                .map_err(|_| MultiRefusal::NotCheaper)?;
        }
        let new: i64 = launches.iter().map(|l| l.price.0).sum();
        if new >= old {
            return Err(MultiRefusal::NotCheaper);
        }
        self.balanced(nodes, old - new)
            .map_err(|_| MultiRefusal::Unbalanced)?;
        Ok(Command {
            nodes: nodes.iter().map(|c| c.node.clone()).collect(),
            reason: DisruptionReason::Underutilized,
            launches,
            savings: old - new,
        })
    }
}

/// Why removing a prefix of multi-node consolidation's list was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MultiRefusal {
    /// Some pod would have no place.
    PodsWouldNotMove,
    /// Some pod would go where an in-flight NodeClaim could take it, once it initializes.
    WaitsForNodeClaim,
    /// The pods need as many new NodeClaims as nodes removed, or more.
    AsManyLaunches(usize),
    /// The replacements would cost as much as the nodes, or more.
    NotCheaper,
    /// The savings are too small for the disruption (the balanced policy).
    Unbalanced,
}

impl std::fmt::Display for MultiRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MultiRefusal::PodsWouldNotMove => write!(f, "some pods would not move"),
            MultiRefusal::WaitsForNodeClaim => write!(f, "waits for an in-flight NodeClaim"),
            MultiRefusal::AsManyLaunches(n) => write!(f, "needs {n} launches"),
            MultiRefusal::NotCheaper => write!(f, "not cheaper"),
            MultiRefusal::Unbalanced => write!(f, "savings too small for the disruption"),
        }
    }
}

/// A candidate's place in multi-node consolidation's order, kept as it changes: the highest
/// price per unit of disruption cost first (Karpenter's `SavingsRatio`), the cost scaled by the
/// node's remaining lifetime (Karpenter's `LifetimeRemaining`, see [`scaled_cost`]) so that nodes
/// near expiry come first, then by node name.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rank(f64);

impl Rank {
    /// The candidate's rank, if multi-node consolidation may take it at all: not disrupting,
    /// priced, consolidatable, unblocked and with pods. Empty nodes are emptiness's alone, under
    /// the Empty budget (Karpenter leaves them out of consolidation "for correct budget
    /// accounting"): one the Empty budget holds back must not go as Underutilized instead.
    pub(super) fn of(c: &Candidate, now_ms: i64) -> Option<Rank> {
        let eligible = !c.disrupting
            && !c.pods.is_empty()
            && c.consolidatable
            && c.price.is_some()
            && Evaluation::consolidation_blocker(c, false).is_none();
        eligible.then(|| Rank(price_of(c) as f64 / scaled_cost(c, now_ms) as f64))
    }
}

impl Ord for Rank {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.0.total_cmp(&self.0)
    }
}

impl PartialOrd for Rank {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Rank {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for Rank {}
