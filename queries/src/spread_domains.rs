//! Query — spread domains: the domains of a pending class's topology spread that existing nodes
//! add, wherever those nodes sit.
//!
//! Rule: for a pending class with a topology spread over a zone-like key (anything but the
//! hostname), the key's value on every existing node whose labels the class's node requirements
//! accept is a domain the skew is measured over, even when the node is cordoned, carries a taint
//! the pod does not tolerate, holds no pod the spread counts, or belongs to a NodePool the class
//! cannot use (Kubernetes' defaults nodeTaintsPolicy Ignore and nodeAffinityPolicy Honor;
//! Karpenter's `countDomains` in topology.go registers such a domain with a count of zero).
//!
//! The packing sees the nodes of its own group; this query adds the domains of the others
//! without joining their groups (joining would merge nearly every group, since every node has a
//! zone). Nodes enter by their labels less the hostname, so nodes coming and going, and pods
//! binding, change nothing here unless a new domain appears. A class that requires a hostname is
//! left out: it is pinned to one node, which its own group already holds.

use crate::types::{ClassId, ClassMembers, Compatibility, NodeState};
use differential_dataflow::VecCollection;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::labels::HOSTNAME;
use dovetail_dataflow::model::Requirements;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A domain of a class's spread: the topology key and its value.
pub type SpreadDomain = (String, String);

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
enum Part {
    /// A spreading class: its zone-like spread keys and node requirements.
    Class(ClassId, BTreeSet<String>, Requirements),
    /// An existing node's labels less the hostname.
    Labels(BTreeMap<String, String>),
}

pub fn spread_domains<'s>(
    classes: VecCollection<'s, Epoch, (ClassId, ClassMembers)>,
    compat: VecCollection<'s, Epoch, (ClassId, Compatibility)>,
    nodes: VecCollection<'s, Epoch, (String, NodeState)>,
) -> VecCollection<'s, Epoch, (ClassId, SpreadDomain)> {
    let spreading = classes
        .flat_map(|(id, m)| {
            let keys: BTreeSet<String> = m
                .class
                .scheduling
                .topology_spread
                .iter()
                .map(|s| s.topology_key.clone())
                .filter(|k| k != HOSTNAME)
                .collect();
            (!keys.is_empty()).then_some((id, keys))
        })
        .join_map(compat, |id, keys, c| {
            ((), Part::Class(*id, keys.clone(), c.requirements.clone()))
        })
        .filter(|(_, p)| !matches!(p, Part::Class(_, _, reqs) if reqs.0.contains_key(HOSTNAME)));
    let labels = nodes
        .map(|(_, n)| {
            let mut labels = n.node.labels.clone();
            labels.remove(HOSTNAME);
            ((), Part::Labels(labels))
        })
        .distinct();
    spreading
        .concat(labels)
        .reduce_named("SpreadDomains", |_unit, parts, out| {
            for domain in domains(parts.iter().map(|(p, _)| *p)) {
                out.push((domain, 1));
            }
        })
        .map(|((), d)| d)
}

/// Every (class, key, value) the rule above gives, each once.
fn domains<'a>(parts: impl Iterator<Item = &'a Part>) -> BTreeSet<(ClassId, SpreadDomain)> {
    let mut classes = Vec::new();
    let mut nodes = Vec::new();
    for p in parts {
        match p {
            Part::Class(id, keys, reqs) => classes.push((*id, keys, reqs)),
            Part::Labels(labels) => nodes.push(labels),
        }
    }
    let mut out = BTreeSet::new();
    for (id, keys, reqs) in classes {
        for labels in &nodes {
            if !keys.iter().any(|k| labels.contains_key(k)) || !reqs.matches_labels(labels) {
                continue;
            }
            for (key, value) in keys.iter().filter_map(|k| labels.get(k).map(|v| (k, v))) {
                out.insert((id, (key.clone(), value.clone())));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_dataflow::model::labels::ZONE;
    use dovetail_dataflow::model::Requirement;

    fn node(zone: &str, arch: &str) -> Part {
        Part::Labels(BTreeMap::from([
            (ZONE.to_string(), zone.to_string()),
            ("kubernetes.io/arch".to_string(), arch.to_string()),
        ]))
    }

    #[test]
    fn a_node_adds_its_domain_only_where_the_class_accepts_its_labels() {
        let mut arm = Requirements::default();
        arm.add(
            "kubernetes.io/arch".to_string(),
            Requirement::single("arm64".to_string()),
        );
        let keys = BTreeSet::from([ZONE.to_string()]);
        let parts = [
            Part::Class(1, keys.clone(), Requirements::default()),
            Part::Class(2, keys, arm),
            node("us-east-1a", "amd64"),
            node("us-east-1c", "arm64"),
        ];
        let zone = |v: &str| (ZONE.to_string(), v.to_string());
        assert_eq!(
            domains(parts.iter()),
            BTreeSet::from([
                (1, zone("us-east-1a")),
                (1, zone("us-east-1c")),
                (2, zone("us-east-1c")),
            ])
        );
    }

    #[test]
    fn a_node_without_the_key_adds_nothing() {
        let keys = BTreeSet::from(["example.com/rack".to_string()]);
        let parts = [
            Part::Class(1, keys, Requirements::default()),
            node("us-east-1a", "amd64"),
        ];
        assert!(domains(parts.iter()).is_empty());
    }
}
