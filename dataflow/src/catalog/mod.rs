//! The embedded EC2 catalogue: instance types, zone offerings, on-demand prices and estimated
//! spot prices for the supported regions, resolved into [`InstanceType`]s with Karpenter's AWS
//! rules for capacity, overhead and labels.
//!
//! The data is compiled in from `data/` (see `data/README.md` for sources, licences and how it
//! was trimmed) and parsed once per region on first use. Spot prices are an estimate,
//! `on_demand × (1 − savings_pct / 100)` from the AWS Spot Instance Advisor's savings.
//!
//! [`InstanceType`]: crate::model::InstanceType

mod capacity;
mod csv;
mod entry;
mod labels;
mod offerings;
mod overhead;
mod resolve;
#[cfg(test)]
mod tests;

pub use capacity::{
    capacity, max_pods, memory_capacity_mib, ARM64_CMA_MIB, DEFAULT_EPHEMERAL_STORAGE_GIB,
    VM_MEMORY_OVERHEAD_PERCENT,
};
pub use entry::{category_and_generation, CatalogEntry};
pub use labels::{lower_kebab, requirements, OS_LINUX};
pub use offerings::{reserved_offerings, TypeOfferings, Zone};
pub use overhead::{
    eviction_threshold, kube_reserved, overhead, threshold_value, DEFAULT_MEMORY_AVAILABLE,
    DEFAULT_NODEFS_AVAILABLE, MEMORY_AVAILABLE, NODEFS_AVAILABLE,
};
pub use resolve::ResolveOptions;

use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Why a catalogue could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// The region has no embedded catalogue (no zone offerings or no prices for it).
    #[error("no embedded EC2 catalogue for region {region:?}; supported regions: {}", supported.join(", "))]
    UnknownRegion {
        region: String,
        supported: Vec<String>,
    },
    /// A data file has a row (or header) that does not parse.
    #[error("{file}, line {line}, field {field:?}: {reason}")]
    Malformed {
        file: String,
        line: usize,
        field: String,
        reason: String,
    },
}

/// The catalogue of one region: every instance type EC2 describes, and what the region sells
/// of each (zones, on-demand price, spot saving).
#[derive(Debug, Clone, PartialEq)]
pub struct RegionCatalog {
    pub region: String,
    /// Every row of `instance_types.csv`, sorted by name, whether or not the region sells it.
    pub entries: Vec<CatalogEntry>,
    /// What the region sells, by instance-type name. Types the region neither offers nor prices
    /// are absent.
    pub offerings: BTreeMap<String, TypeOfferings>,
}

/// The text of the four catalogue files, in the formats of the embedded ones.
#[derive(Debug, Clone, Copy)]
pub struct CatalogSources<'a> {
    pub instance_types: &'a str,
    pub offerings: &'a str,
    pub on_demand_prices: &'a str,
    pub spot_advisor: &'a str,
}

/// The files compiled into the binary.
pub const EMBEDDED: CatalogSources<'static> = CatalogSources {
    instance_types: include_str!("../../../data/catalog/instance_types.csv"),
    offerings: include_str!("../../../data/catalog/offerings.csv"),
    on_demand_prices: include_str!("../../../data/catalog/on_demand_prices.csv"),
    spot_advisor: include_str!("../../../data/spot/spot_advisor.csv"),
};

/// Regions with both zone offerings and prices in the embedded data. `us-gov-east-1` and
/// `us-gov-west-1` have on-demand prices in `data/` but the offerings source (moto) has no zones
/// for them, so no type could be launched there; they are not listed until it does.
const SUPPORTED_REGIONS: &[&str] = &["us-east-1"];

static CATALOGS: [OnceLock<Result<RegionCatalog, CatalogError>>; SUPPORTED_REGIONS.len()] =
    [const { OnceLock::new() }; SUPPORTED_REGIONS.len()];

/// The regions [`embedded`] has a catalogue for.
pub fn supported_regions() -> &'static [&'static str] {
    SUPPORTED_REGIONS
}

/// The embedded catalogue of `region`, parsed on first use and kept for the life of the process.
pub fn embedded(region: &str) -> Result<&'static RegionCatalog, CatalogError> {
    let Some(index) = SUPPORTED_REGIONS.iter().position(|r| *r == region) else {
        return Err(CatalogError::UnknownRegion {
            region: region.to_string(),
            supported: SUPPORTED_REGIONS.iter().map(|r| r.to_string()).collect(),
        });
    };
    CATALOGS[index]
        .get_or_init(|| RegionCatalog::parse(region, &EMBEDDED))
        .as_ref()
        .map_err(Clone::clone)
}

/// The bundled on-demand prices and spot savings of `region`, by instance type, with no zones:
/// what EC2 discovery joins with the zones EC2 reports (EC2 has no price API for on-demand; the
/// spot price history is per zone and moto's is a placeholder). Empty for a region without
/// bundled prices.
pub fn bundled_prices(region: &str) -> Result<BTreeMap<String, TypeOfferings>, CatalogError> {
    offerings::parse_region_prices(region, EMBEDDED.on_demand_prices, EMBEDDED.spot_advisor)
}

/// The bundled rows of `instance_types.csv`, sorted by name: discovery takes what EC2 does not
/// describe from them (Karpenter's branch-interface and trunking limits).
pub fn bundled_entries() -> Result<Vec<CatalogEntry>, CatalogError> {
    let mut entries = entry::parse_entries(entry::FILE, EMBEDDED.instance_types)?;
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

impl RegionCatalog {
    /// Builds the catalogue of `region` from CSV text. Every row of every file is checked, not
    /// only the region's, so a malformed file fails whichever region is asked for.
    pub fn parse(
        region: &str,
        sources: &CatalogSources<'_>,
    ) -> Result<RegionCatalog, CatalogError> {
        let mut entries = entry::parse_entries(entry::FILE, sources.instance_types)?;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let offerings = offerings::parse_region_offerings(
            region,
            sources.offerings,
            sources.on_demand_prices,
            sources.spot_advisor,
        )?;
        Ok(RegionCatalog {
            region: region.to_string(),
            entries,
            offerings,
        })
    }

    /// The entry of the named instance type.
    pub fn entry(&self, name: &str) -> Option<&CatalogEntry> {
        self.entries
            .binary_search_by(|e| e.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.entries[i])
    }
}
