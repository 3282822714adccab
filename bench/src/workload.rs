//! Karpenter's scheduling-benchmark mix, built directly as facts.
//!
//! Infrastructure (after `fake.InstanceTypes(400)` in Karpenter's fake cloud provider): one
//! NodePool with no requirements, one EC2NodeClass, and 400 instance types where type `i` has
//! `i+1` vCPU, `2(i+1)` GiB and `10(i+1)` pods, on-demand offerings in three zones and spot in
//! two, every offering priced alike at 0.1 per vCPU plus 0.1 per GB (10^9 bytes) of memory, as
//! the fake's `PriceFromResources` does (spot costs the same as on-demand there). Overhead is
//! zero.
//!
//! Pods, in five equal groups (any remainder is generic):
//! - generic: label `my-label` drawn from a..g;
//! - zone spread: maxSkew 1, `DoNotSchedule`; its own `my-label` and its selector's `my-label`
//!   are drawn independently, as Karpenter's benchmark draws them;
//! - hostname spread: likewise, over `kubernetes.io/hostname`;
//! - zone self-affinity: label `my-affinity` drawn from a..g, required affinity to pods with the
//!   same value in the same zone;
//! - hostname self anti-affinity: every pod `app: nginx`, anti-affine to `app: nginx` per node.
//!
//! With `nodepools` above one (not in Karpenter's benchmark), each pod also belongs to one of
//! that many teams, drawn uniformly: it runs in namespace `team-k` and selects NodePool
//! `bench-k`, so that the teams share no NodePool and no topology term, and each is a packing
//! group of its own.
//!
//! Requests: CPU from {100, 250, 500, 1000, 1500}m and memory from {100, 256, 512, 1024, 2048,
//! 4096}Mi, each drawn uniformly per pod (Karpenter draws them with a seeded `math/rand`; this
//! draws them from a seeded SplitMix64, so the mix is the same in distribution and deterministic,
//! not the same pod for pod).

use dovetail_dataflow::facts::Fact;
use dovetail_dataflow::model::labels::{
    ARCH, CAPACITY_TYPE, HOSTNAME, INSTANCE_TYPE, NODEPOOL, OS, ZONE,
};
use dovetail_dataflow::model::quantity::{mib, units};
use dovetail_dataflow::model::{
    EC2NodeClass, InstanceType, LabelSelector, NodePool, Offering, Pod, PodAffinityTerm,
    PodScheduling, Price, Requirement, Requirements, Resources, TopologySpread, WhenUnsatisfiable,
};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

pub const INSTANCE_TYPES: usize = 400;
pub const NAMESPACE: &str = "default";
pub const NODE_CLASS: &str = "bench";
pub const NODE_POOL: &str = "bench";
pub const CPU_MILLIS: [i64; 5] = [100, 250, 500, 1000, 1500];
pub const MEMORY_MIB: [i64; 6] = [100, 256, 512, 1024, 2048, 4096];
pub const LABEL_VALUES: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];
pub const ZONES: [&str; 3] = ["test-zone-1", "test-zone-2", "test-zone-3"];
pub const SPOT_ZONES: [&str; 2] = ["test-zone-1", "test-zone-2"];

const MY_LABEL: &str = "my-label";
const MY_AFFINITY: &str = "my-affinity";

/// A small deterministic generator (SplitMix64): the benchmark needs reproducible draws, not
/// statistical quality, and no extra dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`; returns 0 for `n == 0`).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// The five pod groups of the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Group {
    Generic,
    ZoneSpread,
    HostnameSpread,
    ZoneAffinity,
    HostnameAntiAffinity,
}

impl Group {
    pub const ALL: [Group; 5] = [
        Group::Generic,
        Group::ZoneSpread,
        Group::HostnameSpread,
        Group::ZoneAffinity,
        Group::HostnameAntiAffinity,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Group::Generic => "generic",
            Group::ZoneSpread => "zone-spread",
            Group::HostnameSpread => "hostname-spread",
            Group::ZoneAffinity => "zone-affinity",
            Group::HostnameAntiAffinity => "hostname-anti-affinity",
        }
    }
}

