//! Which offerings a CreateFleet `Type=instant` request for a launch may fill, in the order EC2
//! tries them.
//!
//! The rule, as Karpenter's AWS provider builds the request and EC2 fills it:
//! - An offering is a candidate when its type is one of the launch's instance types, it is
//!   `available` in the type's offerings, its zone is one of the launch's zones (no zones: any),
//!   its capacity type is one of the launch's capacity types (none: on-demand, Karpenter's
//!   default), and the launch's requirements allow its zone, zone id and capacity type.
//! - When the launch allows both spot and on-demand (and no requirement has `minValues`), an
//!   instance type is dropped if it has spot candidates but none priced at or below the
//!   cheapest on-demand candidate and no reserved candidate (Karpenter's `SpotInstanceFilter`:
//!   never a bigger, pricier spot type instead of a cheaper on-demand one).
//! - One capacity type per request: reserved if allowed and some candidate is reserved, else spot
//!   likewise, else on-demand (Karpenter's `getCapacityType`). A launch allowing spot and
//!   on-demand therefore asks for spot only; if every spot pool is out of capacity the request
//!   fails, and it is the caller (the engine, through an unavailable-offerings fact) that falls
//!   back to on-demand, as Karpenter does after its ICE cache marks the pools.
//! - Order: on-demand `lowest-price`; spot `price-capacity-optimized`, modelled as the cheapest
//!   pool that has capacity — so both are (price, type, zone) ascending, and EC2 skips pools
//!   without capacity.

use crate::key::OfferingKey;
use dovetail_dataflow::decisions::Launch;
use dovetail_dataflow::model::instance_type::offering_allowed;
use dovetail_dataflow::model::{InstanceType, Price};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Why CreateFleet launched nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FleetError {
    /// Every candidate offering was out of capacity (InsufficientInstanceCapacity), cheapest
    /// first.
    #[error(
        "InsufficientInstanceCapacity for launch {launch}: no capacity in {}",
        list(tried)
    )]
    InsufficientCapacity {
        launch: String,
        tried: Vec<OfferingKey>,
    },
    /// No offering matches the launch (unknown types, or zones and capacity types that exclude
    /// every offering).
    #[error("launch {launch}: no offering of its instance types matches its zones, capacity types and requirements")]
    NoMatchingOfferings { launch: String },
}

fn list(keys: &[OfferingKey]) -> String {
    keys.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// One offering a fleet request may fill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetCandidate {
    pub key: OfferingKey,
    pub zone_id: String,
    pub price: Price,
}

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
) -> Vec<FleetCandidate> {
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
                out.push(FleetCandidate {
                    key: OfferingKey::new(&it.name, &o.zone, &o.capacity_type),
                    zone_id: o.zone_id.clone(),
                    price: o.price,
                });
            }
        }
    }
    out
}

/// Karpenter's `SpotInstanceFilter` over the candidates (see the module documentation).
fn spot_filter(launch: &Launch, all: Vec<FleetCandidate>) -> Vec<FleetCandidate> {
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

/// The capacity type the request is made for (reserved, then spot, then on-demand), or `None`
/// when no offering matches at all.
pub fn fleet_capacity_type(
    launch: &Launch,
    instance_types: &BTreeMap<String, InstanceType>,
) -> Option<String> {
    choose(&spot_filter(launch, allowed(launch, instance_types)))
}

fn choose(all: &[FleetCandidate]) -> Option<String> {
    ["reserved", "spot", "on-demand"]
        .into_iter()
        .find(|ct| all.iter().any(|c| c.key.capacity_type == *ct))
        .map(str::to_string)
}

/// The offerings the request may fill, in the order EC2 tries them: the chosen capacity type
/// only, by (price, type, zone).
pub fn fleet_candidates(
    launch: &Launch,
    instance_types: &BTreeMap<String, InstanceType>,
) -> Vec<FleetCandidate> {
    let all = spot_filter(launch, allowed(launch, instance_types));
    let Some(ct) = choose(&all) else {
        return Vec::new();
    };
    let mut out: Vec<FleetCandidate> = all
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
