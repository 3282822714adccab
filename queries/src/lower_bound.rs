//! Query 6 (cluster-wide) — a lower bound on what the whole cluster's pods cost to run.
//!
//! Rule: for each resource (CPU, memory, pod slots, GPUs, ...), every pod — pending or bound —
//! pays its share of the cheapest price per unit of that resource among the instance types its
//! class is compatible with; the bound is the largest of these per-resource sums. Each sum is the
//! optimum of the LP relaxation for that one resource, so no set of nodes running these pods can
//! cost less. (The packing query reports the same bound for the pending pods' new capacity.)

use crate::types::{ClassId, Compatibility, PodClass};
use differential_dataflow::VecCollection;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::Price;
use std::collections::BTreeMap;

pub fn cluster_lower_bound<'s>(
    class_counts: VecCollection<'s, Epoch, ((ClassId, PodClass), isize)>,
    compat: VecCollection<'s, Epoch, (ClassId, Compatibility)>,
) -> VecCollection<'s, Epoch, Price> {
    class_counts
        .map(|((id, class), n)| (id, (class, n)))
        .join_map(compat, |_id, (class, n), c| {
            let per_resource: Vec<(String, u64)> = c
                .unit_cost
                .iter()
                .filter(|(_, cost)| cost.get() < f64::MAX)
                .map(|(r, cost)| {
                    let need = class.scheduling.requests.get(r) as f64;
                    // Kept in integer pico-dollars per hour so it can sit in a collection.
                    (
                        r.clone(),
                        (need * cost.get() * *n as f64 * 1e6).round() as u64,
                    )
                })
                .collect();
            ((), per_resource)
        })
        .reduce_named("ClusterLowerBound", |_unit, rows, out| {
            let mut sums: BTreeMap<&str, u64> = BTreeMap::new();
            for (row, mult) in rows {
                for (r, v) in row.iter() {
                    *sums.entry(r.as_str()).or_insert(0) += v * (*mult).max(0) as u64;
                }
            }
            let best = sums.values().copied().max().unwrap_or(0);
            out.push((Price((best / 1_000_000) as i64), 1));
        })
        .map(|((), p)| p)
}
