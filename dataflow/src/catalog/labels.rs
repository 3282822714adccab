//! The labels Karpenter derives for an instance type, as requirements (`computeRequirements` in
//! karpenter-provider-aws `pkg/providers/instancetype/types.go`).
//!
//! Each label with a value is a single-value requirement. A well-known instance label the type
//! has no value for is `DoesNotExist` (the empty finite set), as in Karpenter, so that a pod
//! requiring, say, a GPU name never matches a type without GPUs. Zone, zone id and capacity
//! type are the sets the type's available offerings cover.
//!
//! Where the catalogue data cannot follow Karpenter exactly:
//! - `instance-hypervisor` of bare-metal types is `DoesNotExist`; Karpenter writes `In [""]`.
//! - `instance-network-bandwidth` is set only for an exact `N Gigabit`; Karpenter also has a
//!   baseline for `Up to N Gigabit` types from a generated table this data lacks.
//! - `instance-local-nvme` is set for any local instance storage; Karpenter skips stores that do
//!   not support NVMe (older HDD/SATA SSD types), which the data does not distinguish.
//! - `instance-ebs-bandwidth`, `instance-encryption-in-transit-supported`, the accelerator and
//!   the capacity-reservation labels are not derived (no column, or no matching label constant).

use super::entry::CatalogEntry;
use crate::model::labels::{
    ARCH, CAPACITY_TYPE, INSTANCE_CATEGORY, INSTANCE_CPU, INSTANCE_CPU_MANUFACTURER,
    INSTANCE_FAMILY, INSTANCE_GENERATION, INSTANCE_GPU_COUNT, INSTANCE_GPU_MANUFACTURER,
    INSTANCE_GPU_MEMORY, INSTANCE_GPU_NAME, INSTANCE_HYPERVISOR, INSTANCE_LOCAL_NVME,
    INSTANCE_MEMORY, INSTANCE_NETWORK_BANDWIDTH, INSTANCE_SIZE, INSTANCE_TYPE, OS, REGION,
    WINDOWS_BUILD, ZONE, ZONE_ID,
};
use crate::model::{Offering, Requirement, Requirements};
use std::collections::BTreeSet;

/// The operating system every catalogue type is resolved for (Linux AMI families).
pub const OS_LINUX: &str = "linux";

/// Karpenter's `lowerKabobCase`: lower case, spaces to dashes (`RTX PRO 4500` → `rtx-pro-4500`).
pub fn lower_kebab(s: &str) -> String {
    s.replace(' ', "-").to_lowercase()
}

fn does_not_exist() -> Requirement {
    Requirement::finite(BTreeSet::new())
}

fn value_or_absent(value: Option<String>) -> Requirement {
    value.map_or_else(does_not_exist, Requirement::single)
}

/// The requirements of `entry` in `region` with `offerings`, or `None` when the type has no
/// architecture Kubernetes knows (Mac types).
pub fn requirements(
    entry: &CatalogEntry,
    region: &str,
    offerings: &[Offering],
) -> Option<Requirements> {
    let arch = entry.kube_arch()?;
    let available: Vec<&Offering> = offerings.iter().filter(|o| o.available).collect();
    let set = |f: fn(&Offering) -> &str| -> BTreeSet<String> {
        available
            .iter()
            .map(|o| f(o))
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .collect()
    };
    let gpu = (entry.gpu_count > 0 && !entry.fractional_gpu()).then_some(entry);

    let mut r = Requirements::new();
    r.add(INSTANCE_TYPE, Requirement::single(&entry.name));
    r.add(ARCH, Requirement::single(arch));
    r.add(OS, Requirement::single(OS_LINUX));
    r.add(REGION, Requirement::single(region));
    r.add(WINDOWS_BUILD, does_not_exist());
    r.add(ZONE, Requirement::finite(set(|o| &o.zone)));
    r.add(
        CAPACITY_TYPE,
        Requirement::finite(set(|o| &o.capacity_type)),
    );
    let zone_ids = set(|o| &o.zone_id);
    if !zone_ids.is_empty() {
        r.add(ZONE_ID, Requirement::finite(zone_ids));
    }
    r.add(INSTANCE_CATEGORY, value_or_absent(entry.category.clone()));
    r.add(
        INSTANCE_GENERATION,
        value_or_absent(entry.generation.map(|g| g.to_string())),
    );
    r.add(INSTANCE_FAMILY, Requirement::single(&entry.family));
    r.add(INSTANCE_SIZE, Requirement::single(&entry.size));
    r.add(INSTANCE_CPU, Requirement::single(entry.vcpu.to_string()));
    r.add(
        INSTANCE_CPU_MANUFACTURER,
        Requirement::single(lower_kebab(&entry.cpu_manufacturer)),
    );
    r.add(
        INSTANCE_MEMORY,
        Requirement::single(entry.memory_mib.to_string()),
    );
    r.add(
        INSTANCE_HYPERVISOR,
        value_or_absent(entry.hypervisor.clone()),
    );
    r.add(
        INSTANCE_LOCAL_NVME,
        value_or_absent(
            (entry.instance_storage_gb > 0).then(|| entry.instance_storage_gb.to_string()),
        ),
    );
    r.add(
        INSTANCE_NETWORK_BANDWIDTH,
        value_or_absent(entry.network_bandwidth_mbps().map(|m| m.to_string())),
    );
    r.add(
        INSTANCE_GPU_COUNT,
        value_or_absent(gpu.map(|e| e.gpu_count.to_string())),
    );
    r.add(
        INSTANCE_GPU_NAME,
        value_or_absent(gpu.and_then(|e| e.gpu_model.as_deref()).map(lower_kebab)),
    );
    r.add(
        INSTANCE_GPU_MANUFACTURER,
        value_or_absent(
            gpu.and_then(|e| e.gpu_manufacturer.as_deref())
                .map(lower_kebab),
        ),
    );
    r.add(
        INSTANCE_GPU_MEMORY,
        value_or_absent(
            gpu.and_then(CatalogEntry::gpu_memory_mib_per_gpu)
                .map(|m| m.to_string()),
        ),
    );
    Some(r)
}
