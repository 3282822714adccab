//! One EC2 instance type as described by `data/catalog/instance_types.csv` (a DescribeInstanceTypes
//! dump joined with Karpenter's VPC limits), before any NodePool or EC2NodeClass applies.

use super::csv::Table;
use super::CatalogError;
use std::collections::HashSet;

/// One row of `instance_types.csv`. Sizes are as EC2 reports them (MiB, GB); nothing here has
/// overhead taken off yet.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogEntry {
    /// `m5.large`.
    pub name: String,
    /// `m5` (the part of the name before the dot).
    pub family: String,
    /// `large` (the part after the dot).
    pub size: String,
    /// The leading letters of the name (`m`, `c`, `inf`, `u` for `u-6tb1`), by Karpenter's
    /// `(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.` pattern; `None` when the name does not fit it.
    pub category: Option<String>,
    /// The digits after the category (`5` for `m5`, `7` for `c7gn`), by the same pattern.
    pub generation: Option<u32>,
    /// Whether EC2 lists the type as current generation.
    pub current_generation: bool,
    pub vcpu: i64,
    pub default_cores: i64,
    pub memory_mib: i64,
    /// As EC2 names them: `x86_64`, `arm64`, `i386`, `arm64_mac`, ...
    pub architectures: Vec<String>,
    /// As EC2 spells it: `Intel`, `AMD`, `AWS`, `Apple`.
    pub cpu_manufacturer: String,
    pub sustained_clock_ghz: Option<f64>,
    /// Whole GPUs. Fractional-GPU types (g6f, gr6f) have 0 here and a `gpu_partition_size`.
    pub gpu_count: i64,
    /// The share of one GPU each instance gets (`1.0` for whole GPUs, `0.125` for g6f.large).
    pub gpu_partition_size: Option<f64>,
    pub gpu_manufacturer: Option<String>,
    pub gpu_model: Option<String>,
    /// GPU memory of all the instance's GPUs together.
    pub gpu_memory_mib_total: i64,
    pub neuron_device_count: i64,
    pub neuron_device_model: Option<String>,
    /// `nitro` or `xen`; `None` for bare metal.
    pub hypervisor: Option<String>,
    pub bare_metal: bool,
    pub burstable: bool,
    /// `nitro_enclaves_support` is `supported`.
    pub nitro_enclaves_supported: bool,
    /// `nitro_tpm_support` is `supported`.
    pub nitro_tpm_supported: bool,
    pub spot_supported: bool,
    /// EC2 usage classes: `on-demand`, `spot`, `capacity-block`.
    pub usage_classes: Vec<String>,
    pub max_network_interfaces: i64,
    pub max_network_cards: i64,
    pub default_card_max_network_interfaces: i64,
    pub ipv4_per_interface: i64,
    pub ipv6_per_interface: i64,
    pub ipv6_supported: bool,
    /// EC2's text, e.g. `25 Gigabit`, `Up to 10 Gigabit`, `8x 100 Gigabit`, `Moderate`.
    pub network_performance: String,
    pub efa_supported: bool,
    /// `required`, `supported` or `unsupported`.
    pub ena_support: String,
    /// The VPC CNI's ENI-limited pod count, `ENIs * (IPv4 per ENI - 1) + 2`.
    pub max_pods_eni: i64,
    /// Total local instance storage in GB; 0 when the type has none.
    pub instance_storage_gb: i64,
    pub ebs_max_bandwidth_mbps: Option<i64>,
    /// Branch ENIs for security groups per pod (absent for types Karpenter's limits lack).
    pub karpenter_branch_interfaces: Option<i64>,
    pub karpenter_trunking_compatible: Option<bool>,
}

pub(crate) const FILE: &str = "data/catalog/instance_types.csv";

const COLUMNS: &[&str] = &[
    "instance_type",
    "family",
    "size",
    "current_generation",
    "vcpu",
    "default_cores",
    "memory_mib",
    "cpu_manufacturer",
    "sustained_clock_ghz",
    "gpu_count",
    "gpu_partition_size",
    "gpu_manufacturer",
    "gpu_model",
    "gpu_memory_mib_total",
    "neuron_device_count",
    "neuron_device_model",
    "hypervisor",
    "bare_metal",
    "burstable",
    "nitro_enclaves_support",
    "nitro_tpm_support",
    "spot_supported",
    "max_network_interfaces",
    "max_network_cards",
    "default_card_max_network_interfaces",
    "ipv4_per_interface",
    "ipv6_per_interface",
    "ipv6_supported",
    "network_performance",
    "efa_supported",
    "ena_support",
    "max_pods_eni",
    "instance_storage_gb",
    "ebs_max_bandwidth_mbps",
    "karpenter_branch_interfaces",
    "karpenter_trunking_compatible",
    "architectures",
    "usage_classes",
];

