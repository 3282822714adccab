//! Where a set of nodes' pods would go if those nodes went away: the packing solver run over
//! the rest of the cluster, with the NodePools open for replacements. The same solver as
//! provisioning, not a copy of it.
//!
//! Three things keep this cheap at ten thousand nodes without changing any answer:
//! - **Only useful destinations.** Nodes that cannot hold even the smallest of the pods are
//!   left out, unless a pod's spread or affinity counts pods everywhere.
//! - **Existing nodes in chunks.** The solver fills existing nodes first-fit in name order
//!   before it opens any NodeClaim, so that part runs chunk by chunk over the node list, each
//!   chunk taking what the ones before it left, stopping once every pod has a place; the
//!   costly new-NodeClaim part depends only on the leftovers and the NodePools.
//! - **A memo across evaluations.** A run's answer is a function of what it is given; results
//!   are kept by a stable hash of exactly that (the pods and the part of their compatibility
//!   the run reads, the nodes' fingerprints, and for new NodeClaims the NodePools and limits),
//!   so a change elsewhere in the cluster re-runs only the chunks that could see it. A
//!   candidate's whole walk over the chunks is kept too, and stands while the chunks it read
//!   are unchanged.

mod chunks;
mod fitting;
mod memo;
mod names;
mod taken;

pub use chunks::ends_chunk;
use chunks::{chunks, Chunk};
use fitting::Fitting;
pub use memo::Memo;
pub use names::NodeNames;
pub use taken::Taken;
use taken::{mix, removed_before, Removed};

use crate::solver::cheapest::CheapestOfferings;
use crate::solver::topology::Group;
use crate::solver::{
    solve, solve_shared, ClassInput, LabelMatches, LabelValues, Refuses, SharedNodes, SolverInput,
    SolverOutput, Stop,
};
use crate::types::{ClassId, Compatibility, NodeState, PodClass, PoolTypes};
use dovetail_dataflow::decisions::Placement;
use dovetail_dataflow::model::instance_type::OfferingFilter;
use dovetail_dataflow::model::labels::HOSTNAME;
use dovetail_dataflow::model::{LabelSet, Requirements, Resources, WhenUnsatisfiable};
use dovetail_dataflow::stable_hash::stable_hash;
use rustc_hash::FxHashMap as HashMap;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// A class of pods to place: its id, spec, compatibility and count.
type SimClass<'a> = (ClassId, &'a PodClass, &'a Compatibility, i64);

/// Everything a simulation reads, indexed once per evaluation.
pub struct World<'a> {
    pub pools: Vec<&'a PoolTypes>,
    pub classes: BTreeMap<ClassId, (&'a PodClass, &'a Compatibility)>,
    /// Nodes that can take pods (registered, schedulable, not disrupting), in name order.
    pub destinations: Vec<&'a NodeState>,
    /// Every other node (counts against NodePool limits only).
    pub others: Vec<&'a NodeState>,
    /// In-flight NodeClaims that could take pods once initialized, in name order.
    in_flight: Vec<&'a NodeState>,
    /// The other non-destinations with pods (cordoned, deleting, disrupting) and the in-flight
    /// NodeClaims, as nodes that take none: a whole-cluster run counts their pods in zone-like
    /// spread and affinity domains, as Karpenter's `topology.go` counts every bound pod,
    /// wherever its node stands.
    counted: Vec<NodeState>,
    /// A hash of the in-flight NodeClaims' states: while it stands, so does every answer about
    /// whether pods would land on one.
    pub in_flight_hash: u64,
    /// A hash of the counted nodes: while it stands, so does every whole-cluster run.
    pub counted_hash: u64,
    /// Free room on each destination (allocatable − used), in the same order.
    pub free: Vec<Resources>,
    /// A hash of everything about each destination the solver reads.
    fingerprints: Vec<u64>,
    /// The destinations cut into chunks for existing-node runs (see [`Chunk`]).
    chunks: Vec<Chunk>,
    /// Per class, a hash of its compatibility (it changes with the NodePools' offers).
    compat_hashes: BTreeMap<ClassId, u64>,
    /// Per class, a hash of what a run over existing nodes alone reads of its compatibility:
    /// the requirements nodes are matched against and the NodePool rejections a failure
    /// reports. Prices and offerings, which change often, are not in it.
    existing_hashes: BTreeMap<ClassId, u64>,
    /// A hash of the NodePools' offers and of every node's share of their limits.
    pools_hash: u64,
    /// A hash of every class's existing-run hash: while it stands, so does every
    /// [`World::existing_context`] (checked once per evaluation, not per candidate).
    pub existing_all: u64,
    /// A hash of the NodePools' offers and every class's compatibility: while it stands, so
    /// does every [`World::cheapest_launch_for_one`].
    pub offers_all: u64,
    /// Nodes whose allocatable counts against a NodePool limit (a simulation without them
    /// leaves more room under the limit).
    limited_nodes: BTreeSet<&'a str>,
    /// A hash of every destination's fingerprint, for whole-cluster runs; computed at the
    /// first one of an evaluation.
    all_destinations_hash: std::cell::OnceCell<u64>,
    /// Per class, the cheapest launch that could hold one of its pods (see
    /// [`World::cheapest_launch_for_one`]).
    cheapest_one: RefCell<HashMap<ClassId, Option<i64>>>,
    /// Per class, the destinations with room for one of its pods, as far as walks have read
    /// (see [`Fitting`]).
    fitting: RefCell<HashMap<ClassId, Fitting>>,
    /// What whole-cluster simulations share about the nodes they read ([`SharedNodes`]), worked
    /// out at the first one of an evaluation that needs it.
    shared: Shared,
    memo: &'a RefCell<Memo>,
}

/// A simulation's answer: the existing-node part and, when some pods were left over, the
/// new-NodeClaim part. The parts stay shared with the memo; their placements are joined only
/// when a caller asks (an accepted command), not for every candidate checked, whose check reads
/// only the failures and launches.
#[derive(Clone)]
pub struct Simulation {
    existing: Rc<SolverOutput>,
    new: Option<Rc<SolverOutput>>,
    /// Which existing nodes the answer read.
    pub reads: Reads,
    /// Whether the answer read the NodePools (it priced new NodeClaims, or ran over the whole
    /// cluster with them open): if so it also depends on [`World::new_context`].
    pub reads_pools: bool,
    /// The memo's key for the existing-node walk it used, if any (see [`World::keep_walk`]).
    pub walk: Option<u64>,
    /// An in-flight NodeClaim that would take some of the pods the existing nodes leave over.
    uninitialized: Option<String>,
    /// Whether the answer read the in-flight NodeClaims (the existing nodes left pods over): if
    /// so its `uninitialized` also depends on [`World::in_flight_hash`].
    pub reads_in_flight: bool,
    /// Whether the answer read the counted nodes (a whole-cluster run): if so it also depends on
    /// [`World::counted_hash`].
    pub reads_counted: bool,
}

/// Which existing nodes a simulation read: the first `covered` chunks, whose nodes hashed to
/// `prefix`, which of them it left out (taken by earlier commands or its own), and whether it
/// placed every pod there (if not, it read every chunk and stands only while there are no
/// more). While [`World::unchanged`] holds, the same simulation gives the same answer, whatever
/// happened further down the node list, including nodes taken there: at 10,000 nodes an
/// emptiness command taking one more node had made every kept answer stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reads {
    covered: usize,
    complete: bool,
    prefix: u64,
    /// A hash of the positions of the removed nodes among those read (the prefix fixes the
    /// positions).
    removed: u64,
    /// The part of `removed` that the evaluation's taken nodes make up. While the prefix
    /// stands, the simulation's own nodes among those read stand where they were, so only
    /// this part can change: a check need not look its own node up again.
    taken: u64,
}

impl Simulation {
    /// An in-flight (not yet initialized) NodeClaim that Karpenter's scheduler, which tries
    /// initialized nodes first, then uninitialized ones, then new NodeClaims, would put some of
    /// the pods on: `SimulateScheduling` then refuses the command (`UninitializedNodeError`).
    pub fn uninitialized_destination(&self) -> Option<&str> {
        self.uninitialized.as_deref()
    }

