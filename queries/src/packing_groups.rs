//! Query — packing groups: which pending pod classes, NodePools and existing nodes can affect
//! one another's packing, so that a change re-plans only its group.
//!
//! Rule: two pending classes are in one group when they share a compatible NodePool, when an
//! existing node (or in-flight NodeClaim) could take both, or when a topology term of one
//! (spread, pod affinity or anti-affinity, required or preferred) counts the other's pods. A
//! NodePool joins the group of the classes compatible with it; an existing node joins the group
//! of the classes that could use it, of its NodePool (whose limits it counts against), and of
//! the classes whose topology terms count a pod bound to it. Classes in different groups cannot
//! see each other's bins, limits or pods, so packing each group alone gives the same answer as
//! packing them together. A group is named by the smallest hash of its NodePools' names (else
//! its smallest node signature id, else its smallest class id), so that pods pending and
//! binding rename no group.
//!
//! Nodes enter by signature (labels other than the hostname, taints, cordon), read from the node
//! stream, and bound pods by the (namespace, labels) counts of their node, so that nodes coming
//! and going, and pods binding, regroup nothing unless a new kind of node or of bound pod
//! appears. A class's requirement on the hostname is ignored when linking it to a signature,
//! which can only join groups, never split them.

use crate::node_usage::LabelCount;
use crate::solver::topology::{Group, Topology};
use crate::types::{ClassId, ClassMembers, Compatibility, PodClass, PoolTypes};
use differential_dataflow::VecCollection;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::labels::{HOSTNAME, NODEPOOL};
use dovetail_dataflow::model::taints::first_untolerated;
use dovetail_dataflow::model::{LabelSelector, LabelSet, Node, Requirements, SharedNode, Taint};
use dovetail_dataflow::stable_hash::stable_hash;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A packing group's name.
pub type GroupId = u64;

/// What groups a node: its labels without the hostname, its taints and whether it is cordoned.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeSignature {
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
}

impl NodeSignature {
    pub fn of(node: &Node) -> NodeSignature {
        let mut labels = node.labels.clone();
        labels.remove(HOSTNAME);
        NodeSignature {
            labels,
            taints: node.taints.clone(),
            unschedulable: node.unschedulable,
        }
    }

    pub fn id(&self) -> u64 {
        stable_hash(self)
    }
}

/// Who belongs to a group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Member {
    Class(ClassId),
    NodePool(String),
    /// Nodes with this signature id.
    Nodes(u64),
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
enum Part {
    Class(ClassId, Box<PodClass>, Requirements, Vec<String>),
    NodePool(String),
    Signature(u64, NodeSignature),
    /// A bound pod's (namespace, labels) on nodes of a signature.
    PodOn(u64, LabelSet),
}

pub fn packing_groups<'s>(
    classes: VecCollection<'s, Epoch, (ClassId, ClassMembers)>,
    compat: VecCollection<'s, Epoch, (ClassId, Compatibility)>,
    pools: VecCollection<'s, Epoch, (String, PoolTypes)>,
    nodes: VecCollection<'s, Epoch, SharedNode>,
    bound_labels: VecCollection<'s, Epoch, LabelCount>,
) -> VecCollection<'s, Epoch, (Member, GroupId)> {
    let classes = classes
        .map(|(id, m)| (id, m.class))
        .join_map(compat, |id, class, c| {
            let pools = c
                .pools
                .iter()
                .filter(|(_, types)| !types.is_empty())
                .map(|(name, _)| name.clone())
                .collect();
            (
                (),
                Part::Class(*id, Box::new(class.clone()), c.requirements.clone(), pools),
            )
        });
    // A node's signature, and the (namespace, labels) of its pods under it: a node changing
    // without changing signature, or one more pod of labels a node already has, changes
    // nothing here; `distinct` leaves only new kinds of node or bound pod.
    let signatures = nodes.map(|n| {
        let s = NodeSignature::of(&n);
        (n.name.clone(), (s.id(), s))
    });
    let pods_on = signatures
        .clone()
        .map(|(name, (id, _))| (name, id))
        .join_map(
            bound_labels.map(|((name, set), _)| (name, set)),
            |_, id, set| ((), Part::PodOn(*id, set.clone())),
        );
    let nodes = signatures
        .map(|(_, (id, s))| ((), Part::Signature(id, s)))
        .concat(pods_on)
        .distinct();
    pools
        .map(|(name, _)| ((), Part::NodePool(name)))
        .concat(classes)
        .concat(nodes)
        .reduce_named("PackingGroups", |_unit, parts, out| {
            for (member, group) in group(parts.iter().map(|(p, _)| *p)) {
                out.push(((member, group), 1));
            }
        })
        .map(|((), mg)| mg)
}

