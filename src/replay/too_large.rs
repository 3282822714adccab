//! The "too large" part of the replay's cost breakdown: what pods riding along on a node bought
//! for a pod too large for the NodePool's cheapest type cost above that cheapest rate.
//!
//! The lower bound prices each pod at the cheapest price per unit among the types it fits, so a
//! large pod's own premium is already in the bound. What a large pod adds to the gap is the
//! rest of its node: the other pods there pay the large type's rate where the bound charges
//! them the cheap type's. The cheapest rate is taken at the node's own zone and capacity type,
//! so this part does not overlap the spot premium, and over the used share only, so it does not
//! overlap packing waste.

use super::world::World;
use dovetail_dataflow::backend::Instance;
use dovetail_dataflow::model::labels::{CAPACITY_TYPE, ZONE};
use dovetail_dataflow::model::{Node, Pod, Resources};
use dovetail_sim::SimCloud;
use std::collections::HashMap;

/// A NodePool's cheapest type per unit of one resource at one zone and capacity type.
#[derive(Debug, Clone)]
struct CheapRate {
    /// Micro-dollars per hour per milli-unit.
    per_unit: f64,
    /// That type's allocatable: a pod that does not fit it is too large for it.
    allocatable: Resources,
}

/// The cheapest rates, looked up once per (NodePool, zone, capacity type, resource). Like the
/// spot prices in `breakdown.rs`, a price change during the replay is not seen.
#[derive(Debug, Default)]
pub(crate) struct CheapRates {
    rates: HashMap<(String, String, String, &'static str), Option<CheapRate>>,
    /// By node: what its pods too large for the cheap type request, kept while its pods are
    /// the same (see [`Large`]). Reading every node's pods at every step was most of a
    /// 100,000-pod replay's time.
    large: HashMap<String, Large>,
}

/// A node's pods too large for its cheapest rate's type: what they request of the resource,
/// or `None` when every pod fits that type; worked out at one version of the node's pods.
#[derive(Debug, Clone, Copy)]
struct Large {
    pods_version: u64,
    resource: &'static str,
    requested: Option<i64>,
}

/// The resources whose share of allocatable is a node's used share (as in packing waste).
const SHARED: [&str; 2] = [
    dovetail_dataflow::model::resources::CPU,
    dovetail_dataflow::model::resources::MEMORY,
];

impl CheapRates {
    /// Dollars of `usd` (the node's billed cost over an interval) that the too-large rule puts
    /// in its part, for running node `node` of instance `i` with `used` its used share.
    pub(crate) fn too_large_usd(
        &mut self,
        w: &World<SimCloud>,
        i: &Instance,
        node: &Node,
        used: f64,
        usd: f64,
    ) -> f64 {
        let Some(requested) = w.cluster.requested_on(&node.name) else {
            return 0.0;
        };
        // The resource that fills the node most is the one its used share is measured in.
        let Some((resource, share)) = SHARED
            .iter()
            .filter(|r| node.allocatable.get(r) > 0)
            .map(|r| (*r, requested.get(r) as f64 / node.allocatable.get(r) as f64))
            .max_by(|a, b| a.1.total_cmp(&b.1))
        else {
            return 0.0;
        };
        if share <= 0.0 || i.price.0 <= 0 {
            return 0.0;
        }
        let Some(cheap) = self.rate(w, i, resource) else {
            return 0.0;
        };
        let own_rate = i.price.0 as f64 / node.allocatable.get(resource) as f64;
        if cheap.per_unit >= own_rate {
            return 0.0;
        }
        let Some(pods_version) = w.cluster.pods_version(&node.name) else {
            return 0.0;
        };
        let kept = self
            .large
            .get(&node.name)
            .filter(|l| l.pods_version == pods_version && l.resource == resource);
        let large = match kept {
            Some(l) => l.requested,
            None => {
                let requested = too_large_requests(w, &node.name, &cheap.allocatable, resource);
                self.large.insert(
                    node.name.clone(),
                    Large {
                        pods_version,
                        resource,
                        requested,
                    },
                );
                requested
            }
        };
        let Some(large) = large else {
            return 0.0;
        };
        let riders = (requested.get(resource) - large).max(0) as f64;
        let riders_share = (riders / node.allocatable.get(resource) as f64).min(used);
        usd * riders_share * (1.0 - cheap.per_unit / own_rate)
    }

    fn rate(
        &mut self,
        w: &World<SimCloud>,
        i: &Instance,
        resource: &'static str,
    ) -> Option<CheapRate> {
        self.rates
            .entry((
                i.nodepool.clone(),
                i.zone.clone(),
                i.capacity_type.clone(),
                resource,
            ))
            .or_insert_with(|| cheapest(w, i, resource))
            .clone()
    }
}

/// What the pods on `node` that do not fit `allocatable` request of `resource`; `None` when
/// every pod fits.
fn too_large_requests(
    w: &World<SimCloud>,
    node: &str,
    allocatable: &Resources,
    resource: &str,
) -> Option<i64> {
    let pods = w.cluster.pods_on(node);
    let fits = |p: &Pod| p.scheduling.requests.fits_in(allocatable);
    if pods.iter().all(|p| fits(p)) {
        return None;
    }
    Some(
        pods.iter()
            .filter(|p| !fits(p))
            .map(|p| p.scheduling.requests.get(resource))
            .sum(),
    )
}

/// The NodePool's type with the lowest price per unit of `resource` among offerings in the
/// instance's zone and capacity type.
fn cheapest(w: &World<SimCloud>, i: &Instance, resource: &str) -> Option<CheapRate> {
    let actuator = w.control.actuator();
    let pool = actuator.nodepools().get(&i.nodepool)?;
    if !pool.requirements.allows(ZONE, &i.zone)
        || !pool.requirements.allows(CAPACITY_TYPE, &i.capacity_type)
    {
        return None;
    }
    actuator
        .instance_types()
        .values()
        .filter(|t| t.requirements.intersects(&pool.requirements).is_ok())
        .filter_map(|t| {
            let price = t
                .offerings
                .iter()
                .filter(|o| o.available && o.zone == i.zone && o.capacity_type == i.capacity_type)
                .map(|o| o.price.0)
                .min()?;
            let allocatable = t.allocatable();
            let have = allocatable.get(resource);
            (have > 0 && price > 0).then(|| CheapRate {
                per_unit: price as f64 / have as f64,
                allocatable,
            })
        })
        .min_by(|a, b| a.per_unit.total_cmp(&b.per_unit))
}
