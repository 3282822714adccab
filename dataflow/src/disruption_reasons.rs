//! Why a node is or is not disrupted, as data: each kind of reason carries the objects and
//! numbers it is about, and is put into words only where a person reads it ([`std::fmt::Display`]
//! here, for the CLI, JSON and Events). Tools and tests match on the variants, not on text.

use crate::decisions::DisruptionReason;
use crate::facts::InterruptionKind;
use crate::model::cron::civil_from_days;
use crate::model::Price;
use crate::scheduling_reasons::Unschedulable;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The disruption budget that limits a reason now: the most restrictive active one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ActiveBudget {
    /// `nodes` as written (`"0"`, `"10%"`).
    pub nodes: String,
    /// Its cron `schedule` and `duration`, when it has a window.
    pub schedule: Option<String>,
    pub duration: Option<String>,
}

/// What holds a candidate back from a disruption method.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Blocker {
    /// `karpenter.sh/do-not-disrupt: "true"` on the node or its NodeClaim.
    NodeDoNotDisrupt { node: String },
    /// A pod annotated `karpenter.sh/do-not-disrupt`: `"true"`, or a duration whose window
    /// ends at `until_ms`.
    PodDoNotDisrupt { pod: String, until_ms: Option<i64> },
    /// A PodDisruptionBudget (`namespace/name`) that allows no eviction of the pod now.
    Pdb { pdb: String, pod: String },
    /// A pod selected by several PodDisruptionBudgets: the eviction API refuses it.
    ManyPdbs { pod: String, pdbs: Vec<String> },
    /// `consolidateAfter: Never` on the NodePool.
    ConsolidateNever { nodepool: String },
    /// `consolidationPolicy: WhenEmpty` and the node has pods.
    WhenEmpty { nodepool: String },
    /// `consolidateAfter` has not passed since the node's last pod event.
    ConsolidateAfter { until_ms: i64 },
    /// The NodePool's budget for the reason is used up.
    Budget {
        nodepool: String,
        reason: DisruptionReason,
        budget: Option<ActiveBudget>,
    },
    /// Its offering's price is not known, so no saving can be shown.
    PriceUnknown,
    /// Some of its pods would fit neither elsewhere nor on new NodeClaims (the provisioning
    /// solver's reason, as it gives it).
    PodsWouldNotFit { pods: i64, why: Unschedulable },
    /// Its pods need this many new NodeClaims: not a consolidation.
    NeedsNewNodes { count: usize },
    /// The cheapest replacement is not cheaper than the node.
    NotCheaper { replacement: Price, node: Price },
    /// Some of its pods would land on a NodeClaim that is not initialized yet: Karpenter's
    /// `SimulateScheduling` (`UninitializedNodeError`) waits rather than count on capacity that
    /// may not come up.
    UninitializedDestination { nodeclaim: String },
    /// The cheap necessary condition failed: its pods fit no other node's free room and no new
    /// NodeClaim holding any one of them costs less than the node.
    NoCheaperPlace { node: Price },
    /// No instance type of the replacement costs less than `max`.
    NoCheaperType { max: Price },
    /// Fewer cheaper types than the replacement's `minValues`.
    TooFewCheaperTypes {
        found: usize,
        min_values: usize,
        max: Price,
    },
    /// The replacement's types have no offering it allows.
    NoOffering,
    /// The replacement's NodePool is gone.
    NodePoolGone { nodepool: String },
    /// Spot-to-spot replacement without the SpotToSpotConsolidation gate.
    SpotToSpotDisabled,
    /// Spot-to-spot replacement of one node with fewer than the required cheaper types.
    SpotToSpotTooFewTypes { found: usize, needed: usize },
    /// `consolidationPolicy: Balanced`: the savings share (millionths) is under half the
    /// disruption share.
    Balanced {
        nodepool: String,
        savings_share: i64,
        disruption_share: i64,
    },
    /// Consolidatable, but another consolidation goes first: one command at a time, and none
    /// counts on a NodeClaim another launched that is not initialized yet (Karpenter's
    /// `UninitializedNodeError`, when the pods that need a new NodeClaim would land on one).
    Waiting,
}

/// Which field or hash of a node no longer matches its NodePool or EC2NodeClass.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum DriftReason {
    NodePoolHash {
        nodepool: String,
        was: String,
        now: String,
    },
    NodeClassHash {
        nodeclass: String,
        was: String,
        now: String,
    },
    Requirements {
        nodepool: String,
        key: String,
        detail: String,
    },
    Ami {
        ami: String,
        nodeclass: String,
    },
    Subnet {
        subnet: String,
        nodeclass: String,
    },
    SecurityGroups {
        nodeclass: String,
    },
    Enclaves {
        nodeclass: String,
    },
    InstanceType {
        instance_type: String,
        nodepool: String,
    },
}

