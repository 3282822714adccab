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

/// A pod's class and its id.
pub fn class_of(p: &Pod) -> (ClassId, PodClass) {
    let class = PodClass {
        namespace: p.namespace.clone(),
        labels: p.labels.clone(),
        scheduling: p.scheduling.clone(),
    };
    (stable_hash(&class), class)
}

pub fn pod_classes<'s>(
    pods: VecCollection<'s, Epoch, SharedPod>,
) -> VecCollection<'s, Epoch, (ClassId, ClassMembers)> {
    pods.filter(|p| p.node_name.is_none() && !p.is_daemon)
        .map(|p| {
            let key = p.key();
            let (id, class) = class_of(&p);
            (id, (key, class))
        })
        .reduce_named("PodClasses", |_id, pods, out| {
            let class = pods[0].0 .1.clone();
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
    pods.filter(|p| !p.is_daemon).map(|p| class_of(&p)).count()
}