/// Parses every row of an `instance_types.csv`, in file order.
pub(crate) fn parse_entries(file: &str, text: &str) -> Result<Vec<CatalogEntry>, CatalogError> {
    let table = Table::parse(file, text, COLUMNS)?;
    let mut entries = Vec::new();
    let mut seen = HashSet::new();
    for row in table.rows() {
        let name = row.text("instance_type")?;
        if !seen.insert(name) {
            return Err(row.error("instance_type", format!("{name} is listed twice")));
        }
        let family = row.text("family")?;
        let size = row.text("size")?;
        if name.split_once('.') != Some((family, size)) {
            return Err(row.error(
                "instance_type",
                format!("{name:?} is not family {family:?} '.' size {size:?}"),
            ));
        }
        let (category, generation) = match category_and_generation(name) {
            Some((c, g)) => {
                let g = g.parse().map_err(|_| {
                    row.error("instance_type", format!("generation {g:?} is too large"))
                })?;
                (Some(c.to_string()), Some(g))
            }
            None => (None, None),
        };
        let vcpu = row.count("vcpu")?;
        if vcpu == 0 {
            return Err(row.error("vcpu", "an instance type has at least one vCPU"));
        }
        let gpu_partition_size = row.opt_number("gpu_partition_size")?;
        if gpu_partition_size.is_some_and(|p| p <= 0.0 || p > 1.0) {
            return Err(row.error("gpu_partition_size", "must be in (0, 1]"));
        }
        entries.push(CatalogEntry {
            name: name.to_string(),
            family: family.to_string(),
            size: size.to_string(),
            category,
            generation,
            current_generation: row.boolean("current_generation")?,
            vcpu,
            default_cores: row.count("default_cores")?,
            memory_mib: row.count("memory_mib")?,
            architectures: row.list("architectures")?,
            cpu_manufacturer: row.text("cpu_manufacturer")?.to_string(),
            sustained_clock_ghz: row.opt_number("sustained_clock_ghz")?,
            gpu_count: row.count("gpu_count")?,
            gpu_partition_size,
            gpu_manufacturer: row.opt_text("gpu_manufacturer")?.map(str::to_string),
            gpu_model: row.opt_text("gpu_model")?.map(str::to_string),
            gpu_memory_mib_total: row.count("gpu_memory_mib_total")?,
            neuron_device_count: row.count("neuron_device_count")?,
            neuron_device_model: row.opt_text("neuron_device_model")?.map(str::to_string),
            hypervisor: row.opt_text("hypervisor")?.map(str::to_string),
            bare_metal: row.boolean("bare_metal")?,
            burstable: row.boolean("burstable")?,
            nitro_enclaves_supported: row.flag(
                "nitro_enclaves_support",
                "supported",
                "unsupported",
            )?,
            nitro_tpm_supported: row.flag("nitro_tpm_support", "supported", "unsupported")?,
            spot_supported: row.boolean("spot_supported")?,
            usage_classes: row.list("usage_classes")?,
            max_network_interfaces: row.count("max_network_interfaces")?,
            max_network_cards: row.count("max_network_cards")?,
            default_card_max_network_interfaces: row
                .count("default_card_max_network_interfaces")?,
            ipv4_per_interface: row.count("ipv4_per_interface")?,
            ipv6_per_interface: row.count("ipv6_per_interface")?,
            ipv6_supported: row.boolean("ipv6_supported")?,
            network_performance: row.raw("network_performance")?.to_string(),
            efa_supported: row.boolean("efa_supported")?,
            ena_support: row.text("ena_support")?.to_string(),
            max_pods_eni: row.count("max_pods_eni")?,
            instance_storage_gb: row.count("instance_storage_gb")?,
            ebs_max_bandwidth_mbps: row.opt_int("ebs_max_bandwidth_mbps")?,
            karpenter_branch_interfaces: row.opt_int("karpenter_branch_interfaces")?,
            karpenter_trunking_compatible: row.opt_boolean("karpenter_trunking_compatible")?,
        });
    }
    Ok(entries)
}