/// A point on the engine's clock, in ms since the epoch, written as RFC 3339.
pub struct At(pub i64);

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.div_euclid(1000);
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60
        )
    }
}

impl fmt::Display for ActiveBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "nodes: {}", self.nodes)?;
        if let Some(s) = &self.schedule {
            write!(f, ", schedule {s:?}")?;
            if let Some(d) = &self.duration {
                write!(f, " for {d}")?;
            }
        }
        Ok(())
    }
}

impl Blocker {
    /// The variant's name, without its objects and numbers: for counting kinds of blocker.
    pub fn kind(&self) -> &'static str {
        match self {
            Blocker::NodeDoNotDisrupt { .. } => "NodeDoNotDisrupt",
            Blocker::PodDoNotDisrupt { .. } => "PodDoNotDisrupt",
            Blocker::Pdb { .. } => "Pdb",
            Blocker::ManyPdbs { .. } => "ManyPdbs",
            Blocker::ConsolidateNever { .. } => "ConsolidateNever",
            Blocker::WhenEmpty { .. } => "WhenEmpty",
            Blocker::ConsolidateAfter { .. } => "ConsolidateAfter",
            Blocker::Budget { .. } => "Budget",
            Blocker::PriceUnknown => "PriceUnknown",
            Blocker::PodsWouldNotFit { .. } => "PodsWouldNotFit",
            Blocker::NeedsNewNodes { .. } => "NeedsNewNodes",
            Blocker::NotCheaper { .. } => "NotCheaper",
            Blocker::UninitializedDestination { .. } => "UninitializedDestination",
            Blocker::NoCheaperPlace { .. } => "NoCheaperPlace",
            Blocker::NoCheaperType { .. } => "NoCheaperType",
            Blocker::TooFewCheaperTypes { .. } => "TooFewCheaperTypes",
            Blocker::NoOffering => "NoOffering",
            Blocker::NodePoolGone { .. } => "NodePoolGone",
            Blocker::SpotToSpotDisabled => "SpotToSpotDisabled",
            Blocker::SpotToSpotTooFewTypes { .. } => "SpotToSpotTooFewTypes",
            Blocker::Balanced { .. } => "Balanced",
            Blocker::Waiting => "Waiting",
        }
    }
}

impl fmt::Display for Blocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const DND: &str = "karpenter.sh/do-not-disrupt";
        match self {
            Blocker::NodeDoNotDisrupt { node } => write!(f, "node {node} has {DND}"),
            Blocker::PodDoNotDisrupt {
                pod,
                until_ms: None,
            } => write!(f, "pod {pod} has {DND}"),
            Blocker::PodDoNotDisrupt {
                pod,
                until_ms: Some(t),
            } => write!(f, "pod {pod} has {DND} until {}", At(*t)),
            Blocker::Pdb { pdb, pod } => {
                write!(f, "PodDisruptionBudget {pdb} allows no disruption of pod {pod}")
            }
            Blocker::ManyPdbs { pod, pdbs } => write!(
                f,
                "pod {pod} is selected by more than one PodDisruptionBudget ({}): the eviction API refuses it",
                pdbs.join(", ")
            ),
            // The listing names the NodePool beside the reason.
            Blocker::ConsolidateNever { .. } => write!(f, "consolidateAfter: Never"),
            Blocker::WhenEmpty { .. } => write!(f, "consolidationPolicy: WhenEmpty"),
            Blocker::ConsolidateAfter { until_ms } => {
                write!(f, "consolidateAfter not reached until {}", At(*until_ms))
            }
            Blocker::Budget {
                nodepool,
                reason,
                budget,
            } => {
                write!(
                    f,
                    "budget: NodePool {nodepool} allows no more {} disruptions now",
                    reason.as_str()
                )?;
                if let Some(b) = budget {
                    write!(f, " ({b})")?;
                }
                Ok(())
            }
            Blocker::PriceUnknown => write!(f, "its offering's price is not known"),
            Blocker::PodsWouldNotFit { pods, why } => {
                write!(f, "no replacement: {pods} pods would not fit: {why}")
            }
            Blocker::NeedsNewNodes { count } => write!(f, "its pods need {count} new nodes"),
            Blocker::NotCheaper { replacement, node } => {
                write!(f, "not cheaper: the replacement costs {replacement} vs {node}")
            }
            Blocker::UninitializedDestination { nodeclaim } => write!(
                f,
                "its pods would schedule against NodeClaim {nodeclaim}, which is not initialized yet"
            ),
            Blocker::NoCheaperPlace { node } => write!(
                f,
                "not cheaper: its pods fit no other node and no new node for them costs less than {node}"
            ),
            Blocker::NoCheaperType { max } => write!(
                f,
                "not cheaper: no instance type costs less than {max}"
            ),
            Blocker::TooFewCheaperTypes {
                found,
                min_values,
                max,
            } => write!(
                f,
                "only {found} instance types are cheaper than {max}, minValues needs {min_values}"
            ),
            Blocker::NoOffering => {
                write!(f, "no instance type has an offering the replacement allows")
            }
            Blocker::NodePoolGone { nodepool } => write!(f, "NodePool {nodepool} is gone"),
            Blocker::SpotToSpotDisabled => write!(
                f,
                "spot-to-spot consolidation is disabled (SpotToSpotConsolidation)"
            ),
            Blocker::SpotToSpotTooFewTypes { found, needed } => write!(
                f,
                "spot-to-spot replacement needs at least {needed} cheaper instance types, found {found}"
            ),
            Blocker::Balanced {
                nodepool,
                savings_share,
                disruption_share,
            } => write!(
                f,
                "consolidationPolicy: Balanced (NodePool {nodepool}: savings share {:.3} < half of disruption share {:.3})",
                *savings_share as f64 / 1e6,
                *disruption_share as f64 / 1e6
            ),
            Blocker::Waiting => write!(
                f,
                "waiting: one consolidation command at a time, none counting on a NodeClaim not yet initialized, as Karpenter"
            ),
        }
    }
}

