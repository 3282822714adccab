//! Queries 3 and 4 — existing capacity first, then the cheapest packing of the rest.
//!
//! Rule: pending pod classes, largest first (CPU, then memory), fill existing nodes and
//! in-flight NodeClaims as kube-scheduler would, then NodeClaims planned in this run, then new
//! NodeClaims from the NodePools in weight order; each planned NodeClaim keeps every instance
//! type that still fits its pods and launches the cheapest (see `solver` for the details).
//! NodePool limits are charged with the largest candidate type, as Karpenter does.
//!
//! It runs per packing group (`packing_groups`): classes that share no NodePool, no existing
//! node and no topology term cannot affect each other. Within a group the plan is sticky, as
//! Karpenter's nominations are: a change starts from the last plan (`solver::seed`), so a pod
//! more goes into a planned NodeClaim with room or a new one, and a pod less leaves slack,
//! instead of shifting every later bin; a change that only adds or removes pending pods goes
//! further and carries the last run's state on (`solver::warm`) to the same plan, without
//! rebuilding its bins. The waste this leaves is repaired by packing the group
//! from nothing again once the copies added and removed since the last such packing pass a
//! tenth of the group's pods, or when its NodePools change. The lower bound is summed over the
//! groups.

use crate::packing_groups::{GroupId, Member, NodeSignature};
use crate::solver::{
    solve, solve_warm, ClassInput, Failure, PlannedLaunch, Previous, Slot, SolverInput, Warm,
};
use crate::spread_domains::SpreadDomain;
use crate::types::{ClassId, ClassMembers, Compatibility, NodeState, PodClass, PoolTypes};
use differential_dataflow::VecCollection;
use dovetail_dataflow::decisions::{Launch, Placement};
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::maintained::{add_count, changes, maintain_by_key, Maintained};
use dovetail_dataflow::model::Price;
use dovetail_dataflow::scheduling_reasons::Unschedulable;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// Copies added and removed since the group was last packed from nothing, as a share of its
/// pending pods, past which it is packed from nothing again.
const REPACK_SHARE: f64 = 0.1;
/// ... and never more often than every this many copies (a small group repacks cheaply anyway).
const REPACK_MIN: i64 = 64;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
enum Part {
    Pool(PoolTypes),
    Class(ClassId, PodClass, i64, Compatibility),
    Node(NodeState),
    /// A domain of a class's spread that a node outside the group adds.
    Domain(ClassId, SpreadDomain),
}

/// What the packing decides.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Packed {
    Launch(Launch),
    Placement(Placement),
    Failure {
        class: ClassId,
        count: i64,
        reason: Unschedulable,
    },
    LowerBound(Price),
}

pub fn packing<'s>(
    classes: VecCollection<'s, Epoch, (ClassId, ClassMembers)>,
    compat: VecCollection<'s, Epoch, (ClassId, Compatibility)>,
    pools: VecCollection<'s, Epoch, (String, PoolTypes)>,
    nodes: VecCollection<'s, Epoch, (String, NodeState)>,
    groups: VecCollection<'s, Epoch, (Member, GroupId)>,
    spread_domains: VecCollection<'s, Epoch, (ClassId, SpreadDomain)>,
    carry_on: bool,
) -> VecCollection<'s, Epoch, Packed> {
    let class_groups = groups.clone().flat_map(|(m, g)| match m {
        Member::Class(id) => Some((id, g)),
        _ => None,
    });
    let pool_groups = groups.clone().flat_map(|(m, g)| match m {
        Member::NodePool(name) => Some((name, g)),
        _ => None,
    });
    let node_groups = groups.flat_map(|(m, g)| match m {
        Member::Nodes(sig) => Some((sig, g)),
        _ => None,
    });
    let classes = classes
        .join_map(compat, |id, m, c| {
            (
                *id,
                Part::Class(*id, m.class.clone(), m.members.len() as i64, c.clone()),
            )
        })
        .join_map(class_groups.clone(), |_, part, g| (*g, part.clone()));
    let domains =
        spread_domains.join_map(class_groups, |id, d, g| (*g, Part::Domain(*id, d.clone())));
    let pools = pools.join_map(pool_groups, |_, p, g| (*g, Part::Pool(p.clone())));
    let nodes = nodes
        .map(|(_, n)| (NodeSignature::of(&n.node).id(), n))
        .join_map(node_groups, |_, n, g| (*g, Part::Node(n.clone())));
    let packed = maintain_by_key(
        pools.concat(nodes).concat(classes).concat(domains),
        "Packing",
        move || GroupPlan {
            carry_on,
            ..GroupPlan::default()
        },
    );
    let bound = packed
        .clone()
        .flat_map(|p| match p {
            Packed::LowerBound(b) => Some(((), b)),
            _ => None,
        })
        .reduce_named("LowerBoundSum", |_unit, bounds, out| {
            let sum: i64 = bounds.iter().map(|(b, n)| b.0 * (*n as i64)).sum();
            out.push((Price(sum), 1));
        })
        .map(|((), b)| Packed::LowerBound(b));
    packed
        .filter(|p| !matches!(p, Packed::LowerBound(_)))
        .concat(bound)
}