/// Whom a topology term counts: its namespaces and selector.
type Counted<'a> = (&'a BTreeSet<String>, &'a LabelSelector);

/// Union-find over indices.
struct Components(Vec<usize>);

impl Components {
    fn find(&mut self, mut i: usize) -> usize {
        while self.0[i] != i {
            self.0[i] = self.0[self.0[i]];
            i = self.0[i];
        }
        i
    }

    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            self.0[ra.max(rb)] = ra.min(rb);
        }
    }
}

fn group<'a>(parts: impl Iterator<Item = &'a Part>) -> Vec<(Member, GroupId)> {
    let mut classes = Vec::new();
    let mut pools: BTreeMap<&str, usize> = BTreeMap::new();
    let mut sigs: Vec<(u64, &NodeSignature)> = Vec::new();
    let mut pods_on = Vec::new();
    for p in parts {
        match p {
            Part::Class(id, class, reqs, names) => classes.push((*id, class, reqs, names)),
            Part::NodePool(name) => {
                let next = pools.len();
                pools.insert(name, next);
            }
            Part::Signature(id, s) => sigs.push((*id, s)),
            Part::PodOn(sig, set) => pods_on.push((*sig, set)),
        }
    }
    // Elements: classes, then NodePools, then signatures.
    let (nc, np) = (classes.len(), pools.len());
    let mut uf = Components((0..nc + np + sigs.len()).collect());
    let sig_index: BTreeMap<u64, usize> = sigs
        .iter()
        .enumerate()
        .map(|(i, (id, _))| (*id, nc + np + i))
        .collect();
    let topology: Vec<Vec<Group>> = classes
        .iter()
        .map(|(_, class, _, _)| {
            let mut t = Topology::default();
            t.class_constraints(class, true);
            t.groups
        })
        .collect();
    for (ci, (_, class, reqs, names)) in classes.iter().enumerate() {
        for name in names.iter() {
            if let Some(&p) = pools.get(name.as_str()) {
                uf.union(ci, nc + p);
            }
        }
        let mut reqs = (*reqs).clone();
        reqs.0.remove(HOSTNAME);
        for (si, (_, s)) in sigs.iter().enumerate() {
            if !s.unschedulable
                && first_untolerated(&s.taints, &class.scheduling.tolerations).is_none()
                && reqs.matches_labels(&s.labels)
            {
                uf.union(ci, nc + np + si);
            }
        }
    }
    // A topology term joins its owners with the classes and signatures whose pods it counts.
    // Terms are compared by whom they count (namespaces and selector, not the topology key),
    // and classes by their (namespace, labels): both are far fewer than the classes.
    let mut owners: BTreeMap<Counted<'_>, (&Group, Vec<usize>)> = BTreeMap::new();
    for (ci, groups) in topology.iter().enumerate() {
        for g in groups {
            owners
                .entry((&g.namespaces, &g.selector))
                .or_insert((g, Vec::new()))
                .1
                .push(ci);
        }
    }
    let mut label_sets: BTreeMap<(&str, &BTreeMap<String, String>), Vec<usize>> = BTreeMap::new();
    for (ci, (_, class, _, _)) in classes.iter().enumerate() {
        label_sets
            .entry((class.namespace.as_str(), &class.labels))
            .or_default()
            .push(ci);
    }
    for (g, owned_by) in owners.values() {
        let mut counted: Vec<usize> = Vec::new();
        for ((ns, labels), members) in &label_sets {
            if g.counts_pod(ns, labels) {
                counted.extend(members);
            }
        }
        for (sig, set) in &pods_on {
            if let Some(&si) = sig_index.get(sig) {
                if g.counts_pod(set.namespace(), set.labels()) {
                    counted.push(si);
                }
            }
        }
        if counted.is_empty() {
            continue;
        }
        let first = owned_by[0];
        for &e in owned_by.iter().chain(&counted) {
            uf.union(first, e);
        }
    }
    for (si, (_, s)) in sigs.iter().enumerate() {
        if let Some(&p) = s
            .labels
            .get(NODEPOOL)
            .and_then(|name| pools.get(name.as_str()))
        {
            uf.union(nc + np + si, nc + p);
        }
    }
    // Name each component by its smallest NodePool name's hash, so that pods pending and binding
    // one at a time, and nodes of new kinds joining, rename nothing: a renamed group is packed
    // from nothing, without its last plan, and every one of its nodes leaves it and joins the
    // new one. A component without a NodePool goes by its smallest node signature, and one of
    // classes alone by its smallest class id. Nodes that no class could use and no NodePool
    // owns are in no group.
    let mut pooled: BTreeMap<usize, GroupId> = BTreeMap::new();
    for (name, &p) in &pools {
        keep_smallest(&mut pooled, uf.find(nc + p), stable_hash(name));
    }
    let mut names: BTreeMap<usize, GroupId> = BTreeMap::new();
    for (ci, (id, ..)) in classes.iter().enumerate() {
        keep_smallest(&mut names, uf.find(ci), *id);
    }
    let mut signed: BTreeMap<usize, GroupId> = BTreeMap::new();
    for (si, (id, _)) in sigs.iter().enumerate() {
        keep_smallest(&mut signed, uf.find(nc + np + si), *id);
    }
    for (root, name) in names.iter_mut() {
        if let Some(&anchor) = pooled.get(root).or_else(|| signed.get(root)) {
            *name = anchor;
        }
    }
    names.extend(pooled);
    let mut out = Vec::with_capacity(uf.0.len());
    for (ci, (id, ..)) in classes.iter().enumerate() {
        let root = uf.find(ci);
        out.push((Member::Class(*id), names[&root]));
    }
    for (name, &p) in &pools {
        if let Some(&g) = names.get(&uf.find(nc + p)) {
            out.push((Member::NodePool(name.to_string()), g));
        }
    }
    for (si, (id, _)) in sigs.iter().enumerate() {
        if let Some(&g) = names.get(&uf.find(nc + np + si)) {
            out.push((Member::Nodes(*id), g));
        }
    }
    out
}

