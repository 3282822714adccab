//! Where a type is sold in a region and at what price: the zone offerings, the on-demand price
//! list and the spot advisor's savings, and the [`Offering`]s built from them.

use super::csv::Table;
use super::CatalogError;
use crate::model::labels::{CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_SPOT};
use crate::model::{CapacityReservation, Offering, Price};
use std::collections::{BTreeMap, BTreeSet};

pub(crate) const OFFERINGS_FILE: &str = "data/catalog/offerings.csv";
pub(crate) const PRICES_FILE: &str = "data/catalog/on_demand_prices.csv";
pub(crate) const SPOT_FILE: &str = "data/spot/spot_advisor.csv";

/// An availability zone and its account-independent id (`us-east-1a`, `use1-az2`). The id is
/// empty when the catalogue could not pair them (see `data/README.md`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Zone {
    pub name: String,
    pub id: String,
}

/// What one region sells of one instance type.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TypeOfferings {
    /// Zones that offer the type, sorted by name.
    pub zones: Vec<Zone>,
    /// Hourly on-demand price in the region's currency (USD for every supported region).
    pub on_demand: Option<f64>,
    /// The spot advisor's average saving over on-demand, in percent (Linux).
    pub spot_savings_pct: Option<f64>,
    /// Spot prices per zone (DescribeSpotPriceHistory), where EC2 gave them; a zone missing
    /// here is priced at [`TypeOfferings::spot_estimate`].
    pub spot_by_zone: BTreeMap<String, f64>,
}

impl TypeOfferings {
    /// The estimated spot price: `on_demand × (1 − savings_pct / 100)`. The spot advisor gives a
    /// regional saving, not a per-zone spot price: the estimate is for zones without a price of
    /// their own in `spot_by_zone`.
    pub fn spot_estimate(&self) -> Option<f64> {
        Some(self.on_demand? * (1.0 - self.spot_savings_pct? / 100.0))
    }

    /// The spot price in one zone: EC2's for the zone, else the estimate.
    pub fn spot_price(&self, zone: &str) -> Option<f64> {
        self.spot_by_zone
            .get(zone)
            .copied()
            .or_else(|| self.spot_estimate())
    }

    /// One available on-demand offering per zone, plus a spot one where `spot_supported` and
    /// a spot price is known (the zone's own, or the spot advisor's estimate), limited to
    /// `zones` when given. Empty when the region has no on-demand price for the type. Sorted by
    /// zone, then capacity type.
    pub fn offerings(
        &self,
        spot_supported: bool,
        zones: Option<&BTreeSet<String>>,
    ) -> Vec<Offering> {
        let Some(on_demand) = self.on_demand else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for zone in &self.zones {
            if zones.is_some_and(|allowed| !allowed.contains(&zone.name)) {
                continue;
            }
            let offering = |capacity_type: &str, dollars: f64| Offering {
                zone: zone.name.clone(),
                zone_id: zone.id.clone(),
                capacity_type: capacity_type.to_string(),
                price: Price::from_dollars(dollars),
                available: true,
            };
            out.push(offering(CAPACITY_TYPE_ON_DEMAND, on_demand));
            if let Some(spot) = self.spot_price(&zone.name).filter(|_| spot_supported) {
                out.push(offering(CAPACITY_TYPE_SPOT, spot));
            }
        }
        out
    }

    /// The `reserved` offerings of `reservations` for this type (see [`reserved_offerings`]).
    pub fn reserved(
        &self,
        instance_type: &str,
        reservations: &[CapacityReservation],
        zones: Option<&BTreeSet<String>>,
    ) -> Vec<Offering> {
        reserved_offerings(instance_type, reservations, zones, |zone| {
            self.zones
                .iter()
                .find(|z| z.name == zone)
                .map(|z| z.id.clone())
                .unwrap_or_default()
        })
    }
}

/// One `reserved` offering per zone where `reservations` hold `instance_type`, limited to
/// `zones` when given, priced at zero as Karpenter prices reserved capacity (it is paid for
/// whether used or not, so it is preferred and consolidation moves work onto it). Available
/// while some reservation in the zone may still take an instance (or does not say).
pub fn reserved_offerings(
    instance_type: &str,
    reservations: &[CapacityReservation],
    zones: Option<&BTreeSet<String>>,
    zone_id: impl Fn(&str) -> String,
) -> Vec<Offering> {
    let mut by_zone: BTreeMap<&str, bool> = BTreeMap::new();
    for r in reservations {
        if r.instance_type != instance_type
            || zones.is_some_and(|allowed| !allowed.contains(&r.zone))
        {
            continue;
        }
        *by_zone.entry(r.zone.as_str()).or_insert(false) |= r.available != Some(0);
    }
    by_zone
        .into_iter()
        .map(|(zone, available)| Offering {
            zone: zone.to_string(),
            zone_id: zone_id(zone),
            capacity_type: CAPACITY_TYPE_RESERVED.to_string(),
            price: Price::from_dollars(0.0),
            available,
        })
        .collect()
}

