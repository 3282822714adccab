//! `karpenter.sh/v1` NodePool and `karpenter.k8s.aws/v1` EC2NodeClass, as the engine uses them.

use super::kubelet::KubeletConfig;
use super::quantity::Milli;
use super::requirements::Requirements;
use super::taints::Taint;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ConsolidationPolicy {
    WhenEmpty,
    WhenEmptyOrUnderutilized,
    Balanced,
}

/// `spec.disruption.budgets[]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Budget {
    /// `"10%"` or `"5"`, as written.
    pub nodes: String,
    pub schedule: Option<String>,
    pub duration: Option<String>,
    pub reasons: Vec<String>,
}

/// `spec.disruption`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Disruption {
    pub consolidation_policy: ConsolidationPolicy,
    /// `consolidateAfter` as written (`"30s"`, `"Never"`).
    pub consolidate_after: Option<String>,
    pub budgets: Vec<Budget>,
}

impl Default for Disruption {
    fn default() -> Self {
        Disruption {
            consolidation_policy: ConsolidationPolicy::WhenEmptyOrUnderutilized,
            consolidate_after: Some("0s".to_string()),
            budgets: vec![Budget {
                nodes: "10%".to_string(),
                schedule: None,
                duration: None,
                reasons: vec![],
            }],
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodePool {
    pub name: String,
    /// Higher weight is tried first.
    pub weight: i32,
    pub template_labels: BTreeMap<String, String>,
    pub template_annotations: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// Taints a node carries only while it starts; they do not block scheduling.
    pub startup_taints: Vec<Taint>,
    /// `spec.template.spec.requirements` (with `minValues`), plus the template labels as `In`.
    pub requirements: Requirements,
    /// `spec.template.spec.nodeClassRef.name`.
    pub node_class: Option<String>,
    /// `spec.limits`: resource name -> milli-units.
    pub limits: BTreeMap<String, Milli>,
    pub expire_after: Option<String>,
    pub termination_grace_period: Option<String>,
    pub disruption: Disruption,
    /// `spec.replicas`: a static pool (parsed, not supported yet).
    pub replicas: Option<i64>,
}

/// `spec.subnets` / `spec.securityGroups` / `spec.amis` status entries, reduced to what the engine
/// needs.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeClassStatus {
    /// Zones of `status.subnets` (empty: not resolved, allow every zone).
    pub subnet_zones: BTreeSet<String>,
    pub subnet_ids: BTreeSet<String>,
    pub security_group_ids: BTreeSet<String>,
    pub ami_ids: BTreeSet<String>,
    /// The subnet an instance in each zone is launched into (CreateFleet needs one per zone; of
    /// several in a zone, the first listed: Karpenter lists the one with most free IPs first).
    pub subnet_by_zone: BTreeMap<String, String>,
    /// The AMI an instance of each `kubernetes.io/arch` boots (the newest resolved for it), and
    /// for accelerated types the variant an alias resolved (`amd64/nvidia`, `amd64/neuron`):
    /// see [`NodeClassStatus::ami_for`].
    pub ami_by_arch: BTreeMap<String, String>,
    /// Variants (`arm64/neuron`) an alias's family defines but for which no image was found:
    /// types needing them cannot launch with this EC2NodeClass.
    pub ami_variants_missing: BTreeSet<String>,
    /// `status.capacityReservations`: the reservations its nodes may launch into.
    pub capacity_reservations: Vec<CapacityReservation>,
    /// Why the class launches nothing, when its status says so: a `Ready=False` condition, or
    /// an empty (not absent) list of subnets, security groups or AMIs. Karpenter launches
    /// nothing for such a class; its NodePools are not ready.
    // No `skip_serializing_if`: facts cross processes in bincode, which cannot skip a field.
    #[serde(default)]
    pub not_ready: Option<String>,
}

impl NodeClassStatus {
    /// The AMI an instance type of `arch` with AMI `variant` (`standard`, `nvidia`, `neuron`)
    /// boots: the alias's variant image when one was resolved, none when the alias's family
    /// has the variant but no image was found (as Karpenter leaves such types out), else the
    /// architecture's image (AMIs chosen by id, name or tags serve every type of their
    /// architecture, as Karpenter's do).
    pub fn ami_for(&self, arch: &str, variant: &str) -> Option<&str> {
        let key = self.ami_key(arch, variant)?;
        self.ami_by_arch.get(&key).map(String::as_str)
    }

    /// The key of `ami_by_arch` [`NodeClassStatus::ami_for`] reads (`amd64`, `amd64/nvidia`).
    pub fn ami_key(&self, arch: &str, variant: &str) -> Option<String> {
        if variant != "standard" {
            let key = format!("{arch}/{variant}");
            if self.ami_by_arch.contains_key(&key) {
                return Some(key);
            }
            if self.ami_variants_missing.contains(&key) {
                return None;
            }
        }
        self.ami_by_arch
            .contains_key(arch)
            .then(|| arch.to_string())
    }
}

/// A capacity reservation an EC2NodeClass selects (On-Demand Capacity Reservation or capacity
/// block): Karpenter offers it as capacity type `reserved` of its type in its zone, priced as
/// free (it is paid for whether used or not).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CapacityReservation {
    /// `cr-…`
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    /// `default` or `capacity-block`.
    pub reservation_type: String,
    /// Instances it can still take, when known (DescribeCapacityReservations; a status read
    /// from a manifest does not say). At zero it is offered as unavailable.
    pub available: Option<i64>,
    /// When it ends (ms since the epoch), for capacity blocks.
    pub end_ms: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct EC2NodeClass {
    pub name: String,
    pub kubelet: KubeletConfig,
    /// `spec.enclaveOptions.enabled` (Karpenter v1.15): only Nitro-Enclaves-capable types.
    pub enclaves_enabled: bool,
    /// Root volume size in GiB from `blockDeviceMappings` (the root device), default 20.
    pub root_volume_gib: Option<i64>,
    pub status: NodeClassStatus,
    /// The spec as a canonical JSON string, for drift hashing.
    pub spec_json: String,
}

/// `karpenter.sh/v1alpha1` NodeOverlay: changes capacity and price of the instance types (and
/// offerings) its requirements select, per NodePool.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeOverlay {
    pub name: String,
    pub requirements: Requirements,
    /// Extra capacity (e.g. `smarter-devices/fuse`, `hugepages-2Mi`).
    pub capacity: BTreeMap<String, Milli>,
    /// An absolute price in micro-dollars per hour.
    pub price: Option<i64>,
    /// `"+10%"`, `"-0.05"`: a relative or absolute adjustment, as written.
    pub price_adjustment: Option<String>,
    pub weight: i32,
}

/// Spec fields of an EC2NodeClass whose changes are not drift by hash: their resolved values
/// (status AMIs, subnets, security groups, reservations) are checked one by one instead, as
/// Karpenter does.
const UNHASHED_NODECLASS_FIELDS: &[&str] = &[
    "amiSelectorTerms",
    "subnetSelectorTerms",
    "securityGroupSelectorTerms",
    "capacityReservationSelectorTerms",
];

impl NodePool {
    /// dovetail's drift hash of the NodePool's template without requirements and resources
    /// (labels, annotations, taints, startup taints, nodeClassRef), as 16 hex digits.
    pub fn drift_hash(&self) -> String {
        let h = crate::stable_hash::stable_hash(&(
            &self.template_labels,
            &self.template_annotations,
            &self.taints,
            &self.startup_taints,
            &self.node_class,
        ));
        format!("{h:016x}")
    }
}

impl EC2NodeClass {
    /// dovetail's drift hash of the EC2NodeClass's spec without its selector terms, as 16 hex
    /// digits. Key order does not matter (the spec is kept canonical).
    pub fn drift_hash(&self) -> String {
        let spec = match serde_json::from_str::<serde_json::Value>(&self.spec_json) {
            Ok(serde_json::Value::Object(mut m)) => {
                for f in UNHASHED_NODECLASS_FIELDS {
                    m.remove(*f);
                }
                serde_json::Value::Object(m).to_string()
            }
            _ => self.spec_json.clone(),
        };
        format!("{:016x}", crate::stable_hash::stable_hash(&spec))
    }
}
