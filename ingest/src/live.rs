//! Pods on a live cluster, kept resolved against the PersistentVolumeClaims,
//! PersistentVolumes, StorageClasses and PriorityClasses the watches see.
//!
//! A manifest load resolves every pod once, against the whole input. A watch sees one object
//! change at a time, so here a change of a claim, volume or class re-resolves only the pods
//! that depend on it (a claim: the pods that use it; a volume: the pods of the claims bound to
//! it; a StorageClass: the pods that have claims; a PriorityClass: the pods without
//! `spec.priority`) and returns those whose priority or volume zones moved.

use crate::error::ManifestError;
use crate::loader::read_one;
use crate::notes::Notes;
use crate::pod::ParsedPod;
use crate::priority::Priorities;
use crate::volumes::VolumeIndex;
use dovetail_dataflow::model::Pod;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The kinds pods' resolution depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Dependency {
    PersistentVolumeClaim,
    PersistentVolume,
    StorageClass,
    PriorityClass,
}

impl Dependency {
    /// The dependency named by a kind, if it is one.
    pub fn of_kind(kind: &str) -> Option<Dependency> {
        Some(match kind {
            "PersistentVolumeClaim" => Dependency::PersistentVolumeClaim,
            "PersistentVolume" => Dependency::PersistentVolume,
            "StorageClass" => Dependency::StorageClass,
            "PriorityClass" => Dependency::PriorityClass,
            _ => return None,
        })
    }
}

/// A claim's key: (namespace, name).
type ClaimKey = (String, String);

/// The live pods and what they depend on. Pods are keyed `namespace/name`.
#[derive(Debug, Default)]
pub struct LivePods {
    volumes: VolumeIndex,
    priorities: Priorities,
    pods: BTreeMap<String, ParsedPod>,
    /// The pods using each claim.
    users: BTreeMap<ClaimKey, BTreeSet<String>>,
    /// Pods whose priority comes from a class (no `spec.priority`).
    classed: BTreeSet<String>,
    notes: Vec<String>,
}

impl LivePods {
    pub fn new() -> LivePods {
        LivePods::default()
    }

    /// Reads a pod and keeps it; returns it resolved, or `None` for a finished pod (forgotten).
    /// A pod that fails to read is an error and its last good version is kept.
    pub fn set_pod(&mut self, value: &Value) -> Result<Option<Pod>, ManifestError> {
        let collected = read_one("watch", value)?;
        self.notes.extend(collected.out.notes);
        let Some((mut parsed, subject)) = collected.pods.into_iter().next() else {
            if let Some(key) = pod_key(value) {
                self.forget_pod(&key);
            }
            return Ok(None);
        };
        let key = parsed.pod.key();
        self.forget_pod(&key);
        let mut notes = Notes::new(subject);
        self.resolve(&mut parsed, &mut notes);
        self.notes.extend(notes.into_vec());
        for claim in &parsed.spec.claims {
            self.users
                .entry((
                    parsed.pod.namespace.clone(),
                    claim.claim_name(&parsed.pod.name),
                ))
                .or_default()
                .insert(key.clone());
        }
        if !parsed.spec.explicit_priority {
            self.classed.insert(key.clone());
        }
        let pod = parsed.pod.clone();
        self.pods.insert(key, parsed);
        Ok(Some(pod))
    }

    /// Forgets a pod (deleted, finished, or no longer one the engine sees).
    pub fn forget_pod(&mut self, key: &str) {
        let Some(old) = self.pods.remove(key) else {
            return;
        };
        for claim in &old.spec.claims {
            let claim_key = (old.pod.namespace.clone(), claim.claim_name(&old.pod.name));
            if let Some(users) = self.users.get_mut(&claim_key) {
                users.remove(key);
                if users.is_empty() {
                    self.users.remove(&claim_key);
                }
            }
        }
        self.classed.remove(key);
    }

    /// Keeps only the pods of `keys` (a relist of pods: any other is gone).
    pub fn keep_pods(&mut self, keys: &BTreeSet<String>) {
        let gone: Vec<String> = self
            .pods
            .keys()
            .filter(|k| !keys.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            self.forget_pod(&key);
        }
    }

    /// The pod under `key` as last resolved.
    pub fn pod(&self, key: &str) -> Option<&Pod> {
        self.pods.get(key).map(|p| &p.pod)
    }

    /// Reads a claim, volume or class and keeps it; returns the pods whose resolution moved.
    /// One that fails to read is an error and its last good version is kept.
    pub fn set_dependency(
        &mut self,
        kind: Dependency,
        value: &Value,
    ) -> Result<Vec<Pod>, ManifestError> {
        let touched = self.apply(kind, value)?;
        Ok(self.re_resolve(touched))
    }

