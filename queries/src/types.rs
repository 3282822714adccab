//! The intermediate collections the standing queries pass to each other.

pub use dovetail_dataflow::model::UnitCost;
use dovetail_dataflow::model::{
    InstanceType, LabelSet, NodePool, PodScheduling, Requirements, Resources, SharedNode,
};
use dovetail_dataflow::scheduling_reasons::PoolRejection;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Serde for an `Arc` as its contents (serde's own needs its `rc` feature, which would rebuild
/// every dependency that uses serde).
mod shared {
    use super::*;

    pub fn serialize<T: Serialize, S: Serializer>(v: &Arc<T>, s: S) -> Result<S::Ok, S::Error> {
        T::serialize(v, s)
    }

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Arc<T>, D::Error> {
        T::deserialize(d).map(Arc::new)
    }
}

/// Pods that the scheduler cannot tell apart: same namespace, labels and scheduling spec.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PodClass {
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub scheduling: PodScheduling,
}

/// A class id: the stable hash of the class.
pub type ClassId = u64;

/// A class with its pending pods (`ns/name`, sorted).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ClassMembers {
    pub class: PodClass,
    pub members: Vec<String>,
}

/// One instance type as a NodePool offers it: allocatable net of the DaemonSet overhead that
/// NodePool's nodes carry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PoolType {
    /// Shared, not copied: a NodePool's offer holds hundreds of types, and every operator that
    /// holds the offer (packing, compatibility, disruption) cloned them all at each price
    /// change.
    #[serde(with = "shared")]
    pub instance_type: Arc<InstanceType>,
    /// Allocatable minus DaemonSet overhead: what pending pods may use.
    pub available: Resources,
}

/// An instance type shared between records, for collections keyed by it (see
/// [`PoolType::instance_type`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SharedType(#[serde(with = "shared")] pub Arc<InstanceType>);

/// A NodePool with everything it can launch, cheapest first.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PoolTypes {
    pub nodepool: NodePool,
    pub types: Vec<PoolType>,
    /// Why the NodePool cannot launch anything (e.g. its EC2NodeClass is missing).
    pub not_ready: Option<String>,
}

/// Where a class may go: the requirements it is scheduled with (after relaxing preferences it
/// cannot meet), and per NodePool the indices of the compatible types in `PoolTypes::types`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Compatibility {
    pub requirements: Requirements,
    /// Which relaxation level was used (0 = every preference honoured).
    pub relaxation: u32,
    /// Whether that level dropped a preferred node-affinity term: Karpenter gets there only
    /// after dropping every preferred pod (anti-)affinity term, so the packing starts without
    /// them.
    pub dropped_node_preference: bool,
    pub pools: Vec<(String, Vec<u32>)>,
    /// Why each incompatible NodePool was rejected (at the strictest level).
    pub rejections: Vec<(String, PoolRejection)>,
    /// Per requested resource, the cheapest price per milli-unit among compatible types (for
    /// the lower bound).
    pub unit_cost: Vec<(String, UnitCost)>,
}

/// Bound pods by (namespace, labels), with counts: enough for topology and affinity counts.
pub type BoundPods = Vec<(LabelSet, i64)>;

/// An existing Node or in-flight NodeClaim with what its bound pods already use.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeState {
    /// Shared with the node stream and every copy of the state downstream.
    pub node: SharedNode,
    pub used: Resources,
    /// Shared between the copies of the state that the queries downstream hold (pending room,
    /// disruption's parts): at 10,000 nodes each copy's labels were ~120 MiB of peak heap.
    #[serde(with = "shared")]
    pub pods: Arc<BoundPods>,
}