impl fmt::Display for DriftReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriftReason::NodePoolHash { nodepool, was, now } => {
                write!(
                    f,
                    "NodePool {nodepool} template changed (hash {was} → {now})"
                )
            }
            DriftReason::NodeClassHash {
                nodeclass,
                was,
                now,
            } => write!(
                f,
                "EC2NodeClass {nodeclass} spec changed (hash {was} → {now})"
            ),
            DriftReason::Requirements {
                nodepool,
                key,
                detail,
            } => write!(
                f,
                "labels no longer satisfy NodePool {nodepool} requirements ({key}: {detail})"
            ),
            DriftReason::Ami { ami, nodeclass } => {
                write!(
                    f,
                    "AMI {ami} is no longer selected by EC2NodeClass {nodeclass}"
                )
            }
            DriftReason::Subnet { subnet, nodeclass } => write!(
                f,
                "subnet {subnet} is no longer selected by EC2NodeClass {nodeclass}"
            ),
            DriftReason::SecurityGroups { nodeclass } => write!(
                f,
                "security groups differ from those EC2NodeClass {nodeclass} selects"
            ),
            DriftReason::Enclaves { nodeclass } => write!(
                f,
                "Nitro Enclaves setting changed in EC2NodeClass {nodeclass}"
            ),
            DriftReason::InstanceType {
                instance_type,
                nodepool,
            } => write!(
                f,
                "instance type {instance_type} is no longer offered by NodePool {nodepool}"
            ),
        }
    }
}

impl fmt::Display for InterruptionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InterruptionKind::SpotInterruption => "spot interruption warning",
            InterruptionKind::ScheduledChange => "scheduled change",
            InterruptionKind::StateChange => "instance stopping or terminating",
            InterruptionKind::CapacityReservationInterruption => {
                "capacity reservation interruption"
            }
            InterruptionKind::CapacityBlockEnding => "capacity block ending",
            InterruptionKind::RebalanceRecommendation => "rebalance recommendation",
        })
    }
}

impl DriftReason {
    /// The field or hash that drifted, in Karpenter's terms (a short tag for tools).
    pub fn field(&self) -> &'static str {
        match self {
            DriftReason::NodePoolHash { .. } => "NodePoolHash",
            DriftReason::NodeClassHash { .. } => "NodeClassHash",
            DriftReason::Requirements { .. } => "Requirements",
            DriftReason::Ami { .. } => "AMI",
            DriftReason::Subnet { .. } => "Subnet",
            DriftReason::SecurityGroups { .. } => "SecurityGroups",
            DriftReason::Enclaves { .. } => "Enclaves",
            DriftReason::InstanceType { .. } => "InstanceType",
        }
    }
}

/// What one node is, as each disruption method sees it, apart from what the commands decide:
/// kept per node by the verdicts query for `dovetail explain node`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeVerdict {
    pub node: String,
    pub nodeclaim: Option<String>,
    pub nodepool: String,
    pub instance_type: String,
    pub capacity_type: String,
    /// Its movable pods (DaemonSet and mirror pods left out).
    pub pods: i64,
    pub price: Option<Price>,
    /// When `consolidateAfter` has passed since its last pod event (`None`: Never).
    pub consolidatable_at_ms: Option<i64>,
    /// Everything that holds graceful disruption back, not only the first.
    pub blockers: Vec<Blocker>,
    pub drift: Option<DriftReason>,
    /// When it expires (`None`: `expireAfter: Never`, or no creation time known).
    pub expires_at_ms: Option<i64>,
    pub interrupted: Option<InterruptionKind>,
    /// Being deleted or tainted `karpenter.sh/disrupted` already.
    pub disrupting: bool,
}
