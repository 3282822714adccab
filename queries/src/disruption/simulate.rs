//! Where a set of nodes' pods would go if those nodes went away: the packing solver run over
//! the rest of the cluster, with the NodePools open for replacements. The same solver as
//! provisioning, not a copy of it.

use crate::solver::{solve, ClassInput, SolverInput, SolverOutput};
use crate::types::{ClassId, Compatibility, NodeState, PodClass, PoolTypes};
use dovetail_dataflow::model::Resources;
use std::collections::{BTreeMap, BTreeSet};

/// Everything a simulation reads, indexed once per evaluation.
pub struct World<'a> {
    pub pools: Vec<&'a PoolTypes>,
    pub classes: BTreeMap<ClassId, (&'a PodClass, &'a Compatibility)>,
    /// Nodes that can take pods (registered, schedulable, not disrupting), by name.
    pub destinations: Vec<&'a NodeState>,
    /// Every other node (counts against NodePool limits only).
    pub others: Vec<&'a NodeState>,
    /// Free room on each destination (allocatable − used), in the same order.
    pub free: Vec<Resources>,
}

/// True when the class's placement depends on where other pods are (spread or affinity), so a
/// simulation must see every node.
fn needs_whole_cluster(class: &PodClass) -> bool {
    let s = &class.scheduling;
    !s.topology_spread.is_empty()
        || !s.pod_affinity.is_empty()
        || !s.pod_anti_affinity.is_empty()
        || !s.preferred_pod_affinity.is_empty()
        || !s.preferred_pod_anti_affinity.is_empty()
}

impl<'a> World<'a> {
    pub fn new(
        pools: Vec<&'a PoolTypes>,
        classes: BTreeMap<ClassId, (&'a PodClass, &'a Compatibility)>,
        nodes: Vec<&'a NodeState>,
        is_destination: impl Fn(&NodeState) -> bool,
    ) -> World<'a> {
        let (destinations, others): (Vec<&NodeState>, Vec<&NodeState>) =
            nodes.into_iter().partition(|n| is_destination(n));
        let free = destinations
            .iter()
            .map(|n| n.node.allocatable.sub(&n.used))
            .collect();
        World {
            pools,
            classes,
            destinations,
            others,
            free,
        }
    }

    /// Packs `pods` (by class) with the nodes named in `removed` gone. Destinations that cannot
    /// hold even the smallest of those pods are left out (they could not change the outcome)
    /// unless a class needs the whole cluster for spread or affinity counts.
    pub fn simulate(&self, removed: &BTreeSet<&str>, pods: &[(ClassId, i64)]) -> SolverOutput {
        let mut classes = Vec::new();
        let mut whole = false;
        for &(id, count) in pods {
            if let Some((class, compat)) = self.classes.get(&id) {
                whole |= needs_whole_cluster(class);
                classes.push((id, *class, *compat, count));
            }
        }
        let mut nodes = Vec::new();
        let mut bystanders: Vec<&NodeState> = self.others.clone();
        for (n, free) in self.destinations.iter().zip(&self.free) {
            if removed.contains(n.node.name.as_str()) {
                continue;
            }
            let useful = whole
                || classes
                    .iter()
                    .any(|(_, c, _, _)| c.scheduling.requests.fits_in(free));
            if useful {
                nodes.push(*n);
            } else {
                bystanders.push(*n);
            }
        }
        solve(SolverInput {
            pools: self.pools.clone(),
            classes: classes
                .into_iter()
                .map(|(id, class, compat, count)| ClassInput {
                    id,
                    class,
                    count,
                    compat,
                })
                .collect(),
            nodes,
            bystanders,
        })
    }
}
