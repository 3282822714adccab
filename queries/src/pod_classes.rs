//! Query 1 — pod classes.
//!
//! Rule: a pending pod (no node, not a DaemonSet or mirror pod) belongs to the class of pods with
//! the same namespace, labels and scheduling spec; each class lists its pods.
//! `class(id, pods) :- pod(p), pending(p), id = hash(namespace(p), labels(p), scheduling(p)).`

use crate::types::{ClassId, ClassMembers, PodClass};
use differential_dataflow::VecCollection;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::{Pod, SharedPod};
use dovetail_dataflow::stable_hash::stable_hash;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cmp::Ordering;
use std::hash::{Hash, Hasher};

/// A pod's class and its id.
pub fn class_of(p: &Pod) -> (ClassId, PodClass) {
    (class_id(p), class(p))
}

fn class(p: &Pod) -> PodClass {
    PodClass {
        namespace: p.namespace.clone(),
        labels: p.labels.clone(),
        scheduling: p.scheduling.clone(),
    }
}

/// A pod's class id, without building the class: [`PodClass`]'s derived `Hash` writes its
/// fields in order, as this tuple of them does.
pub fn class_id(p: &Pod) -> ClassId {
    stable_hash(&(&p.namespace, &p.labels, &p.scheduling))
}

/// A pod standing for its class: equal, ordered and hashed as its [`PodClass`] is, so that a
/// collection keyed by it holds one shared pointer per pod rather than a copy of the class's
/// labels and scheduling spec. At 100,000 pods arriving at once those copies, two per pod,
/// were 310 MiB of the replay's peak heap (README, *Benchmarks*: "One pod, one allocation").
#[derive(Debug, Clone)]
pub struct PodOfClass(pub SharedPod);

impl PodOfClass {
    fn fields(
        &self,
    ) -> (
        &String,
        &std::collections::BTreeMap<String, String>,
        &dovetail_dataflow::model::PodScheduling,
    ) {
        (&self.0.namespace, &self.0.labels, &self.0.scheduling)
    }

    /// The class the pod stands for.
    pub fn class(&self) -> PodClass {
        class(&self.0)
    }
}

impl PartialEq for PodOfClass {
    fn eq(&self, other: &Self) -> bool {
        self.fields() == other.fields()
    }
}

impl Eq for PodOfClass {}

impl PartialOrd for PodOfClass {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// [`PodClass`]'s derived order: its fields in order.
impl Ord for PodOfClass {
    fn cmp(&self, other: &Self) -> Ordering {
        self.fields().cmp(&other.fields())
    }
}

impl Hash for PodOfClass {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.fields().hash(state)
    }
}

/// Carried between processes as its class (all a reader may look at).
impl Serialize for PodOfClass {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.class().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for PodOfClass {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let class = PodClass::deserialize(deserializer)?;
        Ok(PodOfClass(SharedPod::new(Pod {
            namespace: class.namespace,
            labels: class.labels,
            scheduling: class.scheduling,
            ..Pod::default()
        })))
    }
}

pub fn pod_classes<'s>(
    pods: VecCollection<'s, Epoch, SharedPod>,
) -> VecCollection<'s, Epoch, (ClassId, ClassMembers)> {
    pods.filter(|p| p.node_name.is_none() && !p.is_daemon)
        .map(|p| (class_id(&p), (p.key(), PodOfClass(p))))
        .reduce_named("PodClasses", |_id, pods, out| {
            let class = pods[0].0 .1.class();
            let members = pods.iter().map(|((k, _), _)| k.clone()).collect();
            out.push((ClassMembers { class, members }, 1));
        })
}

/// The classes of every pod the autoscaler accounts for, pending or bound (not DaemonSet or
/// mirror pods), with how many pods each has: what the cluster-wide lower bound covers.
/// `class_count(id, class, n) :- n = #{ p | pod(p), !daemon(p), class(p) = id }.`
pub fn all_pod_classes<'s>(
    pods: VecCollection<'s, Epoch, SharedPod>,
) -> VecCollection<'s, Epoch, ((ClassId, PodClass), isize)> {
    pods.filter(|p| !p.is_daemon)
        .map(|p| (class_id(&p), PodOfClass(p)))
        .count()
        .map(|((id, pod), n)| ((id, pod.class()), n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn a_class_id_is_the_stable_hash_of_the_class_and_pods_of_a_class_compare_equal() {
        let pod = |name: &str, app: &str| Pod {
            namespace: "shop".into(),
            name: name.into(),
            labels: BTreeMap::from([("app".to_string(), app.to_string())]),
            ..Pod::default()
        };
        let (a, b, c) = (pod("a", "api"), pod("b", "api"), pod("c", "web"));
        assert_eq!(class_id(&a), stable_hash(&class(&a)));
        assert_eq!(class_id(&a), class_id(&b));
        assert_ne!(class_id(&a), class_id(&c));
        let shared = |p: &Pod| PodOfClass(SharedPod::new(p.clone()));
        assert_eq!(shared(&a), shared(&b));
        assert_ne!(shared(&a), shared(&c));
        assert_eq!(shared(&a).cmp(&shared(&c)), class(&a).cmp(&class(&c)));
        assert_eq!(stable_hash(&shared(&a)), stable_hash(&class(&a)));
    }
}
