//! What `dovetail explain pod` and `explain launch` read: for a pending pod class, each
//! NodePool's verdict at each relaxation level (the types that fit, or the first thing that
//! rules it out), and for a launch, its types' offerings in price order. Only the explaining
//! build of the queries gives these; nothing acts on them.

use crate::model::{Price, Requirements, Resources, UnitCost};
use crate::scheduling_reasons::PoolRejection;
use serde::{Deserialize, Serialize};

/// One instance type with the cheapest offering a pod class or launch allows it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TypeOffer {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    pub price: Price,
}

/// The types of a NodePool a class may use at one relaxation level.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Fits {
    /// How many instance types fit.
    pub types: u32,
    /// The cheapest of them (at most [`CHEAPEST_SHOWN`]), cheapest first.
    pub cheapest: Vec<TypeOffer>,
}

/// How many of a NodePool's fitting types a verdict lists.
pub const CHEAPEST_SHOWN: usize = 10;

/// One NodePool's verdict for a pod class.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PoolVerdict {
    pub nodepool: String,
    pub weight: i32,
    /// Per relaxation level: the types that fit, or the first thing that rules the NodePool out.
    pub levels: Vec<Result<Fits, PoolRejection>>,
}

/// One set of requirements a class is tried with.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Level {
    pub requirements: Requirements,
    /// Whether this level dropped a preferred node-affinity term.
    pub dropped_preference: bool,
}

/// A pending pod class and where it may go.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PodVerdict {
    pub class: u64,
    /// Its pending pods, `namespace/name`.
    pub pods: Vec<String>,
    pub requests: Resources,
    /// The requirement sets tried, strictest first (Karpenter's preference relaxation).
    pub levels: Vec<Level>,
    /// The level the class is scheduled with: the strictest some NodePool fits.
    pub chosen: u32,
    /// By NodePool name.
    pub pools: Vec<PoolVerdict>,
    /// Per requested resource at the chosen level, the cheapest price per milli-unit among the
    /// compatible types (what the lower bound charges a pod).
    pub unit_cost: Vec<(String, UnitCost)>,
}

/// A launch's instance types as CreateFleet will be offered them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LaunchVerdict {
    pub launch: String,
    /// Each of its types with the cheapest offering its requirements allow, cheapest first.
    pub offers: Vec<TypeOffer>,
}