    /// Pods that fit nowhere, not even on a new NodeClaim (when those were allowed).
    pub fn failures(&self) -> &[crate::solver::Failure] {
        match &self.new {
            Some(n) => &n.failures,
            None => &self.existing.failures,
        }
    }

    /// Names the new-NodeClaim run this answer used, while its memo entry lives (at least for
    /// the evaluation): equal ids, equal launches.
    pub fn new_run_id(&self) -> Option<usize> {
        self.new.as_ref().map(|n| Rc::as_ptr(n) as usize)
    }

    /// The new NodeClaims the pods need.
    pub fn launches(&self) -> &[dovetail_dataflow::decisions::Launch] {
        match &self.new {
            Some(n) => &n.launches,
            None => &self.existing.launches,
        }
    }

    /// Every placement, existing nodes first, each class's placements numbered on in bin
    /// order.
    pub fn placements(&self) -> Vec<Placement> {
        let Some(new) = &self.new else {
            return self.existing.placements.clone();
        };
        let mut placements = Vec::new();
        let mut next_order: BTreeMap<ClassId, u32> = BTreeMap::new();
        append_placements(&mut placements, &mut next_order, &self.existing.placements);
        append_placements(&mut placements, &mut next_order, &new.placements);
        placements
    }
}

/// Appends one run's placements after earlier runs', numbering each class's placements on in
/// bin order.
fn append_placements(
    out: &mut Vec<Placement>,
    next_order: &mut BTreeMap<ClassId, u32>,
    more: &[Placement],
) {
    let base = next_order.clone();
    for p in more {
        let mut p = p.clone();
        p.order += base.get(&p.class).copied().unwrap_or(0);
        let o = next_order.entry(p.class).or_insert(0);
        *o = (*o).max(p.order + 1);
        out.push(p);
    }
}

/// The solver's input for each class.
fn class_inputs<'a>(classes: &[SimClass<'a>]) -> Vec<ClassInput<'a>> {
    classes
        .iter()
        .map(|&(id, class, compat, count)| ClassInput {
            id,
            class,
            count,
            compat,
            counted_domains: Vec::new(),
        })
        .collect()
}

/// Each class with its count and its hash from `hashes`.
fn keyed(classes: &[SimClass<'_>], hashes: &BTreeMap<ClassId, u64>) -> Vec<(ClassId, i64, u64)> {
    classes
        .iter()
        .map(|(id, _, _, n)| (*id, *n, hashes.get(id).copied().unwrap_or(0)))
        .collect()
}

/// True when the class's placement depends on pods on nodes it does not land on, so a
/// simulation must see every node: a spread or anti-affinity over a zone-like key (counts per
/// domain), or any required pod affinity (is a peer running anywhere?). Hostname spread and
/// hostname anti-affinity only read the counts of the node a pod lands on (the solver takes the
/// global minimum of a hostname spread as zero, as some node always holds none), and preferred
/// terms are relaxed at once, so neither needs the whole cluster; DLRM's pods, each under a
/// hostname spread, took the costly path for every simulation before.
fn needs_whole_cluster(class: &PodClass) -> bool {
    let s = &class.scheduling;
    s.topology_spread.iter().any(|t| {
        t.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule && t.topology_key != HOSTNAME
    }) || !s.pod_affinity.is_empty()
        || s.pod_anti_affinity
            .iter()
            .any(|t| t.topology_key != HOSTNAME)
}

/// A hash of everything about a node the solver reads. The commands query computes it as a
/// node's state changes, not per evaluation (why: `docs/disruption-profiling.md`).
pub fn fingerprint(n: &NodeState) -> u64 {
    stable_hash(n)
}

/// A hash of a NodePool's offers. The commands query computes it as the NodePool changes:
/// hashing every type's labels and offerings per evaluation was an eighth of a small one.
pub fn pool_hash(p: &PoolTypes) -> u64 {
    stable_hash(p)
}

/// What simulations of a class are keyed by, hashed as the class changes (as [`pool_hash`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassHashes {
    /// Its whole compatibility (it changes with the NodePools' offers).
    pub compat: u64,
    /// What a run over existing nodes alone reads of it: the requirements nodes are matched
    /// against and the NodePool rejections a failure reports. Prices and offerings, which
    /// change often, are not in it.
    pub existing: u64,
}

impl ClassHashes {
    pub fn of(compat: &Compatibility) -> ClassHashes {
        let read = (&compat.requirements, compat.relaxation, &compat.rejections);
        ClassHashes {
            compat: stable_hash(compat),
            existing: stable_hash(&read),
        }
    }
}

