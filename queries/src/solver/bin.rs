//! A bin of the packing: an existing node (fixed size) or a NodeClaim being planned (the set of
//! instance types that still fit everything put in it).

use dovetail_dataflow::model::{Requirements, Resources};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

#[derive(Debug, Clone)]
pub enum BinKind {
    /// An existing node or in-flight NodeClaim: index into the solver's nodes.
    Existing { node: usize },
    /// A NodeClaim being planned from a NodePool: index into the solver's pools, with the
    /// candidate types (indices into that pool's types, cheapest first) and the requirements
    /// its pods have narrowed it to. (An existing node is matched by its labels.)
    ///
    /// Types and requirements are shared with the plan they were seeded from (a change copies
    /// only the bins it touches).
    New {
        pool: usize,
        types: Arc<[u32]>,
        requirements: Arc<Requirements>,
    },
}

#[derive(Debug, Clone)]
pub struct Bin {
    pub kind: BinKind,
    /// The launch planned last time that this bin continues (see `seed`).
    pub origin: Option<super::seed::Origin>,
    pub used: Resources,
    /// What the largest remaining candidate could still take (CPU, memory), or the fill type
    /// if that is less: a quick reject.
    pub headroom: (i64, i64),
    /// A planned NodeClaim's fill type's room (see `shape`): it takes pods up to this, not up
    /// to its largest candidate. `None`: up to the largest candidate.
    pub limit: Option<Resources>,
    /// A planned NodeClaim's largest CPU and memory over its candidate types (`None`: not yet
    /// known), so that its headroom is found without walking its types again.
    pub type_max: Option<(i64, i64)>,
    /// (class index, copies), in the order first placed.
    pub classes: Vec<(usize, i64)>,
    /// Pods per topology group on this node (hostname-keyed groups and anti-affinity). For
    /// zone-like groups, only what the run placed here: an existing node's own pods of those
    /// are counted in their domain, never read per node.
    pub group_counts: BTreeMap<usize, i64>,
    /// Groups that some pod here is anti-affine to (no member of them may join).
    pub anti_groups: BTreeSet<usize>,
}

impl Bin {
    /// An empty NodeClaim being planned from pool `pool`.
    pub fn planned(pool: usize, types: Arc<[u32]>, requirements: Arc<Requirements>) -> Bin {
        Bin {
            kind: BinKind::New {
                pool,
                types,
                requirements,
            },
            origin: None,
            used: Resources::default(),
            headroom: (i64::MAX, i64::MAX),
            limit: None,
            type_max: None,
            classes: Vec::new(),
            group_counts: BTreeMap::new(),
            anti_groups: BTreeSet::new(),
        }
    }

    pub fn group_count(&self, group: usize) -> i64 {
        self.group_counts.get(&group).copied().unwrap_or(0)
    }

    /// Adds copies of a class: one entry per class, so that a launch's pods and a class's
    /// placements read the same however the copies arrived.
    pub fn add_class(&mut self, class: usize, copies: i64) {
        match self.classes.iter_mut().rev().find(|(c, _)| *c == class) {
            Some((_, n)) => *n += copies,
            None => self.classes.push((class, copies)),
        }
    }
}
