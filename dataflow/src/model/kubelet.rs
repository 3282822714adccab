//! The kubelet settings an EC2NodeClass may set (`spec.kubelet`), which change allocatable.

use super::quantity::Milli;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// An eviction threshold: an absolute quantity or a percentage of capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Threshold {
    Quantity(Milli),
    /// Hundredths of a percent (`10%` = 1000), so thresholds stay integers.
    PercentHundredths(i64),
}

impl Threshold {
    /// The threshold in milli-units for a resource of the given capacity.
    pub fn resolve(&self, capacity: Milli) -> Milli {
        match *self {
            Threshold::Quantity(q) => q,
            Threshold::PercentHundredths(p) => {
                ((capacity as i128 * p as i128 + 9_999) / 10_000) as Milli
            }
        }
    }
}

/// `spec.kubelet` of an EC2NodeClass. Keys of the maps are resource names (`cpu`, `memory`,
/// `ephemeral-storage`, `pid`) for the reserved maps, and eviction signals (`memory.available`,
/// `nodefs.available`, ...) for the eviction maps.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct KubeletConfig {
    pub max_pods: Option<i64>,
    pub pods_per_core: Option<i64>,
    pub kube_reserved: BTreeMap<String, Milli>,
    pub system_reserved: BTreeMap<String, Milli>,
    pub eviction_hard: BTreeMap<String, Threshold>,
    pub eviction_soft: BTreeMap<String, Threshold>,
}
