//! What the node keeps back from pods: kube-reserved, system-reserved and the eviction
//! thresholds, by Karpenter's AWS rules (`kubeReservedResources`, `systemReservedResources` and
//! `evictionThreshold` in karpenter-provider-aws `pkg/providers/instancetype/types.go`).

use crate::model::quantity::{mib, Milli};
use crate::model::resources::{EPHEMERAL_STORAGE, MEMORY};
use crate::model::{KubeletConfig, Resources, Threshold};

/// The kubelet signal whose threshold is held back from memory.
pub const MEMORY_AVAILABLE: &str = "memory.available";
/// The kubelet signal whose threshold is held back from ephemeral storage.
pub const NODEFS_AVAILABLE: &str = "nodefs.available";

/// Karpenter's default `memory.available` hard-eviction threshold (100Mi).
pub const DEFAULT_MEMORY_AVAILABLE: Threshold = Threshold::Quantity(mib(100));
/// Karpenter's default `nodefs.available` hard-eviction threshold (10%).
pub const DEFAULT_NODEFS_AVAILABLE: Threshold = Threshold::PercentHundredths(1000);

/// The resource a reserved-map key names that is not a schedulable resource; it is left out.
const PID: &str = "pid";

/// Karpenter's default kube-reserved for a node (the Bottlerocket-derived formula): CPU is 6% of
/// the first core, 1% of the second, 0.5% of the third and fourth and 0.25% of every core above
/// four (in millicores, each band truncated as Karpenter does); memory is `11 MiB × max_pods +
/// 255 MiB`; ephemeral storage is 1 GiB. `kubelet.kube_reserved` overrides are applied by
/// [`overhead`], not here.
pub fn kube_reserved(vcpu: i64, max_pods: i64) -> Resources {
    let cpu = vcpu.saturating_mul(1000);
    let mut reserved_cpu = 0;
    for (start, end, share) in [
        (0, 1000, 0.06),
        (1000, 2000, 0.01),
        (2000, 4000, 0.005),
        (4000, 1i64 << 31, 0.0025),
    ] {
        if cpu >= start {
            let band = (cpu.min(end) - start) as f64;
            reserved_cpu += (band * share) as i64;
        }
    }
    Resources {
        cpu: reserved_cpu,
        memory: mib(max_pods.saturating_mul(11).saturating_add(255)),
        ephemeral_storage: mib(1024),
        ..Resources::default()
    }
}

/// A threshold in milli-units of a resource with `capacity`. A percentage is rounded up to a
/// whole unit (byte), as Karpenter does, and `100%` means "disabled" (0), as in Karpenter.
pub fn threshold_value(threshold: &Threshold, capacity: Milli) -> Milli {
    match *threshold {
        Threshold::PercentHundredths(10_000) => 0,
        Threshold::PercentHundredths(_) => {
            let milli = threshold.resolve(capacity);
            (milli + 999).div_euclid(1000) * 1000
        }
        Threshold::Quantity(q) => q,
    }
}

/// The eviction thresholds held back from allocatable: `memory.available` (default 100Mi) from
/// memory and `nodefs.available` (default 10%) from ephemeral storage, each replaced by
/// `kubelet.eviction_hard` when set there. `memory` and `ephemeral_storage` are the node's
/// capacities, which percentages refer to.
///
/// `eviction_soft` is deliberately ignored: Karpenter (since v1.x, commit 1d92708 included) only
/// lets hard thresholds reduce allocatable, since a soft threshold only warns.
pub fn eviction_threshold(
    memory: Milli,
    ephemeral_storage: Milli,
    kubelet: &KubeletConfig,
) -> Resources {
    let signal =
        |name: &str, default: &Threshold| *kubelet.eviction_hard.get(name).unwrap_or(default);
    Resources {
        memory: threshold_value(&signal(MEMORY_AVAILABLE, &DEFAULT_MEMORY_AVAILABLE), memory),
        ephemeral_storage: threshold_value(
            &signal(NODEFS_AVAILABLE, &DEFAULT_NODEFS_AVAILABLE),
            ephemeral_storage,
        ),
        ..Resources::default()
    }
}

/// Sets each entry of a kubelet reserved map (`pid` excepted) on `out`, replacing what is there.
fn assign(out: &mut Resources, reserved: &std::collections::BTreeMap<String, Milli>) {
    for (name, value) in reserved {
        if name != PID {
            out.set(name, *value);
        }
    }
}

/// kube-reserved + system-reserved + eviction threshold for a node of `vcpu` vCPUs and the given
/// `capacity` (whose pods, memory and ephemeral storage the formulas use). Each
/// `kubelet.kube_reserved` entry replaces the computed one; system-reserved is only what
/// `kubelet.system_reserved` sets. `pid` entries are skipped: they reserve process ids, not a
/// resource pods request.
///
/// The memory term uses the node's pod count (`capacity.pods`), as Karpenter does for
/// Bottlerocket. For AL2 and AL2023 Karpenter uses the ENI-limited count instead
/// (`UsesENILimitedMemoryOverhead`), so there a `max_pods` override leaves kube-reserved
/// memory alone; [`ResolveOptions`](super::ResolveOptions) carries no AMI family to tell them apart.
pub fn overhead(vcpu: i64, capacity: &Resources, kubelet: &KubeletConfig) -> Resources {
    let mut kube = kube_reserved(vcpu, capacity.pods / 1000);
    assign(&mut kube, &kubelet.kube_reserved);
    let mut system = Resources::default();
    assign(&mut system, &kubelet.system_reserved);
    let eviction = eviction_threshold(
        capacity.get(MEMORY),
        capacity.get(EPHEMERAL_STORAGE),
        kubelet,
    );
    kube.add(&system).add(&eviction)
}
