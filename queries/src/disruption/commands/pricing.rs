//! Pricing a consolidation replacement: which of its instance types stay, so that whatever
//! offering EC2 picks, the new NodeClaim costs less than what it replaces.

use super::super::types::Candidate;
use super::{Evaluation, MIN_SPOT_TO_SPOT_TYPES};
use crate::types::PoolTypes;
use dovetail_dataflow::decisions::Launch;
use dovetail_dataflow::disruption_reasons::Blocker;
use dovetail_dataflow::model::labels::{
    CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_SPOT,
    INSTANCE_TYPE,
};
use dovetail_dataflow::model::{InstanceType, Offering, Price, Requirement};
use std::collections::BTreeSet;

impl<'a> Evaluation<'a> {
    /// Narrows a consolidation replacement to what keeps it cheaper than `max_price`, as
    /// Karpenter's `computeConsolidation` does: when every removed node is spot and the launch
    /// may be spot, it is spot-to-spot (only with the SpotToSpotConsolidation gate, spot only;
    /// a single node needs at least 15 cheaper types and the list is cut to max(15,
    /// minValues)); otherwise only types cheaper than `max_price` at their worst launch price
    /// are kept.
    pub(super) fn price_replacement(
        &self,
        nodes: &[&Candidate],
        l: &mut Launch,
        max_price: i64,
    ) -> Result<(), Blocker> {
        let all_spot = nodes.iter().all(|c| c.capacity_type == CAPACITY_TYPE_SPOT);
        if !(all_spot && l.capacity_types.iter().any(|t| t == CAPACITY_TYPE_SPOT)) {
            return self.keep_cheaper(l, max_price);
        }
        if !self.spot_to_spot {
            return Err(Blocker::SpotToSpotDisabled);
        }
        l.capacity_types = vec![CAPACITY_TYPE_SPOT.to_string()];
        l.requirements.add(
            CAPACITY_TYPE,
            Requirement::single(CAPACITY_TYPE_SPOT.to_string()),
        );
        self.keep_cheaper(l, max_price)?;
        if nodes.len() > 1 {
            // Karpenter asks no minimum flexibility of a multi-node spot-to-spot command.
            return Ok(());
        }
        if l.instance_types.len() < MIN_SPOT_TO_SPOT_TYPES {
            return Err(Blocker::SpotToSpotTooFewTypes {
                found: l.instance_types.len(),
                needed: MIN_SPOT_TO_SPOT_TYPES,
            });
        }
        let keep = MIN_SPOT_TO_SPOT_TYPES.max(min_instance_types(l));
        let kept: Vec<String> = l.instance_types.iter().take(keep).cloned().collect();
        self.set_types(l, kept)
    }

    /// Keeps the launch's instance types whose worst launch price is below `max_price`
    /// (Karpenter's `RemoveInstanceTypeOptionsByPriceAndMinValues`): whichever offering EC2
    /// picks, the replacement is cheaper than what it replaces. A launch that may be spot or
    /// on-demand was priced as spot, so it is narrowed to spot: if spot capacity runs out the
    /// launch fails rather than buying a dearer on-demand node.
    ///
    /// Without this, the replacement listed every type that fits (cheapest first), and a
    /// fleet request falling back from the cheapest could launch a node dearer than the one it
    /// replaced.
    pub(super) fn keep_cheaper(&self, l: &mut Launch, max_price: i64) -> Result<(), Blocker> {
        let pool = self.pool(&l.nodepool)?;
        let kept: Vec<String> = l
            .instance_types
            .iter()
            .filter(|name| {
                pool.types
                    .iter()
                    .find(|t| &&t.instance_type.name == name)
                    .and_then(|t| worst_launch_price(&t.instance_type, l))
                    .is_some_and(|p| p < max_price)
            })
            .cloned()
            .collect();
        if kept.is_empty() {
            return Err(Blocker::NoCheaperType {
                max: Price(max_price),
            });
        }
        let min_values = min_instance_types(l);
        if kept.len() < min_values {
            return Err(Blocker::TooFewCheaperTypes {
                found: kept.len(),
                min_values,
                max: Price(max_price),
            });
        }
        let spot = CAPACITY_TYPE_SPOT.to_string();
        if l.capacity_types.contains(&spot) && l.capacity_types.len() > 1 {
            l.capacity_types = vec![spot.clone()];
            l.requirements.add(CAPACITY_TYPE, Requirement::single(spot));
        }
        self.set_types(l, kept)
    }

    /// Sets a launch's instance types (cheapest first, as given) and recomputes what follows
    /// from them: its requirement, zones and cheapest price. Types left without an offering the
    /// launch allows are dropped.
    pub(super) fn set_types(&self, l: &mut Launch, types: Vec<String>) -> Result<(), Blocker> {
        let pool = self.pool(&l.nodepool)?;
        let mut kept = Vec::new();
        let mut zones = BTreeSet::new();
        let mut price: Option<i64> = None;
        for name in types {
            let Some(t) = pool.types.iter().find(|t| t.instance_type.name == name) else {
                continue;
            };
            let mut any = false;
            for o in t
                .instance_type
                .offerings
                .iter()
                .filter(|o| launch_allows(l, o))
            {
                any = true;
                zones.insert(o.zone.clone());
                price = Some(price.map_or(o.price.0, |p| p.min(o.price.0)));
            }
            if any {
                kept.push(name);
            }
        }
        let Some(price) = price else {
            return Err(Blocker::NoOffering);
        };
        l.requirements.add(
            INSTANCE_TYPE,
            Requirement::finite(kept.iter().cloned().collect()),
        );
        l.instance_types = kept;
        l.zones = zones.into_iter().collect();
        l.price = Price(price);
        Ok(())
    }

    pub(super) fn pool(&self, name: &str) -> Result<&'a PoolTypes, Blocker> {
        self.world
            .pools
            .iter()
            .copied()
            .find(|p| p.nodepool.name == name)
            .ok_or_else(|| Blocker::NodePoolGone {
                nodepool: name.to_string(),
            })
    }
}

/// The `minValues` of a launch's instance-type requirement (0 without one).
pub(super) fn min_instance_types(l: &Launch) -> usize {
    l.requirements
        .get(INSTANCE_TYPE)
        .and_then(|r| r.min_values)
        .unwrap_or(0) as usize
}

/// Whether a launch may get this offering: available, in its zones and capacity types.
pub(super) fn launch_allows(l: &Launch, o: &Offering) -> bool {
    o.available && l.zones.contains(&o.zone) && l.capacity_types.contains(&o.capacity_type)
}

/// The most a launch may pay for a type (Karpenter's `WorstLaunchPrice`): the dearest offering
/// the launch allows of the capacity type it would get — reserved, else spot, else on-demand.
pub(super) fn worst_launch_price(it: &InstanceType, l: &Launch) -> Option<i64> {
    [
        CAPACITY_TYPE_RESERVED,
        CAPACITY_TYPE_SPOT,
        CAPACITY_TYPE_ON_DEMAND,
    ]
    .iter()
    .find_map(|ct| {
        it.offerings
            .iter()
            .filter(|o| o.capacity_type == *ct && launch_allows(l, o))
            .map(|o| o.price.0)
            .max()
    })
}
