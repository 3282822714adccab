//! Query — what existing capacity is already used.
//!
//! Rule: a Node (or in-flight NodeClaim) uses the sum of the requests of the pods bound to it,
//! plus the requests of every DaemonSet that will run there but has no pod there yet (its pods
//! tolerate the node's taints and its node selector and required node affinity match the node's
//! labels), as Karpenter reserves them; its bound pods are kept as (namespace, labels) counts for
//! topology and affinity. Pods bound to a node that is not known are ignored.

use crate::types::{BoundPods, NodeState};
use differential_dataflow::difference::{IsZero, Multiply, Semigroup};
use differential_dataflow::operators::CountTotal;
use differential_dataflow::VecCollection;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::taints::first_untolerated;
use dovetail_dataflow::model::{DaemonSet, LabelSet, Node, Resources, SharedNode, SharedPod};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
enum Part {
    Node(SharedNode),
    /// The requests of the pods bound to the node, summed.
    Requested(Resources),
    /// How many pods of this (namespace, labels) are bound to the node.
    Labels(LabelSet, i64),
    /// A DaemonSet (namespace, name) with a pod bound to the node.
    Running(String, String),
    Daemon(Box<DaemonSet>),
}

/// Requests as a difference: summed by differential itself as pods bind and leave, so a pod
/// moving costs one update of its node's sum, not a pass over the node's every pod.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
struct Requested(Resources);

impl Requested {
    /// A pod's requests as a difference, cleaned as every sum is.
    fn of(requests: &Resources) -> Requested {
        let mut r = Requested(requests.clone());
        r.clean();
        r
    }

    /// Drops zero extended entries: a sum back at zero must equal one that never had the
    /// resource.
    fn clean(&mut self) {
        self.0.extended.retain(|_, v| *v != 0);
    }
}

impl IsZero for Requested {
    fn is_zero(&self) -> bool {
        self.0.is_zero()
    }
}

impl Semigroup for Requested {
    fn plus_equals(&mut self, rhs: &Self) {
        self.0.add_assign(&rhs.0);
        self.clean();
    }
}

impl Multiply<isize> for Requested {
    type Output = Requested;
    fn multiply(self, rhs: &isize) -> Requested {
        let mut r = Requested(self.0.times(*rhs as i64));
        r.clean();
        r
    }
}

/// True when the DaemonSet's pods would run on the node: they tolerate its taints, and its
/// labels satisfy their node selector and one of their required node-affinity terms.
fn daemon_runs_on(d: &DaemonSet, node: &Node) -> bool {
    let s = &d.scheduling;
    first_untolerated(&node.taints, &s.tolerations).is_none()
        && s.node_selector.matches_labels(&node.labels)
        && (s.required_node_affinity.is_empty()
            || s.required_node_affinity
                .iter()
                .any(|term| term.matches_labels(&node.labels)))
}

/// (node, (namespace, labels)) of bound pods, with how many pods have them.
pub type LabelCount = ((String, LabelSet), isize);

/// A pod bound to a node, with the node's name.
pub type BoundPod = (String, SharedPod);

/// The pods bound to a node, by its name: what node usage and the label counts read.
pub fn bound_pods<'s>(
    pods: VecCollection<'s, Epoch, SharedPod>,
) -> VecCollection<'s, Epoch, BoundPod> {
    pods.flat_map(|p| p.node_name.clone().map(|n| (n, p)))
}

/// The pods bound to each node, counted by (namespace, labels), kept per pod: what topology
/// and affinity read of a node's pods (here, and for packing groups).
pub fn bound_label_counts<'s>(
    bound: VecCollection<'s, Epoch, BoundPod>,
) -> VecCollection<'s, Epoch, LabelCount> {
    bound
        .map(|(n, p)| (n, LabelSet::new(&p.namespace, &p.labels)))
        .count_total()
}

