//! Where the replay's money above the lower bound went. Every billed millisecond of every
//! instance is put in exactly one state — booting, empty, being removed, or running pods — and a
//! running node's cost is split further into its unrequested share, the on-demand premium of
//! its requested share, and the rest. The parts, minus the lower bound, add up to the gap.
//!
//! - **boot**: billed time before the Node is Ready (running → registered → initialised).
//! - **idle**: a Ready node with no pod but DaemonSet pods, in a stretch that ended with a pod
//!   bound to it (or with the replay).
//! - **disruption lag**: a Ready node empty in a stretch that ended with its removal (it
//!   waited for `consolidateAfter`, the poll and the command), plus the time a node spends in a
//!   disruption command (tainted `karpenter.sh/disrupted`, draining) and an instance's billed
//!   time after its Node is gone (shutting down).
//! - **packing waste**: a running node's price × (1 − u), u the larger of its cpu and memory
//!   requested / allocatable (all bound pods, DaemonSets included), capped at 1.
//! - **spot premium**: on an on-demand node whose NodePool allows spot, u × (its price − the
//!   cheapest spot price of its type in its zone): what the used capacity would have cost at
//!   spot.
//! - **too large**: on a running node holding a pod that does not fit its NodePool's cheapest type
//!   per unit (at the node's zone and capacity type), the other pods' share of it priced above
//!   that cheapest rate: the pods riding along on a type bought for a large pod (the large pod's
//!   own premium is already in the lower bound, which prices each pod at the cheapest type it
//!   fits; see `too_large.rs`).
//! - **other** = cost − lower bound − the above: the used share of running nodes priced above
//!   the lower bound — types dearer per unit than the cheapest a pod could use, a pool's
//!   on-demand-only price, DaemonSet requests, the one-minute billing minimum — less the bound
//!   of pods still pending (the bound counts them while their node boots).

use super::summary::CostBreakdown;
use super::too_large::CheapRates;
use super::world::World;
use dovetail_dataflow::backend::Instance;
use dovetail_dataflow::model::labels::{
    CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, DISRUPTED_TAINT,
};
use dovetail_sim::SimCloud;
use std::collections::{BTreeMap, BTreeSet, HashMap};

const MICRO_USD_MS_PER_USD_HOUR: f64 = 1e6 * 3_600_000.0;

/// The running sums, advanced from one instant to the next.
#[derive(Debug, Default)]
pub(crate) struct CostLedger {
    parts: CostBreakdown,
    /// Nodes that have been Ready: once gone, their billed time is removal, not boot.
    were_ready: BTreeSet<String>,
    /// Dollars of each node's current empty stretch, not yet attributed.
    empty_usd: BTreeMap<String, f64>,
    /// The cheapest spot price per (type, zone), micro-dollars per hour.
    spot_price: HashMap<(String, String), Option<i64>>,
    /// Each NodePool's cheapest rate per unit, for the too-large part.
    cheap_rates: CheapRates,
}

impl CostLedger {
    /// Adds the billed time in `[from, to)` of every instance, in the state the world was in
    /// over that interval (nothing changes between two instants of the replay).
    pub(crate) fn advance(&mut self, w: &World<SimCloud>, from: i64, to: i64) {
        if to <= from {
            return;
        }
        for i in w.cloud.instances() {
            let start = from.max(i.running_ms);
            let end = i.stopped_ms.map_or(to, |s| s.min(to));
            if end <= start {
                continue;
            }
            let usd = i.price.0 as f64 * (end - start) as f64 / MICRO_USD_MS_PER_USD_HOUR;
            self.instance(w, i, usd);
        }
        // An empty node gone before it was billed again ended its stretch by its removal.
        let gone: Vec<String> = self
            .empty_usd
            .keys()
            .filter(|n| w.cluster.node(n).is_none())
            .cloned()
            .collect();
        for node in gone {
            self.end_empty(&node, true);
        }
    }

    fn instance(&mut self, w: &World<SimCloud>, i: &Instance, usd: f64) {
        let name = i.node_name();
        let node = w.cluster.node(&name).filter(|_| w.cluster.is_ready(&name));
        let Some(node) = node else {
            if self.were_ready.contains(&name) {
                self.end_empty(&name, true);
                self.parts.disruption_lag_usd += usd;
            } else {
                self.parts.boot_usd += usd;
            }
            return;
        };
        self.were_ready.insert(name.clone());
        if node.taints.iter().any(|t| t.key == DISRUPTED_TAINT) {
            self.end_empty(&name, true);
            self.parts.disruption_lag_usd += usd;
            return;
        }
        if !w.cluster.runs_workload(&name) {
            *self.empty_usd.entry(name).or_insert(0.0) += usd;
            return;
        }
        self.end_empty(&name, false);
        let used = w
            .cluster
            .requested_on(&name)
            .map(|r| {
                let share = |req: i64, alloc: i64| {
                    if alloc > 0 {
                        req as f64 / alloc as f64
                    } else {
                        0.0
                    }
                };
                share(r.cpu, node.allocatable.cpu)
                    .max(share(r.memory, node.allocatable.memory))
                    .min(1.0)
            })
            .unwrap_or(0.0);
        self.parts.packing_waste_usd += usd * (1.0 - used);
        self.parts.too_large_usd += self.cheap_rates.too_large_usd(w, i, node, used, usd);
        if i.capacity_type == CAPACITY_TYPE_ON_DEMAND && spot_allowed(w, &i.nodepool) {
            if let Some(spot) = self.spot_price(w, i) {
                if i.price.0 > 0 && spot < i.price.0 {
                    let premium = 1.0 - spot as f64 / i.price.0 as f64;
                    self.parts.spot_premium_usd += usd * used * premium;
                }
            }
        }
    }

    /// A node's empty stretch is over: it ended in removal (disruption lag) or a pod (idle).
    fn end_empty(&mut self, node: &str, removed: bool) {
        if let Some(usd) = self.empty_usd.remove(node) {
            if removed {
                self.parts.disruption_lag_usd += usd;
            } else {
                self.parts.idle_usd += usd;
            }
        }
    }

    fn spot_price(&mut self, w: &World<SimCloud>, i: &Instance) -> Option<i64> {
        *self
            .spot_price
            .entry((i.instance_type.clone(), i.zone.clone()))
            .or_insert_with(|| {
                w.control
                    .actuator()
                    .instance_types()
                    .get(&i.instance_type)?
                    .offerings
                    .iter()
                    .filter(|o| o.capacity_type == CAPACITY_TYPE_SPOT && o.zone == i.zone)
                    .map(|o| o.price.0)
                    .min()
            })
    }

    /// The parts, with what the replay cost and its lower bound; empty stretches still open are
    /// idle.
    pub(crate) fn finish(mut self, total_usd: f64, lower_bound_usd: f64) -> CostBreakdown {
        let open: Vec<String> = self.empty_usd.keys().cloned().collect();
        for node in open {
            self.end_empty(&node, false);
        }
        let mut p = self.parts;
        p.gap_usd = total_usd - lower_bound_usd;
        p.other_usd = p.gap_usd
            - p.boot_usd
            - p.idle_usd
            - p.disruption_lag_usd
            - p.packing_waste_usd
            - p.too_large_usd
            - p.spot_premium_usd;
        p
    }
}

/// Whether the NodePool (if it still exists) lets its nodes be spot.
fn spot_allowed(w: &World<SimCloud>, nodepool: &str) -> bool {
    w.control
        .actuator()
        .nodepools()
        .get(nodepool)
        .is_some_and(|p| p.requirements.allows(CAPACITY_TYPE, CAPACITY_TYPE_SPOT))
}
