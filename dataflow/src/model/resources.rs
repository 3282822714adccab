//! Resource lists (requests, capacity, allocatable) as exact milli-unit vectors.

use super::quantity::Milli;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const PODS: &str = "pods";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const NVIDIA_GPU: &str = "nvidia.com/gpu";
pub const AMD_GPU: &str = "amd.com/gpu";
pub const NEURON: &str = "aws.amazon.com/neuron";

/// A resource list. The four resources every node has are fields (the packing hot path touches
/// them for every check); anything else (GPUs, hugepages, resources a NodeOverlay adds) lives in
/// `extended`, which is empty for most pods.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Resources {
    pub cpu: Milli,
    pub memory: Milli,
    pub pods: Milli,
    pub ephemeral_storage: Milli,
    pub extended: BTreeMap<String, Milli>,
}

impl Resources {
    pub fn get(&self, name: &str) -> Milli {
        match name {
            CPU => self.cpu,
            MEMORY => self.memory,
            PODS => self.pods,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            other => self.extended.get(other).copied().unwrap_or(0),
        }
    }

    pub fn set(&mut self, name: &str, value: Milli) {
        match name {
            CPU => self.cpu = value,
            MEMORY => self.memory = value,
            PODS => self.pods = value,
            EPHEMERAL_STORAGE => self.ephemeral_storage = value,
            other => {
                if value == 0 {
                    self.extended.remove(other);
                } else {
                    self.extended.insert(other.to_string(), value);
                }
            }
        }
    }

