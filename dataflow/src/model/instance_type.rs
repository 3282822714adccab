//! Instance types and offerings as the engine sees them: labels as requirements, capacity,
//! overhead and allocatable, and the (zone, capacity type) offerings with prices.

use super::requirements::Requirements;
use super::resources::Resources;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A price in millionths of a dollar (or of the region's currency) per hour. Integer so that
/// prices can be compared, hashed and summed exactly inside the dataflow.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Price(pub i64);

impl Price {
    /// The dearest price the engine holds, $1,000,000 an hour: any price from a manifest, a
    /// trace or an overlay saturates here, so a sum over a million nodes still fits an `i64`
    /// and an absurd price is merely the dearest, never wrapped into a cheap one.
    pub const CEILING: Price = Price(1_000_000 * 1_000_000);

    /// Dollars per hour, rounded to micro-dollars and clamped to `0..=CEILING`. NaN is not a
    /// price: it reads as the ceiling, so nothing is launched for free because of it.
    pub fn from_dollars(d: f64) -> Price {
        Price::clamped_micros(d * 1_000_000.0)
    }

    /// Micro-dollars, rounded and clamped as [`Price::from_dollars`].
    pub fn clamped_micros(micros: f64) -> Price {
        if micros.is_nan() {
            return Price::CEILING;
        }
        Price((micros.round().clamp(0.0, Price::CEILING.0 as f64)) as i64)
    }

    /// Whole micro-dollars clamped to `0..=CEILING`.
    pub fn clamped(micros: i128) -> Price {
        Price(micros.clamp(0, i128::from(Price::CEILING.0)) as i64)
    }

    pub fn dollars(self) -> f64 {
        self.0 as f64 / 1_000_000.0
    }
}

impl fmt::Display for Price {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "${:.4}/h", self.dollars())
    }
}

/// Where and how an instance type can be bought.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Offering {
    pub zone: String,
    pub zone_id: String,
    /// `on-demand`, `spot` or `reserved`.
    pub capacity_type: String,
    pub price: Price,
    pub available: bool,
}

/// One instance type, resolved for a region (and, once a NodePool's EC2NodeClass and overlays
/// apply, for that NodePool).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct InstanceType {
    pub name: String,
    /// The labels Karpenter derives for the type (arch, os, family, cpu, memory, ...), each as a
    /// single-value requirement, plus zone and capacity type as the sets its offerings cover.
    pub requirements: Requirements,
    pub capacity: Resources,
    /// kube-reserved + system-reserved + eviction threshold.
    pub overhead: Resources,
    pub offerings: Vec<Offering>,
}

impl InstanceType {
    /// Capacity minus overhead: what pods may request.
    pub fn allocatable(&self) -> Resources {
        self.capacity.sub(&self.overhead)
    }

    /// The cheapest available offering that `allowed` admits (zone and capacity type).
    pub fn cheapest_offering(&self, allowed: &Requirements) -> Option<&Offering> {
        self.cheapest_offering_in(&OfferingFilter::new(allowed))
    }

    /// As [`InstanceType::cheapest_offering`], with the filter looked up once by the caller.
    pub fn cheapest_offering_in(&self, filter: &OfferingFilter<'_>) -> Option<&Offering> {
        self.offerings
            .iter()
            .filter(|o| o.available && filter.allows(o))
            .min_by(|a, b| {
                (a.price, &a.zone, &a.capacity_type).cmp(&(b.price, &b.zone, &b.capacity_type))
            })
    }
}

/// The parts of a requirement set that bear on offerings, looked up once so that checking many
/// offerings does not search the requirement map each time.
pub struct OfferingFilter<'a> {
    zone: Option<&'a super::requirements::Requirement>,
    zone_id: Option<&'a super::requirements::Requirement>,
    capacity_type: Option<&'a super::requirements::Requirement>,
}

impl<'a> OfferingFilter<'a> {
    pub fn new(allowed: &'a Requirements) -> Self {
        OfferingFilter {
            zone: allowed.get(super::labels::ZONE),
            zone_id: allowed.get(super::labels::ZONE_ID),
            capacity_type: allowed.get(super::labels::CAPACITY_TYPE),
        }
    }

    /// The filter's parts, owned, for a cache that keeps answers per filter.
    pub fn key(&self) -> OfferingKey {
        OfferingKey {
            zone: self.zone.cloned(),
            zone_id: self.zone_id.cloned(),
            capacity_type: self.capacity_type.cloned(),
        }
    }

    /// Whether this filter is the one `key` was taken from (admits exactly the same offerings).
    pub fn is(&self, key: &OfferingKey) -> bool {
        self.zone == key.zone.as_ref()
            && self.zone_id == key.zone_id.as_ref()
            && self.capacity_type == key.capacity_type.as_ref()
    }

    /// Same answer as [`offering_allowed`].
    pub fn allows(&self, o: &Offering) -> bool {
        self.zone.is_none_or(|r| r.has(&o.zone))
            && self.capacity_type.is_none_or(|r| r.has(&o.capacity_type))
            && (o.zone_id.is_empty() || self.zone_id.is_none_or(|r| r.has(&o.zone_id)))
    }
}

/// An [`OfferingFilter`]'s parts, owned (see [`OfferingFilter::key`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferingKey {
    zone: Option<super::requirements::Requirement>,
    zone_id: Option<super::requirements::Requirement>,
    capacity_type: Option<super::requirements::Requirement>,
}

/// True when an offering's zone, zone id and capacity type satisfy `allowed`.
pub fn offering_allowed(o: &Offering, allowed: &Requirements) -> bool {
    allowed.allows(super::labels::ZONE, &o.zone)
        && allowed.allows(super::labels::CAPACITY_TYPE, &o.capacity_type)
        && (o.zone_id.is_empty() || allowed.allows(super::labels::ZONE_ID, &o.zone_id))
}

/// An f64 that orders (non-negative values only), for costs inside collections.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct UnitCost(pub u64);

impl UnitCost {
    pub fn new(v: f64) -> UnitCost {
        UnitCost(v.max(0.0).to_bits())
    }
    pub fn get(self) -> f64 {
        f64::from_bits(self.0)
    }
}
