//! Karpenter's `consolidationPolicy: Balanced`: a move only where its savings are worth its
//! disruption.

use super::super::types::Candidate;
use super::{price_of, Evaluation, Slot};
use dovetail_dataflow::decisions::DisruptionReason;
use dovetail_dataflow::disruption_reasons::Blocker;
use dovetail_dataflow::model::ConsolidationPolicy;
use std::borrow::Cow;
use std::collections::BTreeMap;

impl<'a> Evaluation<'a> {
    /// `Balanced`: drop options whose savings share is under half their disruption share.
    pub(super) fn balanced_filter(&mut self, options: &mut Vec<(&'a Slot, i64)>) {
        let mut kept = Vec::new();
        for (c, savings) in options.drain(..) {
            if let Err(why) = self.balanced(&[&c.candidate], savings) {
                self.blocked
                    .push((c, DisruptionReason::Underutilized, Cow::Owned(why)));
                continue;
            }
            kept.push((c, savings));
        }
        *options = kept;
    }

    /// Karpenter's `Balanced` score of a move (single- or multi-node): for each NodePool of the
    /// removed nodes whose policy is `Balanced`, its share of the savings (split between pools
    /// by the removed nodes' prices) over its NodePool's total price, divided by the removed
    /// nodes' disruption cost over the NodePool's total disruption cost, must be at least 1/2.
    /// Totals are over every node of the NodePool, candidates or not.
    pub(super) fn balanced(&self, nodes: &[&Candidate], savings: i64) -> Result<(), Blocker> {
        if !nodes
            .iter()
            .any(|c| c.policy == ConsolidationPolicy::Balanced)
        {
            return Ok(());
        }
        let source: i64 = nodes.iter().map(|c| price_of(c)).sum();
        let mut pools: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
        for c in nodes {
            let e = pools.entry(c.nodepool.as_str()).or_insert((0, 0));
            e.0 += price_of(c);
            e.1 += c.disruption_cost;
        }
        for (pool, (price, cost)) in pools {
            let balanced = nodes
                .iter()
                .any(|c| c.nodepool == pool && c.policy == ConsolidationPolicy::Balanced);
            if !balanced {
                continue;
            }
            let totals = self.pool_totals.get_or_init(|| {
                let mut totals: BTreeMap<&'a str, (i64, i64)> = BTreeMap::new();
                for c in self.candidates.values() {
                    let t = totals.entry(c.nodepool.as_str()).or_insert((0, 0));
                    t.0 += price_of(c);
                    t.1 += c.disruption_cost;
                }
                totals
            });
            let (price_total, cost_total) = totals.get(pool).copied().unwrap_or((0, 0));
            let pool_savings = if nodes.len() > 1 && source > 0 {
                savings as f64 * price as f64 / source as f64
            } else {
                savings as f64
            };
            let savings_share = if price_total > 0 {
                pool_savings / price_total as f64
            } else {
                0.0
            };
            let disruption_share = if cost_total > 0 {
                cost as f64 / cost_total as f64
            } else {
                0.0
            };
            // A zero disruption share cannot happen (every node costs at least its base);
            // treat it as a score of 0 rather than dividing by it.
            let score = if disruption_share > 0.0 {
                savings_share / disruption_share
            } else {
                0.0
            };
            if score < 0.5 {
                return Err(Blocker::Balanced {
                    nodepool: pool.to_string(),
                    savings_share: (savings_share * 1e6).round() as i64,
                    disruption_share: (disruption_share * 1e6).round() as i64,
                });
            }
        }
        Ok(())
    }
}