/// Karpenter's `(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.` on an instance-type name: the category letters
/// and the generation digits, skipping a `-<n>tb` memory marker (`u-6tb1.56xlarge` → `u`, `1`).
pub fn category_and_generation(name: &str) -> Option<(&str, &str)> {
    let letters = name.bytes().take_while(u8::is_ascii_lowercase).count();
    if letters == 0 {
        return None;
    }
    let (category, mut rest) = name.split_at(letters);
    if let Some(after_dash) = rest.strip_prefix('-') {
        let n = after_dash.bytes().take_while(u8::is_ascii_digit).count();
        if n > 0 {
            if let Some(after_tb) = after_dash[n..].strip_prefix("tb") {
                rest = after_tb;
            }
        }
    }
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || !rest[digits..].contains('.') {
        return None;
    }
    Some((category, &rest[..digits]))
}

impl CatalogEntry {
    /// The `kubernetes.io/arch` value: the first EC2 architecture Karpenter knows (`x86_64` →
    /// `amd64`, `arm64` → `arm64`). `None` (Mac types: `arm64_mac`, `x86_64_mac`) means Karpenter
    /// cannot run the type as a node.
    pub fn kube_arch(&self) -> Option<&'static str> {
        self.architectures.iter().find_map(|a| match a.as_str() {
            "x86_64" => Some("amd64"),
            "arm64" => Some("arm64"),
            _ => None,
        })
    }

    /// The AMI variant the type boots, as Karpenter's aliases choose it: `nvidia` for NVIDIA
    /// GPUs, `neuron` for Inferentia / Trainium, `standard` otherwise.
    pub fn ami_variant(&self) -> &'static str {
        if self.gpu_count > 0
            && self
                .gpu_manufacturer
                .as_deref()
                .is_some_and(|m| m.eq_ignore_ascii_case("nvidia"))
        {
            "nvidia"
        } else if self.neuron_device_count > 0 {
            "neuron"
        } else {
            "standard"
        }
    }

    /// True for Graviton-style types, whose first listed architecture is `arm64` (Karpenter takes
    /// 64 MiB of CMA memory off these).
    pub fn is_arm64_first(&self) -> bool {
        self.architectures.first().is_some_and(|a| a == "arm64")
    }

    /// True for types that get a share of a GPU rather than whole GPUs (g6f, gr6f).
    pub fn fractional_gpu(&self) -> bool {
        self.gpu_partition_size.is_some_and(|p| p < 1.0)
    }

    /// GPU memory of one GPU, when the type has whole GPUs (Karpenter's `instance-gpu-memory`).
    pub fn gpu_memory_mib_per_gpu(&self) -> Option<i64> {
        (self.gpu_count > 0 && !self.fractional_gpu())
            .then(|| self.gpu_memory_mib_total / self.gpu_count)
    }

    /// Network bandwidth in Mbps when EC2 states an exact figure (`25 Gigabit` → 25000). `None`
    /// for `Up to N Gigabit` (Karpenter takes the baseline from a table this catalogue lacks),
    /// `8x 100 Gigabit` and the old `High` / `Moderate` / `Low` wording.
    pub fn network_bandwidth_mbps(&self) -> Option<i64> {
        let gbit = self.network_performance.strip_suffix(" Gigabit")?;
        if gbit.is_empty() || !gbit.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            return None;
        }
        let v: f64 = gbit.parse().ok()?;
        Some((v * 1000.0).round() as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn category_and_generation_follow_karpenters_pattern() {
        assert_eq!(category_and_generation("m5.large"), Some(("m", "5")));
        assert_eq!(category_and_generation("c7gn.xlarge"), Some(("c", "7")));
        assert_eq!(category_and_generation("inf2.xlarge"), Some(("inf", "2")));
        assert_eq!(category_and_generation("u-6tb1.56xlarge"), Some(("u", "1")));
        assert_eq!(
            category_and_generation("u7i-12tb.224xlarge"),
            Some(("u", "7"))
        );
        assert_eq!(category_and_generation("mac-m4.metal"), None);
        assert_eq!(category_and_generation("m5"), None);
    }
}