fn selector(key: &str, value: &str) -> LabelSelector {
    let mut requirements = Requirements::new();
    requirements.add(key, Requirement::single(value));
    LabelSelector { requirements }
}

fn labels(key: &str, value: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(key.to_string(), value.to_string())])
}

/// The fake cloud provider's price for a capacity: 0.1 per vCPU plus 0.1 per 10^9 bytes.
pub fn fake_price(vcpu: i64, memory_bytes: i64) -> Price {
    Price::from_dollars(0.1 * vcpu as f64 + 0.1 * memory_bytes as f64 / 1e9)
}

/// Instance type `i` of the fake catalogue.
pub fn instance_type(i: usize) -> InstanceType {
    let n = i as i64 + 1;
    let name = format!("fake-it-{i}");
    let price = fake_price(n, 2 * n * (1 << 30));
    let offering = |zone: &str, capacity_type: &str| Offering {
        zone: zone.to_string(),
        zone_id: String::new(),
        capacity_type: capacity_type.to_string(),
        price,
        available: true,
    };
    let mut offerings: Vec<Offering> = SPOT_ZONES.iter().map(|z| offering(z, "spot")).collect();
    offerings.extend(ZONES.iter().map(|z| offering(z, "on-demand")));
    let mut requirements = Requirements::new();
    requirements.add(INSTANCE_TYPE, Requirement::single(name.clone()));
    requirements.add(ARCH, Requirement::single("amd64"));
    requirements.add(
        OS,
        Requirement::finite(
            ["darwin", "linux", "windows"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        ),
    );
    requirements.add(
        ZONE,
        Requirement::finite(ZONES.iter().map(|s| s.to_string()).collect()),
    );
    requirements.add(
        CAPACITY_TYPE,
        Requirement::finite(
            ["on-demand", "spot"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        ),
    );
    InstanceType {
        name,
        requirements,
        capacity: Resources {
            cpu: units(n),
            memory: mib(2048 * n),
            pods: units(10 * n),
            ..Default::default()
        },
        overhead: Resources::default(),
        offerings,
    }
}

/// The name of NodePool `k` of `nodepools`.
pub fn nodepool_name(k: usize, nodepools: usize) -> String {
    if nodepools <= 1 {
        NODE_POOL.to_string()
    } else {
        format!("{NODE_POOL}-{k}")
    }
}

/// The NodeClass, the NodePools and the 400 instance types.
pub fn infrastructure(nodepools: usize) -> Vec<Fact> {
    let mut facts = vec![Fact::NodeClass(EC2NodeClass {
        name: NODE_CLASS.to_string(),
        ..Default::default()
    })];
    facts.extend((0..nodepools.max(1)).map(|k| {
        Fact::NodePool(NodePool {
            name: nodepool_name(k, nodepools),
            node_class: Some(NODE_CLASS.to_string()),
            ..Default::default()
        })
    }));
    facts.extend((0..INSTANCE_TYPES).map(|i| Fact::InstanceType {
        node_class: NODE_CLASS.to_string(),
        instance_type: instance_type(i),
    }));
    facts
}

/// Makes pods of the mix, each with a fresh name.
#[derive(Debug, Clone)]
pub struct Workload {
    rng: Rng,
    next: u64,
    nodepools: usize,
}

impl Workload {
    pub fn new(seed: u64, nodepools: usize) -> Workload {
        Workload {
            rng: Rng::new(seed),
            next: 0,
            nodepools,
        }
    }

    /// `count` pods: `count / 5` of each group, the remainder generic.
    pub fn initial(&mut self, count: usize) -> Vec<Pod> {
        let per_group = count / Group::ALL.len();
        let mut pods = Vec::with_capacity(count);
        for group in Group::ALL {
            for _ in 0..per_group {
                pods.push(self.pod(group));
            }
        }
        while pods.len() < count {
            pods.push(self.pod(Group::Generic));
        }
        pods
    }

    /// One pod of a random group.
    pub fn random_pod(&mut self) -> Pod {
        let group = self.rng.pick(&Group::ALL);
        self.pod(group)
    }

    /// A uniform draw in `0..n`, from the same stream as the pods.
    pub fn below(&mut self, n: usize) -> usize {
        self.rng.below(n)
    }

    /// One pod of `group`.
    pub fn pod(&mut self, group: Group) -> Pod {
        let mut scheduling = PodScheduling::default();
        let pod_labels = match group {
            Group::Generic => labels(MY_LABEL, self.rng.pick(&LABEL_VALUES)),
            Group::ZoneSpread | Group::HostnameSpread => {
                let own = labels(MY_LABEL, self.rng.pick(&LABEL_VALUES));
                let key = if group == Group::ZoneSpread {
                    ZONE
                } else {
                    HOSTNAME
                };
                scheduling.topology_spread.push(TopologySpread {
                    topology_key: key.to_string(),
                    max_skew: 1,
                    when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                    selector: selector(MY_LABEL, self.rng.pick(&LABEL_VALUES)),
                    min_domains: None,
                });
                own
            }
            Group::ZoneAffinity => {
                let value = self.rng.pick(&LABEL_VALUES);
                scheduling.pod_affinity.push(PodAffinityTerm {
                    topology_key: ZONE.to_string(),
                    selector: selector(MY_AFFINITY, value),
                    namespaces: BTreeSet::new(),
                });
                labels(MY_AFFINITY, value)
            }
            Group::HostnameAntiAffinity => {
                scheduling.pod_anti_affinity.push(PodAffinityTerm {
                    topology_key: HOSTNAME.to_string(),
                    selector: selector("app", "nginx"),
                    namespaces: BTreeSet::new(),
                });
                labels("app", "nginx")
            }
        };
        scheduling.requests = Resources {
            cpu: self.rng.pick(&CPU_MILLIS),
            memory: mib(self.rng.pick(&MEMORY_MIB)),
            pods: units(1),
            ..Default::default()
        };
        let name = format!("{}-{:07}", group.name(), self.next);
        self.next += 1;
        let mut namespace = NAMESPACE.to_string();
        if self.nodepools > 1 {
            let team = self.rng.below(self.nodepools);
            namespace = format!("team-{team}");
            scheduling.node_selector.add(
                NODEPOOL,
                Requirement::single(nodepool_name(team, self.nodepools)),
            );
        }
        Pod {
            namespace,
            name,
            labels: pod_labels,
            scheduling,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_mix_has_equal_groups_and_is_deterministic() {
        let a = Workload::new(42, 1).initial(1003);
        let b = Workload::new(42, 1).initial(1003);
        assert_eq!(a, b);
        assert_eq!(a.len(), 1003);
        let anti = a
            .iter()
            .filter(|p| !p.scheduling.pod_anti_affinity.is_empty())
            .count();
        assert_eq!(anti, 200);
        let generic = a
            .iter()
            .filter(|p| {
                p.scheduling.topology_spread.is_empty()
                    && p.scheduling.pod_affinity.is_empty()
                    && p.scheduling.pod_anti_affinity.is_empty()
            })
            .count();
        assert_eq!(generic, 203);
    }

    #[test]
    fn instance_types_follow_the_fake_catalogue() {
        let it = instance_type(3);
        assert_eq!(it.capacity.cpu, units(4));
        assert_eq!(it.capacity.memory, mib(8192));
        assert_eq!(it.capacity.pods, units(40));
        assert_eq!(it.offerings.len(), 5);
        assert!(it
            .offerings
            .iter()
            .all(|o| o.price == it.offerings[0].price));
        assert_eq!(it.allocatable(), it.capacity);
    }
}