/// The region's offerings, keyed by instance type, from the three region files.
pub(crate) fn parse_region_offerings(
    region: &str,
    offerings_csv: &str,
    prices_csv: &str,
    spot_csv: &str,
) -> Result<BTreeMap<String, TypeOfferings>, CatalogError> {
    let mut by_type: BTreeMap<String, TypeOfferings> = BTreeMap::new();

    let table = Table::parse(
        OFFERINGS_FILE,
        offerings_csv,
        &["region", "zone", "zone_id", "instance_type"],
    )?;
    for row in table.rows() {
        if row.text("region")? != region {
            continue;
        }
        let zone = Zone {
            name: row.text("zone")?.to_string(),
            id: row.raw("zone_id")?.to_string(),
        };
        let zones = &mut by_type
            .entry(row.text("instance_type")?.to_string())
            .or_default()
            .zones;
        if zones.iter().any(|z| z.name == zone.name) {
            return Err(row.error("zone", format!("{} listed twice for the type", zone.name)));
        }
        zones.push(zone);
    }
    for t in by_type.values_mut() {
        t.zones.sort();
    }

    for (name, priced) in parse_region_prices(region, prices_csv, spot_csv)? {
        let t = by_type.entry(name).or_default();
        t.on_demand = priced.on_demand;
        t.spot_savings_pct = priced.spot_savings_pct;
    }
    Ok(by_type)
}

/// The region's on-demand prices and spot savings, keyed by instance type, with no zones: what
/// EC2 discovery joins with the zones EC2 reports.
pub(crate) fn parse_region_prices(
    region: &str,
    prices_csv: &str,
    spot_csv: &str,
) -> Result<BTreeMap<String, TypeOfferings>, CatalogError> {
    let mut by_type: BTreeMap<String, TypeOfferings> = BTreeMap::new();
    let table = Table::parse(
        PRICES_FILE,
        prices_csv,
        &["region", "instance_type", "price_per_hour", "currency"],
    )?;
    for row in table.rows() {
        if row.text("region")? != region {
            continue;
        }
        let price = row.number("price_per_hour")?;
        if price < 0.0 {
            return Err(row.error("price_per_hour", "negative price"));
        }
        row.text("currency")?;
        let t = by_type
            .entry(row.text("instance_type")?.to_string())
            .or_default();
        if t.on_demand.replace(price).is_some() {
            return Err(row.error("instance_type", "second price for the type in the region"));
        }
    }

    let table = Table::parse(
        SPOT_FILE,
        spot_csv,
        &["region", "os", "instance_type", "savings_pct"],
    )?;
    for row in table.rows() {
        if row.text("region")? != region || row.text("os")? != "Linux" {
            continue;
        }
        let savings = row.number("savings_pct")?;
        if savings > 100.0 {
            return Err(row.error("savings_pct", "a saving above 100%"));
        }
        let t = by_type
            .entry(row.text("instance_type")?.to_string())
            .or_default();
        if t.spot_savings_pct.replace(savings).is_some() {
            return Err(row.error("instance_type", "second spot advisor row for the type"));
        }
    }
    Ok(by_type)
}

#[cfg(test)]
/// Regions that have both prices and zone offerings in the given files (the regions a catalogue
/// can be built for), sorted.
pub(crate) fn regions_with_offerings_and_prices(
    offerings_csv: &str,
    prices_csv: &str,
) -> Result<Vec<String>, CatalogError> {
    let regions = |file, text| -> Result<BTreeSet<String>, CatalogError> {
        let table = Table::parse(file, text, &["region"])?;
        table
            .rows()
            .map(|r| r.text("region").map(str::to_string))
            .collect()
    };
    let offered = regions(OFFERINGS_FILE, offerings_csv)?;
    let priced = regions(PRICES_FILE, prices_csv)?;
    Ok(offered.intersection(&priced).cloned().collect())
}
