//! What an instance type's node reports as capacity, by Karpenter's AWS rules
//! (`computeCapacity` in karpenter-provider-aws `pkg/providers/instancetype/types.go`).

use super::entry::CatalogEntry;
use crate::model::quantity::{mib, units};
use crate::model::resources::{AMD_GPU, NEURON, NVIDIA_GPU};
use crate::model::{KubeletConfig, Resources};

/// Share of memory Karpenter assumes the hypervisor keeps (its `--vm-memory-overhead-percent`
/// default) until it has seen a real node of the type.
pub const VM_MEMORY_OVERHEAD_PERCENT: f64 = 0.075;

/// Memory Graviton types reserve for the contiguous memory allocator, which Karpenter subtracts.
pub const ARM64_CMA_MIB: i64 = 64;

/// The root volume Karpenter assumes when the EC2NodeClass sets no block device mappings
/// (`amifamily.DefaultEBS`, 20Gi).
pub const DEFAULT_EPHEMERAL_STORAGE_GIB: i64 = 20;

/// Node memory in MiB: the EC2 figure, less 64 MiB of CMA on arm64, less the VM overhead
/// rounded up to a whole MiB. Computed in floating point exactly as Karpenter does, so that the
/// rounding agrees with it for every size.
pub fn memory_capacity_mib(entry: &CatalogEntry) -> i64 {
    let mut size = entry.memory_mib;
    if entry.is_arm64_first() {
        size -= ARM64_CMA_MIB;
    }
    let bytes = (size * 1024 * 1024) as f64;
    let overhead = (bytes * VM_MEMORY_OVERHEAD_PERCENT / 1024.0 / 1024.0).ceil() as i64;
    size - overhead
}

/// The node's pod limit: `kubelet.max_pods` when set, otherwise the VPC CNI's ENI-limited count;
/// then capped at `pods_per_core × vCPUs` when `pods_per_core` is set (and positive).
pub fn max_pods(entry: &CatalogEntry, kubelet: &KubeletConfig) -> i64 {
    let count = kubelet.max_pods.unwrap_or(entry.max_pods_eni);
    match kubelet.pods_per_core {
        Some(per_core) if per_core > 0 => count.min(per_core.saturating_mul(entry.vcpu)),
        _ => count,
    }
}

/// The node's capacity: vCPUs, memory (see [`memory_capacity_mib`]), pods (see [`max_pods`]),
/// the root volume as ephemeral storage, and whole GPUs / Neuron devices as extended resources.
/// Fractional-GPU types get no GPU resource (a share of a GPU is not a schedulable unit).
pub fn capacity(
    entry: &CatalogEntry,
    kubelet: &KubeletConfig,
    ephemeral_storage_gib: i64,
) -> Resources {
    let mut out = Resources {
        cpu: units(entry.vcpu),
        memory: mib(memory_capacity_mib(entry)),
        pods: units(max_pods(entry, kubelet)),
        ephemeral_storage: mib(ephemeral_storage_gib * 1024),
        ..Resources::default()
    };
    if !entry.fractional_gpu() {
        match entry.gpu_manufacturer.as_deref() {
            Some("NVIDIA") => out.set(NVIDIA_GPU, units(entry.gpu_count)),
            Some("AMD") => out.set(AMD_GPU, units(entry.gpu_count)),
            _ => {}
        }
    }
    out.set(NEURON, units(entry.neuron_device_count));
    out
}
