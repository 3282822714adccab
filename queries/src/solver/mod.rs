//! The packing solver: first-fit decreasing over pod classes with counts, in Karpenter's order.
//!
//! Classes are placed largest first (CPU, then memory, descending). Each class first fills
//! existing nodes and in-flight NodeClaims, then NodeClaims already planned in this run, then
//! opens new ones from the NodePools in weight order. A planned NodeClaim keeps every instance
//! type that still fits all its pods, and a class takes as many copies into a bin as the largest
//! remaining type allows (so a run costs O(classes × bins), not O(pods)). Topology spread across
//! zones or capacity types deals copies over domains first (water-filling, which is what a
//! skew check admitting one pod at a time converges to); hostname spread and anti-affinity cap
//! copies per bin. Preferred pod (anti-)affinity and ScheduleAnyway spreads are held as
//! constraints, and the copies that fail are retried with them dropped one at a time in
//! Karpenter's order.
//!
//! It is a pure function of its input, so the incremental engine and a from-scratch run agree.

mod bin;
pub mod cheapest;
mod launch;
mod seed;
mod shape;
pub mod topology;
mod warm;

pub use seed::{executes, PlannedBin, PlannedLaunch, Previous};
pub use warm::{carried_on_runs, solve_warm, Warm};

use crate::spread_domains::SpreadDomain;
use crate::types::{ClassId, Compatibility, NodeState, PodClass, PoolTypes};
use bin::{Bin, BinKind};
use cheapest::CheapestOfferings;
use dovetail_dataflow::decisions::{Launch, Placement};
use dovetail_dataflow::model::instance_type::OfferingFilter;
use dovetail_dataflow::model::labels::{CAPACITY_TYPE, NODEPOOL, ZONE};
use dovetail_dataflow::model::taints::first_untolerated;
use dovetail_dataflow::model::{
    InstanceType, LabelSet, Milli, Requirement, Requirements, Resources,
};
use dovetail_dataflow::scheduling_reasons::{PoolRejection, Unschedulable};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::Arc;
use topology::{water_fill, ClassTopology, SpreadDomains, Topology};

/// One class to place.
pub struct ClassInput<'a> {
    pub id: ClassId,
    pub class: &'a PodClass,
    pub count: i64,
    pub compat: &'a Compatibility,
    /// Domains of its zone-like spreads that nodes outside this run add (`spread_domains`):
    /// they count toward the skew with the pods this run does not see, none.
    pub counted_domains: Vec<&'a SpreadDomain>,
}

pub struct SolverInput<'a> {
    pub pools: Vec<&'a PoolTypes>,
    pub classes: Vec<ClassInput<'a>>,
    pub nodes: Vec<&'a NodeState>,
    /// Nodes that take no pods in this run but still count against NodePool limits (a
    /// disruption simulation leaves out nodes that cannot help, yet they still exist).
    pub bystanders: Vec<&'a NodeState>,
    /// The plan made last time, to start from (`None`: pack from nothing).
    pub previous: Option<Previous<'a>>,
}

/// When a run may stop before it has placed every class: a caller that refuses any answer with
/// a pod left unplaced, with `new_nodeclaims` new NodeClaims or more, or with pods left over
/// that an in-flight NodeClaim would take, learns it as soon as that happens (multi-node
/// consolidation's binary search: most prefixes it tries are refused, and a prefix of 51
/// nodes placed in full was a third of an evaluation). Classes are placed one after another,
/// each on what the ones before it left, so a run that stops has the same first failures,
/// launches and leftovers as the whole run: the whole run would be refused too. A run that
/// does not stop is the whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Stop {
    pub at_failure: bool,
    pub at_new_nodeclaims: Option<usize>,
    /// At the first pods left over (put on new NodeClaims or nowhere) that an in-flight
    /// NodeClaim would take: the caller answers that ([`solve_shared`]'s `refuses`).
    pub at_in_flight: bool,
}

impl Stop {
    /// Every class placed.
    pub const NEVER: Stop = Stop {
        at_failure: false,
        at_new_nodeclaims: None,
        at_in_flight: false,
    };
}

/// Whether the pods left over so far (class, copies), put on new NodeClaims or nowhere, make
/// the run's answer one the caller refuses.
pub type Refuses<'r> = &'r dyn Fn(&[(ClassId, i64)]) -> bool;

/// Copies of a class that could not be placed, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Failure {
    pub class: ClassId,
    pub count: i64,
    pub reason: Unschedulable,
}

#[derive(Debug, Clone, Default)]
pub struct SolverOutput {
    pub launches: Vec<Launch>,
    pub placements: Vec<Placement>,
    pub failures: Vec<Failure>,
    /// A lower bound on the price per hour of the new capacity: for each resource separately
    /// (CPU, memory, pod slots, GPUs, ...), every copy placed on a new NodeClaim pays its share
    /// of the cheapest price per unit of that resource among its compatible types; the largest
    /// of these sums. No packing of those pods onto new capacity can cost less (each sum is the
    /// optimum of the LP relaxation for that one resource).
    pub lower_bound: dovetail_dataflow::model::Price,
    /// For each of `launches`, its bin's candidate types, requirements and fill type's room
    /// (what a later packing seeded with this one needs).
    pub launch_bins: Vec<PlannedBin>,
    /// The previous plan's launches (indices into `Previous::launches`) that this plan keeps
    /// unchanged; they are not repeated in `launches`.
    pub kept: Vec<usize>,
    /// Every launch of the plan in its bins' order: a previous one kept, or one of `launches`.
    pub order: Vec<Slot>,
    /// `None`: `placements` are every class's. `Some`: they are only these classes', and every
    /// other class's placements are as they were (a change carried on from the last plan, see
    /// `warm`).
    pub touched: Option<Vec<ClassId>>,
}

/// A launch of the plan, in bin order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The previous plan's launch of this index, unchanged.
    Kept(usize),
    /// `SolverOutput::launches[i]`.
    Fresh(usize),
}

struct Solver<'a> {
    pools: Vec<&'a PoolTypes>,
    classes: Vec<ClassInput<'a>>,
    nodes: Vec<&'a NodeState>,
    /// Per class: per pool index, a bitset of compatible type indices (None: incompatible).
    compat_bits: Vec<Vec<Option<Vec<u64>>>>,
    topo: Topology,
    class_topo: Vec<ClassTopology>,
    /// Pods per group anywhere (for hostname affinity: is there any pod to be near?).
    group_totals: Vec<i64>,
    /// Remaining NodePool limits by pool index (absent: unlimited).
    limits: Vec<Option<BTreeMap<String, Milli>>>,
    /// By pool index: the requests of the copies not yet placed of every class that may use
    /// the pool (what a new NodeClaim's fill type is chosen for, see `shape`).
    demand: Vec<Resources>,
    bins: Vec<Bin>,
    failures: Vec<Failure>,
    /// Names a new launch must not take: the nodes' and their NodeClaims' (see [`executes`]),
    /// gathered at the first launch that needs a name (most disruption simulations launch
    /// nothing) unless [`SharedNodes::names`] gave them.
    taken: Option<Rc<BTreeSet<String>>>,
    /// The names new launches took in this run.
    claimed: BTreeSet<String>,
    /// Per class: whether this run put copies in or took them out of some bin.
    touched: Vec<bool>,
    /// Classes whose preferences were relaxed in this run, with their constraints as they were
    /// (a run carried on from this one starts from them again, as a fresh run would).
    relaxed: Vec<(usize, ClassTopology)>,
    /// The launches planned last time, whose names a new launch must not take either: looked up
    /// by a set built on the first new name a change needs, since copying 20,000 names into
    /// `taken` at every change cost more than the rest of a small change.
    previous_launches: &'a [Box<PlannedLaunch>],
    previous_names: Option<rustc_hash::FxHashSet<&'a str>>,
    /// Every zone and every capacity type of the NodePools' types' offerings, found once per
    /// run: a class that has found all those its requirements allow stops looking (see
    /// [`Solver::domains`]).
    offer_values: std::cell::OnceCell<[Vec<&'a str>; 2]>,
    /// [`Solver::node_values`] by label key.
    node_values: RefCell<Vec<(String, Rc<NodeValues<'a>>)>>,
    /// What the caller shares about the nodes, if it does, and each node's index in it (empty
    /// without).
    shared: Option<&'a dyn SharedNodes>,
    index: Vec<Option<u32>>,
    /// The types' cheapest offerings per filter: the caller's when it shares them, else this
    /// run's.
    cheapest: Rc<CheapestOfferings>,
    /// When [`Solver::run`] may stop early.
    stop: Stop,
}

/// A label's values on the nodes, each with the indices of the nodes that carry it.
type NodeValues<'a> = Vec<(&'a str, Vec<usize>)>;

