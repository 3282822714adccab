//! Turning catalogue entries into the [`InstanceType`]s a NodePool sees, given what its
//! EC2NodeClass changes (kubelet settings, enclaves, subnet zones, root volume size).

use super::capacity::{capacity, DEFAULT_EPHEMERAL_STORAGE_GIB};
use super::entry::CatalogEntry;
use super::labels::requirements;
use super::overhead::overhead;
use super::RegionCatalog;
use crate::model::{CapacityReservation, InstanceType, KubeletConfig, NodeClassStatus};
use std::collections::BTreeSet;

/// Options that change what a NodePool sees of an instance type (from its EC2NodeClass).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveOptions {
    /// `spec.kubelet`: max pods, pods per core, reserved resources, eviction thresholds.
    pub kubelet: KubeletConfig,
    /// Keep only types that support Nitro Enclaves (the node class asks for enclaves).
    pub enclaves_required: bool,
    /// The zones of the node class's subnets (its status); `None` means every zone of the region.
    pub zones: Option<BTreeSet<String>>,
    /// Size of the root volume, which Karpenter reports as ephemeral storage.
    pub ephemeral_storage_gib: i64,
    /// The capacity reservations of the node class's status: `reserved` offerings.
    pub reservations: Vec<CapacityReservation>,
    /// The node class's resolved AMIs (its status), when it lists any: a type no AMI serves is
    /// left out, as Karpenter leaves out types no AMI's requirements admit.
    pub amis: Option<NodeClassStatus>,
}

impl Default for ResolveOptions {
    /// Karpenter's defaults: no kubelet overrides, no enclaves, every zone, a 20 GiB root volume.
    fn default() -> Self {
        ResolveOptions {
            kubelet: KubeletConfig::default(),
            enclaves_required: false,
            zones: None,
            ephemeral_storage_gib: DEFAULT_EPHEMERAL_STORAGE_GIB,
            reservations: Vec::new(),
            amis: None,
        }
    }
}

impl ResolveOptions {
    /// What an EC2NodeClass asks of its instance types: its kubelet settings, enclave support,
    /// the zones of its resolved subnets (all zones while none are resolved), its root volume and
    /// its capacity reservations.
    pub fn for_node_class(class: &crate::model::EC2NodeClass) -> Self {
        ResolveOptions {
            kubelet: class.kubelet.clone(),
            enclaves_required: class.enclaves_enabled,
            zones: (!class.status.subnet_zones.is_empty())
                .then(|| class.status.subnet_zones.clone()),
            ephemeral_storage_gib: class
                .root_volume_gib
                .unwrap_or(DEFAULT_EPHEMERAL_STORAGE_GIB),
            reservations: class.status.capacity_reservations.clone(),
            amis: (!class.status.ami_by_arch.is_empty()).then(|| NodeClassStatus {
                ami_by_arch: class.status.ami_by_arch.clone(),
                ami_variants_missing: class.status.ami_variants_missing.clone(),
                ..NodeClassStatus::default()
            }),
        }
    }
}

impl RegionCatalog {
    /// Every type a NodePool with these options can launch in the region, sorted by name.
    ///
    /// A type is left out when Kubernetes has no architecture for it (Mac types), when enclaves
    /// are required and it lacks them, when the region has no on-demand price for it (Karpenter
    /// could not price it), when no offering remains in the allowed zones and when the node
    /// class's AMIs serve none of its architecture and variant. A capacity
    /// reservation adds a `reserved` offering in its zone.
    pub fn instance_types(&self, opts: &ResolveOptions) -> Vec<InstanceType> {
        let mut out: Vec<InstanceType> = self
            .entries
            .iter()
            .filter_map(|e| self.resolve(e, opts))
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// One entry as [`RegionCatalog::instance_types`] resolves it, or `None` when it is left out.
    pub fn resolve(&self, entry: &CatalogEntry, opts: &ResolveOptions) -> Option<InstanceType> {
        if opts.enclaves_required && !entry.nitro_enclaves_supported {
            return None;
        }
        if let Some(amis) = &opts.amis {
            amis.ami_for(entry.kube_arch()?, entry.ami_variant())?;
        }
        let sold = self.offerings.get(&entry.name)?;
        let mut offerings = sold.offerings(entry.spot_supported, opts.zones.as_ref());
        if !offerings.is_empty() {
            offerings.extend(sold.reserved(&entry.name, &opts.reservations, opts.zones.as_ref()));
            offerings.sort_by(|a, b| (&a.zone, &a.capacity_type).cmp(&(&b.zone, &b.capacity_type)));
        }
        if offerings.is_empty() {
            return None;
        }
        let requirements = requirements(entry, &self.region, &offerings)?;
        let capacity = capacity(entry, &opts.kubelet, opts.ephemeral_storage_gib);
        let overhead = overhead(entry.vcpu, &capacity, &opts.kubelet);
        Some(InstanceType {
            name: entry.name.clone(),
            requirements,
            capacity,
            overhead,
            offerings,
        })
    }
}
