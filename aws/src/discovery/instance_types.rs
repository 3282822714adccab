//! DescribeInstanceTypes into catalogue entries: the columns EC2 describes, converted as the
//! bundled `instance_types.csv` was made from moto's DescribeInstanceTypes dump, so discovery
//! from an EC2 API equals the bundle on those columns. Karpenter's branch-interface and trunking
//! limits are not in EC2's answer; they come from the bundled rows.

use crate::error::AwsError;
use aws_sdk_ec2::types::InstanceTypeInfo;
use dovetail_dataflow::catalog::{category_and_generation, CatalogEntry};

const ACTION: &str = "DescribeInstanceTypes";

/// One instance type as a catalogue entry; `bundled` supplies what EC2 does not describe.
pub fn entry(
    info: &InstanceTypeInfo,
    bundled: Option<&CatalogEntry>,
) -> Result<CatalogEntry, AwsError> {
    let name = info
        .instance_type()
        .map(|t| t.as_str().to_string())
        .ok_or_else(|| AwsError::response(ACTION, "an instance type", "InstanceType", "missing"))?;
    let object = format!("instance type {name}");
    let missing = |field: &str| AwsError::response(ACTION, object.clone(), field, "missing");
    let (family, size) = name.split_once('.').ok_or_else(|| {
        AwsError::response(
            ACTION,
            object.clone(),
            "InstanceType",
            "no '.' between family and size",
        )
    })?;
    let (category, generation) = match category_and_generation(&name) {
        Some((c, g)) => (
            Some(c.to_string()),
            Some(g.parse::<u32>().map_err(|_| {
                AwsError::response(
                    ACTION,
                    object.clone(),
                    "InstanceType",
                    "generation too large",
                )
            })?),
        ),
        None => (None, None),
    };
    let vcpu_info = info.v_cpu_info().ok_or_else(|| missing("VCpuInfo"))?;
    let vcpu = i64::from(
        vcpu_info
            .default_v_cpus()
            .ok_or_else(|| missing("VCpuInfo.DefaultVCpus"))?,
    );
    if vcpu <= 0 {
        return Err(AwsError::response(
            ACTION,
            object,
            "VCpuInfo.DefaultVCpus",
            "must be at least 1",
        ));
    }
    let memory_mib = info
        .memory_info()
        .and_then(|m| m.size_in_mib())
        .ok_or_else(|| missing("MemoryInfo.SizeInMiB"))?;
    let processor = info.processor_info();
    let gpu = info.gpu_info().and_then(|g| g.gpus().first());
    let neuron = info.neuron_info().and_then(|n| n.neuron_devices().first());
    let network = info.network_info().ok_or_else(|| missing("NetworkInfo"))?;
    let default_card = network.default_network_card_index().unwrap_or(0);
    let default_card_enis = network
        .network_cards()
        .iter()
        .find(|c| c.network_card_index() == Some(default_card))
        .and_then(|c| c.maximum_network_interfaces())
        .or(network.maximum_network_interfaces())
        .map(i64::from)
        .unwrap_or(0);
    let ipv4_per_interface = i64::from(network.ipv4_addresses_per_interface().unwrap_or(0));
    let usage_classes: Vec<String> = {
        let mut v: Vec<String> = info
            .supported_usage_classes()
            .iter()
            .map(|u| u.as_str().to_string())
            .collect();
        v.sort();
        v
    };
    Ok(CatalogEntry {
        name: name.clone(),
        family: family.to_string(),
        size: size.to_string(),
        category,
        generation,
        current_generation: info.current_generation().unwrap_or(false),
        vcpu,
        default_cores: i64::from(vcpu_info.default_cores().unwrap_or(0)),
        memory_mib,
        architectures: processor
            .map(|p| {
                p.supported_architectures()
                    .iter()
                    .map(|a| a.as_str().to_string())
                    .collect()
            })
            .unwrap_or_default(),
        cpu_manufacturer: processor
            .and_then(|p| p.manufacturer())
            .unwrap_or_default()
            .to_string(),
        sustained_clock_ghz: processor.and_then(|p| p.sustained_clock_speed_in_ghz()),
        gpu_count: gpu.and_then(|g| g.count()).map(i64::from).unwrap_or(0),
        gpu_partition_size: gpu.and_then(|g| g.gpu_partition_size()),
        gpu_manufacturer: gpu.and_then(|g| g.manufacturer()).map(str::to_string),
        gpu_model: gpu.and_then(|g| g.name()).map(str::to_string),
        gpu_memory_mib_total: info
            .gpu_info()
            .and_then(|g| g.total_gpu_memory_in_mib())
            .map(i64::from)
            .unwrap_or(0),
        neuron_device_count: neuron.and_then(|n| n.count()).map(i64::from).unwrap_or(0),
        neuron_device_model: neuron.and_then(|n| n.name()).map(str::to_string),
        hypervisor: info.hypervisor().map(|h| h.as_str().to_string()),
        bare_metal: info.bare_metal().unwrap_or(false),
        burstable: info.burstable_performance_supported().unwrap_or(false),
        nitro_enclaves_supported: info
            .nitro_enclaves_support()
            .is_some_and(|s| s.as_str() == "supported"),
        nitro_tpm_supported: info
            .nitro_tpm_support()
            .is_some_and(|s| s.as_str() == "supported"),
        spot_supported: usage_classes.iter().any(|u| u == "spot"),
        usage_classes,
        max_network_interfaces: network
            .maximum_network_interfaces()
            .map(i64::from)
            .unwrap_or(0),
        max_network_cards: network.maximum_network_cards().map(i64::from).unwrap_or(0),
        default_card_max_network_interfaces: default_card_enis,
        ipv4_per_interface,
        ipv6_per_interface: network
            .ipv6_addresses_per_interface()
            .map(i64::from)
            .unwrap_or(0),
        ipv6_supported: network.ipv6_supported().unwrap_or(false),
        network_performance: network
            .network_performance()
            .unwrap_or_default()
            .to_string(),
        efa_supported: network.efa_supported().unwrap_or(false),
        ena_support: network
            .ena_support()
            .map(|e| e.as_str().to_string())
            .unwrap_or_else(|| "unsupported".to_string()),
        // Karpenter's ENILimitedPods: the VPC CNI gives each ENI of the default card its IPv4
        // addresses but the first, plus two host-network pods.
        max_pods_eni: (default_card_enis * (ipv4_per_interface - 1) + 2).max(0),
        instance_storage_gb: info
            .instance_storage_info()
            .and_then(|s| s.total_size_in_gb())
            .unwrap_or(0),
        ebs_max_bandwidth_mbps: info
            .ebs_info()
            .and_then(|e| e.ebs_optimized_info())
            .and_then(|o| o.maximum_bandwidth_in_mbps())
            .map(i64::from),
        karpenter_branch_interfaces: bundled.and_then(|b| b.karpenter_branch_interfaces),
        karpenter_trunking_compatible: bundled.and_then(|b| b.karpenter_trunking_compatible),
    })
}
