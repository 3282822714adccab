//! How the simulated kube-scheduler ranks the nodes a pod fits: the two resource scores of
//! kube-scheduler's default profile, each with weight 1.
//!
//! - **NodeResourcesFit, `LeastAllocated` strategy** (cpu and memory, weight 1 each): per
//!   resource `(allocatable − requested_after) · 100 / allocatable` in integers (0 when
//!   allocatable is 0 or requested exceeds it), then the weighted sum divided by the sum of the
//!   weights. `requested_after` is the node's requests plus the pod's, each pod counted with
//!   kube-scheduler's non-zero defaults (100m CPU, 200 MiB memory for a pod that requests none),
//!   as `NonZeroRequested` does.
//! - **NodeResourcesBalancedAllocation** (cpu and memory): the fractions
//!   `requested_after / allocatable` (capped at 1, a resource with no allocatable left out), with
//!   the pods' actual requests; with two resources the standard deviation is
//!   `|f_cpu − f_memory| / 2`; the score is `⌊(1 − std) · 100⌋`. A pod that requests neither cpu
//!   nor memory (best effort) gets 0 on every node, as kube-scheduler skips the plugin for it.
//!
//! The node with the highest sum wins. kube-scheduler picks at random among equal scores; the
//! simulation takes the first of them by node name, so a replay is reproducible. The other
//! scores of the default profile (TaintToleration, NodeAffinity, PodTopologySpread,
//! InterPodAffinity, ImageLocality) are not modelled, nor `percentageOfNodesToScore`: every
//! feasible node is scored.

use crate::state::NodeState;
use dovetail_dataflow::model::quantity::{mib, units};
use dovetail_dataflow::model::{Pod, Resources};

/// kube-scheduler's `MaxNodeScore`.
pub const MAX_NODE_SCORE: i64 = 100;

/// CPU a pod that requests none counts for in LeastAllocated (`DefaultMilliCPURequest`, 100m).
pub const DEFAULT_CPU_REQUEST: i64 = units(1) / 10;

/// Memory a pod that requests none counts for in LeastAllocated (`DefaultMemoryRequest`, 200 MiB).
pub const DEFAULT_MEMORY_REQUEST: i64 = mib(200);

/// CPU and memory, in the units of [`Resources`] (thousandths).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuMemory {
    pub cpu: i64,
    pub memory: i64,
}

impl CpuMemory {
    pub fn of(r: &Resources) -> CpuMemory {
        CpuMemory {
            cpu: r.cpu,
            memory: r.memory,
        }
    }

    /// What a pod counts for in LeastAllocated: its requests, a zero one replaced by the
    /// scheduler's default.
    pub fn non_zero(r: &Resources) -> CpuMemory {
        CpuMemory {
            cpu: if r.cpu == 0 {
                DEFAULT_CPU_REQUEST
            } else {
                r.cpu
            },
            memory: if r.memory == 0 {
                DEFAULT_MEMORY_REQUEST
            } else {
                r.memory
            },
        }
    }

    pub fn plus(self, o: CpuMemory) -> CpuMemory {
        CpuMemory {
            cpu: self.cpu + o.cpu,
            memory: self.memory + o.memory,
        }
    }

    pub fn minus(self, o: CpuMemory) -> CpuMemory {
        CpuMemory {
            cpu: self.cpu - o.cpu,
            memory: self.memory - o.memory,
        }
    }
}

/// One resource's LeastAllocated score (`leastRequestedScore`).
fn least_requested(requested: i64, allocatable: i64) -> i64 {
    if allocatable <= 0 || requested > allocatable {
        return 0;
    }
    // i128: memory in thousandths of a byte times 100 would overflow i64 past ~90 PB.
    ((allocatable - requested) as i128 * MAX_NODE_SCORE as i128 / allocatable as i128) as i64
}

/// NodeResourcesFit's LeastAllocated score for a node whose requests, this pod included, are
/// `requested_after` (non-zero counting).
pub fn least_allocated(requested_after: CpuMemory, allocatable: CpuMemory) -> i64 {
    // Weight 1 each: the sum over the sum of the weights.
    (least_requested(requested_after.cpu, allocatable.cpu)
        + least_requested(requested_after.memory, allocatable.memory))
        / 2
}

/// NodeResourcesBalancedAllocation's score for a node whose requests, this pod included, are
/// `requested_after` (actual requests).
pub fn balanced_allocation(requested_after: CpuMemory, allocatable: CpuMemory) -> i64 {
    let fractions: Vec<f64> = [
        (requested_after.cpu, allocatable.cpu),
        (requested_after.memory, allocatable.memory),
    ]
    .into_iter()
    .filter(|(_, a)| *a > 0)
    .map(|(r, a)| (r as f64 / a as f64).min(1.0))
    .collect();
    let std = match fractions.as_slice() {
        [a, b] => ((a - b) / 2.0).abs(),
        _ => 0.0,
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

/// A pending pod's requests as the two scores count them.
pub(crate) struct PodScore {
    non_zero: CpuMemory,
    actual: CpuMemory,
    best_effort: bool,
}

impl PodScore {
    pub(crate) fn new(pod: &Pod) -> PodScore {
        let r = &pod.scheduling.requests;
        PodScore {
            non_zero: CpuMemory::non_zero(r),
            actual: CpuMemory::of(r),
            best_effort: r.cpu == 0 && r.memory == 0,
        }
    }

    /// The default profile's total for `node` (a node the pod fits).
    pub(crate) fn score(&self, node: &NodeState) -> i64 {
        let allocatable = CpuMemory::of(&node.node.allocatable);
        let fit = least_allocated(node.non_zero_requested.plus(self.non_zero), allocatable);
        let balanced = if self.best_effort {
            0
        } else {
            balanced_allocation(
                CpuMemory::of(&node.requested).plus(self.actual),
                allocatable,
            )
        };
        fit + balanced
    }
}
