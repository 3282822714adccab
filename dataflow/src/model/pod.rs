//! Pods as the scheduler sees them: requests, node requirements, tolerations, topology spread
//! and pod (anti-)affinity.

use super::requirements::Requirements;
use super::resources::Resources;
use super::selector::LabelSelector;
use super::taints::Toleration;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum WhenUnsatisfiable {
    DoNotSchedule,
    ScheduleAnyway,
}

/// `spec.topologySpreadConstraints[]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TopologySpread {
    pub topology_key: String,
    pub max_skew: i64,
    pub when_unsatisfiable: WhenUnsatisfiable,
    pub selector: LabelSelector,
    pub min_domains: Option<i64>,
}

/// One pod (anti-)affinity term. `namespaces` empty means the pod's own namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PodAffinityTerm {
    pub topology_key: String,
    pub selector: LabelSelector,
    pub namespaces: BTreeSet<String>,
}

/// The scheduling-relevant part of a pod's spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PodScheduling {
    /// Effective requests as kube-scheduler computes them (see [`pod_requests`]), with `pods: 1`.
    pub requests: Resources,
    /// `nodeSelector` as `In` requirements.
    pub node_selector: Requirements,
    /// `requiredDuringScheduling...nodeSelectorTerms`: OR of terms, each an AND.
    pub required_node_affinity: Vec<Requirements>,
    /// `preferredDuringScheduling...`: (weight, term), heaviest first.
    pub preferred_node_affinity: Vec<(i32, Requirements)>,
    pub tolerations: Vec<Toleration>,
    pub topology_spread: Vec<TopologySpread>,
    pub pod_affinity: Vec<PodAffinityTerm>,
    pub pod_anti_affinity: Vec<PodAffinityTerm>,
    pub preferred_pod_affinity: Vec<(i32, PodAffinityTerm)>,
    pub preferred_pod_anti_affinity: Vec<(i32, PodAffinityTerm)>,
    /// Zones the pod's bound or to-be-bound volumes allow (`None`: no zonal volume).
    pub volume_zones: Option<BTreeSet<String>>,
    pub priority: i32,
}

/// A pod: identity, labels and scheduling spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub scheduling: PodScheduling,
    /// `spec.nodeName` (or the node a simulation bound it to).
    pub node_name: Option<String>,
    /// Kind and name of the controlling owner (`ReplicaSet/web-5d9f`), if any.
    pub owner: Option<(String, String)>,
    /// A DaemonSet's pod or a mirror (static) pod: never pending on the autoscaler's account.
    pub is_daemon: bool,
    /// `metadata.creationTimestamp` in ms since the epoch, when known (starts a
    /// `karpenter.sh/do-not-disrupt` grace period given as a duration).
    pub created_ms: Option<i64>,
}

/// A pod as the queries' streams carry it: one copy shared by the operators that read it.
pub type SharedPod = super::shared::Shared<Pod>;

impl Pod {
    /// `namespace/name`, the id used in every output.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// One container's requests, and for an init container whether it is a sidecar
/// (`restartPolicy: Always`).
#[derive(Debug, Clone, Default)]
pub struct ContainerRequests {
    pub requests: Resources,
    pub sidecar: bool,
}

/// A pod's effective requests as kube-scheduler computes them: the larger of (the sum of the
/// ordinary containers plus every sidecar) and (each ordinary init container plus the sidecars
/// started before it), plus the pod overhead, plus one pod slot.
pub fn pod_requests(
    containers: &[Resources],
    init_containers: &[ContainerRequests],
    overhead: &Resources,
) -> Resources {
    let mut running = Resources::default();
    for c in containers {
        running.add_assign(c);
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for init in init_containers {
        if init.sidecar {
            sidecars.add_assign(&init.requests);
            init_peak = init_peak.max_each(&sidecars);
        } else {
            init_peak = init_peak.max_each(&init.requests.add(&sidecars));
        }
    }
    running.add_assign(&sidecars);
    let mut total = running.max_each(&init_peak);
    total.add_assign(overhead);
    total.pods = super::quantity::units(1);
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::quantity::{mib, units};

    fn r(cpu_m: i64, mem_mib: i64) -> Resources {
        Resources {
            cpu: cpu_m,
            memory: mib(mem_mib),
            ..Default::default()
        }
    }

    #[test]
    fn large_init_container_sizes_the_pod() {
        let req = pod_requests(
            &[r(500, 256)],
            &[ContainerRequests {
                requests: r(2000, 128),
                sidecar: false,
            }],
            &Resources::default(),
        );
        assert_eq!(req.cpu, 2000);
        assert_eq!(req.memory, mib(256));
        assert_eq!(req.pods, units(1));
    }

    #[test]
    fn sidecars_add_to_containers_and_to_later_init_containers() {
        let req = pod_requests(
            &[r(500, 256)],
            &[
                ContainerRequests {
                    requests: r(300, 100),
                    sidecar: true,
                },
                ContainerRequests {
                    requests: r(700, 50),
                    sidecar: false,
                },
            ],
            &r(100, 10),
        );
        // running: 500+300 = 800; init peak: 700+300 = 1000 -> 1000 + 100 overhead
        assert_eq!(req.cpu, 1100);
        // memory: running 356, init 150 -> 356 + 10
        assert_eq!(req.memory, mib(366));
    }
}
