//! Which offerings a CreateFleet `Type=instant` request for a launch may fill, in the order EC2
//! tries them: the overrides actuation sends, whatever the `Cloud`.
//!
//! The rule, as Karpenter's AWS provider builds the request and EC2 fills it:
//! - An offering is a candidate when its type is one of the launch's instance types, it is
//!   `available` in the type's offerings and not in the capacity-error cache (Karpenter's
//!   unavailable offerings), its zone is one of the launch's zones (no zones: any),
//!   its capacity type is one of the launch's capacity types (none: on-demand, Karpenter's
//!   default), and the launch's requirements allow its zone, zone id and capacity type.
//! - When the launch allows both spot and on-demand (and no requirement has `minValues`), an
//!   instance type is dropped if it has spot candidates but none priced at or below the
//!   cheapest on-demand candidate and no reserved candidate (Karpenter's `SpotInstanceFilter`:
//!   never a bigger, pricier spot type instead of a cheaper on-demand one).
//! - One capacity type per request: reserved if allowed and some candidate is reserved, else spot
//!   likewise, else on-demand (Karpenter's `getCapacityType`). A launch allowing spot and
//!   on-demand therefore asks for spot only; if every spot pool is out of capacity the request
//!   fails, its pools go into the capacity-error cache, and the engine's relaunch falls back to
//!   on-demand, as Karpenter's does after its ICE cache marks the pools.
//! - Order: on-demand `lowest-price`; spot `price-capacity-optimized`, modelled as the cheapest
//!   pool that has capacity — so both are (price, type, zone) ascending, and EC2 skips pools
//!   without capacity.

use dovetail_dataflow::backend::{FleetOverride, OfferingKey};
use dovetail_dataflow::decisions::Launch;
use dovetail_dataflow::model::instance_type::offering_allowed;
use dovetail_dataflow::model::InstanceType;
use std::collections::{BTreeMap, BTreeSet};

/// The launch's capacity types, on-demand when it names none.
fn capacity_types(launch: &Launch) -> Vec<&str> {
    if launch.capacity_types.is_empty() {
        vec!["on-demand"]
    } else {
        launch.capacity_types.iter().map(String::as_str).collect()
    }
}

/// Every offering the launch allows, of any capacity type, unsorted.
fn allowed(
    launch: &Launch,
    instance_types: &BTreeMap<String, InstanceType>,
    unavailable: &dyn Fn(&OfferingKey) -> bool,
) -> Vec<FleetOverride> {
    let cts = capacity_types(launch);
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for name in &launch.instance_types {
        if !seen.insert(name) {
            continue;
        }
        let Some(it) = instance_types.get(name) else {
            continue;
        };
        for o in &it.offerings {
            if o.available
                && (launch.zones.is_empty() || launch.zones.contains(&o.zone))
                && cts.contains(&o.capacity_type.as_str())
                && offering_allowed(o, &launch.requirements)
            {
                let key = OfferingKey::new(&it.name, &o.zone, &o.capacity_type);
                if unavailable(&key) {
                    continue;
                }
                out.push(FleetOverride {
                    key,
                    zone_id: o.zone_id.clone(),
                    price: o.price,
                });
            }
        }
    }
    out
}

/// Karpenter's `SpotInstanceFilter` over the candidates (see the module documentation).
fn spot_filter(launch: &Launch, all: Vec<FleetOverride>) -> Vec<FleetOverride> {
    let cts = capacity_types(launch);
    let min_values = launch
        .requirements
        .0
        .values()
        .any(|r| r.min_values.is_some());
    if min_values || !cts.contains(&"on-demand") || !cts.contains(&"spot") {
        return all;
    }
    let cheapest_od = all
        .iter()
        .filter(|c| c.key.capacity_type == "on-demand")
        .map(|c| c.price)
        .min();
    let Some(cheapest_od) = cheapest_od else {
        return all;
    };
    if !all.iter().any(|c| c.key.capacity_type == "spot") {
        return all;
    }
    let mut keep: BTreeMap<&str, (bool, bool)> = BTreeMap::new(); // type -> (has spot, keep)
    for c in &all {
        let e = keep
            .entry(c.key.instance_type.as_str())
            .or_insert((false, false));
        match c.key.capacity_type.as_str() {
            "reserved" => e.1 = true,
            "spot" => {
                e.0 = true;
                if c.price <= cheapest_od {
                    e.1 = true;
                }
            }
            _ => {}
        }
    }
    let dropped: BTreeSet<String> = keep
        .into_iter()
        .filter(|(_, (has_spot, kept))| *has_spot && !*kept)
        .map(|(t, _)| t.to_string())
        .collect();
    all.into_iter()
        .filter(|c| !dropped.contains(&c.key.instance_type))
        .collect()
}

fn choose(all: &[FleetOverride]) -> Option<String> {
    ["reserved", "spot", "on-demand"]
        .into_iter()
        .find(|ct| all.iter().any(|c| c.key.capacity_type == *ct))
        .map(str::to_string)
}

/// The offerings the request may fill, in the order EC2 tries them: the chosen capacity type
/// only, by (price, type, zone).
pub fn fleet_overrides(
    launch: &Launch,
    instance_types: &BTreeMap<String, InstanceType>,
    unavailable: &dyn Fn(&OfferingKey) -> bool,
) -> Vec<FleetOverride> {
    let all = spot_filter(launch, allowed(launch, instance_types, unavailable));
    let Some(ct) = choose(&all) else {
        return Vec::new();
    };
    let mut out: Vec<FleetOverride> = all
        .into_iter()
        .filter(|c| c.key.capacity_type == ct)
        .collect();
    out.sort_by(|a, b| {
        (a.price, &a.key.instance_type, &a.key.zone).cmp(&(
            b.price,
            &b.key.instance_type,
            &b.key.zone,
        ))
    });
    out
}
