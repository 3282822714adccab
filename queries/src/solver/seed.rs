//! Seeding a packing with the plan it made last time, so that a change moves only what it
//! touches.
//!
//! Karpenter never re-packs capacity it has decided: pods nominated to a NodeClaim stay there
//! while it launches, and consolidation repairs waste later. Likewise the previous plan's
//! placements and launches are taken as given here, trimmed to the pods still pending, and only
//! the copies left over (new pods, or pods whose place is gone or full) are packed afresh, into
//! the room those bins have left before any new NodeClaim is opened.

use super::bin::{Bin, BinKind};
use super::{Fit, Solver};
use crate::types::ClassId;
use dovetail_dataflow::decisions::{Launch, Placement};
use dovetail_dataflow::model::taints::first_untolerated;
use dovetail_dataflow::model::Requirements;
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The plan a packing made last time: what the new one starts from.
#[derive(Debug, Clone, Copy)]
pub struct Previous<'a> {
    /// Boxed: a change moves the list, not 20,000 launches.
    pub launches: &'a [Box<PlannedLaunch>],
    /// By class, in order.
    pub placements: &'a HashMap<ClassId, Vec<Placement>>,
}

/// A launch as the packing planned it: the decision, and the bin behind it.
#[derive(Debug, Clone)]
pub struct PlannedLaunch {
    pub launch: Launch,
    pub bin: PlannedBin,
}

/// The bin behind a planned launch: its candidate types as indices into its NodePool's types
/// (which hold while the NodePools do not change) and the requirements its pods narrowed it to,
/// shared with the bins seeded from it so that a change copies only the bins it touches.
#[derive(Debug, Clone)]
pub struct PlannedBin {
    pub types: Arc<[u32]>,
    pub requirements: Arc<Requirements>,
    /// Its fill type's room (see `shape`), kept so that it does not grow past it later.
    pub limit: Option<dovetail_dataflow::model::Resources>,
    /// Its types' largest CPU and memory (see `Bin::type_max`).
    pub type_max: Option<(i64, i64)>,
    /// One more than its largest type index: all its types are still known while the
    /// NodePool offers at least this many (checked without walking the types per change).
    pub types_needed: u32,
}

impl PlannedBin {
    pub fn new(
        types: Arc<[u32]>,
        requirements: Arc<Requirements>,
        limit: Option<dovetail_dataflow::model::Resources>,
        type_max: Option<(i64, i64)>,
    ) -> PlannedBin {
        let types_needed = types.iter().max().map_or(0, |&t| t + 1);
        PlannedBin {
            types,
            requirements,
            limit,
            type_max,
            types_needed,
        }
    }
}

/// Where a seeded bin came from: the previous launch it continues, and whether its content
/// changed since (an unchanged one is answered with the previous launch as it was).
#[derive(Debug, Clone)]
pub struct Origin {
    /// Index into the previous launches (its name is read there, not copied per change).
    pub launch: usize,
    pub changed: bool,
}

/// Where a previous placement's copies are now.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    /// An existing node or in-flight NodeClaim (index into the solver's nodes). A launch
    /// whose NodeClaim now exists lands here too.
    Node(usize),
    /// A launch still planned (index into the previous launches).
    Launch(usize),
}