    /// Forgets a claim (`namespace` set), volume or class; returns the pods whose resolution
    /// moved.
    pub fn forget_dependency(
        &mut self,
        kind: Dependency,
        namespace: Option<&str>,
        name: &str,
    ) -> Vec<Pod> {
        let touched = self.forget(kind, namespace.unwrap_or("default"), name);
        self.re_resolve(touched)
    }

    /// A relist of one dependency kind: these are all its objects. Returns the pods whose
    /// resolution moved, and the objects that failed to read, by their index in `values` (each
    /// keeps its last good version).
    pub fn replace_dependencies(
        &mut self,
        kind: Dependency,
        values: &[Value],
    ) -> (Vec<Pod>, Vec<(usize, ManifestError)>) {
        let listed: BTreeSet<ClaimKey> = values.iter().filter_map(object_key).collect();
        let known: Vec<ClaimKey> = match kind {
            Dependency::PersistentVolumeClaim => self.volumes.pvc_keys().cloned().collect(),
            Dependency::PersistentVolume => cluster_scoped(self.volumes.pv_names()),
            Dependency::StorageClass => cluster_scoped(self.volumes.class_names()),
            Dependency::PriorityClass => cluster_scoped(self.priorities.names()),
        };
        let mut touched = BTreeSet::new();
        for (ns, name) in known.into_iter().filter(|k| !listed.contains(k)) {
            touched.extend(self.forget(kind, &ns, &name));
        }
        let mut errors = Vec::new();
        for (i, value) in values.iter().enumerate() {
            match self.apply(kind, value) {
                Ok(t) => touched.extend(t),
                Err(e) => errors.push((i, e)),
            }
        }
        (self.re_resolve(touched), errors)
    }

    /// What resolution noticed (claims or classes not found, volumes that do not overlap),
    /// one sentence each naming the pod; taken for logging.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    fn resolve(&self, parsed: &mut ParsedPod, notes: &mut Notes) {
        let pod = &mut parsed.pod;
        pod.scheduling.priority = self.priorities.resolve(&parsed.spec, notes);
        pod.scheduling.volume_zones =
            self.volumes
                .pod_zones(&pod.namespace, &pod.name, &parsed.spec.claims, notes);
    }

    /// Reads one dependency object into the index; the pods it may move.
    fn apply(
        &mut self,
        kind: Dependency,
        value: &Value,
    ) -> Result<BTreeSet<String>, ManifestError> {
        let collected = read_one("watch", value)?;
        self.notes.extend(collected.out.notes);
        let (ns, name) = object_key(value).unwrap_or_default();
        let before = self.dependents(kind, &ns, &name);
        self.volumes.merge(collected.volumes);
        self.priorities.merge(collected.priorities);
        let mut touched = self.dependents(kind, &ns, &name);
        touched.extend(before);
        Ok(touched)
    }

    fn forget(&mut self, kind: Dependency, namespace: &str, name: &str) -> BTreeSet<String> {
        let touched = self.dependents(kind, namespace, name);
        match kind {
            Dependency::PersistentVolumeClaim => self.volumes.remove_pvc(namespace, name),
            Dependency::PersistentVolume => self.volumes.remove_pv(name),
            Dependency::StorageClass => self.volumes.remove_class(name),
            Dependency::PriorityClass => self.priorities.remove(name),
        }
        touched
    }

    /// The pods whose resolution may read the object `kind` `namespace`/`name`.
    fn dependents(&self, kind: Dependency, namespace: &str, name: &str) -> BTreeSet<String> {
        let users = |claim: &ClaimKey| self.users.get(claim).into_iter().flatten().cloned();
        match kind {
            Dependency::PersistentVolumeClaim => {
                users(&(namespace.to_string(), name.to_string())).collect()
            }
            Dependency::PersistentVolume => {
                self.volumes.claims_bound_to(name).flat_map(users).collect()
            }
            // Any claim may name the class, or default to it.
            Dependency::StorageClass => self.users.values().flatten().cloned().collect(),
            Dependency::PriorityClass => self.classed.clone(),
        }
    }

    /// Resolves `keys` again; the pods whose priority or zones moved.
    fn re_resolve(&mut self, keys: BTreeSet<String>) -> Vec<Pod> {
        let mut moved = Vec::new();
        for key in keys {
            let Some(mut parsed) = self.pods.remove(&key) else {
                continue;
            };
            let before = (
                parsed.pod.scheduling.priority,
                parsed.pod.scheduling.volume_zones.clone(),
            );
            let mut notes = Notes::new(format!("Pod {key}"));
            self.resolve(&mut parsed, &mut notes);
            self.notes.extend(notes.into_vec());
            let after = (
                parsed.pod.scheduling.priority,
                parsed.pod.scheduling.volume_zones.clone(),
            );
            if before != after {
                moved.push(parsed.pod.clone());
            }
            self.pods.insert(key, parsed);
        }
        moved
    }
}