    /// Every resource name with a non-zero value, in a stable order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Milli)> + '_ {
        [
            (CPU, self.cpu),
            (MEMORY, self.memory),
            (PODS, self.pods),
            (EPHEMERAL_STORAGE, self.ephemeral_storage),
        ]
        .into_iter()
        .filter(|(_, v)| *v != 0)
        .chain(self.extended.iter().map(|(k, v)| (k.as_str(), *v)))
    }

    pub fn add(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        out.add_assign(other);
        out
    }

    /// Sums saturate at the ends of `Milli`: containers whose requests add up past `i64::MAX`
    /// ask for more than any node has, never for a wrapped (negative) amount that fits anywhere.
    pub fn add_assign(&mut self, other: &Resources) {
        self.cpu = self.cpu.saturating_add(other.cpu);
        self.memory = self.memory.saturating_add(other.memory);
        self.pods = self.pods.saturating_add(other.pods);
        self.ephemeral_storage = self
            .ephemeral_storage
            .saturating_add(other.ephemeral_storage);
        for (k, v) in &other.extended {
            let e = self.extended.entry(k.clone()).or_insert(0);
            *e = e.saturating_add(*v);
        }
    }

    /// Saturates as [`Resources::add_assign`] does.
    pub fn sub(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        out.cpu = out.cpu.saturating_sub(other.cpu);
        out.memory = out.memory.saturating_sub(other.memory);
        out.pods = out.pods.saturating_sub(other.pods);
        out.ephemeral_storage = out
            .ephemeral_storage
            .saturating_sub(other.ephemeral_storage);
        for (k, v) in &other.extended {
            let e = out.extended.entry(k.clone()).or_insert(0);
            *e = e.saturating_sub(*v);
        }
        out
    }

    /// `self` scaled by a whole number of copies (saturating, as [`Resources::add_assign`]).
    pub fn times(&self, n: i64) -> Resources {
        Resources {
            cpu: self.cpu.saturating_mul(n),
            memory: self.memory.saturating_mul(n),
            pods: self.pods.saturating_mul(n),
            ephemeral_storage: self.ephemeral_storage.saturating_mul(n),
            extended: self
                .extended
                .iter()
                .map(|(k, v)| (k.clone(), v.saturating_mul(n)))
                .collect(),
        }
    }

    /// The larger of each resource.
    pub fn max_each(&self, other: &Resources) -> Resources {
        let mut out = Resources {
            cpu: self.cpu.max(other.cpu),
            memory: self.memory.max(other.memory),
            pods: self.pods.max(other.pods),
            ephemeral_storage: self.ephemeral_storage.max(other.ephemeral_storage),
            extended: self.extended.clone(),
        };
        for (k, v) in &other.extended {
            let e = out.extended.entry(k.clone()).or_insert(0);
            *e = (*e).max(*v);
        }
        out
    }

    /// True when every resource requested here is available in `available`. A resource missing
    /// from `available` counts as zero, so a GPU request never fits a node without GPUs.
    pub fn fits_in(&self, available: &Resources) -> bool {
        self.cpu <= available.cpu
            && self.memory <= available.memory
            && self.pods <= available.pods
            && self.ephemeral_storage <= available.ephemeral_storage
            && self
                .extended
                .iter()
                .all(|(k, v)| *v <= 0 || *v <= available.extended.get(k).copied().unwrap_or(0))
    }

    /// How many whole copies of `self` fit into `available` (`i64::MAX` when `self` asks for
    /// nothing).
    pub fn copies_in(&self, available: &Resources) -> i64 {
        let mut n = i64::MAX;
        let mut limit = |need: Milli, have: Milli| {
            if need > 0 {
                n = n.min(if have <= 0 { 0 } else { have / need });
            }
        };
        limit(self.cpu, available.cpu);
        limit(self.memory, available.memory);
        limit(self.pods, available.pods);
        limit(self.ephemeral_storage, available.ephemeral_storage);
        for (k, v) in &self.extended {
            limit(*v, available.extended.get(k).copied().unwrap_or(0));
        }
        n
    }

    /// How many whole copies of `self` fit into `available − used`, without building the
    /// difference (the packing hot path).
    pub fn copies_in_remaining(&self, available: &Resources, used: &Resources) -> i64 {
        let mut n = i64::MAX;
        let mut limit = |need: Milli, have: Milli| {
            if need > 0 {
                n = n.min(if have <= 0 { 0 } else { have / need });
            }
        };
        limit(self.cpu, available.cpu.saturating_sub(used.cpu));
        limit(self.memory, available.memory.saturating_sub(used.memory));
        limit(self.pods, available.pods.saturating_sub(used.pods));
        limit(
            self.ephemeral_storage,
            available
                .ephemeral_storage
                .saturating_sub(used.ephemeral_storage),
        );
        for (k, v) in &self.extended {
            let have = available
                .extended
                .get(k)
                .copied()
                .unwrap_or(0)
                .saturating_sub(used.extended.get(k).copied().unwrap_or(0));
            limit(*v, have);
        }
        n
    }

    /// The first resource for which `self` exceeds `available`, for explanations.
    pub fn first_shortfall(&self, available: &Resources) -> Option<String> {
        self.iter()
            .find(|(k, v)| *v > available.get(k))
            .map(|(k, _)| k.to_string())
    }

    pub fn is_zero(&self) -> bool {
        self.iter().next().is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::quantity::{mib, units};

    fn res(cpu: i64, mem_mib: i64) -> Resources {
        Resources {
            cpu: units(cpu),
            memory: mib(mem_mib),
            pods: units(1),
            ..Default::default()
        }
    }

    #[test]
    fn copies_and_fit() {
        let node = res(4, 8192);
        let pod = res(1, 1024);
        assert_eq!(pod.copies_in(&node), 1); // limited by one pod slot
        let mut node = node;
        node.pods = units(110);
        assert_eq!(pod.copies_in(&node), 4);
        assert!(pod.times(4).fits_in(&node));
        assert!(!pod.times(5).fits_in(&node));
        assert_eq!(pod.times(5).first_shortfall(&node), Some("cpu".to_string()));
        let used = pod.times(3);
        assert_eq!(
            pod.copies_in_remaining(&node, &used),
            pod.copies_in(&node.sub(&used))
        );
        assert_eq!(pod.copies_in_remaining(&node, &used), 1);
    }

    #[test]
    fn sums_and_multiples_saturate_instead_of_wrapping() {
        let huge = Resources {
            cpu: i64::MAX / 2 + 1,
            memory: mib(1),
            pods: units(1),
            ..Default::default()
        };
        let mut sum = huge.add(&huge);
        assert_eq!(sum.cpu, i64::MAX);
        sum.set(NVIDIA_GPU, i64::MAX);
        sum.add_assign(&sum.clone());
        assert_eq!(sum.get(NVIDIA_GPU), i64::MAX);
        let mut node = res(192, 786_432);
        node.pods = units(110);
        node.set(NVIDIA_GPU, units(8));
        assert!(!sum.fits_in(&node), "a saturated sum fits no node");
        assert_eq!(huge.times(3).cpu, i64::MAX);
        assert_eq!(huge.times(-3).cpu, i64::MIN);
        let floor = Resources {
            cpu: i64::MIN,
            ..Default::default()
        };
        assert_eq!(floor.sub(&huge).cpu, i64::MIN);
        // `available − used` with used at the floor saturates high; the pod slots still bind.
        assert_eq!(res(1, 1).copies_in_remaining(&node, &floor), 110);
        assert_eq!(huge.copies_in_remaining(&node, &floor.times(-1)), 0);
    }

    #[test]
    fn extended_resources_must_exist_on_the_node() {
        let mut gpu_pod = res(1, 1024);
        gpu_pod.set(NVIDIA_GPU, units(1));
        let mut node = res(8, 32768);
        node.pods = units(10);
        assert!(!gpu_pod.fits_in(&node));
        assert_eq!(gpu_pod.copies_in(&node), 0);
        node.set(NVIDIA_GPU, units(4));
        assert!(gpu_pod.fits_in(&node));
        assert_eq!(gpu_pod.copies_in(&node), 4);
    }
}