impl<'a> World<'a> {
    /// The world of one evaluation. `nodes` come in name order, each with its
    /// [`fingerprint`] and whether it [`ends_chunk`], as the commands query keeps them, so that
    /// building a world neither sorts nor hashes names; NodePools and classes come with their
    /// [`pool_hash`] and [`ClassHashes`] likewise.
    pub fn new(
        hashed_pools: Vec<(u64, &'a PoolTypes)>,
        hashed_classes: BTreeMap<ClassId, (&'a PodClass, &'a Compatibility, ClassHashes)>,
        nodes: Vec<(u64, bool, &'a NodeState)>,
        names: Rc<BTreeSet<String>>,
        is_destination: impl Fn(&NodeState) -> bool,
        memo: &'a RefCell<Memo>,
    ) -> World<'a> {
        let mut destinations = Vec::with_capacity(nodes.len());
        let mut fingerprints = Vec::with_capacity(nodes.len());
        let mut ends = Vec::with_capacity(nodes.len());
        let mut free = Vec::with_capacity(nodes.len());
        let mut others = Vec::new();
        for (fingerprint, end, n) in nodes {
            if is_destination(n) {
                destinations.push(n);
                fingerprints.push(fingerprint);
                ends.push(end);
                free.push(n.node.allocatable.sub(&n.used));
            } else {
                others.push(n);
            }
        }
        let in_flight: Vec<&NodeState> = others
            .iter()
            .copied()
            .filter(|n| n.node.in_flight && !n.node.unschedulable && !n.node.deleting)
            .collect();
        let counted: Vec<NodeState> = others
            .iter()
            .filter(|n| {
                let flying = in_flight.iter().any(|f| f.node.name == n.node.name);
                flying || !n.pods.is_empty()
            })
            .map(|n| {
                let mut n = (*n).clone();
                // The solver places nothing on an unschedulable node but counts its pods.
                n.node.make_mut().unschedulable = true;
                n
            })
            .collect();
        let in_flight_hash = stable_hash(&in_flight);
        let counted_hash = stable_hash(&counted);
        let chunks = chunks(&ends, &fingerprints);
        let mut classes = BTreeMap::new();
        let mut compat_hashes = BTreeMap::new();
        let mut existing_hashes = BTreeMap::new();
        for (id, (class, compat, hashes)) in hashed_classes {
            classes.insert(id, (class, compat));
            compat_hashes.insert(id, hashes.compat);
            existing_hashes.insert(id, hashes.existing);
        }
        let pools: Vec<&PoolTypes> = hashed_pools.iter().map(|(_, p)| *p).collect();
        // Limits are charged with the allocatable of every node of a NodePool, wherever it is.
        let limited: BTreeSet<&str> = pools
            .iter()
            .filter(|p| !p.nodepool.limits.is_empty())
            .map(|p| p.nodepool.name.as_str())
            .collect();
        let mut limit_usage: Vec<(&str, &Resources)> = Vec::new();
        let mut limited_nodes = BTreeSet::new();
        if !limited.is_empty() {
            for n in destinations.iter().chain(&others) {
                if let Some(pool) = n
                    .node
                    .labels
                    .get(dovetail_dataflow::model::labels::NODEPOOL)
                {
                    if limited.contains(pool.as_str()) {
                        limit_usage.push((n.node.name.as_str(), n.node.limit_usage()));
                        limited_nodes.insert(n.node.name.as_str());
                    }
                }
            }
        }
        let mut sorted_pools: Vec<(&str, u64)> = hashed_pools
            .iter()
            .map(|(h, p)| (p.nodepool.name.as_str(), *h))
            .collect();
        sorted_pools.sort_unstable();
        let pools_hash = stable_hash(&(sorted_pools, limit_usage));
        let existing_all = stable_hash(&existing_hashes);
        let offers_all = stable_hash(&(pools_hash, &compat_hashes));
        World {
            pools,
            classes,
            destinations,
            others,
            in_flight,
            counted,
            in_flight_hash,
            counted_hash,
            free,
            fingerprints,
            compat_hashes,
            existing_hashes,
            pools_hash,
            existing_all,
            offers_all,
            limited_nodes,
            chunks,
            all_destinations_hash: std::cell::OnceCell::new(),
            cheapest_one: RefCell::new(HashMap::default()),
            fitting: RefCell::new(HashMap::default()),
            shared: Shared {
                names,
                ..Shared::default()
            },
            memo,
        }
    }

    /// The price of the cheapest offering, among the class's compatible instance types that
    /// fit one of its pods, that its requirements admit; None when no NodePool can launch one.
    /// A new NodeClaim holding any pod of the class costs at least this, whatever else it
    /// holds: its types are all compatible with the class and fit that pod, and its price is
    /// the cheapest of their offerings it allows.
    pub fn cheapest_launch_for_one(&self, id: ClassId) -> Option<i64> {
        if let Some(p) = self.cheapest_one.borrow().get(&id) {
            return *p;
        }
        let price = self.classes.get(&id).and_then(|(class, compat)| {
            let filter = OfferingFilter::new(&compat.requirements);
            let req = &class.scheduling.requests;
            compat
                .pools
                .iter()
                .filter_map(|(name, types)| {
                    self.pools
                        .iter()
                        .find(|p| &p.nodepool.name == name && p.not_ready.is_none())
                        .map(|p| (*p, types))
                })
                .filter_map(|(pool, types)| {
                    let cheapest = self.shared.cheapest.under(pool, &filter);
                    types
                        .iter()
                        .filter(|&&t| {
                            pool.types
                                .get(t as usize)
                                .is_some_and(|pt| req.fits_in(&pt.available))
                        })
                        .filter_map(|&t| cheapest.of(t))
                        .map(|o| o.price.0)
                        .min()
                })
                .min()
        });
        self.cheapest_one.borrow_mut().insert(id, price);
        price
    }

    /// Whether a simulation of these pods runs over the whole cluster (see
    /// [`needs_whole_cluster`]).
    pub fn reads_whole_cluster(&self, pods: &[(ClassId, i64)]) -> bool {
        pods.iter().any(|(id, _)| {
            self.classes
                .get(id)
                .is_some_and(|(class, _)| needs_whole_cluster(class))
        })
    }

    /// A destination's position, found by name (the destinations are in name order; a few
    /// hundred lookups per evaluation do not pay for hashing ten thousand names).
    fn position(&self, name: &str) -> Option<usize> {
        self.destinations
            .binary_search_by(|n| n.node.name.as_str().cmp(name))
            .ok()
    }

    /// What a simulation removing `nodes` leaves out, with the `taken` ones.
    fn removed<'r>(&self, taken: &'r Taken, nodes: &[&'r str]) -> Removed<'r> {
        let mut own: Vec<&str> = nodes
            .iter()
            .copied()
            .filter(|n| !taken.contains(n))
            .collect();
        own.sort_unstable();
        own.dedup();
        let own_gone = own.iter().filter_map(|n| self.position(n)).collect();
        Removed {
            taken,
            own,
            own_gone,
        }
    }

    /// Adds nodes to an evaluation's taken set.
    pub fn take(&self, taken: &mut Taken, names: impl IntoIterator<Item = String>) {
        let gone = taken.gone.len();
        for name in names {
            if taken.names.contains(&name) {
                continue;
            }
            let h = stable_hash(&name);
            if let Some(i) = self.position(&name) {
                taken.gone.insert(i);
            }
            if self.limited_nodes.contains(name.as_str()) {
                taken.limited.insert(name.clone());
                taken.limited_key = taken.limited_key.wrapping_add(h);
            }
            taken.names.insert(name);
            taken.hashes.insert(h);
            taken.key = taken.key.wrapping_add(h);
        }
        if taken.gone.len() != gone {
            let mut sum = 0u64;
            taken.gone_sums = taken
                .gone
                .iter()
                .map(|&i| {
                    sum = sum.wrapping_add(mix(i as u64));
                    (i, sum)
                })
                .collect();
        }
    }

    /// Packs `pods` (by class) with the `taken` nodes and the check's own `nodes` gone. Destinations that cannot
    /// hold even the smallest of those pods are left out (they could not change the outcome)
    /// unless a class needs the whole cluster for spread or affinity counts.
    ///
    /// Without `new_nodeclaims` the answer may stop at the existing nodes: pods they cannot
    /// hold are failures, not launches (a delete-only check need not price replacements).
    pub fn simulate(
        &self,
        taken: &Taken,
        nodes: &[&str],
        pods: &[(ClassId, i64)],
        new_nodeclaims: bool,
    ) -> Simulation {
        self.simulate_until(taken, nodes, pods, new_nodeclaims, Stop::NEVER)
    }

    /// [`World::simulate`], letting a whole-cluster run stop where `stop` says (see [`Stop`]):
    /// a simulation that stopped holds what the whole one would be refused for (a failure, that
    /// many launches, or an in-flight NodeClaim its leftovers would go to). Other runs do not
    /// stop.
    pub fn simulate_until(
        &self,
        taken: &Taken,
        nodes: &[&str],
        pods: &[(ClassId, i64)],
        new_nodeclaims: bool,
        stop: Stop,
    ) -> Simulation {
        let removed = self.removed(taken, nodes);
        let mut classes = Vec::new();
        let mut whole = false;
        for &(id, count) in pods {
            if let Some((class, compat)) = self.classes.get(&id) {
                whole |= needs_whole_cluster(class);
                classes.push((id, *class, *compat, count));
            }
        }
        let class_key = self.class_key(&classes);
        // New NodeClaims depend on the removed nodes only through NodePool limits.
        let own_limited: Vec<&str> = removed
            .own
            .iter()
            .copied()
            .filter(|n| self.limited_nodes.contains(n))
            .collect();
        let limit_removed = (taken.limited_key, own_limited);
        if whole {
            // What the solver sees is every destination less the removed ones: the hash of the
            // whole list and the removed positions name it without hashing every fingerprint
            // per simulation.
            let all = *self
                .all_destinations_hash
                .get_or_init(|| stable_hash(&self.fingerprints));
            let destinations_key = (all, taken.key, &removed.own_gone);
            let key = stable_hash(&(
                "full",
                &limit_removed,
                &class_key,
                &destinations_key,
                self.pools_hash,
                self.counted_hash,
                stop,
            ));
            // What `stop.at_in_flight` stops at: some of the pods left over so far would go
            // on an in-flight NodeClaim (see `uninitialized` below). Those are the whole run's
            // leftovers of the classes placed so far; with more classes an in-flight run still
            // places something (the first class that placed in this one finds the same room),
            // so the whole run would be refused too.
            let in_flight_takes = |left: &[(ClassId, i64)]| {
                let rest: Vec<SimClass<'a>> = left
                    .iter()
                    .filter_map(|&(id, n)| {
                        let &(_, class, compat, _) = classes.iter().find(|c| c.0 == id)?;
                        Some((id, class, compat, n))
                    })
                    .collect();
                self.in_flight_run(&rest).is_some()
            };
            let existing = Memo::get_or(self.memo, "full", key, || {
                let useful: Vec<usize> = (0..self.destinations.len())
                    .filter(|&i| !removed.contains_index(i))
                    .collect();
                self.solve_whole(&classes, &useful, stop, &in_flight_takes)
            });
            // As for the runs below: would an in-flight NodeClaim take any of the pods that go
            // on new NodeClaims or nowhere? Karpenter's scheduler would try it first.
            let leaves_pods = !existing.launches.is_empty() || !existing.failures.is_empty();
            let uninitialized = if leaves_pods && !self.in_flight.is_empty() {
                self.in_flight_run(&not_on_existing_nodes(&existing, &classes))
            } else {
                None
            };
            let covered = self.chunks.len();
            return Simulation {
                existing,
                new: None,
                reads: self.reads(covered, false, &removed),
                reads_pools: true,
                walk: None,
                uninitialized,
                reads_in_flight: leaves_pods,
                reads_counted: true,
            };
        }
        // Without zone-like spread or any affinity, the solver tries every existing node before
        // it opens a NodeClaim (existing bins come first in its first-fit order, and nothing
        // about a new bin changes an existing one). So the full run is two: the existing nodes
        // alone, then new NodeClaims for what they leave over. The second, the costly one,
        // depends only on the leftovers and the NodePools, so it is reused while churn
        // elsewhere in the cluster re-runs the first.
        let (existing, reads, walk) = self.existing_run(&classes, &removed);
        let mut leftover: BTreeMap<ClassId, i64> = BTreeMap::new();
        for f in &existing.failures {
            *leftover.entry(f.class).or_insert(0) += f.count;
        }
        let rest: Vec<_> = classes
            .iter()
            .filter_map(|&(id, class, compat, _)| {
                leftover.get(&id).map(|&n| (id, class, compat, n))
            })
            .collect();
        let uninitialized = self.in_flight_run(&rest);
        let reads_in_flight = !rest.is_empty();
        if existing.failures.is_empty() || !new_nodeclaims {
            return Simulation {
                existing,
                new: None,
                reads,
                reads_pools: false,
                walk: Some(walk),
                uninitialized,
                reads_in_flight,
                reads_counted: false,
            };
        }
        let key = stable_hash(&(
            "new",
            &limit_removed,
            &self.class_key(&rest),
            self.pools_hash,
        ));
        let new = Memo::get_or(self.memo, "new", key, || {
            self.solve(&rest, &[], true, &removed)
        });
        Simulation {
            existing,
            new: Some(new),
            reads,
            reads_pools: true,
            walk: Some(walk),
            uninitialized,
            reads_in_flight,
            reads_counted: false,
        }
    }

    /// The pods placed on existing nodes only, chunk by chunk (see [`Chunk`]): each chunk's
    /// run takes what the chunks before it left over, and the runs stop once nothing is left.
    /// For these classes (no zone-like spread, no affinity) that is the solver's own answer
    /// over all the nodes: it places each class, largest first, over the nodes in name order,
    /// and what a node takes depends only on that node and on how many copies are still to
    /// place, so cutting the node list between two nodes changes nothing.
    ///
    /// Three things keep it cheap when most of the cluster is unchanged:
    /// - the whole walk is kept per candidate (its pods and the nodes it removes) with the
    ///   hash of the chunks it read, and stands while they are unchanged, so churn further
    ///   down the node list costs it one hash comparison;
    /// - it goes from one node with room for a pod still to place to the next ([`Fitting`]),
    ///   so chunks without one are skipped unread;
    /// - a chunk's run is memoised by its nodes' fingerprints and what enters it, so churn on a
    ///   few nodes re-runs only their chunks.
    fn existing_run(
        &self,
        classes: &[SimClass<'a>],
        removed: &Removed,
    ) -> (Rc<SolverOutput>, Reads, u64) {
        // Taken nodes are not in the key: the walk's reads say which of them it saw.
        let walk_key = stable_hash(&("walk", &self.existing_key(classes), &removed.own));
        if let Some((out, reads)) = self.memo.borrow_mut().walk(walk_key, self, removed) {
            return (out, reads, walk_key);
        }
        let mut left: Vec<SimClass<'a>> = classes.to_vec();
        let mut placements = Vec::new();
        let mut next_order: BTreeMap<ClassId, u32> = BTreeMap::new();
        let mut last: Option<Rc<SolverOutput>> = None;
        let mut covered = 0;
        let mut j = 0;
        let mut fitting = self.fitting.borrow_mut();
        while j < self.chunks.len() {
            // A node with no room for one pod of any class still to place takes nothing: the
            // walk goes on at the next chunk holding one that has room.
            let from = self.chunks[j].start;
            let next = left
                .iter()
                .filter_map(|(id, c, _, _)| {
                    fitting
                        .entry(*id)
                        .or_default()
                        .next(&c.scheduling.requests, &self.free, from)
                })
                .min();
            let Some(next) = next else {
                covered = self.chunks.len();
                break;
            };
            j += self.chunks[j..].partition_point(|c| c.end <= next);
            covered = j + 1;
            let Some(chunk) = self.chunks.get(j) else {
                break;
            };
            j += 1;
            let mut members: Vec<usize> = Vec::new();
            for (id, c, _, _) in &left {
                fitting.entry(*id).or_default().within(
                    &c.scheduling.requests,
                    &self.free,
                    chunk.start,
                    chunk.end,
                    &mut members,
                );
            }
            members.sort_unstable();
            members.dedup();
            members.retain(|&i| !removed.contains_index(i));
            if members.is_empty() {
                continue;
            }
            // Fingerprints include the node's name: they name the chunk's nodes and state.
            let fingerprints: Vec<u64> = members.iter().map(|&i| self.fingerprints[i]).collect();
            let key = stable_hash(&("existing", &self.existing_key(&left), &fingerprints));
            let out = Memo::get_or(self.memo, "existing", key, || {
                self.solve(&left, &members, false, removed)
            });
            append_placements(&mut placements, &mut next_order, &out.placements);
            let mut unplaced: BTreeMap<ClassId, i64> = BTreeMap::new();
            for f in &out.failures {
                *unplaced.entry(f.class).or_insert(0) += f.count;
            }
            left = left
                .iter()
                .filter_map(|&(id, class, compat, _)| {
                    unplaced.get(&id).map(|&n| (id, class, compat, n))
                })
                .collect();
            last = Some(out);
            if left.is_empty() {
                break;
            }
        }
        let failures = match &last {
            Some(out) => out.failures.clone(),
            // No existing node could take any of them: the solver's own failures for that.
            None => Memo::get_or(
                self.memo,
                "existing",
                stable_hash(&("none", &self.existing_key(&left))),
                || self.solve(&left, &[], false, removed),
            )
            .failures
            .clone(),
        };
        let out = Rc::new(SolverOutput {
            launches: Vec::new(),
            placements,
            failures,
            ..Default::default()
        });
        let reads = self.reads(covered, left.is_empty(), removed);
        self.memo
            .borrow_mut()
            .keep_walk(walk_key, reads, out.clone());
        (out, reads, walk_key)
    }

    /// Keeps the walk `key` for the next evaluation, though this one did not ask for it: an
    /// answer kept elsewhere (a candidate's check) stood on it, and when that answer has to be
    /// redone for a reason the walk does not read (the candidate's price), the walk still
    /// stands.
    pub fn keep_walk_alive(&self, key: u64) {
        let mut memo = self.memo.borrow_mut();
        let evaluation = memo.evaluation;
        if let Some(w) = memo.walks.get_mut(&key) {
            w.used = evaluation;
        }
    }

    /// The hash of the first `covered` chunks' nodes.
    fn prefix_of(&self, covered: usize) -> u64 {
        covered
            .checked_sub(1)
            .and_then(|j| self.chunks.get(j))
            .map_or(0, |c| c.prefix)
    }

    fn reads(&self, covered: usize, complete: bool, removed: &Removed) -> Reads {
        Reads {
            covered,
            complete,
            prefix: self.prefix_of(covered),
            removed: removed.hash_before(self.end_of(covered)),
            taken: removed_before(removed.taken, std::iter::empty(), self.end_of(covered)),
        }
    }

    /// The destination position after the first `covered` chunks.
    fn end_of(&self, covered: usize) -> usize {
        covered
            .checked_sub(1)
            .and_then(|j| self.chunks.get(j))
            .map_or(0, |c| c.end)
    }

    /// Whether what a simulation removing the same nodes as the one that made `reads` (with
    /// the `taken` ones) read of the existing nodes is as it was.
    /// Thousands of checks ask this per evaluation, so it looks none of their own nodes up
    /// (see [`Reads::taken`]): one of them taken since only makes it answer "changed", never a
    /// wrong "unchanged".
    pub fn unchanged(&self, reads: &Reads, taken: &Taken) -> bool {
        self.same_chunks(reads)
            && removed_before(taken, std::iter::empty(), self.end_of(reads.covered)) == reads.taken
    }

    fn unchanged_for(&self, reads: &Reads, removed: &Removed) -> bool {
        self.same_chunks(reads) && removed.hash_before(self.end_of(reads.covered)) == reads.removed
    }

    /// Whether the chunks a simulation read are as they were, and it read enough of them.
    fn same_chunks(&self, reads: &Reads) -> bool {
        self.prefix_of(reads.covered) == reads.prefix
            && (reads.complete || reads.covered == self.chunks.len())
    }

    /// What a simulation with `pods` reads of their classes when it stays on existing nodes:
    /// each class's existing-run hash (not prices or offerings). Two simulations of the same
    /// nodes with equal contexts and [`Reads`] that are both [`World::unchanged`], neither of
    /// which [`Simulation::reads_pools`], give the same answer.
    pub fn existing_context(&self, pods: &[(ClassId, i64)]) -> u64 {
        pods.iter().fold(0, |h, (id, _)| {
            mix(h ^ self.existing_hashes.get(id).copied().unwrap_or(0))
        })
    }

    /// What a simulation with `pods` that [`Simulation::reads_pools`] reads besides: the
    /// NodePools' offers and limits, the taken nodes' share of the limits, and the classes'
    /// whole compatibility.
    pub fn new_context(&self, taken: &Taken, pods: &[(ClassId, i64)]) -> u64 {
        let classes: Vec<u64> = pods
            .iter()
            .map(|(id, _)| self.compat_hashes.get(id).copied().unwrap_or(0))
            .collect();
        stable_hash(&(taken.limited_key, self.pools_hash, classes))
    }

    /// What a simulation's answer depends on for its pods: each class, its count, and a hash of
    /// its compatibility.
    /// The first in-flight NodeClaim that would take some of `rest`, the pods the existing
    /// nodes leave over (the solver fills those NodeClaims alone, no NodePool open).
    fn in_flight_run(&self, rest: &[SimClass<'a>]) -> Option<String> {
        if rest.is_empty() || self.in_flight.is_empty() {
            return None;
        }
        // No NodePool is open, so the run reads what an existing-node run reads of each class.
        let key = stable_hash(&("in-flight", &self.existing_key(rest), self.in_flight_hash));
        let out = Memo::get_or(self.memo, "in-flight", key, || {
            solve(SolverInput {
                pools: Vec::new(),
                classes: class_inputs(rest),
                nodes: self.in_flight.clone(),
                bystanders: Vec::new(),
                previous: None,
            })
        });
        out.placements
            .iter()
            .find_map(|p| self.in_flight_nodeclaim(&p.target))
    }

    /// The NodeClaim of in-flight node `name` (its own name when it has none recorded), if
    /// `name` is in flight.
    fn in_flight_nodeclaim(&self, name: &str) -> Option<String> {
        self.in_flight
            .iter()
            .find(|n| n.node.name == name)
            .map(|n| n.node.nodeclaim.clone().unwrap_or_else(|| name.to_string()))
    }

    fn class_key(&self, classes: &[SimClass<'a>]) -> Vec<(ClassId, i64, u64)> {
        keyed(classes, &self.compat_hashes)
    }

    /// What a run over existing nodes alone depends on for its pods: each class, its count, and
    /// a hash of the part of its compatibility such a run reads.
    fn existing_key(&self, classes: &[SimClass<'a>]) -> Vec<(ClassId, i64, u64)> {
        keyed(classes, &self.existing_hashes)
    }

    /// The whole-cluster run: the initialized destinations, then new NodeClaims; the counted
    /// nodes, the in-flight NodeClaims among them, take no pods but their pods count in spread
    /// domains. Karpenter's scheduler would try the in-flight NodeClaims before it opens one
    /// (`sortExistingNodes` in `scheduler.go`), but a graceful command that needs them waits
    /// anyway ([`Simulation::uninitialized_destination`], found apart on the pods this run puts
    /// on new NodeClaims), so leaving them out keeps the run standing while NodeClaims come and
    /// go. It differs where a spread over the in-flight NodeClaims alone refuses a pod this run
    /// would have put there: that command goes, with its own replacement, counting on no
    /// in-flight capacity; and a forceful command launches for pods the in-flight NodeClaims
    /// could have taken, as it did already where no whole-cluster run is needed.
    fn solve_whole(
        &self,
        classes: &[SimClass<'a>],
        destinations: &[usize],
        stop: Stop,
        refuses: Refuses<'_>,
    ) -> SolverOutput {
        let mut nodes: Vec<&NodeState> =
            destinations.iter().map(|&i| self.destinations[i]).collect();
        nodes.extend(self.counted.iter());
        let in_nodes: BTreeSet<&str> = self.counted.iter().map(|n| n.node.name.as_str()).collect();
        // `destinations` are all those not removed, so only the others are left to count against
        // NodePool limits.
        let bystanders: Vec<&NodeState> = self
            .others
            .iter()
            .copied()
            .filter(|n| !in_nodes.contains(n.node.name.as_str()))
            .collect();
        solve_shared(
            SolverInput {
                pools: self.pools.clone(),
                classes: class_inputs(classes),
                nodes,
                bystanders,
                previous: None,
            },
            Some(self),
            stop,
            Some(refuses),
        )
    }

    fn solve(
        &self,
        classes: &[SimClass<'a>],
        destinations: &[usize],
        with_pools: bool,
        removed: &Removed,
    ) -> SolverOutput {
        let chosen: BTreeSet<usize> = destinations.iter().copied().collect();
        let nodes: Vec<&NodeState> = destinations.iter().map(|&i| self.destinations[i]).collect();
        let mut bystanders: Vec<&NodeState> = self.others.clone();
        if with_pools {
            bystanders.extend(
                (0..self.destinations.len())
                    .filter(|i| !chosen.contains(i))
                    .map(|i| self.destinations[i])
                    .filter(|n| !removed.contains(n.node.name.as_str())),
            );
        }
        solve(SolverInput {
            pools: if with_pools {
                self.pools.clone()
            } else {
                Vec::new()
            },
            classes: class_inputs(classes),
            nodes,
            bystanders,
            previous: None,
        })
    }
}

/// The nodes a whole-cluster simulation reads — the destinations, the in-flight NodeClaims and
/// the counted nodes — indexed in name order once per evaluation (see [`SharedNodes`]).
#[derive(Default)]
struct Shared {
    /// The nodes in name order, as positions in the list of destinations, then counted nodes.
    order: std::cell::OnceCell<Vec<u32>>,
    /// Each node's index (its place in name order), by its address.
    index: std::cell::OnceCell<HashMap<usize, u32>>,
    /// By topology group (a hash of its namespaces and selector): how many of each node's pods
    /// it counts.
    counts: RefCell<HashMap<u64, Rc<Vec<i64>>>>,
    /// By label key: each node's value, numbered in the order first met.
    labels: RefCell<Vec<(String, LabelValues)>>,
    /// Every node's name and its NodeClaim's ([`NodeNames`]).
    names: Rc<BTreeSet<String>>,
    /// By a hash of the requirements: which nodes' labels they match.
    matches: RefCell<HashMap<u64, LabelMatches>>,
    /// The cheapest offerings of the World's NodePools' types, per filter.
    cheapest: Rc<CheapestOfferings>,
}

impl World<'_> {
    /// The nodes [`Shared`] indexes, in name order, each with its fingerprint if it is a
    /// destination.
    fn everywhere(&self) -> Vec<(&NodeState, Option<u64>)> {
        let listed: Vec<(&NodeState, Option<u64>)> = self
            .destinations
            .iter()
            .copied()
            .zip(self.fingerprints.iter().copied().map(Some))
            .chain(self.counted.iter().map(|n| (n, None)))
            .collect();
        let order = self.shared.order.get_or_init(|| {
            // The destinations come in name order and the others are few: a stable sort finds
            // the runs and merges them.
            let mut order: Vec<u32> = (0..listed.len() as u32).collect();
            order.sort_by(|&a, &b| {
                listed[a as usize]
                    .0
                    .node
                    .name
                    .cmp(&listed[b as usize].0.node.name)
            });
            order
        });
        order.iter().map(|&i| listed[i as usize]).collect()
    }
}

impl SharedNodes for World<'_> {
    fn index(&self, nodes: &[&NodeState]) -> Vec<Option<u32>> {
        let index = self.shared.index.get_or_init(|| {
            self.everywhere()
                .into_iter()
                .enumerate()
                .map(|(i, (n, _))| (n as *const NodeState as usize, i as u32))
                .collect()
        });
        nodes
            .iter()
            .map(|n| index.get(&(*n as *const NodeState as usize)).copied())
            .collect()
    }

    /// Read from what the last evaluation counted for the nodes whose fingerprints are
    /// unchanged.
    fn counts(&self, group: &Group) -> Rc<Vec<i64>> {
        let key = stable_hash(&(&group.namespaces, &group.selector));
        let mut counts = self.shared.counts.borrow_mut();
        Rc::clone(counts.entry(key).or_insert_with(|| {
            let mut memo = self.memo.borrow_mut();
            let evaluation = memo.evaluation;
            let kept = memo.group_counts.entry(key).or_default();
            let last = std::mem::take(&mut kept.1);
            kept.0 = evaluation;
            // Label sets are interned, so most nodes share theirs: match each set once.
            let mut counted: HashMap<LabelSet, bool> = HashMap::default();
            let per_node = self
                .everywhere()
                .into_iter()
                .map(|(n, fingerprint)| match fingerprint {
                    Some(f) => {
                        let count = last
                            .get(&f)
                            .copied()
                            .unwrap_or_else(|| pods_counted(group, n, &mut counted));
                        kept.1.insert(f, count);
                        count
                    }
                    None => pods_counted(group, n, &mut counted),
                })
                .collect();
            Rc::new(per_node)
        }))
    }

    fn label_values(&self, key: &str) -> LabelValues {
        let mut labels = self.shared.labels.borrow_mut();
        if let Some((_, ids)) = labels.iter().find(|(k, _)| k == key) {
            return Rc::clone(ids);
        }
        let mut seen: Vec<&str> = Vec::new();
        let ids: Vec<Option<u32>> = self
            .everywhere()
            .into_iter()
            .map(|(n, _)| {
                let v = n.node.labels.get(key)?;
                let id = match seen.iter().position(|s| *s == v.as_str()) {
                    Some(id) => id,
                    None => {
                        seen.push(v.as_str());
                        seen.len() - 1
                    }
                };
                Some(id as u32)
            })
            .collect();
        let ids = Rc::new(ids);
        labels.push((key.to_string(), Rc::clone(&ids)));
        ids
    }

    /// Every node of the evaluation's, the nodes a simulation takes away included: a launch
    /// replacing a node does not take its name either.
    fn names(&self) -> Rc<BTreeSet<String>> {
        Rc::clone(&self.shared.names)
    }

    fn matches(&self, reqs: &Requirements) -> LabelMatches {
        let key = stable_hash(reqs);
        let len = self.destinations.len() + self.counted.len();
        Rc::clone(
            self.shared
                .matches
                .borrow_mut()
                .entry(key)
                .or_insert_with(|| Rc::new(RefCell::new(vec![None; len]))),
        )
    }

    /// Every whole-cluster run of the World is given the World's own NodePools.
    fn cheapest(&self) -> Rc<CheapestOfferings> {
        Rc::clone(&self.shared.cheapest)
    }
}

/// The pods of a whole-cluster run that went on new NodeClaims or nowhere, by class.
fn not_on_existing_nodes<'a>(out: &SolverOutput, classes: &[SimClass<'a>]) -> Vec<SimClass<'a>> {
    let launched: BTreeSet<&str> = out.launches.iter().map(|l| l.name.as_str()).collect();
    let mut left: BTreeMap<ClassId, i64> = BTreeMap::new();
    for p in &out.placements {
        if launched.contains(p.target.as_str()) {
            *left.entry(p.class).or_insert(0) += p.count;
        }
    }
    for f in &out.failures {
        *left.entry(f.class).or_insert(0) += f.count;
    }
    classes
        .iter()
        .filter_map(|&(id, class, compat, _)| left.get(&id).map(|&n| (id, class, compat, n)))
        .collect()
}

/// How many of the node's pods the group counts; `counted` remembers whether the group counts
/// a label set's pods.
fn pods_counted(group: &Group, n: &NodeState, counted: &mut HashMap<LabelSet, bool>) -> i64 {
    n.pods
        .iter()
        .filter(|(set, _)| match counted.get(set) {
            Some(answer) => *answer,
            None => {
                let answer = group.counts_pod(set.namespace(), set.labels());
                counted.insert(set.clone(), answer);
                answer
            }
        })
        .map(|(_, count)| count)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solver::Failure;
    use crate::types::UnitCost;
    use dovetail_dataflow::model::labels::ZONE;
    use dovetail_dataflow::model::{
        LabelSelector, LabelSet, Node, PodScheduling, Requirement, Requirements, TopologySpread,
    };

    /// A small deterministic generator (xorshift), so the test needs no dependency.
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    fn labels(app: &str) -> BTreeMap<String, String> {
        BTreeMap::from([("app".to_string(), app.to_string())])
    }

    fn class(app: &str, cpu: i64, memory_mib: i64, spread: Option<i64>) -> PodClass {
        let requests = Resources {
            cpu,
            memory: memory_mib * 1024 * 1024 * 1000,
            pods: 1000,
            ..Resources::default()
        };
        let mut selector = Requirements::new();
        selector.add("app", Requirement::single(app.to_string()));
        PodClass {
            namespace: "default".to_string(),
            labels: labels(app),
            scheduling: PodScheduling {
                requests,
                topology_spread: spread
                    .map(|max_skew| TopologySpread {
                        topology_key: HOSTNAME.to_string(),
                        max_skew,
                        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                        selector: LabelSelector {
                            requirements: selector,
                        },
                        min_domains: None,
                    })
                    .into_iter()
                    .collect(),
                ..PodScheduling::default()
            },
        }
    }

    fn compat() -> Compatibility {
        Compatibility {
            requirements: Requirements::new(),
            relaxation: 0,
            dropped_node_preference: false,
            pools: Vec::new(),
            rejections: Vec::new(),
            unit_cost: Vec::new(),
        }
    }

    /// What a run decided, without the placement numbering: (class, node, copies) placed and
    /// copies failed per class.
    type Outcome = (BTreeSet<(ClassId, String, i64)>, BTreeMap<ClassId, i64>);

    fn outcome(placements: &[Placement], failures: &[Failure]) -> Outcome {
        let mut placed: BTreeMap<(ClassId, String), i64> = BTreeMap::new();
        for p in placements {
            *placed.entry((p.class, p.target.clone())).or_insert(0) += p.count;
        }
        let mut failed = BTreeMap::new();
        for f in failures {
            *failed.entry(f.class).or_insert(0) += f.count;
        }
        (
            placed.into_iter().map(|((c, t), n)| (c, t, n)).collect(),
            failed,
        )
    }

    fn random_node(rng: &mut Rng, name: String) -> NodeState {
        let allocatable = Resources {
            cpu: 4000,
            memory: 16 * 1024 * 1024 * 1024 * 1000,
            pods: 110_000,
            ..Resources::default()
        };
        let used = Resources {
            cpu: rng.below(4001) as i64,
            memory: rng.below(17) as i64 * 1024 * 1024 * 1024 * 1000,
            ..Resources::default()
        };
        let app = ["web", "db", "batch"][rng.below(3) as usize];
        let zone = ["a", "b"][rng.below(2) as usize];
        NodeState {
            node: Node {
                name,
                allocatable,
                labels: BTreeMap::from([(ZONE.to_string(), zone.to_string())]),
                ..Node::default()
            }
            .into(),
            used,
            pods: vec![(LabelSet::new("default", &labels(app)), rng.below(3) as i64)].into(),
        }
    }

    /// `count` random nodes named `node-0000` on, in name order.
    fn random_nodes(rng: &mut Rng, count: usize) -> Vec<NodeState> {
        (0..count)
            .map(|i| random_node(rng, format!("node-{i:04}")))
            .collect()
    }

    /// `count` names of nodes among the first `of` (repeats possible).
    fn random_names(rng: &mut Rng, count: u64, of: u64) -> Vec<String> {
        (0..count)
            .map(|_| format!("node-{:04}", rng.below(of)))
            .collect()
    }

    fn test_classes() -> [PodClass; 3] {
        [
            class("web", 500, 512, None),
            class("db", 2000, 4096, Some(1)),
            class("batch", 1000, 2048, Some(2)),
        ]
    }

    /// One solver run over every node but the removed ones.
    fn whole_run(
        classes: &[PodClass],
        compat: &Compatibility,
        pods: &[(ClassId, i64)],
        nodes: &[NodeState],
        removed: &BTreeSet<&str>,
    ) -> SolverOutput {
        solve(SolverInput {
            pools: Vec::new(),
            classes: pods
                .iter()
                .zip(classes)
                .map(|(&(id, count), class)| ClassInput {
                    id,
                    class,
                    count,
                    compat,
                    counted_domains: Vec::new(),
                })
                .collect(),
            nodes: nodes
                .iter()
                .filter(|n| !removed.contains(n.node.name.as_str()))
                .collect(),
            bystanders: Vec::new(),
            previous: None,
        })
    }

    fn world<'a>(
        classes: &'a [PodClass],
        ids: &[ClassId],
        compat: &'a Compatibility,
        nodes: &'a [NodeState],
        memo: &'a RefCell<Memo>,
    ) -> World<'a> {
        World::new(
            Vec::new(),
            ids.iter()
                .zip(classes)
                .map(|(id, c)| (*id, (c, compat, ClassHashes::of(compat))))
                .collect(),
            {
                let mut nodes: Vec<(u64, bool, &NodeState)> = nodes
                    .iter()
                    .map(|n| (fingerprint(n), ends_chunk(&n.node.name), n))
                    .collect();
                nodes.sort_by(|a, b| a.2.node.name.cmp(&b.2.node.name));
                nodes
            },
            NodeNames::of(nodes).set(),
            |_| true,
            memo,
        )
    }

    /// The chunked existing-node run must be the solver's own answer over all the nodes,
    /// including hostname spread caps, removed nodes (taken by earlier commands or the check's
    /// own) and pods that do not fit anywhere.
    #[test]
    fn chunked_existing_runs_equal_one_solver_run_over_every_node() {
        let classes = test_classes();
        let ids: Vec<ClassId> = classes.iter().map(stable_hash).collect();
        let compat = compat();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..20 {
            let nodes = random_nodes(&mut rng, 300);
            let memo = RefCell::new(Memo::default());
            let world = world(&classes, &ids, &compat, &nodes, &memo);
            let count = rng.below(8);
            let removed_names = random_names(&mut rng, count, 300);
            let removed: BTreeSet<&str> = removed_names.iter().map(String::as_str).collect();
            let pods: Vec<(ClassId, i64)> = ids
                .iter()
                .map(|id| {
                    (
                        *id,
                        1 + rng.below(if round % 2 == 0 { 20 } else { 400 }) as i64,
                    )
                })
                .collect();
            // Some of the removed nodes were taken by earlier commands, the rest are the
            // check's own.
            let mut taken = Taken::default();
            let mut own = Vec::new();
            for (k, name) in removed.iter().enumerate() {
                if k % 2 == 0 {
                    world.take(&mut taken, [name.to_string()]);
                } else {
                    own.push(*name);
                }
            }
            let chunked = world.simulate(&taken, &own, &pods, false);
            let whole = whole_run(&classes, &compat, &pods, &nodes, &removed);
            let chunks = world.chunks.len();
            assert!(chunks > 3, "round {round}: {chunks} chunks test little");
            assert_eq!(
                outcome(&chunked.placements(), chunked.failures()),
                outcome(&whole.placements, &whole.failures),
                "round {round}"
            );
        }
    }

    /// A whole-cluster run (a zone spread reads every node) reads its pod counts, the nodes'
    /// zones and names from what the evaluation shares ([`SharedNodes`]), made once for every
    /// run of it; each run, whatever nodes it leaves out, must be the solver's own answer
    /// working all of that out itself.
    #[test]
    fn whole_cluster_runs_sharing_node_facts_equal_runs_that_work_them_out() {
        let mut classes = test_classes();
        for spread in &mut classes[1].scheduling.topology_spread {
            spread.topology_key = ZONE.to_string();
        }
        let ids: Vec<ClassId> = classes.iter().map(stable_hash).collect();
        let compat = compat();
        let mut rng = Rng(0x6a09_e667_f3bc_c908);
        let mut whole_runs = 0;
        for round in 0..10 {
            let nodes = random_nodes(&mut rng, 200);
            let memo = RefCell::new(Memo::default());
            let world = world(&classes, &ids, &compat, &nodes, &memo);
            for ask in 0..8 {
                let count = 1 + rng.below(4);
                let removed_names = random_names(&mut rng, count, 200);
                let removed: BTreeSet<&str> = removed_names.iter().map(String::as_str).collect();
                let own: Vec<&str> = removed.iter().copied().collect();
                let pods: Vec<(ClassId, i64)> = ids
                    .iter()
                    .map(|id| (*id, 1 + rng.below(40) as i64))
                    .collect();
                let shared = world.simulate(&Taken::default(), &own, &pods, false);
                let counting = whole_run(&classes, &compat, &pods, &nodes, &removed);
                assert_eq!(
                    outcome(&shared.placements(), shared.failures()),
                    outcome(&counting.placements, &counting.failures),
                    "round {round}, ask {ask}"
                );
            }
            whole_runs += memo.borrow().runs.get("full").map_or(0, |r| r.0);
            assert!(
                !world.shared.counts.borrow().is_empty()
                    && !world.shared.labels.borrow().is_empty(),
                "round {round}: no run read the shared counts and zones"
            );
        }
        assert!(
            whole_runs >= 40,
            "{whole_runs} whole-cluster runs test little"
        );
    }

    /// A NodePool of two types (2 and 8 CPU) offered in zones a and b.
    fn two_type_pool() -> PoolTypes {
        use crate::types::PoolType;
        use dovetail_dataflow::model::{InstanceType, NodePool, Offering, Price};
        let gib = 1024 * 1024 * 1024 * 1000;
        let types = [(2, 8, 100), (8, 32, 380)]
            .into_iter()
            .map(|(cpus, memory_gib, price)| {
                let capacity = Resources {
                    cpu: cpus * 1000,
                    memory: memory_gib * gib,
                    pods: 110_000,
                    ..Resources::default()
                };
                let offerings = ["a", "b"]
                    .into_iter()
                    .map(|zone| Offering {
                        zone: zone.to_string(),
                        zone_id: String::new(),
                        capacity_type: "on-demand".to_string(),
                        price: Price(price),
                        available: true,
                    })
                    .collect();
                PoolType {
                    instance_type: std::sync::Arc::new(InstanceType {
                        name: format!("t{cpus}"),
                        requirements: Requirements::new(),
                        capacity: capacity.clone(),
                        overhead: Resources::default(),
                        offerings,
                    }),
                    available: capacity,
                }
            })
            .collect();
        PoolTypes {
            nodepool: NodePool {
                name: "general".to_string(),
                ..NodePool::default()
            },
            types,
            not_ready: None,
        }
    }

    /// A simulation that may stop at its first failure, at `n` new NodeClaims or at pods an
    /// in-flight NodeClaim would take is refused exactly when the whole one is (a failure, `n`
    /// launches or more, or an uninitialized destination), and equals it when it is not; a
    /// World keys the two apart, so a stopped run never answers a simulation that asked for
    /// the whole.
    #[test]
    fn runs_that_stop_early_are_refused_exactly_when_whole_runs_are() {
        let mut classes = test_classes().to_vec();
        for spread in &mut classes[1].scheduling.topology_spread {
            spread.topology_key = ZONE.to_string();
        }
        // Pods bound to a zone no node and no type has: they never fit.
        classes.push(class("pinned", 250, 256, None));
        let ids: Vec<ClassId> = classes.iter().map(stable_hash).collect();
        let mut compat = compat();
        compat.pools = vec![("general".to_string(), vec![0, 1])];
        let mut pinned = compat.clone();
        pinned.pools = Vec::new();
        pinned.requirements.add(ZONE, Requirement::single("c"));
        let pool = two_type_pool();
        let mut rng = Rng(0x3c6e_f372_fe94_f82b);
        let (mut stopped_short, mut refused, mut accepted, mut waiting) = (0, 0, 0, 0);
        for round in 0..60 {
            let mut nodes = random_nodes(&mut rng, 60);
            // In-flight NodeClaims with random room, in most rounds.
            for k in 0..(if round % 3 == 0 { 0 } else { 1 + rng.below(3) }) {
                let mut n = random_node(&mut rng, format!("claim-{k}"));
                let mut node = (*n.node).clone();
                node.in_flight = true;
                n.node = node.into();
                n.pods = Vec::new().into();
                nodes.push(n);
            }
            nodes.sort_by(|a, b| a.node.name.cmp(&b.node.name));
            let memo = RefCell::new(Memo::default());
            let world = World::new(
                vec![(pool_hash(&pool), &pool)],
                ids.iter()
                    .zip(&classes)
                    .enumerate()
                    .map(|(at, (id, c))| {
                        let compat = if at == 3 { &pinned } else { &compat };
                        (*id, (c, compat, ClassHashes::of(compat)))
                    })
                    .collect(),
                nodes
                    .iter()
                    .map(|n| (fingerprint(n), ends_chunk(&n.node.name), n))
                    .collect(),
                NodeNames::of(&nodes).set(),
                |n| !n.node.in_flight,
                &memo,
            );
            let count = 1 + rng.below(6);
            let removed_names = random_names(&mut rng, count, 60);
            let own: BTreeSet<&str> = removed_names.iter().map(String::as_str).collect();
            let own: Vec<&str> = own.into_iter().collect();
            let with_pinned = round % 4 == 0;
            let pods: Vec<(ClassId, i64)> = ids
                .iter()
                .enumerate()
                .filter(|(i, _)| *i < 3 || with_pinned)
                .map(|(_, id)| {
                    (
                        *id,
                        1 + rng.below(if round % 2 == 0 { 10 } else { 60 }) as i64,
                    )
                })
                .collect();
            let n = own.len().max(2);
            let stop = Stop {
                at_failure: true,
                at_new_nodeclaims: Some(n),
                at_in_flight: true,
            };
            let early = world.simulate_until(&Taken::default(), &own, &pods, true, stop);
            let whole = world.simulate(&Taken::default(), &own, &pods, true);
            let refuses = |o: &Simulation| {
                o.uninitialized_destination().is_some()
                    || !o.failures().is_empty()
                    || o.launches().len() >= n
            };
            assert_eq!(refuses(&early), refuses(&whole), "round {round}");
            if refuses(&whole) {
                refused += 1;
                if whole.uninitialized_destination().is_some() {
                    waiting += 1;
                }
                let placed = |o: &Simulation| o.placements().iter().map(|p| p.count).sum::<i64>();
                if placed(&early) < placed(&whole) {
                    stopped_short += 1;
                }
            } else {
                accepted += 1;
                assert_eq!(
                    outcome(&early.placements(), early.failures()),
                    outcome(&whole.placements(), whole.failures()),
                    "round {round}"
                );
                assert_eq!(early.launches(), whole.launches(), "round {round}");
            }
        }
        assert!(
            stopped_short >= 5 && waiting >= 5 && refused > stopped_short / 2 && accepted >= 5,
            "{stopped_short} stopped short, {refused} refused ({waiting} waiting for an \
             in-flight NodeClaim), {accepted} accepted test little"
        );

        // Through a World: the stopped run, asked first, is not the whole run's answer.
        let nodes = random_nodes(&mut rng, 60);
        let memo = RefCell::new(Memo::default());
        let world = World::new(
            vec![(pool_hash(&pool), &pool)],
            ids[..3]
                .iter()
                .zip(&classes)
                .map(|(id, c)| (*id, (c, &compat, ClassHashes::of(&compat))))
                .collect(),
            nodes
                .iter()
                .map(|n| (fingerprint(n), ends_chunk(&n.node.name), n))
                .collect(),
            NodeNames::of(&nodes).set(),
            |_| true,
            &memo,
        );
        let pods: Vec<(ClassId, i64)> = ids[..3].iter().map(|id| (*id, 60)).collect();
        let own = ["node-0001", "node-0002"];
        let stop = Stop {
            at_failure: true,
            at_new_nodeclaims: Some(1),
            at_in_flight: false,
        };
        let early = world.simulate_until(&Taken::default(), &own, &pods, true, stop);
        let whole = world.simulate(&Taken::default(), &own, &pods, true);
        // It stops after the class that opened the first NodeClaim; the others launch more.
        assert!(
            !early.launches().is_empty() && early.launches().len() < whole.launches().len(),
            "stopped: {} launches, whole: {}",
            early.launches().len(),
            whole.launches().len()
        );
        assert_eq!(memo.borrow().runs.get("full").map(|r| r.0), Some(2));
    }

    /// A walk kept from an earlier evaluation must give the answer a fresh run would, whatever
    /// changed since: nodes' room before, inside or after the chunks it read, nodes joining
    /// (also past the end of a walk that placed nothing) or leaving, the classes' requirements
    /// (a zone), nodes an earlier command of the evaluation took, and the classes' prices
    /// (which such runs do not read, so walks stand through them).
    /// The memo is shared across all rounds, as the commands query shares it across
    /// evaluations.
    #[test]
    fn walks_kept_between_evaluations_equal_fresh_runs() {
        let classes = test_classes();
        let ids: Vec<ClassId> = classes.iter().map(stable_hash).collect();
        let mut compat = compat();
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let mut nodes = random_nodes(&mut rng, 200);
        let mut next_name = 200;
        let memo = RefCell::new(Memo::default());
        // A few fixed simulations asked every evaluation, as candidates are.
        type Ask = (Vec<(ClassId, i64)>, Vec<String>);
        let asks: Vec<Ask> = (0..12)
            .map(|k| {
                let pods = ids
                    .iter()
                    .map(|id| (*id, rng.below(if k % 3 == 0 { 300 } else { 6 }) as i64))
                    .filter(|(_, n)| *n > 0)
                    .collect();
                (pods, vec![format!("node-{:04}", rng.below(200))])
            })
            .collect();
        let mut reused = 0;
        for round in 0..60 {
            memo.borrow_mut().next_evaluation();
            // Every round a new price; now and then a new zone requirement.
            compat.unit_cost = vec![("cpu".to_string(), UnitCost::new(rng.below(100) as f64))];
            if rng.below(5) == 0 {
                let mut requirements = Requirements::new();
                if let Some(zone) = ["a", "b", ""][rng.below(3) as usize].get(..1) {
                    requirements.add(ZONE, Requirement::single(zone.to_string()));
                }
                compat.requirements = requirements;
            }
            {
                let world = world(&classes, &ids, &compat, &nodes, &memo);
                // In every other stretch of five evaluations an earlier command took a node,
                // early in name order, where walks read, or (every other twenty) late, where
                // most do not.
                let mut taken = Taken::default();
                let first = if (round / 20) % 2 == 0 { 0 } else { 150 };
                let taken_name = format!("node-{:04}", first + (round / 10) % 10);
                if (round / 5) % 2 == 0 {
                    world.take(&mut taken, [taken_name.clone()]);
                }
                for (pods, removed_names) in &asks {
                    let mut removed: BTreeSet<&str> =
                        removed_names.iter().map(String::as_str).collect();
                    let own: Vec<&str> = removed.iter().copied().collect();
                    let kept = world.simulate(&taken, &own, pods, false);
                    if taken.contains(&taken_name) {
                        removed.insert(&taken_name);
                    }
                    let chosen: Vec<PodClass> = pods
                        .iter()
                        .filter_map(|(id, _)| ids.iter().position(|i| i == id))
                        .map(|i| classes[i].clone())
                        .collect();
                    let whole = whole_run(&chosen, &compat, pods, &nodes, &removed);
                    assert_eq!(
                        outcome(&kept.placements(), kept.failures()),
                        outcome(&whole.placements, &whole.failures),
                        "round {round}"
                    );
                }
                reused += memo.borrow().walk_hits;
            }
            // Churn: a node's room changes, a node joins at a random place in name order or at
            // the end, a node leaves.
            match rng.below(4) {
                0 | 1 => {
                    let i = rng.below(nodes.len() as u64) as usize;
                    let name = nodes[i].node.name.clone();
                    nodes[i] = random_node(&mut rng, name);
                }
                2 => {
                    let name = if rng.below(2) == 0 {
                        format!("node-{:04}z", rng.below(200))
                    } else {
                        next_name += 1;
                        format!("node-{next_name:04}")
                    };
                    nodes.push(random_node(&mut rng, name));
                }
                _ => {
                    let i = rng.below(nodes.len() as u64) as usize;
                    nodes.remove(i);
                }
            }
        }
        assert!(reused > 0, "no walk was ever kept (prices change every round and must not end one): the test checks nothing");
    }
}
