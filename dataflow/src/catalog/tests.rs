//! Tests of the embedded catalogue against figures worked out by hand from the data files.

use super::*;
use crate::model::labels::{
    ARCH, CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_SPOT,
    INSTANCE_CATEGORY, INSTANCE_CPU, INSTANCE_CPU_MANUFACTURER, INSTANCE_FAMILY,
    INSTANCE_GENERATION, INSTANCE_GPU_COUNT, INSTANCE_GPU_MANUFACTURER, INSTANCE_GPU_MEMORY,
    INSTANCE_GPU_NAME, INSTANCE_HYPERVISOR, INSTANCE_LOCAL_NVME, INSTANCE_MEMORY,
    INSTANCE_NETWORK_BANDWIDTH, INSTANCE_SIZE, INSTANCE_TYPE, OS, REGION, ZONE, ZONE_ID,
};
use crate::model::quantity::{mib, units};
use crate::model::resources::NVIDIA_GPU;
use crate::model::{InstanceType, KubeletConfig, Operator, Price, Threshold};
use std::collections::BTreeSet;

fn us_east_1() -> &'static RegionCatalog {
    embedded("us-east-1").expect("the embedded us-east-1 catalogue parses")
}

fn resolve_all(opts: &ResolveOptions) -> Vec<InstanceType> {
    us_east_1().instance_types(opts)
}

fn find<'a>(types: &'a [InstanceType], name: &str) -> &'a InstanceType {
    types
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("{name} is not among the resolved types"))
}

fn resolve_one(name: &str, opts: &ResolveOptions) -> InstanceType {
    let catalog = us_east_1();
    let entry = catalog.entry(name).expect("type is in instance_types.csv");
    catalog.resolve(entry, opts).expect("type resolves")
}

/// The single value of a label, or `None` when the label is absent or `DoesNotExist`.
fn label(it: &InstanceType, key: &str) -> Option<String> {
    let r = it.requirements.get(key)?;
    assert!(!r.complement, "{key} should be a finite set");
    assert!(
        r.values.len() <= 1,
        "{key} should have at most one value: {r}"
    );
    r.values.iter().next().cloned()
}