/// Names component `root` by `id` unless it already has a smaller name.
fn keep_smallest(names: &mut BTreeMap<usize, GroupId>, root: usize, id: GroupId) {
    let name = names.entry(root).or_insert(id);
    *name = (*name).min(id);
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_dataflow::model::taints::Effect;
    use dovetail_dataflow::model::{
        LabelSelector, PodScheduling, Requirement, TopologySpread, WhenUnsatisfiable,
    };
    use std::collections::BTreeSet;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn class(id: ClassId, app: &str, pools: &[&str]) -> Part {
        let class = PodClass {
            namespace: "default".to_string(),
            labels: labels(&[("app", app)]),
            scheduling: PodScheduling::default(),
        };
        let pools = pools.iter().map(|p| p.to_string()).collect();
        Part::Class(id, Box::new(class), Requirements::default(), pools)
    }

    fn spreading_over(part: Part, app: &str) -> Part {
        let Part::Class(id, mut class, reqs, pools) = part else {
            return part;
        };
        let mut selector = LabelSelector::default();
        selector
            .requirements
            .add("app", Requirement::single(app.to_string()));
        class.scheduling.topology_spread.push(TopologySpread {
            topology_key: "topology.kubernetes.io/zone".to_string(),
            max_skew: 1,
            when_unsatisfiable: WhenUnsatisfiable::ScheduleAnyway,
            selector,
            min_domains: None,
        });
        Part::Class(id, class, reqs, pools)
    }

    fn nodes(pool: &str, taint: bool) -> (u64, Part) {
        let s = NodeSignature {
            labels: labels(&[(NODEPOOL, pool), ("topology.kubernetes.io/zone", "a")]),
            taints: if taint {
                vec![Taint {
                    key: "dedicated".to_string(),
                    value: "x".to_string(),
                    effect: Effect::NoSchedule,
                }]
            } else {
                Vec::new()
            },
            unschedulable: false,
        };
        (s.id(), Part::Signature(s.id(), s))
    }

    /// The groups as sets of members.
    fn sets(parts: &[Part]) -> BTreeSet<BTreeSet<Member>> {
        let mut by_group: BTreeMap<GroupId, BTreeSet<Member>> = BTreeMap::new();
        for (m, g) in group(parts.iter()) {
            by_group.entry(g).or_default().insert(m);
        }
        by_group.into_values().collect()
    }

    fn set(members: &[Member]) -> BTreeSet<Member> {
        members.iter().cloned().collect()
    }

    fn pool(name: &str) -> Part {
        Part::NodePool(name.to_string())
    }

    #[test]
    fn classes_of_different_nodepools_are_apart() {
        let parts = [
            class(1, "web", &["general"]),
            class(2, "train", &["gpu"]),
            pool("general"),
            pool("gpu"),
            pool("unused"),
        ];
        let expected = BTreeSet::from([
            set(&[Member::Class(1), Member::NodePool("general".into())]),
            set(&[Member::Class(2), Member::NodePool("gpu".into())]),
            set(&[Member::NodePool("unused".into())]),
        ]);
        assert_eq!(sets(&parts), expected);
    }

    #[test]
    fn classes_and_nodes_coming_and_going_rename_no_group() {
        let (sig, nodes) = nodes("general", false);
        let idle = [pool("general"), nodes.clone()];
        // Nodes of other zones: new signatures, whose ids may be smaller than any other.
        let others = ["b", "c", "d", "e"].map(|zone| {
            let s = NodeSignature {
                labels: labels(&[(NODEPOOL, "general"), ("topology.kubernetes.io/zone", zone)]),
                taints: Vec::new(),
                unschedulable: false,
            };
            Part::Signature(s.id(), s)
        });
        let mut busy = vec![class(1, "web", &["general"]), pool("general"), nodes];
        busy.extend(others);
        let name_of = |parts: &[Part], member: &Member| {
            group(parts.iter())
                .into_iter()
                .find(|(m, _)| m == member)
                .map(|(_, g)| g)
        };
        let idle_name = name_of(&idle, &Member::Nodes(sig));
        assert!(idle_name.is_some(), "nodes of a NodePool are grouped");
        assert_eq!(name_of(&busy, &Member::Nodes(sig)), idle_name);
        assert_eq!(name_of(&busy, &Member::Class(1)), idle_name);
        assert_eq!(
            name_of(&busy, &Member::NodePool("general".into())),
            idle_name
        );
    }

    #[test]
    fn a_node_both_could_use_joins_them_and_a_tainted_one_does_not() {
        let (open, open_nodes) = nodes("other", false);
        let parts = [
            class(1, "web", &["general"]),
            class(2, "train", &["gpu"]),
            pool("general"),
            pool("gpu"),
            pool("other"),
            open_nodes,
        ];
        let all = set(&[
            Member::Class(1),
            Member::Class(2),
            Member::NodePool("general".into()),
            Member::NodePool("gpu".into()),
            Member::NodePool("other".into()),
            Member::Nodes(open),
        ]);
        assert_eq!(sets(&parts), BTreeSet::from([all]));

        let (tainted, tainted_nodes) = nodes("gpu", true);
        let parts = [
            class(1, "web", &["general"]),
            class(2, "train", &["gpu"]),
            pool("general"),
            pool("gpu"),
            tainted_nodes,
        ];
        // Nobody tolerates the taint, but the nodes count against their NodePool's limits.
        let expected = BTreeSet::from([
            set(&[Member::Class(1), Member::NodePool("general".into())]),
            set(&[
                Member::Class(2),
                Member::NodePool("gpu".into()),
                Member::Nodes(tainted),
            ]),
        ]);
        assert_eq!(sets(&parts), expected);
    }

    #[test]
    fn a_topology_term_joins_the_classes_and_nodes_whose_pods_it_counts() {
        let parts = [
            spreading_over(class(1, "web", &["general"]), "train"),
            class(2, "train", &["gpu"]),
            pool("general"),
            pool("gpu"),
        ];
        assert_eq!(sets(&parts).len(), 1, "{:?}", sets(&parts));

        // The counted pods are bound to tainted nodes of a third NodePool: those nodes, and
        // through their limits that NodePool, join the spreading class.
        let (tainted, tainted_nodes) = nodes("batch", true);
        let parts = [
            spreading_over(class(1, "web", &["general"]), "train"),
            class(3, "batch", &["batch"]),
            pool("general"),
            pool("batch"),
            tainted_nodes,
            Part::PodOn(
                tainted,
                LabelSet::new("default", &labels(&[("app", "train")])),
            ),
        ];
        let all = set(&[
            Member::Class(1),
            Member::Class(3),
            Member::NodePool("general".into()),
            Member::NodePool("batch".into()),
            Member::Nodes(tainted),
        ]);
        assert_eq!(sets(&parts), BTreeSet::from([all]));
    }
}
