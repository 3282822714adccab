//! Carrying a packing on from the last one instead of rebuilding it.
//!
//! A change that only adds or removes pods of classes already pending (no NodePool, node,
//! class or spread domain changed) would, seeded from the last plan (`seed`), rebuild every
//! planned bin, every class's compatibility bitsets and topology constraints, only to arrive at
//! the state the last run ended in, minus the copies removed. At 100,000 pending pods that is
//! ~20,000 bins and ~3,400 classes per change. Instead the last run's state is kept ([`Warm`]),
//! the removed copies are taken out of it by the seed's own rule (nodes first, then the planned
//! NodeClaims holding the fewest pods), and the run goes on from there: the plan is the one a
//! seeded run would make (`solve_warm_equals_seeded_runs` in `queries/tests/differential.rs`
//! checks it on random changes), at a cost that follows the classes and bins the change touches.

use super::bin::{Bin, BinKind};
use super::seed::Origin;
use super::topology::{ClassTopology, Topology};
use super::SolverOutput;
use super::{
    class_bits, node_limits, pending_demand, sorted, ClassInput, Previous, Solver, SolverInput,
};
use crate::types::{ClassId, NodeState, PoolTypes};
use dovetail_dataflow::model::Resources;
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Runs carried on since the process started (see [`carried_on_runs`]).
static CARRIED_ON: AtomicU64 = AtomicU64::new(0);

/// How many packing runs in this process were carried on from the last one rather than rebuilt:
/// how often changes take the short way (the bench reports it; a test checks it is taken).
pub fn carried_on_runs() -> u64 {
    CARRIED_ON.load(Ordering::Relaxed)
}

/// What a packing run ended with, kept for the next change of the same packing group. It holds
/// only while the group's NodePools, nodes, spread domains and each class's content are the
/// same (classes may come and go); the caller tells, and `solve_warm` checks that the NodePools
/// and nodes match by name.
pub struct Warm {
    /// The run's classes, in its order, with one copy's requests (to take out the copies of a
    /// class that is gone).
    classes: Vec<(ClassId, Resources)>,
    pools: Vec<String>,
    nodes: Vec<String>,
    compat_bits: Vec<Vec<Option<Vec<u64>>>>,
    topo: Topology,
    class_topo: Vec<ClassTopology>,
    group_totals: Vec<i64>,
    bins: Vec<Bin>,
    taken: Option<Rc<BTreeSet<String>>>,
}

impl Warm {
    fn fits(&self, pools: &[&PoolTypes], nodes: &[&NodeState]) -> bool {
        self.pools.len() == pools.len()
            && self.nodes.len() == nodes.len()
            && self
                .pools
                .iter()
                .zip(pools)
                .all(|(name, p)| *name == p.nodepool.name)
            && self
                .nodes
                .iter()
                .zip(nodes)
                .all(|(name, n)| *name == n.node.name)
    }
}

/// Runs the packing as `solve` does and returns, beside the plan, the state to carry the next
/// change on from. With `warm` from the last run and the previous plan it carries this one on
/// (only the classes it touches get placements in the output, see `SolverOutput::touched`);
/// otherwise, or when a new class brings a topology group no class had, it runs from the
/// previous plan, or from nothing.
pub fn solve_warm(mut input: SolverInput<'_>, warm: Option<Warm>) -> (SolverOutput, Warm) {
    sorted(&mut input);
    let SolverInput {
        pools,
        classes,
        nodes,
        bystanders,
        previous,
    } = input;
    let mut solver = match (warm, previous) {
        (Some(warm), Some(previous)) if warm.fits(&pools, &nodes) => {
            let (mut solver, last) =
                Solver::resume(pools, classes, nodes, &bystanders, warm, previous);
            if solver.carry_on(last) {
                CARRIED_ON.fetch_add(1, Ordering::Relaxed);
                let out = solver.finish(true);
                return (out, solver.suspend());
            }
            // The state is part-way changed: run from the previous plan instead.
            let Solver {
                pools,
                classes,
                nodes,
                ..
            } = solver;
            let mut solver = Solver::new(pools, classes, nodes, &bystanders, None);
            solver.run(Some(previous));
            solver
        }
        (_, previous) => {
            let mut solver = Solver::new(pools, classes, nodes, &bystanders, None);
            solver.run(previous);
            solver
        }
    };
    let out = solver.finish(false);
    (out, solver.suspend())
}