fn cluster_scoped<'a>(names: impl Iterator<Item = &'a String>) -> Vec<ClaimKey> {
    names.map(|n| ("default".to_string(), n.clone())).collect()
}

/// (namespace or `default`, name) of an object; `default` also for cluster-scoped ones, as
/// [`LivePods::forget_dependency`] keys them.
fn object_key(value: &Value) -> Option<ClaimKey> {
    let meta = value.get("metadata")?;
    let name = meta.get("name")?.as_str()?;
    let ns = meta
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .unwrap_or("default");
    Some((ns.to_string(), name.to_string()))
}

fn pod_key(value: &Value) -> Option<String> {
    object_key(value).map(|(ns, name)| format!("{ns}/{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeSet;

    fn pod(name: &str, claim: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "db"},
            "spec": {"containers": [{"name": "c", "image": "i"}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}})
    }

    fn pvc(name: &str, volume: Option<&str>) -> Value {
        let mut v = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "db"},
            "spec": {"storageClassName": "gp3"}});
        if let Some(volume) = volume {
            v["spec"]["volumeName"] = json!(volume);
        }
        v
    }

    fn pv(name: &str, zone: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": [zone]}]}]}}}})
    }

    fn zones(pod: &Pod) -> Option<Vec<&str>> {
        pod.scheduling
            .volume_zones
            .as_ref()
            .map(|z| z.iter().map(String::as_str).collect())
    }

    #[test]
    fn a_claim_bound_later_moves_only_the_pods_that_use_it() {
        let mut live = LivePods::new();
        let a = live.set_pod(&pod("a", "data-a")).unwrap().unwrap();
        live.set_pod(&pod("b", "data-b")).unwrap().unwrap();
        assert_eq!(zones(&a), None, "no claim yet: not known, unconstrained");

        // The volume arrives first: nothing is bound to it, no pod moves.
        let moved = live
            .set_dependency(Dependency::PersistentVolume, &pv("pv-a", "us-east-1b"))
            .unwrap();
        assert!(moved.is_empty(), "{moved:?}");

        // The claim, bound to it: pod a (only) is pinned to the volume's zone.
        let moved = live
            .set_dependency(
                Dependency::PersistentVolumeClaim,
                &pvc("data-a", Some("pv-a")),
            )
            .unwrap();
        assert_eq!(moved.len(), 1);
        assert_eq!(moved[0].name, "a");
        assert_eq!(zones(&moved[0]), Some(vec!["us-east-1b"]));

        // The same claim again: nothing moves.
        let moved = live
            .set_dependency(
                Dependency::PersistentVolumeClaim,
                &pvc("data-a", Some("pv-a")),
            )
            .unwrap();
        assert!(moved.is_empty());

        // The volume moves zone (a restore): pod a follows.
        let moved = live
            .set_dependency(Dependency::PersistentVolume, &pv("pv-a", "us-east-1c"))
            .unwrap();
        assert_eq!(zones(&moved[0]), Some(vec!["us-east-1c"]));

        // A pod read after its claim and volume is resolved at once.
        let c = live.set_pod(&pod("c", "data-a")).unwrap().unwrap();
        assert_eq!(zones(&c), Some(vec!["us-east-1c"]));

        // The volume is deleted: a and c are unconstrained again, b never moved.
        let moved = live.forget_dependency(Dependency::PersistentVolume, None, "pv-a");
        let names: BTreeSet<&str> = moved.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, BTreeSet::from(["a", "c"]));
        assert!(moved.iter().all(|p| zones(p).is_none()));
    }

    #[test]
    fn a_claim_bound_to_another_volume_no_longer_follows_the_first() {
        let mut live = LivePods::new();
        live.set_pod(&pod("a", "data-a")).unwrap();
        for (volume, zone) in [("pv-1", "us-east-1a"), ("pv-2", "us-east-1b")] {
            live.set_dependency(Dependency::PersistentVolume, &pv(volume, zone))
                .unwrap();
        }
        let claim = Dependency::PersistentVolumeClaim;
        live.set_dependency(claim, &pvc("data-a", Some("pv-1")))
            .unwrap();
        let moved = live
            .set_dependency(claim, &pvc("data-a", Some("pv-2")))
            .unwrap();
        assert_eq!(moved.first().and_then(zones), Some(vec!["us-east-1b"]));
        // pv-1 changes: nothing is bound to it any more.
        let moved = live
            .set_dependency(Dependency::PersistentVolume, &pv("pv-1", "us-east-1c"))
            .unwrap();
        assert!(moved.is_empty(), "{moved:?}");
        // The claim goes: pv-2 has no claim left either.
        live.forget_dependency(claim, Some("db"), "data-a");
        let moved = live
            .set_dependency(Dependency::PersistentVolume, &pv("pv-2", "us-east-1c"))
            .unwrap();
        assert!(moved.is_empty(), "{moved:?}");
    }

    #[test]
    fn a_forgotten_pod_is_not_brought_back_by_its_claim() {
        let mut live = LivePods::new();
        live.set_pod(&pod("a", "data-a")).unwrap();
        live.set_dependency(Dependency::PersistentVolume, &pv("pv-a", "us-east-1a"))
            .unwrap();
        live.keep_pods(&BTreeSet::new());
        let moved = live
            .set_dependency(
                Dependency::PersistentVolumeClaim,
                &pvc("data-a", Some("pv-a")),
            )
            .unwrap();
        assert!(moved.is_empty(), "{moved:?}");
        assert!(live.pod("db/a").is_none());
    }

    #[test]
    fn a_pod_the_rules_refuse_keeps_its_last_good_version() {
        let mut live = LivePods::new();
        live.set_pod(&pod("a", "data-a")).unwrap();
        let mut refused = pod("a", "data-a");
        refused["spec"]["topologySpreadConstraints"] = json!([{"maxSkew": 1, "minDomains": 0,
            "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}]);
        let err = live.set_pod(&refused).unwrap_err().to_string();
        assert!(
            err.contains("Pod db/a")
                && err.contains("spec.topologySpreadConstraints[0].minDomains"),
            "{err}"
        );
        let kept = live.pod("db/a").expect("the last good version");
        assert!(kept.scheduling.topology_spread.is_empty());
    }

    #[test]
    fn a_relist_forgets_the_objects_it_does_not_name_and_keeps_the_broken_ones() {
        let mut live = LivePods::new();
        live.set_pod(&pod("a", "data-a")).unwrap();
        live.set_pod(&pod("b", "data-b")).unwrap();
        for (claim, volume, zone) in [
            ("data-a", "pv-a", "us-east-1a"),
            ("data-b", "pv-b", "us-east-1b"),
        ] {
            live.set_dependency(Dependency::PersistentVolume, &pv(volume, zone))
                .unwrap();
            live.set_dependency(Dependency::PersistentVolumeClaim, &pvc(claim, Some(volume)))
                .unwrap();
        }
        // The relist names data-a only (data-b was deleted while the watch was down), and a
        // broken version of it: data-a keeps its last good version.
        let mut broken = pvc("data-a", Some("pv-a"));
        broken["spec"]["volumeName"] = json!({"name": "pv-a"});
        let (moved, errors) =
            live.replace_dependencies(Dependency::PersistentVolumeClaim, &[broken]);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].0, 0);
        let message = errors[0].1.to_string();
        assert!(
            message.contains("db/data-a") && message.contains("volumeName"),
            "{message}"
        );
        assert_eq!(moved.len(), 1, "{moved:?}");
        assert_eq!(moved[0].name, "b");
        assert_eq!(zones(&moved[0]), None);
        assert_eq!(live.pod("db/a").and_then(zones), Some(vec!["us-east-1a"]));
    }

    #[test]
    fn a_priority_class_moves_only_pods_without_a_priority_of_their_own() {
        let mut live = LivePods::new();
        let mut classed = pod("a", "x");
        classed["spec"]["priorityClassName"] = json!("batch");
        let mut explicit = pod("b", "y");
        explicit["spec"]["priorityClassName"] = json!("batch");
        explicit["spec"]["priority"] = json!(5);
        assert_eq!(
            live.set_pod(&classed).unwrap().unwrap().scheduling.priority,
            0
        );
        let class = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "batch"}, "value": 100});
        live.set_pod(&explicit).unwrap();
        let moved = live
            .set_dependency(Dependency::PriorityClass, &class)
            .unwrap();
        assert_eq!(moved.len(), 1);
        assert_eq!(
            (moved[0].name.as_str(), moved[0].scheduling.priority),
            ("a", 100)
        );
        let moved = live.forget_dependency(Dependency::PriorityClass, None, "batch");
        assert_eq!(
            (moved[0].name.as_str(), moved[0].scheduling.priority),
            ("a", 0)
        );
        assert_eq!(live.pod("db/b").map(|p| p.scheduling.priority), Some(5));
    }
}