/// What the pods bound to each node add up to, kept per pod: their requests summed, their
/// label counts, and the DaemonSets among their owners. A node's final reduce then reads a
/// record per label set, not each of its pods.
fn bound_parts<'s>(
    bound: VecCollection<'s, Epoch, BoundPod>,
    labels: VecCollection<'s, Epoch, LabelCount>,
) -> VecCollection<'s, Epoch, (String, Part)> {
    let requested = bound
        .clone()
        .explode(|(n, p)| Some((n, Requested::of(&p.scheduling.requests))))
        .count_total()
        .map(|(n, r)| (n, Part::Requested(r.0)));
    let labels = labels.map(|((n, set), count)| (n, Part::Labels(set, count as i64)));
    let running = bound.flat_map(|(n, p)| match &p.owner {
        Some((kind, d)) if kind == "DaemonSet" => {
            Some((n, Part::Running(p.namespace.clone(), d.clone())))
        }
        _ => None,
    });
    requested.concat(labels).concat(running)
}

pub fn node_usage<'s>(
    nodes: VecCollection<'s, Epoch, SharedNode>,
    bound: VecCollection<'s, Epoch, BoundPod>,
    labels: VecCollection<'s, Epoch, LabelCount>,
    daemonsets: VecCollection<'s, Epoch, DaemonSet>,
) -> VecCollection<'s, Epoch, (String, NodeState)> {
    let daemons = daemonsets
        .map(|d| ((), d))
        .join_map(nodes.clone().map(|n| ((), n.name.clone())), |_, d, node| {
            (node.clone(), Part::Daemon(Box::new(d.clone())))
        });
    nodes
        .map(|n| (n.name.clone(), Part::Node(n)))
        .concat(bound_parts(bound, labels))
        .concat(daemons)
        .reduce_named("NodeUsage", |_name, parts, out| {
            let mut node = None;
            let mut used = Resources::default();
            let mut pods: BoundPods = Vec::new();
            let mut running: BTreeSet<(&String, &String)> = BTreeSet::new();
            let mut daemons = Vec::new();
            for (part, r) in parts {
                match part {
                    Part::Node(n) => node = Some(n),
                    Part::Requested(requests) => used.add_assign(&requests.times(*r as i64)),
                    Part::Labels(set, n) => pods.push((set.clone(), n * *r as i64)),
                    Part::Running(ns, d) => {
                        running.insert((ns, d));
                    }
                    Part::Daemon(d) => daemons.push(d),
                }
            }
            if let Some(node) = node {
                for d in daemons {
                    if !running.contains(&(&d.namespace, &d.name)) && daemon_runs_on(d, node) {
                        used.add_assign(&d.scheduling.requests);
                    }
                }
                out.push((
                    NodeState {
                        node: node.clone(),
                        used,
                        pods: std::sync::Arc::new(pods),
                    },
                    1,
                ));
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_dataflow::model::resources::NVIDIA_GPU;

    fn gpu_pod() -> Resources {
        let mut r = Resources {
            cpu: 500,
            ..Resources::default()
        };
        r.set(NVIDIA_GPU, 1000);
        r
    }

    /// A node's sum back at nothing must be differential's zero and equal a sum that never had
    /// the resource, or a node whose GPU pod left would keep a record of nothing.
    #[test]
    fn requests_summed_back_to_nothing_are_zero() {
        let mut sum = Requested(gpu_pod());
        sum.plus_equals(&Requested(gpu_pod()).multiply(&-1));
        assert!(sum.is_zero());
        assert_eq!(sum, Requested::default());
    }

    #[test]
    fn requests_sum_and_scale_per_resource() {
        let mut sum = Requested(gpu_pod()).multiply(&3);
        sum.plus_equals(&Requested(gpu_pod()).multiply(&-1));
        assert_eq!(sum.0.cpu, 1000);
        assert_eq!(sum.0.get(NVIDIA_GPU), 2000);
        assert!(!sum.is_zero());
    }
}
