//! Decisions: what the standing queries maintain. Their diffs are the actions.

use crate::disruption_reasons::{Blocker, NodeVerdict};
use crate::model::{Price, Requirements};
use crate::provisioning_verdicts::{LaunchVerdict, PodVerdict};
use crate::scheduling_reasons::Unschedulable;
use serde::{Deserialize, Serialize};

/// A NodeClaim to create.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Launch {
    /// Deterministic: a stable hash of NodePool, requirements, instance-type set and ordinal.
    pub name: String,
    pub nodepool: String,
    /// Cheapest first, at most 60 (as Karpenter truncates).
    pub instance_types: Vec<String>,
    pub zones: Vec<String>,
    pub capacity_types: Vec<String>,
    /// The cheapest offering the launch allows.
    pub price: Price,
    /// The NodeClaim's requirements (NodePool's, pods', topology's), for CreateFleet overrides.
    pub requirements: Requirements,
    /// How many pods of each class it holds: (class id, count).
    pub pods_by_class: Vec<(u64, i64)>,
}

/// Where some pods of one class go: an existing node, an in-flight NodeClaim, or a launch.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Placement {
    pub class: u64,
    /// Node name or launch name.
    pub target: String,
    /// Order among the class's placements (pods of the class are dealt out in this order).
    pub order: u32,
    pub count: i64,
}

/// One output record of the engine.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Decision {
    Launch(Launch),
    /// A pending pod goes to a node or launch.
    Binding {
        pod: String,
        target: String,
    },
    Unschedulable {
        pod: String,
        reason: Unschedulable,
    },
    /// The fractional lower bound on the cost per hour of the pending pods' new capacity.
    LowerBound(Price),
    /// The fractional lower bound on the cost per hour of running every pod (pending and bound).
    ClusterLowerBound(Price),
    /// A node to disrupt, or a candidate that is blocked (with why).
    Disruption(Disruption),
    /// A NodeClaim seen without dovetail's drift-hash annotations: write these, so later
    /// changes of its NodePool or EC2NodeClass drift it.
    Adopt {
        nodeclaim: String,
        nodepool_hash: String,
        nodeclass_hash: String,
    },
    /// What each disruption method reads of a node, for `dovetail explain node`; only the
    /// explaining build of the queries gives these (nothing acts on them). Boxed: it is the
    /// largest record, and every decision would carry its size.
    NodeVerdict(Box<NodeVerdict>),
    /// Where a pending pod class may go, NodePool by NodePool, for `dovetail explain pod`
    /// (explaining build only).
    PodVerdict(Box<PodVerdict>),
    /// A launch's types with their offerings, for `dovetail explain launch` (explaining build
    /// only).
    LaunchVerdict(Box<LaunchVerdict>),
}

/// Why a node is disrupted, in Karpenter's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum DisruptionReason {
    Interrupted,
    Expired,
    Empty,
    Drifted,
    Underutilized,
}

impl DisruptionReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DisruptionReason::Interrupted => "Interrupted",
            DisruptionReason::Expired => "Expired",
            DisruptionReason::Empty => "Empty",
            DisruptionReason::Drifted => "Drifted",
            DisruptionReason::Underutilized => "Underutilized",
        }
    }
}

/// A disruption of one node, alone or as part of a multi-node command.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Disruption {
    pub node: String,
    pub nodeclaim: Option<String>,
    pub nodepool: String,
    pub reason: DisruptionReason,
    /// Shared by the nodes of one command; `None` for a blocked candidate.
    pub command: Option<String>,
    /// Names of the replacement launches (also listed as `Decision::Launch`).
    pub replacements: Vec<String>,
    /// What the whole command saves per hour (node prices minus replacement prices).
    pub savings_per_hour: Price,
    /// Why the candidate is not disrupted now (`None`: it is). Boxed: most decisions are not
    /// listings, and every one would carry its size.
    pub blocked_by: Option<Box<Blocker>>,
}