/// What a caller that solves many times over the same nodes (a disruption evaluation's
/// whole-cluster simulations) works out once for all its runs, by its own index of those nodes:
/// the pods each topology group counts, the nodes' label values and their names. Working these
/// out per run (matching every pod against every selector, looking labels up in each node's
/// map, sorting a thousand names) was most of such a run.
pub trait SharedNodes {
    /// Each node's index in the caller's list, in the order of `nodes` (`None`: not in it).
    fn index(&self, nodes: &[&NodeState]) -> Vec<Option<u32>>;
    /// How many of each listed node's pods `group` counts, by index.
    fn counts(&self, group: &topology::Group) -> Rc<Vec<i64>>;
    /// Each listed node's value of label `key`, by index, as a number standing for the value
    /// (equal numbers, equal values).
    fn label_values(&self, key: &str) -> LabelValues;
    /// Every listed node's name and its NodeClaim's: names a new launch must not take.
    fn names(&self) -> Rc<BTreeSet<String>>;
    /// Whether each listed node's labels match `reqs`, by index, as far as found so far
    /// (`None`: not yet), for the runs to fill in and share.
    fn matches(&self, reqs: &Requirements) -> LabelMatches;
    /// The NodePools' types' cheapest offerings as found so far, for the runs to fill in and
    /// share: every run that shares them must be given the same `PoolTypes` (see
    /// [`CheapestOfferings`]).
    fn cheapest(&self) -> Rc<CheapestOfferings>;
}

/// Each of a caller's nodes' value of a label (by its index), as a number standing for the
/// value (see [`SharedNodes::label_values`]).
pub type LabelValues = Rc<Vec<Option<u32>>>;

/// Whether each of a caller's nodes (by its index) has labels that some requirements match:
/// `None` until a run has looked.
pub type LabelMatches = Rc<RefCell<Vec<Option<bool>>>>;

/// Runs the packing.
pub fn solve(input: SolverInput<'_>) -> SolverOutput {
    solve_shared(input, None, Stop::NEVER, None)
}

/// [`solve`], reading what `shared` has worked out about the nodes instead of working it out,
/// and stopping where `stop` says (with `refuses` for [`Stop::at_in_flight`]).
///
/// The caller's index must list its nodes in name order: the nodes are then put in order by it,
/// without comparing names.
pub fn solve_shared<'a>(
    mut input: SolverInput<'a>,
    shared: Option<&'a dyn SharedNodes>,
    stop: Stop,
    refuses: Option<Refuses<'_>>,
) -> SolverOutput {
    sort_pools_and_classes(&mut input);
    let indexed = match shared {
        Some(s) => {
            let index = s.index(&input.nodes);
            let mut pairs: Vec<_> = input.nodes.iter().copied().zip(index).collect();
            if pairs.iter().all(|(_, at)| at.is_some()) {
                pairs.sort_unstable_by_key(|(_, at)| *at);
            } else {
                pairs.sort_by(|a, b| a.0.node.name.cmp(&b.0.node.name));
            }
            let (nodes, index): (Vec<_>, Vec<_>) = pairs.into_iter().unzip();
            input.nodes = nodes;
            Some((s, index))
        }
        None => {
            input.nodes.sort_by(|a, b| a.node.name.cmp(&b.node.name));
            None
        }
    };
    let (pools, classes, nodes) = (input.pools, input.classes, input.nodes);
    let mut solver = Solver::new(pools, classes, nodes, &input.bystanders, indexed);
    solver.stop = stop;
    solver.run_until(input.previous, refuses.filter(|_| stop.at_in_flight));
    solver.finish(false)
}

/// Sorts the input as every run takes it: NodePools by weight, then name; classes largest first
/// (CPU, then memory), then by id; nodes by name.
fn sorted(input: &mut SolverInput<'_>) {
    sort_pools_and_classes(input);
    input.nodes.sort_by(|a, b| a.node.name.cmp(&b.node.name));
}

/// [`sorted`] without the nodes.
fn sort_pools_and_classes(input: &mut SolverInput<'_>) {
    input.pools.sort_by(|a, b| {
        b.nodepool
            .weight
            .cmp(&a.nodepool.weight)
            .then_with(|| a.nodepool.name.cmp(&b.nodepool.name))
    });
    // Class ids are unique, so the order is total and an unstable sort gives it.
    input.classes.sort_unstable_by(|a, b| {
        let (ra, rb) = (&a.class.scheduling.requests, &b.class.scheduling.requests);
        rb.cpu
            .cmp(&ra.cpu)
            .then(rb.memory.cmp(&ra.memory))
            .then(a.id.cmp(&b.id))
    });
}

/// The zones (or capacity types, by `key`) of a type's available offerings the filter admits.
fn offering_values<'a>(
    it: &'a InstanceType,
    key: &'a str,
    filter: &'a OfferingFilter<'_>,
) -> impl Iterator<Item = &'a str> + 'a {
    it.offerings
        .iter()
        .filter(|o| o.available && filter.allows(o))
        .map(move |o| {
            if key == ZONE {
                o.zone.as_str()
            } else {
                o.capacity_type.as_str()
            }
        })
}

/// Per pool (in `pools`' order), the bitset of the class's compatible types; `None` where it
/// may not use the pool or the pool cannot launch.
fn class_bits(pools: &[&PoolTypes], c: &ClassInput<'_>) -> Vec<Option<Vec<u64>>> {
    let mut per_pool: Vec<Option<Vec<u64>>> = vec![None; pools.len()];
    for (name, types) in &c.compat.pools {
        if let Some(p) = pools.iter().position(|p| p.nodepool.name == *name) {
            if pools[p].not_ready.is_none() {
                per_pool[p] = Some(bitset(types, pools[p].types.len()));
            }
        }
    }
    per_pool
}

/// The values `nodes` carry for label `key`, each with the indices of the nodes that carry it,
/// in the order first met. `known(i)` may tell node `i`'s value by a number instead (`Some(None)`:
/// the node has no such label), so that its label map is read only for the first node of each
/// value.
fn node_values_of<'a>(
    nodes: &[&'a NodeState],
    key: &str,
    known: impl Fn(usize) -> Option<Option<u32>>,
) -> NodeValues<'a> {
    let mut values: NodeValues<'a> = Vec::new();
    // By the number standing for a value, its place in `values`.
    let mut numbered: Vec<(u32, usize)> = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let id = known(i);
        if let Some(Some(id)) = id {
            if let Some(&(_, at)) = numbered.iter().find(|(seen, _)| *seen == id) {
                values[at].1.push(i);
                continue;
            }
        }
        if id == Some(None) {
            continue;
        }
        let Some(v) = n.node.labels.get(key) else {
            continue;
        };
        let at = match values.iter().position(|(seen, _)| *seen == v.as_str()) {
            Some(at) => {
                values[at].1.push(i);
                at
            }
            None => {
                values.push((v.as_str(), vec![i]));
                values.len() - 1
            }
        };
        if let Some(Some(id)) = id {
            numbered.push((id, at));
        }
    }
    values
}

