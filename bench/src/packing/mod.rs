//! Packing cost on real pod sizes (issue 20): dovetail's packing of a workload's pending pods
//! against a Karpenter-style first-fit decreasing ([`ffd`]) on the same NodePools and
//! instance types, both beside a bound that neither computes ([`bound`]) and beside dovetail's
//! own bound.

pub mod bound;
pub mod ffd;
pub mod workload;

use anyhow::{Context, Result};
use dovetail_dataflow::decisions::Decision;
use dovetail_dataflow::engine::Engine;
use dovetail_dataflow::facts::Fact;
use dovetail_dataflow::model::Pod;
use ffd::{OfferedType, PoolOffer};
use serde::Serialize;
use serde_json::Value;
use std::time::Instant;

/// One workload's figures; prices in dollars per hour.
#[derive(Debug, Clone, Serialize)]
pub struct PackingRow {
    pub workload: String,
    pub pods: usize,
    pub dovetail_cost: f64,
    pub dovetail_nodeclaims: usize,
    pub dovetail_unschedulable: usize,
    pub dovetail_seconds: f64,
    pub karpenter_ffd_cost: f64,
    pub karpenter_ffd_nodeclaims: usize,
    pub karpenter_ffd_unplaced: usize,
    /// Issue 20's bound (the best CPU/memory weighting).
    pub bound: f64,
    /// The bound dovetail's packing reports (the largest single-resource LP bound).
    pub dovetail_bound: f64,
    pub dovetail_vs_bound: f64,
    pub karpenter_ffd_vs_bound: f64,
    pub dovetail_vs_karpenter_ffd: f64,
}

/// Facts for the manifests `objects` on the embedded us-east-1 catalogue.
pub fn facts_of(objects: Vec<Value>) -> Result<Vec<Fact>> {
    let manifests = dovetail_ingest::load_values("packing-bench", objects)
        .context("reading the workload's manifests")?;
    let catalog = dovetail_dataflow::catalog::embedded("us-east-1")?;
    Ok(dovetail_ingest::facts::manifest_facts(&manifests, catalog))
}

/// Every NodePool's offer, read from the facts the way the engine resolves it (the NodePool's
/// requirements admit the type and its offerings), without DaemonSets or overlays.
pub fn offers(facts: &[Fact]) -> Vec<PoolOffer> {
    let types: Vec<&dovetail_dataflow::model::InstanceType> = facts
        .iter()
        .filter_map(|f| match f {
            Fact::InstanceType { instance_type, .. } => Some(instance_type),
            _ => None,
        })
        .collect();
    facts
        .iter()
        .filter_map(|f| match f {
            Fact::NodePool(p) => Some(p),
            _ => None,
        })
        .map(|pool| PoolOffer {
            name: pool.name.clone(),
            weight: pool.weight,
            taints: pool.taints.clone(),
            types: types
                .iter()
                .filter(|it| it.requirements.intersects(&pool.requirements).is_ok())
                .filter_map(|it| {
                    let price = it.cheapest_offering(&pool.requirements)?.price.0;
                    Some(OfferedType {
                        name: it.name.clone(),
                        available: it.allocatable(),
                        capacity: it.capacity.clone(),
                        price,
                    })
                })
                .filter(|t| t.available.cpu > 0 && t.available.memory > 0 && t.available.pods > 0)
                .collect(),
        })
        .collect()
}

/// dovetail's packing of the facts' pending pods: (launch cost, launches, unschedulable pods,
/// its own bound), prices in micro-dollars per hour.
pub fn dovetail_packing(facts: Vec<Fact>) -> Result<(i64, usize, usize, i64)> {
    let mut engine =
        Engine::start(1, dovetail_queries::provisioning).context("starting the engine")?;
    engine.advance(1, facts.into_iter().map(|f| (f, 1)).collect())?;
    let (mut cost, mut launches, mut unschedulable, mut bound) = (0, 0, 0, 0);
    for d in engine.decisions() {
        match d {
            Decision::Launch(l) => {
                cost += l.price.0;
                launches += 1;
            }
            Decision::Unschedulable { .. } => unschedulable += 1,
            Decision::LowerBound(p) => bound += p.0,
            _ => {}
        }
    }
    Ok((cost, launches, unschedulable, bound))
}

/// Measures one workload.
pub fn measure(name: &str, objects: Vec<Value>) -> Result<PackingRow> {
    let facts = facts_of(objects)?;
    let pods: Vec<Pod> = facts
        .iter()
        .filter_map(|f| match f {
            Fact::Pod(p) => Some(dovetail_dataflow::model::Pod::clone(p)),
            _ => None,
        })
        .collect();
    let offers = offers(&facts);
    let ffd = ffd::karpenter_ffd(&offers, &pods);
    let bound = bound::weighted_bound(&offers, &pods);
    let start = Instant::now();
    let (cost, launches, unschedulable, own_bound) = dovetail_packing(facts)?;
    let seconds = start.elapsed().as_secs_f64();
    let dollars = |micros: f64| micros / 1e6;
    Ok(PackingRow {
        workload: name.to_string(),
        pods: pods.len(),
        dovetail_cost: dollars(cost as f64),
        dovetail_nodeclaims: launches,
        dovetail_unschedulable: unschedulable,
        dovetail_seconds: seconds,
        karpenter_ffd_cost: dollars(ffd.price as f64),
        karpenter_ffd_nodeclaims: ffd.nodeclaims,
        karpenter_ffd_unplaced: ffd.unplaced,
        bound: dollars(bound),
        dovetail_bound: dollars(own_bound as f64),
        dovetail_vs_bound: cost as f64 / bound,
        karpenter_ffd_vs_bound: ffd.price as f64 / bound,
        dovetail_vs_karpenter_ffd: cost as f64 / ffd.price as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A few openb-sized pods: the bound must stay below both packings, and both must place
    /// every pod (a bound above a real packing, or a lost pod, would make the ratios lie).
    #[test]
    fn the_bound_is_below_both_packings_and_every_pod_is_placed() {
        let sizes = [
            (12_500, 57_344),
            (32_000, 49_152),
            (8_000, 30_517),
            (500, 1_024),
        ];
        let pods: Vec<workload::OpenbPod> = (0..24)
            .map(|i| {
                let (cpu_milli, memory_mib) = sizes[i % sizes.len()];
                workload::OpenbPod {
                    cpu_milli,
                    memory_mib,
                    gpus: 0,
                }
            })
            .collect();
        let mut objects = workload::getting_started_pools();
        objects.push(workload::nodeclass());
        objects.extend(
            pods.iter()
                .enumerate()
                .map(|(i, p)| workload::pod_manifest(i, p)),
        );
        let row = measure("test", objects).expect("measures");
        assert_eq!(row.pods, 24);
        assert_eq!(row.dovetail_unschedulable, 0);
        assert_eq!(row.karpenter_ffd_unplaced, 0);
        assert!(row.bound > 0.0);
        assert!(row.bound <= row.dovetail_cost, "{row:?}");
        assert!(row.bound <= row.karpenter_ffd_cost, "{row:?}");
        assert!(row.dovetail_bound <= row.dovetail_cost, "{row:?}");
    }
}
