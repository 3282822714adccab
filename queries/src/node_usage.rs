//! Query — what existing capacity is already used.
//!
//! Rule: a Node (or in-flight NodeClaim) uses the sum of the requests of the pods bound to it;
//! its bound pods are kept as (namespace, labels) counts for topology and affinity. Pods bound
//! to a node that is not known are ignored.

use crate::types::NodeState;
use differential_dataflow::VecCollection;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::{Node, Pod, Resources};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
enum Part {
    Node(Node),
    /// (namespace, labels, requests) of a bound pod.
    Pod(String, BTreeMap<String, String>, Resources),
}

pub fn node_usage<'s>(
    nodes: VecCollection<'s, Epoch, Node>,
    pods: VecCollection<'s, Epoch, Pod>,
) -> VecCollection<'s, Epoch, (String, NodeState)> {
    let bound = pods.flat_map(|p| {
        p.node_name
            .clone()
            .map(|n| (n, Part::Pod(p.namespace, p.labels, p.scheduling.requests)))
    });
    nodes
        .map(|n| (n.name.clone(), Part::Node(n)))
        .concat(bound)
        .reduce_named("NodeUsage", |_name, parts, out| {
            let mut node = None;
            let mut used = Resources::default();
            let mut pods: Vec<(String, BTreeMap<String, String>, i64)> = Vec::new();
            for (part, r) in parts {
                match part {
                    Part::Node(n) => node = Some(n),
                    Part::Pod(ns, labels, req) => {
                        used.add_assign(&req.times(*r as i64));
                        match pods.last_mut() {
                            Some((pns, pl, c)) if pns == ns && pl == labels => *c += *r as i64,
                            _ => pods.push((ns.clone(), labels.clone(), *r as i64)),
                        }
                    }
                }
            }
            if let Some(node) = node {
                out.push((
                    NodeState {
                        node: node.clone(),
                        used,
                        pods,
                    },
                    1,
                ));
            }
        })
}