/// Whether NodeClaim `claim` executes the launch named `launch`: it has its name, or the
/// actuator had to suffix it (`name-2`, …) because a NodeClaim of that name existed.
pub fn executes(claim: &str, launch: &str) -> bool {
    claim == launch
        || claim.strip_prefix(launch).is_some_and(|rest| {
            rest.strip_prefix('-')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
}

impl<'a> Solver<'a> {
    /// Puts the previous plan's copies back where they were, as far as they still fit, and
    /// returns how many copies of each class (by index) were put back. Copies beyond a class's
    /// pending count are dropped first from nodes, then from the launches holding the fewest
    /// pods.
    pub(super) fn seed(&mut self, previous: Previous<'a>) -> Vec<i64> {
        let class_index: HashMap<ClassId, usize> = self
            .classes
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id, i))
            .collect();
        let launch_index: HashMap<&str, usize> = previous
            .launches
            .iter()
            .enumerate()
            .map(|(i, p)| (p.launch.name.as_str(), i))
            .collect();
        let node_index: HashMap<&str, usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.node.name.as_str(), i))
            .collect();
        // A launch whose NodeClaim exists is that node now.
        let mut executed: HashMap<usize, usize> = HashMap::default();
        for (ni, n) in self.nodes.iter().enumerate() {
            let Some(claim) = n.node.nodeclaim.as_deref() else {
                continue;
            };
            let base = claim.rsplit_once('-').map_or(claim, |(base, _)| base);
            for name in [claim, base] {
                if let Some(&li) = launch_index.get(name) {
                    if executes(claim, name) {
                        executed.entry(li).or_insert(ni);
                    }
                }
            }
        }
        let launch_pods: Vec<i64> = previous
            .launches
            .iter()
            .map(|p| p.launch.pods_by_class.iter().map(|(_, n)| n).sum())
            .collect();

        // Per class: (target, copies) in the previous placements' order.
        let mut held: Vec<Vec<(Target, i64)>> = vec![Vec::new(); self.classes.len()];
        for (class, list) in previous.placements {
            let Some(&ci) = class_index.get(class) else {
                continue;
            };
            for p in list {
                let target = match (
                    node_index.get(p.target.as_str()),
                    launch_index.get(p.target.as_str()),
                ) {
                    (Some(&ni), _) => Target::Node(ni),
                    (None, Some(&li)) => match executed.get(&li) {
                        Some(&ni) => Target::Node(ni),
                        None => Target::Launch(li),
                    },
                    (None, None) => continue,
                };
                if p.count > 0 {
                    held[ci].push((target, p.count));
                }
            }
        }
        for (ci, list) in held.iter_mut().enumerate() {
            let mut excess = list.iter().map(|(_, n)| n).sum::<i64>() - self.classes[ci].count;
            if excess <= 0 {
                continue;
            }
            // Nodes give theirs up first (a pending pod planned onto a node most often leaves by
            // being bound to it), then the launches holding the fewest pods, so that removals
            // empty NodeClaims rather than thin them all.
            let mut by_priority: Vec<usize> = (0..list.len()).collect();
            by_priority.sort_by_key(|&i| match list[i].0 {
                Target::Node(_) => (0, 0, std::cmp::Reverse(i)),
                Target::Launch(li) => (1, launch_pods[li], std::cmp::Reverse(i)),
            });
            for i in by_priority {
                let take = excess.min(list[i].1);
                list[i].1 -= take;
                excess -= take;
                if excess == 0 {
                    break;
                }
            }
            list.retain(|(_, n)| *n > 0);
        }

        let mut seeded = vec![0i64; self.classes.len()];
        // Existing nodes first, as far as their room still allows (a pod planned there may have
        // been bound somewhere else, or the node filled up).
        for (ci, list) in held.iter().enumerate() {
            for &(target, copies) in list {
                if let Target::Node(ni) = target {
                    let k = self.room_on_node(ni, ci, copies);
                    if k > 0 {
                        self.commit(ni, ci, node_fit(k));
                        seeded[ci] += k;
                    }
                }
            }
        }
        // Then the planned launches, each rebuilt as a bin with the types it had.
        let mut by_launch: BTreeMap<usize, Vec<(usize, i64)>> = BTreeMap::new();
        for (ci, list) in held.iter().enumerate() {
            for &(target, copies) in list {
                if let Target::Launch(li) = target {
                    by_launch.entry(li).or_default().push((ci, copies));
                }
            }
        }
        for (li, contents) in by_launch {
            let planned = &previous.launches[li];
            let Some(b) = self.open_planned(planned) else {
                continue;
            };
            let mut held: Vec<(ClassId, i64)> = Vec::with_capacity(contents.len());
            for (ci, copies) in contents {
                if self.compat_bits[ci]
                    .get(self.pool_of(b))
                    .is_some_and(Option::is_some)
                {
                    self.add_copies(b, ci, copies);
                    seeded[ci] += copies;
                    held.push((self.classes[ci].id, copies));
                }
            }
            if self.bins[b].classes.is_empty() {
                self.bins.pop();
                continue;
            }
            self.refresh_headroom(b);
            self.charge_limits(b);
            held.sort_unstable();
            self.bins[b].origin = Some(Origin {
                launch: li,
                changed: held != planned.launch.pods_by_class,
            });
        }
        self.previous_launches = previous.launches;
        seeded
    }

    /// How many of `copies` copies of class `ci` node `ni` still takes.
    fn room_on_node(&self, ni: usize, ci: usize, copies: i64) -> i64 {
        let n = &self.nodes[ni].node;
        let class = &self.classes[ci];
        if n.unschedulable
            || first_untolerated(&n.taints, &class.class.scheduling.tolerations).is_some()
            || !class.compat.requirements.matches_labels(&n.labels)
        {
            return 0;
        }
        let free = n.allocatable.sub(&self.bins[ni].used);
        copies.min(class.class.scheduling.requests.copies_in(&free))
    }

    /// A bin for a launch planned last time, with the types and requirements it had, or `None`
    /// when its NodePool is gone.
    fn open_planned(&mut self, planned: &PlannedLaunch) -> Option<usize> {
        let pool = self
            .pools
            .iter()
            .position(|p| p.nodepool.name == planned.launch.nodepool)?;
        let known = self.pools[pool].types.len() as u32;
        let planned = &planned.bin;
        let mut bin = if planned.types_needed <= known {
            let mut bin = Bin::planned(pool, planned.types.clone(), planned.requirements.clone());
            bin.type_max = planned.type_max;
            bin
        } else {
            let types: Arc<[u32]> = planned
                .types
                .iter()
                .copied()
                .filter(|&t| t < known)
                .collect();
            Bin::planned(pool, types, planned.requirements.clone())
        };
        if matches!(&bin.kind, BinKind::New { types, .. } if types.is_empty()) {
            return None;
        }
        bin.limit = planned.limit.clone();
        self.bins.push(bin);
        Some(self.bins.len() - 1)
    }

    fn pool_of(&self, b: usize) -> usize {
        match &self.bins[b].kind {
            BinKind::New { pool, .. } => *pool,
            BinKind::Existing { .. } => usize::MAX,
        }
    }
}

fn node_fit(copies: i64) -> Fit {
    Fit {
        copies,
        types: Vec::new(),
        requirements: None,
        limit: None,
    }
}

#[cfg(test)]
mod tests {
    use super::executes;

    #[test]
    fn a_nodeclaim_executes_its_launch_under_its_name_or_a_numbered_suffix() {
        assert!(executes("general-00ab", "general-00ab"));
        assert!(executes("general-00ab-2", "general-00ab"));
        assert!(executes("general-00ab-17", "general-00ab"));
        assert!(!executes("general-00ab-x", "general-00ab"));
        assert!(!executes("general-00ab-", "general-00ab"));
        assert!(!executes("general-00abc", "general-00ab"));
        assert!(!executes("general-00a", "general-00ab"));
    }
}
