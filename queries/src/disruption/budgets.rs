//! Query — disruption budgets: how many more nodes each NodePool may disrupt now, per reason.
//!
//! Rule: each budget allows `nodes` disruptions — a count, or a percentage of the NodePool's
//! registered nodes rounded up — while it is active: always, or for `duration` after each time
//! its cron `schedule` fires (UTC, minute resolution, on the logical clock). A budget with
//! `reasons` applies only to those (Empty, Drifted, Underutilized). For each reason the most
//! restrictive active budget wins, minus the nodes already disrupting (being deleted, tainted
//! `karpenter.sh/disrupted`, or not Ready), never below zero. With no budgets at all there is no
//! limit. Expiration and interruption are not bound by budgets.

use super::types::Allowance;
use differential_dataflow::VecCollection;
use dovetail_dataflow::disruption_reasons::ActiveBudget;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::facts::Minute;
use dovetail_dataflow::model::cron::Schedule;
use dovetail_dataflow::model::duration::parse_duration;
use dovetail_dataflow::model::labels::{DISRUPTED_TAINT, NODEPOOL};
use dovetail_dataflow::model::{Budget, NodePool, SharedNode};
use serde::{Deserialize, Serialize};

/// A budget's node count at `total` nodes, if it is active at `now`; `None` when inactive.
/// A malformed budget is treated as allowing nothing, the safe reading.
pub fn budget_nodes(b: &Budget, total: i64, now: Minute) -> Option<i64> {
    if let Some(s) = &b.schedule {
        let duration = b
            .duration
            .as_deref()
            .and_then(|d| parse_duration(d).ok().flatten());
        match (Schedule::parse(s), duration) {
            (Ok(schedule), Some(d)) => {
                if !schedule.active(now, d) {
                    return None;
                }
            }
            _ => return Some(0),
        }
    }
    let n = b.nodes.trim();
    Some(match n.strip_suffix('%') {
        Some(p) => p
            .trim()
            .parse::<i64>()
            .map(|p| (p * total + 99) / 100)
            .unwrap_or(0),
        None => n.parse().unwrap_or(0),
    })
}

/// How many more disruptions each reason may start, given the pool's node counts.
pub fn allowance(pool: &NodePool, total: i64, disrupting: i64, now: Minute) -> Allowance {
    // The most restrictive active budget and what it leaves, per reason.
    let limit = |reason: &str| -> (i64, Option<ActiveBudget>) {
        pool.disruption
            .budgets
            .iter()
            .filter(|b| b.reasons.is_empty() || b.reasons.iter().any(|r| r == reason))
            .filter_map(|b| Some((budget_nodes(b, total, now)?, b)))
            .min_by_key(|(n, _)| *n)
            .map(|(n, b)| {
                let active = ActiveBudget {
                    nodes: b.nodes.clone(),
                    schedule: b.schedule.clone(),
                    duration: b.duration.clone(),
                };
                ((n - disrupting).max(0), Some(active))
            })
            .unwrap_or((i64::MAX, None))
    };
    let (empty, empty_budget) = limit("Empty");
    let (drifted, drifted_budget) = limit("Drifted");
    let (underutilized, underutilized_budget) = limit("Underutilized");
    Allowance {
        empty,
        drifted,
        underutilized,
        empty_budget,
        drifted_budget,
        underutilized_budget,
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
enum Part {
    Pool(Box<NodePool>),
    /// A node: is it disrupting?
    Node(bool),
}

pub fn budgets<'s>(
    nodepools: VecCollection<'s, Epoch, NodePool>,
    nodes: VecCollection<'s, Epoch, SharedNode>,
    clock: VecCollection<'s, Epoch, Minute>,
) -> VecCollection<'s, Epoch, (String, Allowance)> {
    let counts = nodes
        .flat_map(|n| {
            let pool = n.labels.get(NODEPOOL)?.clone();
            if n.in_flight {
                return None;
            }
            let disrupting =
                n.deleting || n.not_ready || n.taints.iter().any(|t| t.key == DISRUPTED_TAINT);
            Some((pool, Part::Node(disrupting)))
        })
        .concat(nodepools.map(|p| (p.name.clone(), Part::Pool(Box::new(p)))))
        .reduce_named("BudgetCounts", |_name, parts, out| {
            let mut pool = None;
            let (mut total, mut disrupting) = (0i64, 0i64);
            for (part, r) in parts {
                match part {
                    Part::Pool(p) => pool = Some(p),
                    Part::Node(d) => {
                        total += *r as i64;
                        if *d {
                            disrupting += *r as i64;
                        }
                    }
                }
            }
            if let Some(p) = pool {
                out.push((((**p).clone(), total, disrupting), 1));
            }
        });
    counts.map(|(name, c)| ((), (name, c))).join_map(
        clock.map(|m| ((), m)),
        |_, (name, (pool, total, disrupting)), now| {
            (name.clone(), allowance(pool, *total, *disrupting, *now))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(
        nodes: &str,
        schedule: Option<&str>,
        duration: Option<&str>,
        reasons: &[&str],
    ) -> Budget {
        Budget {
            nodes: nodes.to_string(),
            schedule: schedule.map(str::to_string),
            duration: duration.map(str::to_string),
            reasons: reasons.iter().map(|r| r.to_string()).collect(),
        }
    }

    // Monday 2026-11-30 00:00 UTC.
    const MONDAY: i64 = 1_795_996_800_000;
    const HOUR: i64 = 3_600_000;

    #[test]
    fn most_restrictive_active_budget_wins_per_reason() {
        let mut pool = NodePool::default();
        pool.disruption.budgets = vec![
            budget("10%", None, None, &[]),
            budget("0", Some("0 9 * * mon-fri"), Some("8h"), &["Drifted"]),
        ];
        // 25 nodes: 10 % rounds up to 3; one is already disrupting.
        let at_noon = allowance(&pool, 25, 1, MONDAY + 12 * HOUR);
        assert_eq!(
            (at_noon.empty, at_noon.drifted, at_noon.underutilized),
            (2, 0, 2)
        );
        assert_eq!(
            at_noon.drifted_budget.and_then(|b| b.schedule).as_deref(),
            Some("0 9 * * mon-fri"),
            "the budget that limits it is named"
        );
        let at_night = allowance(&pool, 25, 1, MONDAY + 20 * HOUR);
        assert_eq!(at_night.drifted, 2);
        assert_eq!(
            at_night.drifted_budget.map(|b| b.nodes).as_deref(),
            Some("10%")
        );
    }

    #[test]
    fn no_budgets_means_no_limit_and_bad_ones_allow_nothing() {
        let mut pool = NodePool::default();
        pool.disruption.budgets = vec![];
        assert_eq!(allowance(&pool, 5, 0, 0).empty, i64::MAX);
        pool.disruption.budgets = vec![budget("lots", None, None, &[])];
        assert_eq!(allowance(&pool, 5, 0, 0).empty, 0);
    }
}