fn bitset(indices: &[u32], len: usize) -> Vec<u64> {
    let mut bits = vec![0u64; len.div_ceil(64)];
    for &i in indices {
        if let Some(w) = bits.get_mut(i as usize / 64) {
            *w |= 1 << (i % 64);
        }
    }
    bits
}

fn has_bit(bits: &[u64], i: u32) -> bool {
    bits.get(i as usize / 64)
        .is_some_and(|w| w & (1 << (i % 64)) != 0)
}

impl<'a> Solver<'a> {
    fn new(
        pools: Vec<&'a PoolTypes>,
        classes: Vec<ClassInput<'a>>,
        nodes: Vec<&'a NodeState>,
        bystanders: &[&'a NodeState],
        shared: Option<(&'a dyn SharedNodes, Vec<Option<u32>>)>,
    ) -> Self {
        let compat_bits: Vec<Vec<Option<Vec<u64>>>> =
            classes.iter().map(|c| class_bits(&pools, c)).collect();
        let mut topo = Topology::default();
        let mut class_topo: Vec<ClassTopology> = classes
            .iter()
            .map(|c| topo.class_constraints(c.class, !c.compat.dropped_node_preference))
            .collect();
        for (t, c) in class_topo.iter_mut().zip(&classes) {
            t.member_of = topo.memberships(c.class);
        }
        let mut group_totals = vec![0i64; topo.groups.len()];
        let mut bins = Vec::with_capacity(nodes.len());
        let (shared, index) = match shared {
            Some((s, index)) => (Some(s), Some(index)),
            None => (None, None),
        };
        // The groups that count a pod, by its namespace and labels: a cluster's nodes share a
        // few label sets, and matching each pod entry against every selector was most of a
        // whole-cluster disruption simulation.
        let mut pod_groups: rustc_hash::FxHashMap<&LabelSet, Vec<usize>> =
            rustc_hash::FxHashMap::default();
        let counted: Option<Vec<Rc<Vec<i64>>>> =
            shared.map(|s| topo.groups.iter().map(|g| s.counts(g)).collect());
        // A node's count of a zone-like group is read only to sum its domain's below: kept by
        // node here rather than in its bin's map, which then holds only what placements add
        // (a map entry per node and group was a fifth of a whole-cluster simulation's setup).
        let mut zone_counts: Vec<Vec<i64>> = topo
            .groups
            .iter()
            .map(|g| {
                if g.per_node() {
                    Vec::new()
                } else {
                    vec![0; nodes.len()]
                }
            })
            .collect();
        let mut count_on = |bin: &mut Bin, i: usize, g: usize, count: i64| {
            group_totals[g] += count;
            match zone_counts[g].get_mut(i) {
                Some(c) => *c += count,
                None => *bin.group_counts.entry(g).or_insert(0) += count,
            }
        };
        for (i, n) in nodes.iter().enumerate() {
            let mut bin = Bin {
                kind: BinKind::Existing { node: i },
                origin: None,
                used: n.used.clone(),
                headroom: (0, 0),
                limit: None,
                type_max: None,
                classes: Vec::new(),
                group_counts: BTreeMap::new(),
                anti_groups: BTreeSet::new(),
            };
            let at = index.as_ref().and_then(|idx| idx[i]);
            match (&counted, at) {
                (Some(counted), Some(at)) => {
                    for (g, per_node) in counted.iter().enumerate() {
                        let count = per_node.get(at as usize).copied().unwrap_or(0);
                        if count != 0 {
                            count_on(&mut bin, i, g, count);
                        }
                    }
                }
                _ if topo.groups.is_empty() => {}
                _ => {
                    for (set, count) in n.pods.iter() {
                        let groups = pod_groups.entry(set).or_insert_with(|| {
                            (0..topo.groups.len())
                                .filter(|&g| {
                                    topo.groups[g].counts_pod(set.namespace(), set.labels())
                                })
                                .collect()
                        });
                        for &g in groups.iter() {
                            count_on(&mut bin, i, g, *count);
                        }
                    }
                }
            }
            bins.push(bin);
        }
        // Zone-like groups count their pods per value of their key: the nodes are visited value
        // by value (found once per key, from `shared` when given), each group's count summed
        // before it is added.
        let mut node_values: Vec<(String, Rc<NodeValues<'a>>)> = Vec::new();
        for (g, counts) in zone_counts.iter().enumerate() {
            if topo.groups[g].per_node() {
                continue;
            }
            let key = topo.groups[g].key.clone();
            let values = match node_values.iter().find(|(k, _)| *k == key) {
                Some((_, values)) => Rc::clone(values),
                None => {
                    let ids = shared.map(|s| s.label_values(&key));
                    let at = |i: usize| {
                        let at = index.as_ref().and_then(|idx| idx[i])?;
                        ids.as_ref()
                            .map(|ids| ids.get(at as usize).copied().flatten())
                    };
                    let values = Rc::new(node_values_of(&nodes, &key, at));
                    node_values.push((key, Rc::clone(&values)));
                    values
                }
            };
            for (v, on) in values.iter() {
                let sum: i64 = on.iter().map(|&i| counts[i]).sum();
                if sum != 0 {
                    topo.add(g, v, sum);
                }
            }
        }
        let limits = node_limits(&pools, &nodes, bystanders);
        let demand = pending_demand(&pools, &classes, &compat_bits);
        let touched = vec![false; classes.len()];
        let mut solver = Solver {
            pools,
            classes,
            nodes,
            demand,
            compat_bits,
            topo,
            class_topo,
            group_totals,
            limits,
            bins,
            failures: Vec::new(),
            taken: shared.map(|s| s.names()),
            cheapest: shared.map(|s| s.cheapest()).unwrap_or_default(),
            shared,
            index: index.unwrap_or_default(),
            claimed: BTreeSet::new(),
            touched,
            relaxed: Vec::new(),
            previous_launches: &[],
            previous_names: None,
            offer_values: std::cell::OnceCell::new(),
            node_values: RefCell::new(node_values),
            stop: Stop::NEVER,
        };
        for b in 0..solver.bins.len() {
            solver.refresh_headroom(b);
        }
        solver
    }

    /// Seeds the run with the previous plan, if any, and places every copy not seeded.
    fn run(&mut self, previous: Option<Previous<'a>>) {
        self.run_until(previous, None);
    }

    /// [`Solver::run`], stopping where [`Solver::stop`] says; `refuses` answers for the
    /// leftovers.
    fn run_until(&mut self, previous: Option<Previous<'a>>, refuses: Option<Refuses<'_>>) {
        let seeded = match previous {
            Some(previous) => self.seed(previous),
            None => vec![0; self.classes.len()],
        };
        let mut leftovers: Vec<(ClassId, i64)> = Vec::new();
        for (ci, seeded) in seeded.into_iter().enumerate() {
            self.place_class_relaxing(ci, self.classes[ci].count - seeded);
            if self.should_stop() {
                break;
            }
            let Some(refuses) = refuses else {
                continue;
            };
            let left = self.left_over(ci);
            if left > 0 {
                leftovers.push((self.classes[ci].id, left));
                if refuses(&leftovers) {
                    break;
                }
            }
        }
    }

    /// The copies of class `ci` on new NodeClaims or failed.
    fn left_over(&self, ci: usize) -> i64 {
        let on_new: i64 = self.bins[self.nodes.len().min(self.bins.len())..]
            .iter()
            .flat_map(|b| &b.classes)
            .filter(|(c, _)| *c == ci)
            .map(|(_, n)| n)
            .sum();
        let id = self.classes[ci].id;
        let failed: i64 = self
            .failures
            .iter()
            .filter(|f| f.class == id)
            .map(|f| f.count)
            .sum();
        on_new + failed
    }

    /// Whether the run has reached what [`Solver::stop`] stops at. New bins come after the
    /// existing nodes' and each holds a pod once opened, so they are counted by length.
    fn should_stop(&self) -> bool {
        (self.stop.at_failure && !self.failures.is_empty())
            || self
                .stop
                .at_new_nodeclaims
                .is_some_and(|n| self.bins.len().saturating_sub(self.nodes.len()) >= n)
    }

    fn fail(&mut self, ci: usize, count: i64, reason: Unschedulable) {
        if count > 0 {
            self.failures.push(Failure {
                class: self.classes[ci].id,
                count,
                reason,
            });
        }
    }

    /// The values a label-keyed domain can take for a class: from the offerings and labels of
    /// its compatible types, and from existing nodes it could use.
    fn domains(&self, ci: usize, key: &str, reqs: &Requirements) -> BTreeSet<String> {
        // A handful of distinct values among thousands of offerings: each value is looked for
        // in the short list found so far before the costlier checks, and copied once at the end
        // (a whole-cluster disruption simulation calls this per spread class and chunk).
        let mut found: Vec<&str> = Vec::new();
        let filter = OfferingFilter::new(reqs);
        let offering_key = key == ZONE || key == CAPACITY_TYPE;
        let wanted: Vec<&str> = if offering_key {
            let [zones, capacity_types] = self.offer_values();
            let all = if key == ZONE { zones } else { capacity_types };
            all.iter()
                .copied()
                .filter(|v| reqs.allows(key, v))
                .collect()
        } else {
            Vec::new()
        };
        'pools: for (p, bits) in self.compat_bits[ci].iter().enumerate() {
            let Some(bits) = bits else { continue };
            for (t, pt) in self.pools[p].types.iter().enumerate() {
                if !has_bit(bits, t as u32) {
                    continue;
                }
                let it = &pt.instance_type;
                if key == ZONE || key == CAPACITY_TYPE {
                    for o in &it.offerings {
                        let v = if key == ZONE {
                            o.zone.as_str()
                        } else {
                            o.capacity_type.as_str()
                        };
                        if !found.contains(&v) && o.available && filter.allows(o) {
                            found.push(v);
                        }
                    }
                    if wanted.iter().all(|v| found.contains(v)) {
                        break 'pools;
                    }
                } else if let Some(r) = it.requirements.get(key) {
                    if !r.complement {
                        for v in &r.values {
                            if !found.contains(&v.as_str()) && reqs.allows(key, v) {
                                found.push(v);
                            }
                        }
                    }
                } else if let Some(v) = self.pools[p].nodepool.template_labels.get(key) {
                    if !found.contains(&v.as_str()) && reqs.allows(key, v) {
                        found.push(v);
                    }
                }
            }
        }
        let tolerations = &self.classes[ci].class.scheduling.tolerations;
        for (v, nodes) in self.node_values(key).iter() {
            if found.contains(v) {
                continue;
            }
            let usable = nodes.iter().map(|&i| self.nodes[i]).any(|n| {
                !n.node.unschedulable
                    && first_untolerated(&n.node.taints, tolerations).is_none()
                    && reqs.matches_labels(&n.node.labels)
            });
            if usable {
                found.push(v);
            }
        }
        found.into_iter().map(str::to_string).collect()
    }

    /// The values the nodes' labels take for `key`, each with the nodes (by index) that carry
    /// it, found at the first call for the key: a class then checks a node only for a value it
    /// has not found yet, not each of thousands of nodes per spread and chunk.
    fn node_values(&self, key: &str) -> Rc<NodeValues<'a>> {
        let mut cache = self.node_values.borrow_mut();
        if let Some((_, values)) = cache.iter().find(|(k, _)| k == key) {
            return Rc::clone(values);
        }
        let values = Rc::new(node_values_of(&self.nodes, key, |_| None));
        cache.push((key.to_string(), Rc::clone(&values)));
        values
    }

    /// [`Solver::offer_values`], found at the first call.
    fn offer_values(&self) -> &[Vec<&'a str>; 2] {
        self.offer_values.get_or_init(|| {
            let mut values: [Vec<&'a str>; 2] = [Vec::new(), Vec::new()];
            let pools: &[&'a PoolTypes] = &self.pools;
            for pool in pools {
                for pt in &pool.types {
                    for o in &pt.instance_type.offerings {
                        for (found, v) in values.iter_mut().zip([&o.zone, &o.capacity_type]) {
                            if !found.contains(&v.as_str()) {
                                found.push(v.as_str());
                            }
                        }
                    }
                }
            }
            values
        })
    }

    /// The domains of existing nodes whose labels `reqs` accept, cordoned and tainted ones
    /// included: a topology spread's skew is measured against them even where no NodePool can
    /// add capacity any more (Kubernetes' default nodeTaintsPolicy Ignore and nodeAffinityPolicy
    /// Honor; Karpenter's `countDomains` registers them the same way), and those the class's
    /// `counted_domains` bring from nodes outside this run.
    fn counted_domains(&self, ci: usize, key: &str, reqs: &Requirements) -> BTreeSet<String> {
        let elsewhere = self.classes[ci]
            .counted_domains
            .iter()
            .filter(|(k, v)| k == key && reqs.allows(key, v))
            .map(|(_, v)| v.clone());
        self.node_values(key)
            .iter()
            .filter(|(_, nodes)| {
                nodes
                    .iter()
                    .any(|&i| reqs.matches_labels(&self.nodes[i].node.labels))
            })
            .map(|(v, _)| v.to_string())
            .chain(elsewhere)
            .collect()
    }

    /// Places the class's copies holding its preferences as constraints; the copies that fail
    /// are tried again with the next preference dropped (Karpenter relaxes a pod one step per
    /// failed attempt), and only the last attempt's failures stand.
    fn place_class_relaxing(&mut self, ci: usize, copies: i64) {
        let mut left = copies;
        loop {
            let mark = self.failures.len();
            self.place_class(ci, left);
            let failed: i64 = self.failures[mark..].iter().map(|f| f.count).sum();
            if failed == 0 || self.class_topo[ci].soft.is_empty() {
                return;
            }
            if !self.relaxed.iter().any(|(c, _)| *c == ci) {
                self.relaxed.push((ci, self.class_topo[ci].clone()));
            }
            self.class_topo[ci].relax();
            self.failures.truncate(mark);
            left = failed;
        }
    }

    fn place_class(&mut self, ci: usize, n: i64) {
        if n <= 0 {
            return;
        }
        if self.compat_bits[ci].iter().all(Option::is_none) && self.nodes.is_empty() {
            let reason = self.no_nodepool_reason(ci);
            self.fail(ci, n, reason);
            return;
        }
        let mut reqs = self.classes[ci].compat.requirements.clone();
        let topo = self.class_topo[ci].clone();
        let mut left = n;

        // Required pod affinity to a zone-like domain: go where the selected pods are; a class
        // that selects itself and has no peers yet picks one domain for all its copies.
        for &g in &topo.affinity {
            let group = self.topo.groups[g].clone();
            if group.per_node() {
                continue;
            }
            let present = self.topo.occupied(g);
            if !present.is_empty() {
                reqs.add(group.key.clone(), Requirement::finite(present));
            } else if topo.member_of.contains(&g) {
                let domains = self.domains(ci, &group.key, &reqs);
                let Some(first) = self.cheapest_domain(ci, &group.key, &reqs, &domains) else {
                    self.fail(
                        ci,
                        left,
                        Unschedulable::NoAffinityDomain {
                            key: group.key.clone(),
                        },
                    );
                    return;
                };
                reqs.add(group.key.clone(), Requirement::single(first));
            } else {
                self.fail(
                    ci,
                    left,
                    Unschedulable::NoAffinityPeer {
                        selector: group.selector.requirements.clone(),
                        key: group.key.clone(),
                    },
                );
                return;
            }
        }
        // Required anti-affinity to a zone-like domain: avoid domains with selected pods; a class
        // that selects itself gets one copy per free domain.
        let mut chunks: Option<Vec<(Requirements, i64)>> = None;
        for &g in &topo.anti_affinity {
            let group = self.topo.groups[g].clone();
            if group.per_node() {
                continue;
            }
            let occupied = self.topo.occupied(g);
            if !occupied.is_empty() {
                reqs.add(
                    group.key.clone(),
                    Requirement {
                        complement: true,
                        values: occupied,
                        ..Requirement::any()
                    },
                );
            }
            if topo.member_of.contains(&g) && chunks.is_none() {
                let free = self.domains(ci, &group.key, &reqs);
                let mut list = Vec::new();
                for d in free.into_iter().take(left as usize) {
                    let mut r = reqs.clone();
                    r.add(group.key.clone(), Requirement::single(d));
                    list.push((r, 1));
                }
                chunks = Some(list);
            }
        }
        // Topology spread over a zone-like key: deal copies over domains by water-filling. When
        // copies are already dealt (by anti-affinity or an earlier spread, e.g. zones before
        // capacity types), each chunk is dealt over this key's domains in turn, counting what
        // earlier chunks took, so that every constraint holds.
        for &(g, max_skew, min_domains) in &topo.spreads {
            let group = self.topo.groups[g].clone();
            if group.per_node() {
                continue;
            }
            let domains = self.domains(ci, &group.key, &reqs);
            let counted = self.counted_domains(ci, &group.key, &reqs);
            let everywhere = SpreadDomains {
                domains: &domains,
                counted_only: &counted,
            };
            if !topo.member_of.contains(&g) {
                // Pods that are not counted may go to any domain within the skew.
                let min = everywhere
                    .min_count(&self.topo.counts[g], &BTreeMap::new())
                    .unwrap_or(0);
                let ok = Requirement::finite(
                    domains
                        .into_iter()
                        .filter(|d| self.topo.count(g, d) - min <= max_skew)
                        .collect(),
                );
                reqs.add(group.key.clone(), ok.clone());
                for (r, _) in chunks.iter_mut().flatten() {
                    r.add(group.key.clone(), ok.clone());
                }
                continue;
            }
            let below_min_domains = min_domains.is_some_and(|m| (everywhere.count() as i64) < m);
            // A chunk may reach only some of the domains; the skew is still measured against
            // all of them.
            let all: BTreeSet<String> = domains.union(&counted).cloned().collect();
            let mut counts = self.topo.counts[g].clone();
            let mut dealt = Vec::new();
            for (r, q) in chunks.take().unwrap_or_else(|| vec![(reqs.clone(), left)]) {
                let reach = self.domains(ci, &group.key, &r);
                let quotas = water_fill(
                    &counts,
                    &SpreadDomains {
                        domains: &reach,
                        counted_only: &all,
                    },
                    q,
                    max_skew,
                    min_domains,
                );
                let floor = if below_min_domains {
                    0
                } else {
                    everywhere.min_count(&counts, &quotas).unwrap_or(0)
                };
                for (d, n) in quotas {
                    let now = counts.get(&d).copied().unwrap_or(0);
                    let n = n.min(floor + max_skew - now);
                    if n <= 0 {
                        continue;
                    }
                    *counts.entry(d.clone()).or_insert(0) += n;
                    let mut r = r.clone();
                    r.add(group.key.clone(), Requirement::single(d));
                    dealt.push((r, n));
                }
            }
            chunks = Some(dealt);
        }
        match chunks {
            None => {
                left = self.place_chunk(ci, &reqs, left);
                if left > 0 {
                    let reason = self.last_reason(ci);
                    self.fail(ci, left, reason);
                }
            }
            Some(list) => {
                let dealt: i64 = list.iter().map(|(_, q)| q).sum();
                let mut unplaced = 0;
                for (r, q) in list {
                    unplaced += self.place_chunk(ci, &r, q);
                }
                if unplaced > 0 {
                    let reason = self.last_reason(ci);
                    self.fail(ci, unplaced, reason);
                }
                if left > dealt {
                    self.fail(ci, left - dealt, Unschedulable::Topology);
                }
                left = 0;
            }
        }
        let _ = left;
    }

    /// The reason recorded by the last failed attempt to open a bin for this class.
    fn last_reason(&self, ci: usize) -> Unschedulable {
        self.open_reason(ci)
    }

    fn no_nodepool_reason(&self, ci: usize) -> Unschedulable {
        let c = self.classes[ci].compat;
        if !c.rejections.is_empty() {
            return Unschedulable::NodePools {
                rejections: c.rejections.clone(),
            };
        }
        if self.pools.is_empty() {
            return Unschedulable::NoNodePool;
        }
        Unschedulable::NodePools {
            rejections: self
                .pools
                .iter()
                .filter_map(|p| {
                    p.not_ready.as_ref().map(|r| {
                        (
                            p.nodepool.name.clone(),
                            PoolRejection::NotReady { reason: r.clone() },
                        )
                    })
                })
                .collect(),
        }
    }

    /// Why no new NodeClaim could be opened for the class, pool by pool.
    fn open_reason(&self, ci: usize) -> Unschedulable {
        let mut rejections = Vec::new();
        for (p, bits) in self.compat_bits[ci].iter().enumerate() {
            let pool = self.pools[p];
            let Some(bits) = bits else { continue };
            // Limits are the reason when some compatible type has room for the pod but every
            // such type is larger than what the limits leave (the filter `open` applies).
            if let Some(left) = &self.limits[p] {
                if let Some(r) = limits_rejection(pool, bits, left, self.classes[ci].class) {
                    rejections.push((pool.nodepool.name.clone(), r));
                    continue;
                }
            }
            rejections.push((
                pool.nodepool.name.clone(),
                PoolRejection::NoRoomUnderTopology,
            ));
        }
        if rejections.is_empty() {
            return self.no_nodepool_reason(ci);
        }
        Unschedulable::NodePools { rejections }
    }

    fn cheapest_domain(
        &self,
        ci: usize,
        key: &str,
        reqs: &Requirements,
        domains: &BTreeSet<String>,
    ) -> Option<String> {
        let mut best: Option<(i64, String)> = None;
        for d in domains {
            let mut r = reqs.clone();
            r.add(key.to_string(), Requirement::single(d.clone()));
            let filter = OfferingFilter::new(&r);
            let mut price = i64::MAX;
            for (p, bits) in self.compat_bits[ci].iter().enumerate() {
                let Some(bits) = bits else { continue };
                let cheapest = self.cheapest.under(self.pools[p], &filter);
                for t in 0..self.pools[p].types.len() as u32 {
                    if has_bit(bits, t) {
                        if let Some(o) = cheapest.of(t) {
                            price = price.min(o.price.0);
                        }
                    }
                }
            }
            if best.as_ref().is_none_or(|(bp, _)| price < *bp) {
                best = Some((price, d.clone()));
            }
        }
        best.map(|(_, d)| d)
    }

    /// Places up to `n` copies with requirements `reqs`; returns how many are left over.
    fn place_chunk(&mut self, ci: usize, reqs: &Requirements, n: i64) -> i64 {
        let mut left = n;
        let req = self.classes[ci].class.scheduling.requests.clone();
        let matches = self.shared.map(|s| s.matches(reqs));
        for b in 0..self.bins.len() {
            if left == 0 {
                return 0;
            }
            let bin = &self.bins[b];
            if req.cpu > bin.headroom.0 || req.memory > bin.headroom.1 {
                continue;
            }
            if let Some(fit) = self.fit(b, ci, reqs, left, false, matches.as_ref()) {
                left -= fit.copies;
                self.commit(b, ci, fit);
            }
        }
        while left > 0 {
            match self.open(ci, reqs, left) {
                Some(k) => left -= k,
                None => break,
            }
        }
        left
    }

    /// Caps from per-node topology: hostname spread, anti-affinity (both ways), hostname affinity.
    fn node_topology_cap(&self, bin: &Bin, ci: usize, cap: i64) -> i64 {
        let t = &self.class_topo[ci];
        let mut cap = cap;
        for &g in &t.anti_affinity {
            if self.topo.groups[g].per_node() {
                if bin.group_count(g) > 0 {
                    return 0;
                }
                if t.member_of.contains(&g) {
                    cap = cap.min(1);
                }
            }
        }
        if bin.anti_groups.iter().any(|g| t.member_of.contains(g)) {
            return 0;
        }
        for &(g, skew, _) in &t.spreads {
            if self.topo.groups[g].per_node() && t.member_of.contains(&g) {
                cap = cap.min(skew - bin.group_count(g));
            }
        }
        for &g in &t.affinity {
            if self.topo.groups[g].per_node() {
                let anywhere = self.group_totals[g] > 0;
                if anywhere && bin.group_count(g) == 0 {
                    return 0;
                }
                if !anywhere && !t.member_of.contains(&g) {
                    return 0;
                }
            }
        }
        cap.max(0)
    }

    /// Whether node `node`'s labels match `reqs`, read from `matches` (the same requirements'
    /// answers the caller shares) when the node has an index there, and written to it.
    fn labels_match(
        &self,
        node: usize,
        reqs: &Requirements,
        matches: Option<&LabelMatches>,
    ) -> bool {
        let labels = &self.nodes[node].node.labels;
        let (Some(matches), Some(Some(at))) = (matches, self.index.get(node)) else {
            return reqs.matches_labels(labels);
        };
        let at = *at as usize;
        if let Some(Some(known)) = matches.borrow().get(at) {
            return *known;
        }
        let answer = reqs.matches_labels(labels);
        if let Some(slot) = matches.borrow_mut().get_mut(at) {
            *slot = Some(answer);
        }
        answer
    }

    /// How many copies of the class bin `b` takes and what it becomes. A bin being opened
    /// (`opening`) takes the number of copies with the lowest price per copy rather than the
    /// most copies the largest type could hold: FFD's habit of filling the first NodeClaim to
    /// the largest type can cost more than two smaller NodeClaims.
    fn fit(
        &self,
        b: usize,
        ci: usize,
        reqs: &Requirements,
        left: i64,
        opening: bool,
        matches: Option<&LabelMatches>,
    ) -> Option<Fit> {
        let bin = &self.bins[b];
        let cap = self.node_topology_cap(bin, ci, left);
        if cap == 0 {
            return None;
        }
        let class = &self.classes[ci];
        let req = &class.class.scheduling.requests;
        match &bin.kind {
            BinKind::Existing { node } => {
                let n = &self.nodes[*node].node;
                if n.unschedulable
                    || first_untolerated(&n.taints, &class.class.scheduling.tolerations).is_some()
                    || !self.labels_match(*node, reqs, matches)
                {
                    return None;
                }
                let free = n.allocatable.sub(&bin.used);
                let k = cap.min(req.copies_in(&free));
                (k > 0).then(|| Fit {
                    copies: k,
                    types: Vec::new(),
                    requirements: None,
                    limit: None,
                })
            }
            BinKind::New {
                pool,
                types,
                requirements,
            } => {
                let bits = self.compat_bits[ci][*pool].as_ref()?;
                let cap = match &bin.limit {
                    Some(limit) => cap.min(req.copies_in_remaining(limit, &bin.used)),
                    None => cap,
                };
                if cap <= 0 {
                    return None;
                }
                requirements.intersects(reqs).ok()?;
                // Most classes add nothing to a bin's requirements: skip building a copy then.
                let adds = reqs.0.iter().any(|(k, r)| {
                    requirements
                        .get(k)
                        .is_none_or(|br| br.intersection(r) != *br)
                });
                let merged = if adds {
                    std::borrow::Cow::Owned(requirements.intersection(reqs))
                } else {
                    std::borrow::Cow::Borrowed(&**requirements)
                };
                self.best_types(*pool, types, bits, &merged, &bin.used, req, cap, opening)
                    .map(|(copies, types, limit)| Fit {
                        copies,
                        types,
                        requirements: adds.then(|| merged.into_owned()),
                        limit,
                    })
            }
        }
    }

    /// The most copies some candidate type takes, and the types that take that many (honouring
    /// minValues, which may force fewer copies to keep enough types). A NodeClaim being opened
    /// takes as many as its fill type holds (see `shape`), and that type's room is returned as
    /// its limit.
    #[allow(clippy::too_many_arguments)]
    fn best_types(
        &self,
        pool: usize,
        types: &[u32],
        bits: &[u64],
        merged: &Requirements,
        used: &Resources,
        req: &Resources,
        cap: i64,
        opening: bool,
    ) -> Option<(i64, Vec<u32>, Option<Resources>)> {
        let pt = &self.pools[pool].types;
        let offerings = OfferingFilter::new(merged);
        let cheapest = self.cheapest.under(self.pools[pool], &offerings);
        let mut fits: Vec<(u32, i64)> = Vec::new();
        for &t in types {
            if !has_bit(bits, t) {
                continue;
            }
            let Some(p) = pt.get(t as usize) else {
                continue;
            };
            // Cheap resource check first; the offering check looks at every offering.
            let k = cap.min(req.copies_in_remaining(&p.available, used));
            if k <= 0 || cheapest.of(t).is_none() {
                continue;
            }
            fits.push((t, k));
        }
        if opening {
            if let Some((fill, k)) = shape::fill_type(&fits, pt, &self.demand[pool], &cheapest) {
                let chosen: Vec<u32> = fits
                    .iter()
                    .filter(|(_, kt)| *kt >= k)
                    .map(|(t, _)| *t)
                    .collect();
                if self.min_values_met(pool, &chosen, merged) {
                    let limit = pt.get(fill as usize).map(|p| p.available.clone());
                    return Some((k, chosen, limit));
                }
            }
        }
        let mut levels: Vec<i64> = fits.iter().map(|(_, k)| *k).collect();
        levels.sort_unstable_by(|a, b| b.cmp(a));
        levels.dedup();
        // (price per hour, copies, types) of the best level so far.
        let mut best: Option<(i64, i64, Vec<u32>)> = None;
        for k in levels {
            let chosen: Vec<u32> = fits
                .iter()
                .filter(|(_, kt)| *kt >= k)
                .map(|(t, _)| *t)
                .collect();
            if !self.min_values_met(pool, &chosen, merged) {
                continue;
            }
            if !opening {
                return Some((k, chosen, None));
            }
            let price = chosen
                .iter()
                .filter_map(|&t| cheapest.of(t))
                .map(|o| o.price.0)
                .min()
                .unwrap_or(i64::MAX);
            // Lower price per copy wins; ties keep more copies (levels go from most copies down).
            let better = match &best {
                None => true,
                Some((bp, bk, _)) => (price as i128) * (*bk as i128) < (*bp as i128) * (k as i128),
            };
            if better {
                best = Some((price, k, chosen));
            }
        }
        best.map(|(_, k, types)| (k, types, None))
    }

    fn min_values_met(&self, pool: usize, types: &[u32], merged: &Requirements) -> bool {
        let filter = OfferingFilter::new(merged);
        for (key, r) in &merged.0 {
            let Some(min) = r.min_values else { continue };
            let mut values: BTreeSet<&str> = BTreeSet::new();
            for &t in types {
                let Some(pt) = self.pools[pool].types.get(t as usize) else {
                    continue;
                };
                let it = &pt.instance_type;
                if key == ZONE || key == CAPACITY_TYPE {
                    values.extend(offering_values(it, key, &filter));
                } else if key == dovetail_dataflow::model::labels::INSTANCE_TYPE {
                    values.insert(&it.name);
                } else if let Some(tr) = it.requirements.get(key) {
                    values.extend(tr.values.iter().filter(|v| r.has(v)).map(String::as_str));
                }
            }
            if (values.len() as u32) < min {
                return false;
            }
        }
        true
    }

    fn commit(&mut self, b: usize, ci: usize, fit: Fit) {
        {
            let bin = &mut self.bins[b];
            if let Some(origin) = bin.origin.as_mut() {
                origin.changed = true;
            }
            if let BinKind::New {
                types,
                requirements,
                ..
            } = &mut bin.kind
            {
                *types = fit.types.into();
                if let Some(r) = fit.requirements {
                    *requirements = Arc::new(r);
                }
                bin.type_max = None;
                if fit.limit.is_some() {
                    bin.limit = fit.limit;
                }
            }
        }
        self.add_copies(b, ci, fit.copies);
        self.refresh_headroom(b);
    }

    /// Puts `copies` copies of class `ci` into bin `b` (its use, its classes, and the topology
    /// counts), leaving its types and headroom as they are.
    fn add_copies(&mut self, b: usize, ci: usize, copies: i64) {
        self.touched[ci] = true;
        let req = self.classes[ci].class.scheduling.requests.times(copies);
        let member_of = &self.class_topo[ci].member_of;
        for (p, bits) in self.compat_bits[ci].iter().enumerate() {
            if bits.is_some() {
                // What goes below zero (copies seeded beyond a count) is ignored by `shape`.
                self.demand[p] = self.demand[p].sub(&req);
            }
        }
        let bin = &mut self.bins[b];
        bin.used.add_assign(&req);
        bin.add_class(ci, copies);
        for &g in member_of {
            *bin.group_counts.entry(g).or_insert(0) += copies;
        }
        bin.anti_groups
            .extend(self.class_topo[ci].refuses.iter().copied());
        for &g in member_of {
            self.group_totals[g] += copies;
            let group = &self.topo.groups[g];
            if group.per_node() {
                continue;
            }
            let key = group.key.clone();
            if let Some(domain) = self.bin_domain(b, &key) {
                self.topo.add(g, &domain, copies);
            }
        }
    }

    /// The single value of a label a bin is pinned to, if any.
    fn bin_domain(&self, b: usize, key: &str) -> Option<String> {
        let bin = &self.bins[b];
        match &bin.kind {
            BinKind::Existing { node } => self.nodes[*node].node.labels.get(key).cloned(),
            BinKind::New { requirements, .. } => requirements
                .get(key)
                .filter(|r| !r.complement && r.values.len() == 1)
                .and_then(|r| r.values.iter().next().cloned()),
        }
    }

    fn refresh_headroom(&mut self, b: usize) {
        if let (None, BinKind::New { pool, types, .. }) =
            (self.bins[b].type_max, &self.bins[b].kind)
        {
            let max = self.type_max(*pool, types);
            self.bins[b].type_max = Some(max);
        }
        let bin = &self.bins[b];
        let headroom = match &bin.kind {
            BinKind::Existing { node } => {
                let n = &self.nodes[*node].node;
                if n.unschedulable {
                    (-1, -1)
                } else {
                    let free = n.allocatable.sub(&bin.used);
                    (free.cpu, free.memory)
                }
            }
            BinKind::New { .. } => {
                let max = bin.type_max.unwrap_or((-1, -1));
                let mut h = (-1, -1);
                if max.0 >= 0 {
                    h = (
                        max.0.saturating_sub(bin.used.cpu),
                        max.1.saturating_sub(bin.used.memory),
                    );
                }
                if let Some(limit) = &bin.limit {
                    h.0 = h.0.min(limit.cpu - bin.used.cpu);
                    h.1 = h.1.min(limit.memory - bin.used.memory);
                }
                h
            }
        };
        self.bins[b].headroom = headroom;
    }

    /// The largest CPU and memory any of `types` (of pool `pool`) has available, or (-1, -1)
    /// when none is known.
    fn type_max(&self, pool: usize, types: &[u32]) -> (i64, i64) {
        let mut max = (-1, -1);
        for &t in types {
            if let Some(pt) = self.pools[pool].types.get(t as usize) {
                max.0 = max.0.max(pt.available.cpu);
                max.1 = max.1.max(pt.available.memory);
            }
        }
        max
    }

    /// Opens a NodeClaim for the class from the first NodePool (by weight) that can hold at
    /// least one copy; returns the copies placed.
    fn open(&mut self, ci: usize, reqs: &Requirements, left: i64) -> Option<i64> {
        for p in 0..self.pools.len() {
            if self.compat_bits[ci][p].is_none() {
                continue;
            }
            let pool = self.pools[p];
            let candidates: Vec<u32> = (0..pool.types.len() as u32)
                .filter(|&t| {
                    self.limits[p].as_ref().is_none_or(|left| {
                        let cap = &pool.types[t as usize].instance_type.capacity;
                        left.iter().all(|(r, v)| cap.get(r) <= *v)
                    })
                })
                .collect();
            if candidates.is_empty() {
                continue;
            }
            let mut requirements = pool.nodepool.requirements.clone();
            requirements.add(NODEPOOL, Requirement::single(pool.nodepool.name.clone()));
            self.bins
                .push(Bin::planned(p, candidates.into(), Arc::new(requirements)));
            let b = self.bins.len() - 1;
            match self.fit(b, ci, reqs, left, true, None) {
                Some(fit) => {
                    let copies = fit.copies;
                    self.commit(b, ci, fit);
                    self.charge_limits(b);
                    return Some(copies);
                }
                None => {
                    self.bins.pop();
                }
            }
        }
        None
    }

    /// Charges a planned bin's NodePool limits with its largest candidate type, as Karpenter
    /// does.
    fn charge_limits(&mut self, b: usize) {
        let BinKind::New { pool, types, .. } = &self.bins[b].kind else {
            return;
        };
        let pool_types = &self.pools[*pool].types;
        let Some(limits) = self.limits[*pool].as_mut() else {
            return;
        };
        for (r, v) in limits.iter_mut() {
            let largest = types
                .iter()
                .filter_map(|&t| pool_types.get(t as usize))
                .map(|pt| pt.instance_type.capacity.get(r))
                .max()
                .unwrap_or(0);
            *v -= largest;
        }
    }

    /// `name`, or a name derived from it, that no node, NodeClaim or other launch has, and
    /// that no existing NodeClaim could be mistaken to execute.
    fn claim_name(&mut self, name: String) -> String {
        let previous = self.previous_launches;
        let previous_names = self
            .previous_names
            .get_or_insert_with(|| previous.iter().map(|p| p.launch.name.as_str()).collect());
        let nodes = &self.nodes;
        let taken: &BTreeSet<String> = self.taken.get_or_insert_with(|| {
            Rc::new(
                nodes
                    .iter()
                    .flat_map(|n| std::iter::once(&n.node.name).chain(&n.node.nodeclaim))
                    .cloned()
                    .collect(),
            )
        });
        let executed_by = |set: &BTreeSet<String>, n: &str| {
            set.range(format!("{n}-")..)
                .take_while(|t| t.starts_with(n))
                .any(|t| executes(t, n))
        };
        let claimed = &self.claimed;
        let free = |n: &str| {
            !taken.contains(n)
                && !claimed.contains(n)
                && !previous_names.contains(n)
                && !executed_by(taken, n)
                && !executed_by(claimed, n)
        };
        let mut candidate = name.clone();
        let mut salt = 1u32;
        while !free(&candidate) {
            let (prefix, _) = name.rsplit_once('-').unwrap_or((name.as_str(), ""));
            candidate = format!(
                "{prefix}-{:010x}",
                dovetail_dataflow::stable_hash::stable_hash(&(&name, salt)) & 0xff_ffff_ffff
            );
            salt += 1;
        }
        self.claimed.insert(candidate.clone());
        candidate
    }

    /// The plan: a launch for every planned bin that changed, the previous launch kept for
    /// every one that did not, and the placements — every class's, or with `only_touched` only
    /// those of the classes this run put in or took out (the others' are as they were: their
    /// bins kept their order and names). The bins stay, for a run carried on from this one.
    fn finish(&mut self, only_touched: bool) -> SolverOutput {
        let mut out = SolverOutput {
            failures: self.failures.clone(),
            ..Default::default()
        };
        let mut ordinals: BTreeMap<u64, u32> = BTreeMap::new();
        let mut order = vec![0u32; self.classes.len()];
        let mut on_new = vec![0i64; self.classes.len()];
        let bins = std::mem::take(&mut self.bins);
        for bin in &bins {
            if bin.classes.is_empty() {
                continue;
            }
            let target = match &bin.kind {
                BinKind::Existing { node } => {
                    let n: &'a NodeState = self.nodes[*node];
                    Some(n.node.name.as_str())
                }
                BinKind::New {
                    pool,
                    types,
                    requirements,
                } => match &bin.origin {
                    Some(origin) if !origin.changed => {
                        out.kept.push(origin.launch);
                        out.order.push(Slot::Kept(origin.launch));
                        None
                    }
                    _ => {
                        let filter = OfferingFilter::new(requirements);
                        let mut l = launch::launch(
                            &self.cheapest.under(self.pools[*pool], &filter),
                            types,
                            requirements,
                            &bin.classes,
                            &self.classes,
                            &mut ordinals,
                        );
                        l.name = match &bin.origin {
                            Some(origin) => {
                                self.previous_launches[origin.launch].launch.name.clone()
                            }
                            None => self.claim_name(l.name),
                        };
                        out.order.push(Slot::Fresh(out.launches.len()));
                        out.launches.push(l);
                        out.launch_bins.push(PlannedBin::new(
                            types.clone(),
                            requirements.clone(),
                            bin.limit.clone(),
                            bin.type_max,
                        ));
                        None
                    }
                },
            };
            let is_new = matches!(bin.kind, BinKind::New { .. });
            for &(ci, count) in &bin.classes {
                if is_new {
                    on_new[ci] += count;
                }
                let o = order[ci];
                order[ci] += 1;
                if only_touched && !self.touched[ci] {
                    continue;
                }
                let target = match (target, out.order.last()) {
                    (Some(name), _) => name.to_string(),
                    (None, Some(Slot::Kept(li))) => self.previous_launches[*li].launch.name.clone(),
                    (None, Some(Slot::Fresh(i))) => out.launches[*i].name.clone(),
                    (None, None) => continue,
                };
                out.placements.push(Placement {
                    class: self.classes[ci].id,
                    target,
                    order: o,
                    count,
                });
            }
        }
        self.bins = bins;
        out.lower_bound = self.lower_bound(&on_new);
        if only_touched {
            out.touched = Some(
                (0..self.classes.len())
                    .filter(|&ci| self.touched[ci])
                    .map(|ci| self.classes[ci].id)
                    .collect(),
            );
        }
        out
    }

    /// The lower bound on the price of the copies put on new NodeClaims (`on_new`, per class):
    /// see `SolverOutput::lower_bound`.
    fn lower_bound(&self, on_new: &[i64]) -> dovetail_dataflow::model::Price {
        // A handful of resources: a list beats a map here, summed over every class per change.
        let mut bound: Vec<(&str, f64)> = Vec::new();
        for (c, &count) in self.classes.iter().zip(on_new) {
            if count == 0 {
                continue;
            }
            for (r, cost) in &c.compat.unit_cost {
                if cost.get() < f64::MAX {
                    let need = c.class.scheduling.requests.get(r) as f64;
                    let add = count as f64 * need * cost.get();
                    match bound.iter_mut().find(|(name, _)| *name == r.as_str()) {
                        Some((_, sum)) => *sum += add,
                        None => bound.push((r.as_str(), add)),
                    }
                }
            }
        }
        dovetail_dataflow::model::Price(
            bound.iter().fold(0.0f64, |a, (_, b)| a.max(*b)).floor() as i64
        )
    }
}

/// What each NodePool's limits leave after the nodes (taking pods or not) that belong to it.
fn node_limits(
    pools: &[&PoolTypes],
    nodes: &[&NodeState],
    bystanders: &[&NodeState],
) -> Vec<Option<BTreeMap<String, Milli>>> {
    pools
        .iter()
        .map(|p| {
            if p.nodepool.limits.is_empty() {
                return None;
            }
            let mut left = p.nodepool.limits.clone();
            for n in nodes.iter().chain(bystanders) {
                if n.node.labels.get(NODEPOOL) == Some(&p.nodepool.name) {
                    for (r, v) in left.iter_mut() {
                        *v -= n.node.limit_usage().get(r);
                    }
                }
            }
            Some(left)
        })
        .collect()
}

/// By pool: the requests of every pending copy of the classes that may use it.
fn pending_demand(
    pools: &[&PoolTypes],
    classes: &[ClassInput<'_>],
    compat_bits: &[Vec<Option<Vec<u64>>>],
) -> Vec<Resources> {
    let mut demand = vec![Resources::default(); pools.len()];
    for (c, per_pool) in classes.iter().zip(compat_bits) {
        let requests = c.class.scheduling.requests.times(c.count.max(0));
        for (p, bits) in per_pool.iter().enumerate() {
            if bits.is_some() {
                demand[p].add_assign(&requests);
            }
        }
    }
    demand
}

struct Fit {
    copies: i64,
    /// A planned bin's remaining candidate types (unused for existing nodes).
    types: Vec<u32>,
    /// A planned bin's new requirements, when the class narrowed them.
    requirements: Option<Requirements>,
    /// The room of the fill type of a bin being opened (see `shape`).
    limit: Option<Resources>,
}

/// The NodePool limit that keeps every type with room for the class out, if one does: the
/// resource, the limit, how much of it is used, and what the smallest fitting type needs.
fn limits_rejection(
    pool: &PoolTypes,
    bits: &[u64],
    left: &BTreeMap<String, Milli>,
    class: &PodClass,
) -> Option<PoolRejection> {
    let req = &class.scheduling.requests;
    let fitting: Vec<&InstanceType> = (0..pool.types.len())
        .filter(|&t| has_bit(bits, t as u32) && req.fits_in(&pool.types[t].available))
        .map(|t| &*pool.types[t].instance_type)
        .collect();
    let within = |it: &InstanceType| left.iter().all(|(r, v)| it.capacity.get(r) <= *v);
    if fitting.is_empty() || fitting.iter().any(|it| within(it)) {
        return None;
    }
    // The smallest fitting type (by CPU) names the limit that shuts it out.
    let smallest = fitting.iter().min_by_key(|it| it.capacity.cpu)?;
    let (resource, remaining) = left.iter().find(|(r, v)| smallest.capacity.get(r) > **v)?;
    let limit = pool
        .nodepool
        .limits
        .get(resource)
        .copied()
        .unwrap_or(*remaining);
    Some(PoolRejection::Limits {
        resource: resource.clone(),
        limit,
        used: limit - remaining,
        needs: smallest.capacity.get(resource),
    })
}
