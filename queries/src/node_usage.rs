//! Query — what existing capacity is already used.
//!
//! Rule: a Node (or in-flight NodeClaim) uses the sum of the requests of the pods bound to it,
//! plus the requests of every DaemonSet that will run there but has no pod there yet (its pods
//! tolerate the node's taints and its node selector and required node affinity match the node's
//! labels), as Karpenter reserves them; its bound pods are kept as (namespace, labels) counts for
//! topology and affinity. Pods bound to a node that is not known are ignored.

use crate::types::{BoundPods, NodeState};
use differential_dataflow::VecCollection;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::taints::first_untolerated;
use dovetail_dataflow::model::{DaemonSet, Node, Resources, SharedNode, SharedPod};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
enum Part {
    Node(SharedNode),
    /// A bound pod, shared with the pod stream (a copy of its labels per pod was ~100 MiB of
    /// peak heap at 118,000 pods).
    Pod(SharedPod),
    Daemon(Box<DaemonSet>),
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

pub fn node_usage<'s>(
    nodes: VecCollection<'s, Epoch, SharedNode>,
    pods: VecCollection<'s, Epoch, SharedPod>,
    daemonsets: VecCollection<'s, Epoch, DaemonSet>,
) -> VecCollection<'s, Epoch, (String, NodeState)> {
    let bound = pods.flat_map(|p| p.node_name.clone().map(|n| (n, Part::Pod(p))));
    let daemons = daemonsets
        .map(|d| ((), d))
        .join_map(nodes.clone().map(|n| ((), n.name.clone())), |_, d, node| {
            (node.clone(), Part::Daemon(Box::new(d.clone())))
        });
    nodes
        .map(|n| (n.name.clone(), Part::Node(n)))
        .concat(bound)
        .concat(daemons)
        .reduce_named("NodeUsage", |_name, parts, out| {
            let mut node = None;
            let mut used = Resources::default();
            let mut counts: BTreeMap<(&String, &BTreeMap<String, String>), i64> = BTreeMap::new();
            let mut running: BTreeSet<(&String, &String)> = BTreeSet::new();
            let mut daemons = Vec::new();
            for (part, r) in parts {
                match part {
                    Part::Node(n) => node = Some(n),
                    Part::Pod(p) => {
                        used.add_assign(&p.scheduling.requests.times(*r as i64));
                        if let Some((kind, d)) = &p.owner {
                            if kind == "DaemonSet" {
                                running.insert((&p.namespace, d));
                            }
                        }
                        *counts.entry((&p.namespace, &p.labels)).or_insert(0) += *r as i64;
                    }
                    Part::Daemon(d) => daemons.push(d),
                }
            }
            let pods: BoundPods = counts
                .into_iter()
                .filter(|(_, n)| *n != 0)
                .map(|((ns, labels), n)| (ns.clone(), labels.clone(), n))
                .collect();
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