/// One packing group's input and the plan it was last answered with.
#[derive(Default)]
struct GroupPlan {
    /// Fx-hashed: a part is a whole class with its compatibility, hashed at every change.
    parts: FxHashMap<Part, isize>,
    /// The answer but its launches and placements (failures, the lower bound).
    answered: FxHashMap<Packed, isize>,
    /// The launches answered, with their bins: compared by the solver, not here, so that a
    /// change does not hash and clone every planned NodeClaim of a large group.
    /// Boxed: a change rebuilds this list, and moving 20,000 boxes instead of 20,000 launches
    /// took a sixth of a change's time at 100k pods.
    #[allow(clippy::vec_box)]
    launches: Vec<Box<PlannedLaunch>>,
    /// The placements answered, by class, in order.
    placements: FxHashMap<ClassId, Vec<Placement>>,
    /// Whether a NodePool record changed since the last evaluation.
    pools_changed: bool,
    /// Pending copies per class at the last evaluation.
    counts: HashMap<ClassId, i64>,
    /// Copies added and removed since the group was last packed from nothing.
    drift: i64,
    /// Whether a change that only adds or removes pods of pending classes carries the last
    /// run on (`solver::warm`) rather than rebuilding it from the last plan: the same plan,
    /// at the cost of what the change touches. Off only to check that claim.
    carry_on: bool,
    /// The last run's state, while `carry_on`.
    warm: Option<Warm>,
    /// Whether a NodePool, node or spread domain changed since the last evaluation.
    reshaped: bool,
    /// Since the last evaluation, per class: the net change of each content (the class and
    /// its compatibility, by hash). A change of count alone nets to zero; a class that came
    /// or went has one content that rose or fell.
    class_edits: FxHashMap<ClassId, FxHashMap<u64, isize>>,
}

impl Maintained for GroupPlan {
    type In = Part;
    type Out = Packed;

    fn update(&mut self, part: Part, diff: isize) {
        match &part {
            Part::Pool(_) => {
                self.pools_changed = true;
                self.reshaped = true;
            }
            Part::Node(_) | Part::Domain(..) => self.reshaped = true,
            Part::Class(id, class, _, compat) => {
                let mut h = rustc_hash::FxHasher::default();
                (class, compat).hash(&mut h);
                *self
                    .class_edits
                    .entry(*id)
                    .or_default()
                    .entry(h.finish())
                    .or_insert(0) += diff;
            }
        }
        add_count(&mut self.parts, part, diff);
    }