impl<'a> Solver<'a> {
    /// A solver over the last run's state, and the last run's classes (`carry_on` brings the
    /// state up to this run's).
    fn resume(
        pools: Vec<&'a PoolTypes>,
        classes: Vec<ClassInput<'a>>,
        nodes: Vec<&'a NodeState>,
        bystanders: &[&'a NodeState],
        warm: Warm,
        previous: Previous<'a>,
    ) -> (Self, Vec<(ClassId, Resources)>) {
        let limits = node_limits(&pools, &nodes, bystanders);
        let touched = vec![false; classes.len()];
        let solver = Solver {
            pools,
            classes,
            nodes,
            compat_bits: warm.compat_bits,
            topo: warm.topo,
            class_topo: warm.class_topo,
            group_totals: warm.group_totals,
            limits,
            demand: Vec::new(),
            bins: warm.bins,
            failures: Vec::new(),
            taken: warm.taken,
            claimed: BTreeSet::new(),
            touched,
            relaxed: Vec::new(),
            previous_launches: previous.launches,
            previous_names: None,
            offer_values: std::cell::OnceCell::new(),
            node_values: std::cell::RefCell::default(),
            shared: None,
            index: Vec::new(),
            cheapest: Rc::default(),
            stop: super::Stop::NEVER,
        };
        (solver, warm.classes)
    }

    /// Carries the last run on to this input: its classes reconciled, the copies beyond each
    /// class's count taken out, the limits and demand recounted, and the copies still to place
    /// placed. False, with the state part-way changed, when a new class needs a topology group
    /// the last run did not have (its counts would have to be rebuilt from every bin).
    fn carry_on(&mut self, last: Vec<(ClassId, Resources)>) -> bool {
        if !self.reconcile(&last) {
            return false;
        }
        let placed = self.trim();
        if self.limits.iter().any(Option::is_some) {
            for b in 0..self.bins.len() {
                self.charge_limits(b);
            }
        }
        self.demand = pending_demand(&self.pools, &self.classes, &self.compat_bits);
        for (ci, &n) in placed.iter().enumerate() {
            let req = self.classes[ci].class.scheduling.requests.times(n);
            for (p, bits) in self.compat_bits[ci].iter().enumerate() {
                if bits.is_some() {
                    self.demand[p] = self.demand[p].sub(&req);
                }
            }
        }
        for (ci, placed) in placed.into_iter().enumerate() {
            self.place_class_relaxing(ci, self.classes[ci].count - placed);
        }
        true
    }

    /// Brings the state's per-class parts from the last run's classes (`last`, in its order) to
    /// this run's: the copies of classes that are gone are taken out, new classes get their
    /// compatible types and constraints, and the bins' class indices are renumbered.
    fn reconcile(&mut self, last: &[(ClassId, Resources)]) -> bool {
        if last.len() == self.classes.len()
            && last
                .iter()
                .zip(&self.classes)
                .all(|((id, _), c)| *id == c.id)
        {
            return true;
        }
        let now: FxHashMap<ClassId, usize> = self
            .classes
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id, i))
            .collect();
        let renumber: Vec<Option<usize>> =
            last.iter().map(|(id, _)| now.get(id).copied()).collect();
        let mut emptied = false;
        for b in 0..self.bins.len() {
            let gone: Vec<(usize, i64)> = self.bins[b]
                .classes
                .iter()
                .filter(|(oi, _)| renumber[*oi].is_none())
                .copied()
                .collect();
            for &(oi, k) in &gone {
                self.take_out(b, oi, k, &last[oi].1.times(k));
            }
            if !gone.is_empty() {
                self.refresh_headroom(b);
                emptied |= self.bins[b].classes.is_empty();
            }
        }
        if emptied {
            self.drop_empty_planned_bins();
        }
        let mut bits: Vec<Option<Vec<Option<Vec<u64>>>>> = std::mem::take(&mut self.compat_bits)
            .into_iter()
            .map(Some)
            .collect();
        let mut topo: Vec<Option<ClassTopology>> = std::mem::take(&mut self.class_topo)
            .into_iter()
            .map(Some)
            .collect();
        let before: FxHashMap<ClassId, usize> = last
            .iter()
            .enumerate()
            .map(|(i, (id, _))| (*id, i))
            .collect();
        let groups = self.topo.groups.len();
        for ci in 0..self.classes.len() {
            let c = &self.classes[ci];
            let kept = before
                .get(&c.id)
                .and_then(|&oi| Some((bits.get_mut(oi)?.take()?, topo.get_mut(oi)?.take()?)));
            let (b, t) = match kept {
                Some(kept) => kept,
                None => {
                    let mut t = self
                        .topo
                        .class_constraints(c.class, !c.compat.dropped_node_preference);
                    t.member_of = self.topo.memberships(c.class);
                    (class_bits(&self.pools, c), t)
                }
            };
            self.compat_bits.push(b);
            self.class_topo.push(t);
        }
        if self.topo.groups.len() != groups {
            return false;
        }
        for bin in &mut self.bins {
            for (ci, _) in &mut bin.classes {
                // Every class left in a bin is still pending (the others were taken out above).
                if let Some(ni) = renumber[*ci] {
                    *ci = ni;
                }
            }
        }
        true
    }

    /// Takes out the copies beyond each class's pending count, as `seed` drops them: from
    /// nodes first (the last placed first), then from the planned NodeClaims holding the fewest
    /// pods. Returns the copies of each class left in the bins.
    fn trim(&mut self) -> Vec<i64> {
        let mut placed = vec![0i64; self.classes.len()];
        for bin in &self.bins {
            for &(ci, k) in &bin.classes {
                placed[ci] += k;
            }
        }
        let excess: Vec<i64> = placed
            .iter()
            .zip(&self.classes)
            .map(|(p, c)| p - c.count)
            .collect();
        if excess.iter().all(|&e| e <= 0) {
            return placed;
        }
        let mut held: FxHashMap<usize, Vec<(usize, i64)>> = FxHashMap::default();
        for (b, bin) in self.bins.iter().enumerate() {
            for &(ci, k) in &bin.classes {
                if excess[ci] > 0 {
                    held.entry(ci).or_default().push((b, k));
                }
            }
        }
        let pods = |bin: &Bin| bin.classes.iter().map(|(_, k)| k).sum::<i64>();
        let mut classes: Vec<usize> = held.keys().copied().collect();
        classes.sort_unstable();
        let mut removals = Vec::new();
        for ci in classes {
            let list = &held[&ci];
            let mut by_priority: Vec<usize> = (0..list.len()).collect();
            by_priority.sort_by_key(|&i| {
                let bin = &self.bins[list[i].0];
                match bin.kind {
                    BinKind::Existing { .. } => (0, 0, std::cmp::Reverse(i)),
                    BinKind::New { .. } => (1, pods(bin), std::cmp::Reverse(i)),
                }
            });
            let mut left = excess[ci];
            for i in by_priority {
                let take = left.min(list[i].1);
                removals.push((list[i].0, ci, take));
                left -= take;
                if left == 0 {
                    break;
                }
            }
        }
        let mut emptied = false;
        for &(b, ci, k) in &removals {
            self.remove_copies(b, ci, k);
            placed[ci] -= k;
            emptied |= self.bins[b].classes.is_empty();
        }
        for &(b, _, _) in &removals {
            self.refresh_headroom(b);
        }
        if emptied {
            self.drop_empty_planned_bins();
        }
        placed
    }

    /// A planned NodeClaim left with no pods is gone, as a seeded run would not rebuild it.
    fn drop_empty_planned_bins(&mut self) {
        self.bins
            .retain(|bin| matches!(bin.kind, BinKind::Existing { .. }) || !bin.classes.is_empty());
    }

    /// Takes `copies` copies of class `ci` out of bin `b`: the inverse of `add_copies`, but
    /// for the NodePools' demand, which `carry_on` recounts.
    fn remove_copies(&mut self, b: usize, ci: usize, copies: i64) {
        self.touched[ci] = true;
        let req = self.classes[ci].class.scheduling.requests.times(copies);
        self.take_out(b, ci, copies, &req);
    }

    /// `remove_copies` of copies needing `req` in all, for a class index that may be the last
    /// run's (`reconcile`).
    fn take_out(&mut self, b: usize, ci: usize, copies: i64, req: &Resources) {
        let member_of = &self.class_topo[ci].member_of;
        let bin = &mut self.bins[b];
        bin.used = bin.used.sub(req);
        bin.used.extended.retain(|_, v| *v != 0);
        if let Some(i) = bin.classes.iter().position(|(c, _)| *c == ci) {
            bin.classes[i].1 -= copies;
            if bin.classes[i].1 <= 0 {
                bin.classes.remove(i);
            }
        }
        for &g in member_of {
            if let Some(n) = bin.group_counts.get_mut(&g) {
                *n -= copies;
                if *n == 0 {
                    bin.group_counts.remove(&g);
                }
            }
        }
        bin.anti_groups = bin
            .classes
            .iter()
            .flat_map(|&(c, _)| self.class_topo[c].refuses.iter().copied())
            .collect();
        if let Some(origin) = bin.origin.as_mut() {
            origin.changed = true;
        }
        for &g in member_of {
            self.group_totals[g] -= copies;
            let group = &self.topo.groups[g];
            if group.per_node() {
                continue;
            }
            let key = group.key.clone();
            if let Some(domain) = self.bin_domain(b, &key) {
                self.topo.remove(g, &domain, copies);
            }
        }
    }

    /// The state to carry the next change on from: the preferences this run relaxed restored,
    /// every bin's classes in class order (as a seeded run rebuilds them),
    /// and every planned bin numbered as its launch in the plan (`SolverOutput::order`).
    fn suspend(mut self) -> Warm {
        for (ci, topo) in self.relaxed.drain(..) {
            self.class_topo[ci] = topo;
        }
        let mut launch = 0;
        self.bins.retain_mut(|bin| {
            if bin.classes.is_empty() {
                return matches!(bin.kind, BinKind::Existing { .. });
            }
            if !bin.classes.is_sorted_by_key(|(ci, _)| *ci) {
                bin.classes.sort_by_key(|(ci, _)| *ci);
            }
            if matches!(bin.kind, BinKind::New { .. }) {
                bin.origin = Some(Origin {
                    launch,
                    changed: false,
                });
                launch += 1;
            }
            true
        });
        Warm {
            classes: self
                .classes
                .iter()
                .map(|c| (c.id, c.class.scheduling.requests.clone()))
                .collect(),
            pools: self.pools.iter().map(|p| p.nodepool.name.clone()).collect(),
            nodes: self.nodes.iter().map(|n| n.node.name.clone()).collect(),
            compat_bits: self.compat_bits,
            topo: self.topo,
            class_topo: self.class_topo,
            group_totals: self.group_totals,
            bins: self.bins,
            taken: self.taken,
        }
    }
}