fn values(it: &InstanceType, key: &str) -> BTreeSet<String> {
    it.requirements
        .get(key)
        .map(|r| r.values.clone())
        .unwrap_or_default()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

const GIB_MIB: i64 = 1024;

#[test]
fn m5_large_capacity_overhead_and_labels() {
    let it = resolve_one("m5.large", &ResolveOptions::default());
    // 2 vCPU, 8 GiB, ENI-limited pods 3 ENIs * (10 - 1) + 2 = 29.
    let pods = 3 * (10 - 1) + 2;
    assert_eq!(pods, 29);
    let memory_mib = 8192 - ceil_div(8192 * 75, 1000);
    assert_eq!(it.capacity.cpu, units(2));
    assert_eq!(it.capacity.pods, units(pods));
    assert_eq!(it.capacity.memory, mib(memory_mib));
    assert_eq!(it.capacity.ephemeral_storage, mib(20 * GIB_MIB));
    assert!(it.capacity.extended.is_empty());

    let kube = kube_reserved(2, pods);
    assert_eq!(kube.cpu, 60 + 10);
    assert_eq!(kube.memory, mib(11 * pods + 255));
    assert_eq!(kube.ephemeral_storage, mib(GIB_MIB));

    // overhead = kube-reserved + 100Mi memory.available + 10% of the 20 GiB root volume.
    assert_eq!(it.overhead.cpu, 70);
    assert_eq!(it.overhead.memory, mib(11 * pods + 255 + 100));
    assert_eq!(
        it.overhead.ephemeral_storage,
        mib(GIB_MIB + 20 * GIB_MIB / 10)
    );
    assert_eq!(it.overhead.pods, 0);
    assert_eq!(it.allocatable().cpu, 2000 - 70);

    assert_eq!(label(&it, INSTANCE_TYPE).as_deref(), Some("m5.large"));
    assert_eq!(label(&it, ARCH).as_deref(), Some("amd64"));
    assert_eq!(label(&it, OS).as_deref(), Some("linux"));
    assert_eq!(label(&it, REGION).as_deref(), Some("us-east-1"));
    assert_eq!(label(&it, INSTANCE_CATEGORY).as_deref(), Some("m"));
    assert_eq!(label(&it, INSTANCE_GENERATION).as_deref(), Some("5"));
    assert_eq!(label(&it, INSTANCE_FAMILY).as_deref(), Some("m5"));
    assert_eq!(label(&it, INSTANCE_SIZE).as_deref(), Some("large"));
    assert_eq!(label(&it, INSTANCE_CPU).as_deref(), Some("2"));
    assert_eq!(
        label(&it, INSTANCE_CPU_MANUFACTURER).as_deref(),
        Some("intel")
    );
    assert_eq!(label(&it, INSTANCE_MEMORY).as_deref(), Some("8192"));
    assert_eq!(label(&it, INSTANCE_HYPERVISOR).as_deref(), Some("nitro"));
    // "Up to 10 Gigabit" has no exact figure; no GPUs; no local storage.
    for key in [
        INSTANCE_NETWORK_BANDWIDTH,
        INSTANCE_GPU_COUNT,
        INSTANCE_GPU_NAME,
        INSTANCE_LOCAL_NVME,
    ] {
        let r = it.requirements.get(key).expect("present as DoesNotExist");
        assert_eq!(r.operator(), Operator::DoesNotExist, "{key}");
    }
}

#[test]
fn m5_large_prices_and_offerings() {
    let it = resolve_one("m5.large", &ResolveOptions::default());
    let on_demand = Price::from_dollars(0.096);
    let savings = us_east_1().offerings["m5.large"]
        .spot_savings_pct
        .expect("m5.large has a spot advisor row");
    let spot = Price::from_dollars(0.096 * (1.0 - savings / 100.0));
    assert!(spot < on_demand);

    let zones: BTreeSet<String> = it.offerings.iter().map(|o| o.zone.clone()).collect();
    assert!(!zones.is_empty());
    assert_eq!(
        it.offerings.len(),
        2 * zones.len(),
        "one on-demand and one spot offering per zone"
    );
    for o in &it.offerings {
        assert!(o.available);
        assert!(o.zone.starts_with("us-east-1"));
        assert!(o.zone_id.starts_with("use1-az"), "{o:?}");
        match o.capacity_type.as_str() {
            CAPACITY_TYPE_ON_DEMAND => assert_eq!(o.price, on_demand),
            CAPACITY_TYPE_SPOT => assert_eq!(o.price, spot),
            other => panic!("unexpected capacity type {other}"),
        }
    }
    assert_eq!(values(&it, ZONE), zones);
    assert_eq!(
        values(&it, CAPACITY_TYPE),
        set(&[CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT])
    );
    let zone_ids: BTreeSet<String> = it.offerings.iter().map(|o| o.zone_id.clone()).collect();
    assert_eq!(values(&it, ZONE_ID), zone_ids);
    assert_eq!(
        zone_ids.len(),
        zones.len(),
        "zones and zone ids pair one to one"
    );
    assert_eq!(
        it.cheapest_offering(&Default::default()).map(|o| o.price),
        Some(spot)
    );
}

#[test]
fn c7g_xlarge_is_arm64_with_58_pods_and_cma_taken_off() {
    let it = resolve_one("c7g.xlarge", &ResolveOptions::default());
    assert_eq!(label(&it, ARCH).as_deref(), Some("arm64"));
    assert_eq!(
        label(&it, INSTANCE_CPU_MANUFACTURER).as_deref(),
        Some("aws")
    );
    assert_eq!(label(&it, INSTANCE_CATEGORY).as_deref(), Some("c"));
    assert_eq!(label(&it, INSTANCE_GENERATION).as_deref(), Some("7"));
    // 4 ENIs * (15 - 1) + 2
    assert_eq!(it.capacity.pods, units(4 * (15 - 1) + 2));
    assert_eq!(it.capacity.pods, units(58));
    let after_cma = 8192 - 64;
    assert_eq!(
        it.capacity.memory,
        mib(after_cma - ceil_div(after_cma * 75, 1000))
    );
    // 4 vCPU: 60 + 10 + 2000 * 0.5%
    assert_eq!(it.overhead.cpu, 60 + 10 + 10);
}

#[test]
fn gpu_types_get_gpus_and_per_gpu_memory() {
    let it = resolve_one("g5.xlarge", &ResolveOptions::default());
    assert_eq!(it.capacity.get(NVIDIA_GPU), units(1));
    assert_eq!(label(&it, INSTANCE_GPU_COUNT).as_deref(), Some("1"));
    assert_eq!(label(&it, INSTANCE_GPU_NAME).as_deref(), Some("a10g"));
    assert_eq!(
        label(&it, INSTANCE_GPU_MANUFACTURER).as_deref(),
        Some("nvidia")
    );
    let entry = us_east_1().entry("g5.xlarge").unwrap();
    assert_eq!(
        label(&it, INSTANCE_GPU_MEMORY),
        Some(entry.gpu_memory_mib_total.to_string())
    );
    assert_eq!(label(&it, INSTANCE_LOCAL_NVME).as_deref(), Some("250"));

    // Eight GPUs: the label is the memory of one.
    let big = resolve_one("g5.48xlarge", &ResolveOptions::default());
    let entry = us_east_1().entry("g5.48xlarge").unwrap();
    assert_eq!(big.capacity.get(NVIDIA_GPU), units(8));
    assert_eq!(label(&big, INSTANCE_GPU_COUNT).as_deref(), Some("8"));
    assert_eq!(
        label(&big, INSTANCE_GPU_MEMORY),
        Some((entry.gpu_memory_mib_total / 8).to_string())
    );
    assert_eq!(
        label(&big, INSTANCE_GPU_MEMORY),
        label(&it, INSTANCE_GPU_MEMORY)
    );
    assert_eq!(
        label(&big, INSTANCE_NETWORK_BANDWIDTH).as_deref(),
        Some("100000")
    );

    // A share of a GPU is no schedulable GPU.
    let types = resolve_all(&ResolveOptions::default());
    for it in types
        .iter()
        .filter(|t| t.name.starts_with("g6f.") || t.name.starts_with("gr6f."))
    {
        assert_eq!(it.capacity.get(NVIDIA_GPU), 0, "{}", it.name);
        assert_eq!(label(it, INSTANCE_GPU_COUNT), None, "{}", it.name);
    }
}

#[test]
fn kubelet_max_pods_changes_pods_and_kube_reserved_memory() {
    let mut opts = ResolveOptions::default();
    opts.kubelet.max_pods = Some(110);
    let it = resolve_one("m5.large", &opts);
    assert_eq!(it.capacity.pods, units(110));
    assert_eq!(it.overhead.memory, mib(11 * 110 + 255 + 100));

    // pods_per_core caps it at 4 * 2 vCPU.
    opts.kubelet.pods_per_core = Some(4);
    let it = resolve_one("m5.large", &opts);
    assert_eq!(it.capacity.pods, units(8));
    assert_eq!(it.overhead.memory, mib(11 * 8 + 255 + 100));
    let entry = us_east_1().entry("m5.large").unwrap();
    assert_eq!(max_pods(entry, &opts.kubelet), 8);
    assert_eq!(max_pods(entry, &KubeletConfig::default()), 29);
}

#[test]
fn eviction_hard_overrides_defaults_and_soft_is_ignored() {
    let base = resolve_one("m5.large", &ResolveOptions::default());
    let kube_memory = mib(11 * 29 + 255);
    let kube_storage = mib(GIB_MIB);

    let mut opts = ResolveOptions::default();
    opts.kubelet
        .eviction_hard
        .insert("memory.available".into(), Threshold::Quantity(mib(500)));
    opts.kubelet.eviction_hard.insert(
        "nodefs.available".into(),
        Threshold::PercentHundredths(1500),
    );
    let it = resolve_one("m5.large", &opts);
    assert_eq!(it.overhead.memory, kube_memory + mib(500));
    // 15% of 20 GiB = 3 GiB.
    assert_eq!(
        it.overhead.ephemeral_storage,
        kube_storage + mib(3 * GIB_MIB)
    );

    // A percentage of memory refers to capacity and rounds up to a whole byte.
    opts.kubelet
        .eviction_hard
        .insert("memory.available".into(), Threshold::PercentHundredths(500));
    let it = resolve_one("m5.large", &opts);
    let capacity_bytes = (8192 - ceil_div(8192 * 75, 1000)) * 1024 * 1024;
    assert_eq!(
        it.overhead.memory,
        kube_memory + ceil_div(capacity_bytes * 5, 100) * 1000
    );

    // Soft thresholds only warn; Karpenter leaves allocatable alone.
    let mut soft = ResolveOptions::default();
    soft.kubelet
        .eviction_soft
        .insert("memory.available".into(), Threshold::Quantity(mib(2048)));
    assert_eq!(resolve_one("m5.large", &soft).overhead, base.overhead);

    // 100% disables a threshold.
    let mut off = ResolveOptions::default();
    off.kubelet.eviction_hard.insert(
        "nodefs.available".into(),
        Threshold::PercentHundredths(10_000),
    );
    assert_eq!(
        resolve_one("m5.large", &off).overhead.ephemeral_storage,
        kube_storage
    );
}

#[test]
fn reserved_overrides_replace_and_add() {
    let mut opts = ResolveOptions::default();
    opts.kubelet.kube_reserved.insert("cpu".into(), 200);
    opts.kubelet.kube_reserved.insert("pid".into(), units(1000));
    opts.kubelet
        .system_reserved
        .insert("memory".into(), mib(100));
    let it = resolve_one("m5.large", &opts);
    assert_eq!(it.overhead.cpu, 200);
    assert_eq!(it.overhead.memory, mib(11 * 29 + 255 + 100 + 100));
    assert!(it.overhead.extended.is_empty(), "pid is not a resource");
}

#[test]
fn kube_reserved_cpu_bands() {
    // 6% of core 1, 1% of core 2, 0.5% of cores 3-4, 0.25% above.
    let expected = |vcpu: i64| -> i64 {
        let m = vcpu * 1000;
        m.min(1000) * 6 / 100
            + (m.min(2000) - 1000).max(0) / 100
            + (m.min(4000) - 2000).max(0) * 5 / 1000
            + (m - 4000).max(0) * 25 / 10_000
    };
    for (vcpu, millicores) in [(1, 60), (2, 70), (4, 80), (8, 90), (96, 310), (192, 550)] {
        assert_eq!(expected(vcpu), millicores);
        assert_eq!(kube_reserved(vcpu, 10).cpu, millicores, "{vcpu} vCPU");
    }
    assert_eq!(kube_reserved(4, 58).memory, mib(11 * 58 + 255));
}

#[test]
fn enclaves_required_keeps_only_supporting_types() {
    let opts = ResolveOptions {
        enclaves_required: true,
        ..ResolveOptions::default()
    };
    let types = resolve_all(&opts);
    let catalog = us_east_1();
    assert!(!types.is_empty());
    for it in &types {
        assert!(
            catalog.entry(&it.name).unwrap().nitro_enclaves_supported,
            "{}",
            it.name
        );
    }
    assert!(
        types.iter().all(|t| t.name != "m5.large"),
        "m5.large lacks enclaves"
    );
    assert!(types.iter().any(|t| t.name == "c7g.xlarge"));
    assert!(types.len() < resolve_all(&ResolveOptions::default()).len());
}

#[test]
fn unknown_region_names_the_supported_ones() {
    for region in ["eu-west-1", "us-gov-west-1"] {
        let err = embedded(region).unwrap_err();
        assert_eq!(
            err,
            CatalogError::UnknownRegion {
                region: region.into(),
                supported: vec!["us-east-1".into()],
            }
        );
        assert!(err.to_string().contains("us-east-1"), "{err}");
    }
    assert_eq!(supported_regions(), &["us-east-1"]);
}

#[test]
fn supported_regions_are_those_with_offerings_and_prices() {
    let regions =
        offerings::regions_with_offerings_and_prices(EMBEDDED.offerings, EMBEDDED.on_demand_prices)
            .unwrap();
    assert_eq!(regions, supported_regions());
}

#[test]
fn zones_restrict_offerings_and_zone_labels() {
    let opts = ResolveOptions {
        zones: Some(set(&["us-east-1a"])),
        ..ResolveOptions::default()
    };
    let restricted = resolve_all(&opts);
    let all = resolve_all(&ResolveOptions::default());
    assert!(!restricted.is_empty());
    assert!(
        restricted.len() < all.len(),
        "some types are not sold in us-east-1a"
    );
    for it in &restricted {
        assert!(
            it.offerings.iter().all(|o| o.zone == "us-east-1a"),
            "{}",
            it.name
        );
        assert_eq!(values(it, ZONE), set(&["us-east-1a"]));
        let ids: BTreeSet<String> = it.offerings.iter().map(|o| o.zone_id.clone()).collect();
        assert_eq!(ids.len(), 1);
        assert_eq!(values(it, ZONE_ID), ids);
    }
    let m5 = find(&restricted, "m5.large");
    assert_eq!(m5.offerings.len(), 2);

    let none = ResolveOptions {
        zones: Some(BTreeSet::new()),
        ..ResolveOptions::default()
    };
    assert!(resolve_all(&none).is_empty());
}

#[test]
fn types_without_price_or_kubernetes_arch_are_left_out() {
    let catalog = us_east_1();
    let types = resolve_all(&ResolveOptions::default());
    let names: BTreeSet<&str> = types.iter().map(|t| t.name.as_str()).collect();
    let unpriced: Vec<&str> = catalog
        .offerings
        .iter()
        .filter(|(_, o)| o.on_demand.is_none() && !o.zones.is_empty())
        .map(|(n, _)| n.as_str())
        .collect();
    for name in &unpriced {
        assert!(
            !names.contains(name),
            "{name} has no price but was resolved"
        );
    }
    for e in catalog.entries.iter().filter(|e| e.kube_arch().is_none()) {
        assert!(
            !names.contains(e.name.as_str()),
            "{} has no Kubernetes arch",
            e.name
        );
    }
}

#[test]
fn whole_catalogue_is_consistent() {
    let types = resolve_all(&ResolveOptions::default());
    assert!(types.len() > 1000, "{} types", types.len());
    assert!(
        types.windows(2).all(|w| w[0].name < w[1].name),
        "sorted and unique"
    );
    for it in &types {
        let a = it.allocatable();
        assert!(
            a.cpu > 0 && a.memory > 0 && a.pods > 0 && a.ephemeral_storage > 0,
            "{}: {a:?}",
            it.name
        );
        assert!(!it.offerings.is_empty());
        assert!(
            it.offerings.iter().all(|o| o.price > Price(0)),
            "{}",
            it.name
        );
        assert_eq!(
            values(it, ZONE),
            it.offerings
                .iter()
                .map(|o| o.zone.clone())
                .collect::<BTreeSet<_>>()
        );
    }
}

#[test]
fn malformed_rows_name_file_line_and_field() {
    let header = EMBEDDED.instance_types.lines().next().unwrap();
    let good = EMBEDDED
        .instance_types
        .lines()
        .find(|l| l.starts_with("m5.large,"))
        .unwrap();
    let bad = good.replacen(",2,", ",two,", 1);
    let text = format!("{header}\n{good}\n{bad}\n");
    let sources = CatalogSources {
        instance_types: &text,
        ..EMBEDDED
    };
    match RegionCatalog::parse("us-east-1", &sources) {
        Err(CatalogError::Malformed {
            file, line, field, ..
        }) => {
            assert_eq!(file, "data/catalog/instance_types.csv");
            assert_eq!(line, 3);
            // The first ",2," of an m5.large row is its vcpu field (default_cores follows).
            assert_eq!(field, "instance_type", "the duplicate name is caught first");
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
    let bad_only = format!("{header}\n{bad}\n");
    let sources = CatalogSources {
        instance_types: &bad_only,
        ..EMBEDDED
    };
    match RegionCatalog::parse("us-east-1", &sources) {
        Err(CatalogError::Malformed {
            line,
            field,
            reason,
            ..
        }) => {
            assert_eq!((line, field.as_str()), (2, "vcpu"), "{reason}");
        }
        other => panic!("expected Malformed, got {other:?}"),
    }

    let prices = "region,instance_type,price_per_hour,currency\nus-east-1,m5.large,cheap,USD\n";
    let sources = CatalogSources {
        on_demand_prices: prices,
        ..EMBEDDED
    };
    match RegionCatalog::parse("us-east-1", &sources) {
        Err(CatalogError::Malformed {
            file, line, field, ..
        }) => {
            assert_eq!(
                (file.as_str(), line, field.as_str()),
                ("data/catalog/on_demand_prices.csv", 2, "price_per_hour")
            );
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
}

#[test]
fn capacity_reservations_add_free_reserved_offerings_in_their_zones() {
    let reservation =
        |id: &str, t: &str, zone: &str, available: Option<i64>| crate::model::CapacityReservation {
            id: id.into(),
            instance_type: t.into(),
            zone: zone.into(),
            reservation_type: "default".into(),
            available,
            end_ms: None,
        };
    let opts = ResolveOptions {
        zones: Some(set(&["us-east-1a", "us-east-1b"])),
        reservations: vec![
            reservation("cr-1", "m5.large", "us-east-1a", Some(2)),
            reservation("cr-2", "m5.large", "us-east-1b", Some(0)),
            // Outside the node class's zones: not offered.
            reservation("cr-3", "m5.large", "us-east-1c", Some(5)),
        ],
        ..ResolveOptions::default()
    };
    let m5 = resolve_one("m5.large", &opts);
    let reserved: Vec<_> = m5
        .offerings
        .iter()
        .filter(|o| o.capacity_type == CAPACITY_TYPE_RESERVED)
        .collect();
    assert_eq!(reserved.len(), 2, "{reserved:?}");
    assert_eq!(reserved[0].zone, "us-east-1a");
    assert_eq!(reserved[0].price, Price::from_dollars(0.0));
    assert!(reserved[0].available);
    assert_eq!(reserved[0].zone_id, zone_id_of(&m5, "us-east-1a"));
    assert_eq!(reserved[1].zone, "us-east-1b");
    assert!(!reserved[1].available, "a full reservation is unavailable");
    assert!(values(&m5, CAPACITY_TYPE).contains(CAPACITY_TYPE_RESERVED));
    // Other types are untouched.
    let c5 = resolve_one("c5.large", &opts);
    assert!(c5
        .offerings
        .iter()
        .all(|o| o.capacity_type != CAPACITY_TYPE_RESERVED));
}

fn zone_id_of(it: &InstanceType, zone: &str) -> String {
    it.offerings
        .iter()
        .find(|o| o.zone == zone && o.capacity_type == CAPACITY_TYPE_ON_DEMAND)
        .map(|o| o.zone_id.clone())
        .unwrap_or_default()
}

#[test]
fn a_node_class_whose_amis_lack_a_variant_leaves_out_its_types() {
    let mut status = crate::model::NodeClassStatus::default();
    status.ami_by_arch.insert("amd64".into(), "ami-std".into());
    status
        .ami_by_arch
        .insert("amd64/nvidia".into(), "ami-gpu".into());
    status.ami_variants_missing.insert("amd64/neuron".into());
    let opts = ResolveOptions {
        amis: Some(status),
        ..ResolveOptions::default()
    };
    let types = resolve_all(&opts);
    let has = |name: &str| types.iter().any(|t| t.name == name);
    assert!(has("m5.large"));
    assert!(has("g4dn.xlarge"), "the NVIDIA image serves it");
    assert!(!has("inf1.xlarge"), "no Neuron image");
    assert!(!has("m6g.large"), "no arm64 image at all");
    // AMIs chosen by tags serve every type of their architecture.
    let mut by_tags = crate::model::NodeClassStatus::default();
    by_tags.ami_by_arch.insert("amd64".into(), "ami-any".into());
    let types = resolve_all(&ResolveOptions {
        amis: Some(by_tags),
        ..ResolveOptions::default()
    });
    assert!(types.iter().any(|t| t.name == "inf1.xlarge"));
    assert!(types.iter().any(|t| t.name == "g4dn.xlarge"));
}
