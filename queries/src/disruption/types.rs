//! The collections the disruption queries pass to each other.

use super::lifetime::Lifetime;
use crate::types::ClassId;
use dovetail_dataflow::disruption_reasons::{ActiveBudget, Blocker, DriftReason};
use dovetail_dataflow::facts::InterruptionKind;
use dovetail_dataflow::model::{ConsolidationPolicy, Price};
use serde::{Deserialize, Serialize};

/// Where a node's price is looked up: its NodePool, instance type, and zone and capacity type
/// (None when the node has no such label: any).
pub type OfferKey = (String, String, Option<String>, Option<String>);

/// A pod that has to move if its node goes away (not a DaemonSet or mirror pod).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct MovablePod {
    pub key: String,
    pub class: ClassId,
    /// Karpenter's eviction cost: 1 + deletion-cost / 2²⁷ + priority / 2²⁵, clamped to ±10,
    /// in millionths.
    pub eviction_cost: i64,
}

/// Everything about one NodePool-managed node that the disruption rules read.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Candidate {
    pub node: String,
    pub nodeclaim: Option<String>,
    pub nodepool: String,
    pub policy: ConsolidationPolicy,
    /// `consolidateAfter: Never`.
    pub consolidate_never: bool,
    /// `consolidateAfter` has passed since the last pod event (Karpenter's Consolidatable).
    pub consolidatable: bool,
    /// When it becomes (or became) consolidatable; `None` with `consolidateAfter: Never`.
    pub consolidatable_at_ms: Option<i64>,
    pub capacity_type: String,
    /// Its `node.kubernetes.io/instance-type` label.
    pub instance_type: String,
    /// Its offering, by which the commands query looks its price up (`None`: it has no
    /// instance-type label; no price).
    pub offer: Option<OfferKey>,
    /// The price of its offering (`None`: not offered any more). Always `None` as the
    /// candidates query makes it: the commands query fills it in from its own index of offer
    /// prices, so that a price change reaches it as one changed key, not as the thousands of
    /// candidates that key prices.
    pub price: Option<Price>,
    /// Movable pods by class, sorted.
    pub pods: Vec<(ClassId, i64)>,
    /// What disrupting it costs, in millionths: 1 for the node itself plus each pod's eviction
    /// cost, negative ones counted as 0 (Karpenter's `RescheduleDisruptionCost`; the base keeps
    /// an empty node's cost above zero, so ratios and `Balanced` shares never divide by zero).
    pub disruption_cost: i64,
    /// When it expires and its `expireAfter` (`None`: Never), by which consolidation scales
    /// `disruption_cost` ([`super::lifetime::scaled_cost`]).
    pub lifetime: Option<Lifetime>,
    /// Why graceful disruption may not touch it (do-not-disrupt, a PodDisruptionBudget).
    pub blocked_by: Option<Blocker>,
    /// Already tainted `karpenter.sh/disrupted` or being deleted.
    pub disrupting: bool,
}

/// A reason a node should go regardless of savings (drift goes within budgets, but is forced
/// in that savings do not matter), with what it is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Forced {
    Interrupted(InterruptionKind),
    /// Expired at `at_ms` (its NodeClaim's creation plus `expireAfter`).
    Expired {
        at_ms: i64,
    },
    Drifted(DriftReason),
}

/// How many more nodes of a NodePool may be disrupted now, per reason.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Allowance {
    pub empty: i64,
    pub drifted: i64,
    pub underutilized: i64,
    /// The active budget that sets each limit (None: no budget limits it).
    pub empty_budget: Option<ActiveBudget>,
    pub drifted_budget: Option<ActiveBudget>,
    pub underutilized_budget: Option<ActiveBudget>,
}
