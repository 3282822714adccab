//! Zonal volumes: which zones a pod's PersistentVolumeClaims let it run in.
//!
//! A claim bound to a PersistentVolume pins the pod to the volume's zones (EBS volumes live in
//! one zone). An unbound claim is limited by its StorageClass's `allowedTopologies`, as
//! Karpenter's volume topology does; with `WaitForFirstConsumer` the volume is then created
//! where the pod lands.

use crate::error::FieldResult;
use crate::fields::At;
use crate::notes::Notes;
use std::collections::{BTreeMap, BTreeSet};

/// Label keys whose values are zone names.
const ZONE_KEYS: &[&str] = &[
    "topology.kubernetes.io/zone",
    "topology.ebs.csi.aws.com/zone",
    "failure-domain.beta.kubernetes.io/zone",
];

/// Annotation marking the cluster's default StorageClass.
const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

/// A claim a pod uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum VolumeClaim {
    /// `persistentVolumeClaim.claimName`.
    Claim(String),
    /// A generic ephemeral volume: the claim will be `<pod>-<volume>`, with the template's class.
    Ephemeral {
        volume: String,
        storage_class: Option<String>,
    },
    /// A claim made from a template (a StatefulSet's `volumeClaimTemplates`): `claim` if it
    /// exists already, else a new claim of `storage_class`.
    FromTemplate {
        claim: String,
        storage_class: Option<String>,
    },
}

impl VolumeClaim {
    /// The name of the claim this is, in a pod named `pod_name`.
    pub fn claim_name(&self, pod_name: &str) -> String {
        match self {
            VolumeClaim::Claim(name) | VolumeClaim::FromTemplate { claim: name, .. } => {
                name.clone()
            }
            VolumeClaim::Ephemeral { volume, .. } => format!("{pod_name}-{volume}"),
        }
    }
}

/// The claims in a pod spec's `volumes`.
pub(crate) fn pod_volume_claims(spec: &At) -> FieldResult<Vec<VolumeClaim>> {
    let mut out = Vec::new();
    for v in spec.list("volumes")? {
        if let Some(pvc) = v.obj("persistentVolumeClaim")? {
            out.push(VolumeClaim::Claim(pvc.req_str("claimName")?));
        } else if let Some(tmpl) = v.dig(&["ephemeral", "volumeClaimTemplate"])? {
            let storage_class = match tmpl.obj("spec")? {
                Some(spec) => spec.str("storageClassName")?,
                None => None,
            };
            out.push(VolumeClaim::Ephemeral {
                volume: v.req_str("name")?,
                storage_class,
            });
        }
    }
    Ok(out)
}

/// A PersistentVolumeClaim, reduced to what zone resolution needs.
#[derive(Debug, Clone)]
pub(crate) struct Pvc {
    pub namespace: String,
    pub name: String,
    pub volume_name: Option<String>,
    /// `Some("")` means "no class" (only binds to class-less volumes); `None` the default class.
    pub storage_class: Option<String>,
}

pub(crate) fn pvc(root: &At, namespace: String, name: String) -> FieldResult<Pvc> {
    let spec = root.obj("spec")?;
    let (volume_name, storage_class) = match spec {
        Some(s) => (
            s.str("volumeName")?.filter(|v| !v.is_empty()),
            s.str("storageClassName")?,
        ),
        None => (None, None),
    };
    Ok(Pvc {
        namespace,
        name,
        volume_name,
        storage_class,
    })
}

/// A PersistentVolume's zones (`None`: not zonal), and other node constraints it has that
/// dovetail does not model (a local volume's hostname).
#[derive(Debug, Clone)]
pub(crate) struct Pv {
    pub name: String,
    pub zones: Option<BTreeSet<String>>,
    pub other_keys: BTreeSet<String>,
}

pub(crate) fn pv(root: &At, name: String) -> FieldResult<Pv> {
    let mut other_keys = BTreeSet::new();
    let terms = match root.dig(&["spec", "nodeAffinity", "required"])? {
        Some(req) => req.list("nodeSelectorTerms")?,
        None => Vec::new(),
    };
    let zones = if terms.is_empty() {
        // Volumes provisioned by the in-tree EBS plugin carry their zone as a label instead.
        let labels = root.req_obj("metadata")?.string_map("labels")?;
        ZONE_KEYS
            .iter()
            .find_map(|k| labels.get(*k))
            .map(|z| BTreeSet::from([z.clone()]))
    } else {
        let mut per_term = Vec::new();
        for term in &terms {
            let mut term_zones: Option<BTreeSet<String>> = None;
            for expr in term.list("matchExpressions")? {
                let key = expr.req_str("key")?;
                let op = expr.req_str("operator")?;
                if ZONE_KEYS.contains(&key.as_str()) && op == "In" {
                    let values: BTreeSet<String> = expr.str_list("values")?.into_iter().collect();
                    term_zones = Some(match term_zones {
                        Some(z) => z.intersection(&values).cloned().collect(),
                        None => values,
                    });
                } else if !ZONE_KEYS.contains(&key.as_str()) {
                    other_keys.insert(key);
                }
            }
            per_term.push(term_zones);
        }
        union_of_terms(per_term)
    };
    Ok(Pv {
        name,
        zones,
        other_keys,
    })
}