    fn evaluate(&mut self, out: &mut Vec<(Packed, isize)>) {
        let mut input = SolverInput {
            pools: Vec::new(),
            classes: Vec::new(),
            nodes: Vec::new(),
            bystanders: Vec::new(),
            previous: None,
        };
        let mut counts = HashMap::new();
        let mut domains: HashMap<ClassId, Vec<&SpreadDomain>> = HashMap::new();
        for (part, n) in &self.parts {
            if let (Part::Domain(id, d), 1..) = (part, *n) {
                domains.entry(*id).or_default().push(d);
            }
        }
        for (part, n) in &self.parts {
            if *n <= 0 {
                continue;
            }
            match part {
                Part::Pool(p) => input.pools.push(p),
                Part::Node(n) => input.nodes.push(n),
                Part::Class(id, class, count, compat) => {
                    counts.insert(*id, *count);
                    input.classes.push(ClassInput {
                        id: *id,
                        class,
                        count: *count,
                        compat,
                        counted_domains: domains.remove(id).unwrap_or_default(),
                    })
                }
                Part::Domain(..) => {}
            }
        }
        for (id, n) in &counts {
            self.drift += (n - self.counts.get(id).copied().unwrap_or(0)).abs();
        }
        for (id, n) in &self.counts {
            if !counts.contains_key(id) {
                self.drift += n;
            }
        }
        if input.classes.is_empty() {
            // Nothing pending: the plan is empty, and no solver need read the group's nodes
            // (they stay in it only so that the next pending pod finds them there).
            for planned in std::mem::take(&mut self.launches) {
                out.push((Packed::Launch(planned.launch), -1));
            }
            for (_, placements) in self.placements.drain() {
                out.extend(placements.into_iter().map(|p| (Packed::Placement(p), -1)));
            }
            changes(&self.answered, &FxHashMap::default(), out);
            self.answered.clear();
            self.warm = None;
            self.counts = counts;
            self.reshaped = false;
            self.class_edits.clear();
            return;
        }
        let pending: i64 = counts.values().sum();
        let repack = self.pools_changed
            || (self.answered.is_empty() && self.launches.is_empty() && self.placements.is_empty())
            || self.drift as f64 > (REPACK_SHARE * pending as f64).max(REPACK_MIN as f64);
        // A class that came or went is carried on; one whose content (its compatibility)
        // changed is not.
        let reshaped = std::mem::take(&mut self.reshaped)
            || self
                .class_edits
                .drain()
                .any(|(_, edits)| edits.values().any(|&d| d > 0) && edits.values().any(|&d| d < 0));
        if repack {
            self.drift = 0;
        } else {
            input.previous = Some(Previous {
                launches: &self.launches,
                placements: &self.placements,
            });
        }
        let warm = self.warm.take().filter(|_| !repack && !reshaped);
        let mut solved = if self.carry_on {
            let (solved, warm) = solve_warm(input, warm);
            self.warm = Some(warm);
            solved
        } else {
            solve(input)
        };
        // The plan's launches in its bins' order: the previous ones kept, the rest new or
        // changed. A previous launch not kept is retracted.
        let mut previous: Vec<Option<Box<PlannedLaunch>>> = std::mem::take(&mut self.launches)
            .into_iter()
            .map(Some)
            .collect();
        let mut fresh: Vec<Option<Box<PlannedLaunch>>> = std::mem::take(&mut solved.launches)
            .into_iter()
            .zip(std::mem::take(&mut solved.launch_bins))
            .map(|(launch, bin)| Some(Box::new(PlannedLaunch { launch, bin })))
            .collect();
        let mut launches = Vec::with_capacity(solved.order.len());
        for slot in &solved.order {
            let planned = match *slot {
                Slot::Kept(i) => previous.get_mut(i).and_then(Option::take),
                Slot::Fresh(i) => {
                    let planned = fresh.get_mut(i).and_then(Option::take);
                    if let Some(p) = &planned {
                        out.push((Packed::Launch(p.launch.clone()), 1));
                    }
                    planned
                }
            };
            launches.extend(planned);
        }
        for planned in previous.into_iter().flatten() {
            out.push((Packed::Launch(planned.launch), -1));
        }
        // Placements are many (one per class per bin): they are compared class by class, and
        // only for the classes the run touched when it carried the last one on.
        let mut by_class: FxHashMap<ClassId, Vec<Placement>> = FxHashMap::default();
        for p in std::mem::take(&mut solved.placements) {
            by_class.entry(p.class).or_default().push(p);
        }
        let changed: Vec<ClassId> = match solved.touched.take() {
            Some(mut touched) => {
                // Classes gone since the last run have no placements any more.
                touched.extend(self.counts.keys().filter(|id| !counts.contains_key(id)));
                touched
            }
            None => {
                let mut all: Vec<ClassId> = self.placements.keys().copied().collect();
                all.extend(by_class.keys().copied());
                all.sort_unstable();
                all.dedup();
                all
            }
        };
        for class in changed {
            let before = self.placements.remove(&class).unwrap_or_default();
            let now = by_class.remove(&class).unwrap_or_default();
            placement_changes(&before, &now, out);
            if !now.is_empty() {
                self.placements.insert(class, now);
            }
        }
        let mut now: FxHashMap<Packed, isize> = FxHashMap::default();
        for Failure {
            class,
            count,
            reason,
        } in solved.failures
        {
            *now.entry(Packed::Failure {
                class,
                count,
                reason,
            })
            .or_insert(0) += 1;
        }
        if !self.parts.is_empty() {
            now.insert(Packed::LowerBound(solved.lower_bound), 1);
        }
        changes(&self.answered, &now, out);
        self.answered = now;
        self.launches = launches;
        self.counts = counts;
        self.pools_changed = false;
    }

    fn is_empty(&self) -> bool {
        self.parts.is_empty()
            && self.answered.is_empty()
            && self.launches.is_empty()
            && self.placements.is_empty()
    }
}

/// The placements retracted and asserted between two lists sorted by class and order (a class's
/// orders are distinct, so each list has one placement per key).
fn placement_changes(before: &[Placement], now: &[Placement], out: &mut Vec<(Packed, isize)>) {
    let key = |p: &Placement| (p.class, p.order);
    let (mut i, mut j) = (0, 0);
    while i < before.len() || j < now.len() {
        match (before.get(i), now.get(j)) {
            (Some(b), Some(n)) if key(b) == key(n) => {
                if b != n {
                    out.push((Packed::Placement(b.clone()), -1));
                    out.push((Packed::Placement(n.clone()), 1));
                }
                i += 1;
                j += 1;
            }
            (Some(b), Some(n)) if key(b) < key(n) => {
                out.push((Packed::Placement(b.clone()), -1));
                i += 1;
            }
            (Some(b), None) => {
                out.push((Packed::Placement(b.clone()), -1));
                i += 1;
            }
            (_, Some(n)) => {
                out.push((Packed::Placement(n.clone()), 1));
                j += 1;
            }
            (None, None) => break,
        }
    }
}
