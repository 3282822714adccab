//! Discovery: the region's catalogue from EC2. DescribeInstanceTypes (paginated) gives the types,
//! DescribeInstanceTypeOfferings (by zone, paginated) where each is sold, DescribeAvailabilityZones
//! each zone's id (the name → id pairing differs per account). EC2 has no on-demand price API
//! (Karpenter reads the Pricing API, or its generated table when it cannot): prices are the
//! bundled snapshot; spot prices come from DescribeSpotPriceHistory when it gives real ones.

mod instance_types;
mod spot_prices;

pub use instance_types::entry;
pub use spot_prices::{spot_prices, SpotPrices};

use crate::calls::Calls;
use crate::error::{from_sdk, AwsError};
use aws_sdk_ec2::types::{Filter, LocationType};
use dovetail_dataflow::catalog::{bundled_entries, bundled_prices, RegionCatalog, Zone};
use std::collections::BTreeMap;

/// What discovery found, and what it had to take from the bundle instead.
#[derive(Debug, Clone)]
pub struct Discovered {
    pub catalog: RegionCatalog,
    /// Zone name → zone id, as this account pairs them.
    pub zone_ids: BTreeMap<String, String>,
    /// Things said about the result (placeholder spot prices, types without prices).
    pub notes: Vec<String>,
}

/// The catalogue of the clients' region, from EC2.
pub async fn discover_catalog(
    ec2: &aws_sdk_ec2::Client,
    calls: &Calls,
    region: &str,
) -> Result<Discovered, AwsError> {
    let mut notes = Vec::new();
    let zone_ids = zone_ids(ec2, calls, region).await?;
    let bundled: BTreeMap<String, _> = bundled_entries()?
        .into_iter()
        .map(|e| (e.name.clone(), e))
        .collect();
    let mut entries = Vec::new();
    for info in describe_instance_types(ec2, calls).await? {
        let name = info.instance_type().map(|t| t.as_str().to_string());
        entries.push(entry(&info, name.as_ref().and_then(|n| bundled.get(n)))?);
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries.dedup_by(|a, b| a.name == b.name);

    let mut offerings = bundled_prices(region)?;
    if offerings.is_empty() {
        return Err(AwsError::Catalog(
            dovetail_dataflow::catalog::CatalogError::UnknownRegion {
                region: region.to_string(),
                supported: vec!["regions with bundled on-demand prices".to_string()],
            },
        ));
    }
    for t in offerings.values_mut() {
        t.zones.clear();
    }
    for (instance_type, zone) in describe_zone_offerings(ec2, calls).await? {
        let id = zone_ids.get(&zone).cloned().unwrap_or_default();
        let zones = &mut offerings.entry(instance_type).or_default().zones;
        if !zones.iter().any(|z| z.name == zone) {
            zones.push(Zone { name: zone, id });
        }
    }
    for t in offerings.values_mut() {
        t.zones.sort();
    }
    let unpriced = offerings
        .values()
        .filter(|t| !t.zones.is_empty() && t.on_demand.is_none())
        .count();
    if unpriced > 0 {
        notes.push(format!(
            "{unpriced} instance types sold in {region} have no bundled on-demand price and are not offered"
        ));
    }
    match spot_prices(ec2, calls).await? {
        Ok(prices) => {
            for (name, by_zone) in prices {
                if let Some(t) = offerings.get_mut(&name) {
                    t.spot_by_zone = by_zone;
                }
            }
        }
        Err(why) => {
            tracing::warn!(
                region,
                "{why}: spot prices are the bundled spot advisor estimate"
            );
            notes.push(format!(
                "{why}: spot prices are the bundled spot advisor estimate"
            ));
        }
    }
    Ok(Discovered {
        catalog: RegionCatalog {
            region: region.to_string(),
            entries,
            offerings,
        },
        zone_ids,
        notes,
    })
}

/// Zone name → zone id for the region's zones.
pub async fn zone_ids(
    ec2: &aws_sdk_ec2::Client,
    calls: &Calls,
    region: &str,
) -> Result<BTreeMap<String, String>, AwsError> {
    const ACTION: &str = "DescribeAvailabilityZones";
    let out = calls
        .run(ACTION, || async {
            ec2.describe_availability_zones()
                .filters(Filter::builder().name("region-name").values(region).build())
                .send()
                .await
                .map_err(|e| from_sdk(ACTION, e))
        })
        .await?;
    let mut ids = BTreeMap::new();
    for z in out.availability_zones() {
        let name = z
            .zone_name()
            .ok_or_else(|| AwsError::response(ACTION, "a zone", "ZoneName", "missing"))?;
        let id = z.zone_id().ok_or_else(|| {
            AwsError::response(ACTION, format!("zone {name}"), "ZoneId", "missing")
        })?;
        ids.insert(name.to_string(), id.to_string());
    }
    Ok(ids)
}

async fn describe_instance_types(
    ec2: &aws_sdk_ec2::Client,
    calls: &Calls,
) -> Result<Vec<aws_sdk_ec2::types::InstanceTypeInfo>, AwsError> {
    const ACTION: &str = "DescribeInstanceTypes";
    let pages = calls
        .pages(
            ACTION,
            usize::MAX,
            |token| async move {
                ec2.describe_instance_types()
                    .set_next_token(token)
                    .max_results(100)
                    .send()
                    .await
                    .map_err(|e| from_sdk(ACTION, e))
            },
            |p| p.next_token(),
        )
        .await?;
    Ok(pages
        .iter()
        .flat_map(|p| p.instance_types().iter().cloned())
        .collect())
}

/// (instance type, zone name) for every type sold in every zone of the region.
async fn describe_zone_offerings(
    ec2: &aws_sdk_ec2::Client,
    calls: &Calls,
) -> Result<Vec<(String, String)>, AwsError> {
    const ACTION: &str = "DescribeInstanceTypeOfferings";
    let pages = calls
        .pages(
            ACTION,
            usize::MAX,
            |token| async move {
                ec2.describe_instance_type_offerings()
                    .location_type(LocationType::AvailabilityZone)
                    .set_next_token(token)
                    .max_results(1000)
                    .send()
                    .await
                    .map_err(|e| from_sdk(ACTION, e))
            },
            |p| p.next_token(),
        )
        .await?;
    let mut all = Vec::new();
    for o in pages.iter().flat_map(|p| p.instance_type_offerings()) {
        match (o.instance_type(), o.location()) {
            (Some(t), Some(z)) => all.push((t.as_str().to_string(), z.to_string())),
            _ => {
                return Err(AwsError::response(
                    ACTION,
                    "an offering",
                    "InstanceType/Location",
                    "missing",
                ))
            }
        }
    }
    Ok(all)
}