/// Terms are alternatives: the zones are their union, unless one term allows any zone.
fn union_of_terms(terms: Vec<Option<BTreeSet<String>>>) -> Option<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for t in terms {
        out.extend(t?);
    }
    Some(out)
}

/// A StorageClass: its binding mode, allowed zones and whether it is the default.
#[derive(Debug, Clone)]
pub(crate) struct StorageClass {
    pub name: String,
    pub immediate: bool,
    pub zones: Option<BTreeSet<String>>,
    pub is_default: bool,
}

pub(crate) fn storage_class(root: &At, name: String) -> FieldResult<StorageClass> {
    let annotations = root.req_obj("metadata")?.string_map("annotations")?;
    let is_default = annotations.get(DEFAULT_CLASS).map(String::as_str) == Some("true");
    // The API server defaults volumeBindingMode to Immediate.
    let immediate = root.str("volumeBindingMode")?.as_deref() != Some("WaitForFirstConsumer");
    let terms = root.list("allowedTopologies")?;
    let zones = if terms.is_empty() {
        None
    } else {
        let mut per_term = Vec::new();
        for term in &terms {
            let mut term_zones: Option<BTreeSet<String>> = None;
            for expr in term.list("matchLabelExpressions")? {
                let key = expr.req_str("key")?;
                if ZONE_KEYS.contains(&key.as_str()) {
                    let values: BTreeSet<String> = expr.str_list("values")?.into_iter().collect();
                    term_zones = Some(match term_zones {
                        Some(z) => z.intersection(&values).cloned().collect(),
                        None => values,
                    });
                }
            }
            per_term.push(term_zones);
        }
        union_of_terms(per_term)
    };
    Ok(StorageClass {
        name,
        immediate,
        zones,
        is_default,
    })
}

/// Every claim, volume and class in the input, for resolving pods' zones.
#[derive(Debug, Default)]
pub(crate) struct VolumeIndex {
    pvcs: BTreeMap<(String, String), Pvc>,
    pvs: BTreeMap<String, Pv>,
    classes: BTreeMap<String, StorageClass>,
    /// The claims bound to each volume (`spec.volumeName`), so a volume's change finds its
    /// claims without a scan.
    bound: BTreeMap<String, BTreeSet<(String, String)>>,
}

impl VolumeIndex {
    pub fn add_pvc(&mut self, p: Pvc) {
        let key = (p.namespace.clone(), p.name.clone());
        self.unbind(&key);
        if let Some(volume) = &p.volume_name {
            self.bound
                .entry(volume.clone())
                .or_default()
                .insert(key.clone());
        }
        self.pvcs.insert(key, p);
    }

    /// Takes the claim `key` out of its volume's bound claims.
    fn unbind(&mut self, key: &(String, String)) {
        let volume = self.pvcs.get(key).and_then(|p| p.volume_name.clone());
        if let Some(volume) = volume {
            if let Some(claims) = self.bound.get_mut(&volume) {
                claims.remove(key);
                if claims.is_empty() {
                    self.bound.remove(&volume);
                }
            }
        }
    }

    pub fn add_pv(&mut self, p: Pv) {
        self.pvs.insert(p.name.clone(), p);
    }

    pub fn add_class(&mut self, c: StorageClass) {
        self.classes.insert(c.name.clone(), c);
    }

    /// Takes in the claims, volumes and classes of `other` (one object read on its own).
    pub fn merge(&mut self, other: VolumeIndex) {
        for p in other.pvcs.into_values() {
            self.add_pvc(p);
        }
        self.pvs.extend(other.pvs);
        self.classes.extend(other.classes);
    }

    pub fn remove_pvc(&mut self, namespace: &str, name: &str) {
        let key = (namespace.to_string(), name.to_string());
        self.unbind(&key);
        self.pvcs.remove(&key);
    }

    pub fn remove_pv(&mut self, name: &str) {
        self.pvs.remove(name);
    }

    pub fn remove_class(&mut self, name: &str) {
        self.classes.remove(name);
    }

    pub fn pvc_keys(&self) -> impl Iterator<Item = &(String, String)> {
        self.pvcs.keys()
    }

