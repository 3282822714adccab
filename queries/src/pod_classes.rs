//! Query 1 — pod classes.
//!
//! Rule: a pending pod (no node, not a DaemonSet or mirror pod) belongs to the class of pods with
//! the same namespace, labels and scheduling spec; each class lists its pods.
//! `class(id, pods) :- pod(p), pending(p), id = hash(namespace(p), labels(p), scheduling(p)).`

use crate::types::{ClassId, ClassMembers, PodClass};
use differential_dataflow::VecCollection;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::Pod;
use dovetail_dataflow::stable_hash::stable_hash;

pub fn pod_classes<'s>(
    pods: VecCollection<'s, Epoch, Pod>,
) -> VecCollection<'s, Epoch, (ClassId, ClassMembers)> {
    pods.filter(|p| p.node_name.is_none() && !p.is_daemon)
        .map(|p| {
            let key = p.key();
            let class = PodClass {
                namespace: p.namespace,
                labels: p.labels,
                scheduling: p.scheduling,
            };
            (stable_hash(&class), (key, class))
        })
        .reduce_named("PodClasses", |_id, pods, out| {
            let class = pods[0].0 .1.clone();
            let members = pods.iter().map(|((k, _), _)| k.clone()).collect();
            out.push((ClassMembers { class, members }, 1));
        })
}
