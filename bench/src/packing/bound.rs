//! The bound issue 20 fixes for comparing packers, independent of dovetail's own: the best, over
//! CPU/memory weightings w ∈ {0, 0.05, …, 1}, of Σ over pods of the cheapest fitting type's price
//! × (w·cpu/vCPUs + (1−w)·memory/memory), on raw instance capacity.
//!
//! Why it bounds every packing: a node of type T holding pods P has Σ_P (w·cpu/cpu_T +
//! (1−w)·mem/mem_T) ≤ 1, and T is one of the fitting types each of those pods minimises over,
//! so the pods' shares sum to at most T's price. It stays fixed while the packer changes, so a
//! ratio to it moves only when the packing does.

use super::ffd::PoolOffer;
use dovetail_dataflow::model::Pod;
use std::collections::BTreeMap;

/// Pods alike for the bound: their requests, and the NodePools that may take them.
type PodShape = (Vec<(String, i64)>, Vec<usize>);

/// Steps of w: 0, 0.05, …, 1.
const STEPS: u32 = 20;

/// The bound in micro-dollars per hour (pods that no type fits contribute nothing).
pub fn weighted_bound(pools: &[PoolOffer], pods: &[Pod]) -> f64 {
    // Pods with the same requests and the same usable NodePools share their minimum.
    let mut classes: BTreeMap<PodShape, (usize, &Pod)> = BTreeMap::new();
    for pod in pods {
        let usable: Vec<usize> = (0..pools.len()).filter(|&p| pools[p].takes(pod)).collect();
        let key: Vec<(String, i64)> = pod
            .scheduling
            .requests
            .iter()
            .map(|(r, v)| (r.to_string(), v))
            .collect();
        classes.entry((key, usable)).or_insert((0, pod)).0 += 1;
    }
    let mut best = 0.0f64;
    for step in 0..=STEPS {
        let w = f64::from(step) / f64::from(STEPS);
        let mut sum = 0.0;
        for ((_, usable), (count, pod)) in &classes {
            let req = &pod.scheduling.requests;
            let mut cheapest = f64::INFINITY;
            for &p in usable {
                for t in &pools[p].types {
                    let cap = &t.capacity;
                    let fits = req
                        .iter()
                        .filter(|(r, _)| *r != "pods")
                        .all(|(r, v)| v <= cap.get(r));
                    if !fits || cap.cpu <= 0 || cap.memory <= 0 {
                        continue;
                    }
                    let share = w * req.cpu as f64 / cap.cpu as f64
                        + (1.0 - w) * req.memory as f64 / cap.memory as f64;
                    cheapest = cheapest.min(t.price as f64 * share);
                }
            }
            if cheapest.is_finite() {
                sum += cheapest * *count as f64;
            }
        }
        best = best.max(sum);
    }
    best
}