    pub fn pv_names(&self) -> impl Iterator<Item = &String> {
        self.pvs.keys()
    }

    pub fn class_names(&self) -> impl Iterator<Item = &String> {
        self.classes.keys()
    }

    /// The claims bound to volume `name`.
    pub fn claims_bound_to<'a>(
        &'a self,
        name: &'a str,
    ) -> impl Iterator<Item = &'a (String, String)> + 'a {
        self.bound.get(name).into_iter().flatten()
    }

    fn default_class(&self) -> Option<&StorageClass> {
        self.classes.values().find(|c| c.is_default)
    }

    /// The zones a pod's claims allow, intersected over its claims; `None` when no claim is
    /// zonal (or none could be resolved: those are noted and left unconstrained).
    pub fn pod_zones(
        &self,
        namespace: &str,
        pod_name: &str,
        claims: &[VolumeClaim],
        notes: &mut Notes,
    ) -> Option<BTreeSet<String>> {
        let mut out: Option<BTreeSet<String>> = None;
        for claim in claims {
            let template_class = match claim {
                VolumeClaim::Claim(_) => None,
                VolumeClaim::Ephemeral { storage_class, .. }
                | VolumeClaim::FromTemplate { storage_class, .. } => Some(storage_class),
            };
            let zones = self.claim_zones(
                namespace,
                &claim.claim_name(pod_name),
                template_class,
                notes,
            );
            if let Some(z) = zones {
                out = Some(match out {
                    Some(acc) => acc.intersection(&z).cloned().collect(),
                    None => z,
                });
            }
        }
        if out.as_ref().is_some_and(BTreeSet::is_empty) {
            notes.add("its volumes' zones do not overlap; it cannot be scheduled anywhere");
        }
        out
    }

    /// Zones of claim `name`. `template_class` is set when the claim is created on demand from a
    /// template, so that its absence is expected and the template's class applies.
    fn claim_zones(
        &self,
        namespace: &str,
        name: &str,
        template_class: Option<&Option<String>>,
        notes: &mut Notes,
    ) -> Option<BTreeSet<String>> {
        let key = (namespace.to_string(), name.to_string());
        let Some(pvc) = self.pvcs.get(&key) else {
            return match template_class {
                Some(class) => self.class_zones(name, class.as_deref(), notes),
                None => {
                    notes.add(format!(
                        "PersistentVolumeClaim {namespace}/{name} is not in the input; its zone is not known"
                    ));
                    None
                }
            };
        };
        if let Some(volume) = &pvc.volume_name {
            let Some(pv) = self.pvs.get(volume) else {
                notes.add(format!(
                    "PersistentVolume {volume} (bound to claim {namespace}/{name}) is not in the input; its zone is not known"
                ));
                return None;
            };
            if !pv.other_keys.is_empty() {
                notes.add(format!(
                    "PersistentVolume {volume} also pins nodes by {:?}, which dovetail does not model",
                    pv.other_keys
                ));
            }
            return pv.zones.clone();
        }
        self.class_zones(name, pvc.storage_class.as_deref(), notes)
    }

    /// Zones a new volume of `class` (`None`: the default class) may be created in.
    fn class_zones(
        &self,
        claim: &str,
        class: Option<&str>,
        notes: &mut Notes,
    ) -> Option<BTreeSet<String>> {
        let sc = match class {
            Some("") => return None,
            Some(name) => match self.classes.get(name) {
                Some(sc) => sc,
                None => {
                    notes.add(format!(
                        "StorageClass {name} (of claim {claim}) is not in the input; the volume's zone is not known"
                    ));
                    return None;
                }
            },
            None => self.default_class()?,
        };
        if sc.immediate {
            notes.add(format!(
                "claim {claim} is not bound and StorageClass {} binds Immediately: the volume's zone is chosen without the pod{}",
                sc.name,
                if sc.zones.is_some() { " (within its allowedTopologies)" } else { "; zone not known" }
            ));
        }
        sc.zones.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pv_terms_union_and_unconstrained_terms_win() {
        let doc = json!({"metadata": {"name": "pv"}, "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": ["us-east-1a"]}]},
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1b"]}]},
        ]}}}});
        let p = pv(&At::root(&doc, ""), "pv".into()).unwrap();
        assert_eq!(
            p.zones,
            Some(BTreeSet::from([
                "us-east-1a".to_string(),
                "us-east-1b".to_string()
            ]))
        );
        let doc = json!({"metadata": {"name": "pv"}, "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1b"]}]},
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]},
        ]}}}});
        let p = pv(&At::root(&doc, ""), "pv".into()).unwrap();
        assert_eq!(p.zones, None);
        assert!(p.other_keys.contains("kubernetes.io/hostname"));
    }
}
