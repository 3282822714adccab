//! Query — disruption commands: which nodes to disrupt now, why, and what replaces them.
//!
//! Rule, in Karpenter's method order, each NodePool's budget shared across methods (a node
//! any command takes counts against every budget of its NodePool, as a node marked for deletion
//! does in Karpenter):
//! 1. interrupted and expired nodes go at once, outside budgets and blockers (though they use
//!    them up), each with the launches its pods need;
//! 2. empty nodes (no movable pods, past `consolidateAfter`) go together in one command;
//! 3. drifted nodes go one command each, with the launches their pods need;
//! 4. multi-node consolidation: candidates by descending price per unit of disruption cost,
//!    scaled by the share of the node's lifetime left before it expires (at most 100), the longest prefix (found by binary search, as Karpenter) whose pods fit on the
//!    rest of the cluster plus fewer new NodeClaims than it removes (m → n, n < m; Karpenter
//!    allows only n ≤ 1) for a lower total price;
//! 5. otherwise single-node consolidation: the candidate with the best savings per unit of
//!    disruption cost (scaled likewise) whose pods fit elsewhere (delete) or on one strictly cheaper NodeClaim
//!    (replace).
//!
//! A replacement keeps only the instance types that are cheaper than what it replaces at their
//! worst launch price, and one that may be spot or on-demand is narrowed to spot (it was priced
//! as spot). When every removed node is spot and the replacement may be spot, it is
//! spot-to-spot: only with the SpotToSpotConsolidation gate, and for a single node only with at
//! least 15 cheaper types, the launch list cut to max(15, minValues). `Balanced` approves a move
//! only when its NodePool's share of the savings is at least half its share of the disruption
//! cost (single- and multi-node moves alike).
//!
//! Each method is a file, as in Karpenter's `pkg/controllers/disruption/`: `forceful.rs` (1),
//! `emptiness.rs` (2), `drift.rs` (3), `multi_node.rs` (4), `single_node.rs` (5), and
//! `balanced.rs` for the Balanced policy's approval; `run` calls them in order.
//!
//! Graceful methods (2–5) skip blocked candidates (do-not-disrupt, PodDisruptionBudget,
//! `consolidateAfter: Never`, `WhenEmpty` for a node with pods), and over-budget ones; those
//! are listed with what blocks them. A cheap necessary condition (every pod fits the largest
//! free room elsewhere and all of them the total, or the cheapest launch that could hold any one
//! of its pods costs less than the node) prunes candidates before the exact check, and a
//! candidate no replacement could beat is checked for a delete only.

mod balanced;
mod drift;
mod emptiness;
mod forceful;
mod multi_node;
mod parts;
mod pricing;
mod single_node;

use super::simulate::{Memo, Simulation, Taken, World};
use super::types::{Allowance, Candidate, Forced};
use crate::solver::Stop;
use crate::types::{ClassId, NodeState, PoolTypes};
use differential_dataflow::VecCollection;
use dovetail_dataflow::decisions::{Decision, Disruption, DisruptionReason, Launch};
use dovetail_dataflow::disruption_reasons::Blocker;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::maintained::{changes, maintain, Maintained};
use dovetail_dataflow::model::labels::DISRUPTED_TAINT;
use dovetail_dataflow::model::{ConsolidationPolicy, Price, Resources};
use dovetail_dataflow::stable_hash::stable_hash;
use multi_node::Rank;
pub use parts::Part;
use parts::{Listing, Parts, Slot};
use rustc_hash::{FxBuildHasher, FxHashMap};
use single_node::{Check, Demand, PricedLaunches};
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::BuildHasher;

/// Karpenter's cap on candidates in one multi-node command.
pub const MAX_MULTI_NODE: usize = 100;
/// How much re-checking of single-node outcomes that stood on a whole-cluster run one
/// evaluation does, in nodes simulated (a run over every destination costs their number).
/// A pod with a zone spread or an affinity reads the whole cluster, so every change anywhere
/// makes such an outcome stale; at 1,200 nodes re-checking ~600 of them cost ~0.5 s per
/// evaluation. Past this much, a stale outcome stands until its turn comes in a later
/// evaluation (each starts where the last stopped), and one chosen as the command is checked
/// again first. Karpenter bounds the same work by time (single-node consolidation gives up
/// after 3 minutes and starts over at its next poll); a count keeps replays deterministic.
/// Multi-node consolidation's whole-cluster runs, once a clock minute, count against it too.
pub const WHOLE_RECHECK_NODES: usize = 12_000;
/// Spot-to-spot replacement needs at least this many cheaper instance types.
pub const MIN_SPOT_TO_SPOT_TYPES: usize = 15;
/// The feature gate that allows spot-to-spot replacement.
pub const SPOT_TO_SPOT_GATE: &str = "SpotToSpotConsolidation";

/// A planned command before it becomes decisions.
struct Command {
    nodes: Vec<String>,
    reason: DisruptionReason,
    launches: Vec<Launch>,
    savings: i64,
}

/// Why a candidate is held back. Most are the candidate's own blocker, which needs no copy per
/// evaluation.
type Why<'a> = Cow<'a, Blocker>;

/// The evaluation's state: inputs indexed, budgets left, commands and blocked candidates.
struct Evaluation<'a> {
    world: World<'a>,
    /// Every candidate by node, with what is kept about it.
    candidates: &'a BTreeMap<String, Slot>,
    /// Candidates without pods, by node.
    empty: &'a BTreeSet<String>,
    /// Candidates multi-node consolidation may take, best first.
    ranked: &'a BTreeSet<(Rank, String)>,
    /// Single-node replacements narrowed by price, by new-NodeClaim run, the removed node's
    /// price and whether it is spot (see [`Evaluation::consolidate_one_now`]).
    priced: PricedLaunches,
    /// Single-node outcomes that stood (for the debug log).
    check_hits: std::cell::Cell<u64>,
    /// Nodes simulated by this evaluation's whole-cluster runs, multi-node's and single-node
    /// re-checks' (see [`WHOLE_RECHECK_NODES`]).
    whole_spent: std::cell::Cell<usize>,
    /// Candidates whose stale whole-cluster outcome stood this evaluation, past the budget,
    /// with whether a replacement was plausible (to check them again if chosen).
    deferred: RefCell<FxHashMap<&'a str, bool>>,
    /// The first of them in this evaluation's order: where the next one starts.
    first_deferred: std::cell::Cell<Option<&'a str>>,
    /// The candidate single-node consolidation starts from.
    start_at: Option<&'a str>,
    /// Whether multi-node consolidation has not run yet in this clock minute: with outcomes
    /// deferred it runs once a minute, not every evaluation (see [`Evaluation::consolidate`]).
    multi_due: bool,
    /// Whether it ran in this evaluation.
    multi_ran: bool,
    forced: BTreeMap<&'a str, &'a Forced>,
    budgets: BTreeMap<&'a str, Allowance>,
    /// Nodes of each NodePool this evaluation's commands disrupt (forceful ones included).
    used: BTreeMap<String, i64>,
    spot_to_spot: bool,
    /// Largest free room and total free room on destinations, for the cheap prune.
    max_free: Resources,
    total_free: Resources,
    commands: Vec<Command>,
    blocked: Vec<(&'a Slot, DisruptionReason, Why<'a>)>,
    /// Per NodePool, the price and disruption cost of all its nodes (for `Balanced`), summed
    /// at the first use, not per option.
    pool_totals: std::cell::OnceCell<BTreeMap<&'a str, (i64, i64)>>,
    taken: Taken,
    /// The time candidates' disruption costs are scaled at (see [`super::lifetime`]).
    now: i64,
    phases: Phases,
}

/// Microseconds spent in each phase of an evaluation (for the debug log).
struct Phases {
    started: std::time::Instant,
    last: std::time::Instant,
    done: Vec<(&'static str, u64)>,
}

impl Phases {
    fn start() -> Self {
        let now = std::time::Instant::now();
        Phases {
            started: now,
            last: now,
            done: Vec::new(),
        }
    }

    /// Ends a phase.
    fn mark(&mut self, phase: &'static str) {
        let now = std::time::Instant::now();
        self.done
            .push((phase, now.duration_since(self.last).as_micros() as u64));
        self.last = now;
    }
}

fn price_of(c: &Candidate) -> i64 {
    c.price.map(|p| p.0).unwrap_or(0)
}

impl<'a> Evaluation<'a> {
    fn candidate(&self, node: &str) -> Option<&'a Candidate> {
        self.candidates.get(node).map(|s| &s.candidate)
    }

    fn mark(&mut self, phase: &'static str) {
        self.phases.mark(phase);
    }

    /// Whether an earlier command of this evaluation disrupts or fills the candidate's node.
    fn is_taken(&self, c: &Slot) -> bool {
        self.taken.contains_hashed(&c.node, c.name_hash)
    }

    /// How many more nodes of `pool` may go for `reason`: the budget (already net of nodes
    /// disrupting before this evaluation) less the pool's nodes this evaluation's commands
    /// take, whatever their reason. A node being disrupted counts against every budget of its
    /// NodePool, as Karpenter counts it once it is marked for deletion; otherwise one
    /// evaluation could start up to a budget's worth of disruptions for each reason at once.
    /// No budget computed (no NodePool): nothing may be disrupted gracefully.
    fn budget_left(&self, pool: &str, reason: DisruptionReason) -> i64 {
        let Some(a) = self.budgets.get(pool) else {
            return 0;
        };
        let limit = match reason {
            DisruptionReason::Empty => a.empty,
            DisruptionReason::Drifted => a.drifted,
            DisruptionReason::Underutilized => a.underutilized,
            _ => return 0,
        };
        limit.saturating_sub(self.used.get(pool).copied().unwrap_or(0))
    }

    /// Counts one of the pool's nodes as disrupted by this evaluation.
    fn use_budget(&mut self, pool: &str) {
        *self.used.entry(pool.to_string()).or_insert(0) += 1;
    }

    /// Takes one disruption of `reason` from the node's NodePool budget; false when none left.
    fn take_budget(&mut self, pool: &str, reason: DisruptionReason) -> bool {
        if self.budget_left(pool, reason) > 0 {
            self.use_budget(pool);
            true
        } else {
            false
        }
    }

    fn over_budget(&mut self, c: &'a Slot, reason: DisruptionReason) {
        let budget = self
            .budgets
            .get(c.nodepool.as_str())
            .and_then(|a| match reason {
                DisruptionReason::Empty => a.empty_budget.clone(),
                DisruptionReason::Drifted => a.drifted_budget.clone(),
                DisruptionReason::Underutilized => a.underutilized_budget.clone(),
                _ => None,
            });
        self.blocked.push((
            c,
            reason,
            Cow::Owned(Blocker::Budget {
                nodepool: c.nodepool.clone(),
                reason,
                budget,
            }),
        ));
    }

    /// A simulation of removing `nodes`: the launches it needs, or why it fails.
    fn simulate(&self, nodes: &[&Candidate]) -> Result<Vec<Launch>, Blocker> {
        self.simulate_until(nodes, Stop::NEVER)
    }

    /// [`Evaluation::simulate`] for a caller that refuses what `stop` stops at (see [`Stop`]).
    fn simulate_until(&self, nodes: &[&Candidate], stop: Stop) -> Result<Vec<Launch>, Blocker> {
        let out = self.simulation_with(nodes, true, stop);
        Self::workable(&out)?;
        Ok(out.launches().to_vec())
    }

    /// Whether a graceful command may stand on a simulation: every pod placed, none on a
    /// NodeClaim that is not initialized (Karpenter's `SimulateScheduling`).
    fn workable(out: &Simulation) -> Result<(), Blocker> {
        if let Some(nodeclaim) = out.uninitialized_destination() {
            return Err(Blocker::UninitializedDestination {
                nodeclaim: nodeclaim.to_string(),
            });
        }
        Self::all_placed(out)
    }

    /// Whether every pod of a simulation has a place, on an existing node or a new NodeClaim.
    fn all_placed(out: &Simulation) -> Result<(), Blocker> {
        match out.failures().first() {
            Some(f) => Err(Blocker::PodsWouldNotFit {
                pods: f.count,
                why: f.reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Keeps the existing nodes that take pods from an accepted command out of later commands
    /// of this evaluation, both as destinations (their free room is spoken for) and as
    /// candidates (a node cannot receive pods and be removed at once). Call it before the
    /// command's own nodes join `taken`, so the simulation is the one already memoised.
    fn reserve_landing(&mut self, nodes: &[&Candidate]) {
        let out = self.simulation(nodes);
        let launched: BTreeSet<&str> = out.launches().iter().map(|l| l.name.as_str()).collect();
        let landing: Vec<String> = out
            .placements()
            .iter()
            .filter(|p| !launched.contains(p.target.as_str()))
            .map(|p| p.target.clone())
            .collect();
        self.world.take(&mut self.taken, landing);
    }

    fn simulation(&self, nodes: &[&Candidate]) -> Simulation {
        self.simulation_with(nodes, true, Stop::NEVER)
    }

    /// The simulation of removing `nodes`, with new NodeClaims when `new_nodeclaims`, stopping
    /// where `stop` says.
    fn simulation_with(
        &self,
        nodes: &[&Candidate],
        new_nodeclaims: bool,
        stop: Stop,
    ) -> Simulation {
        // Nodes that earlier commands of this evaluation disrupt cannot take pods either.
        let own: Vec<&str> = nodes.iter().map(|c| c.node.as_str()).collect();
        let mut pods: BTreeMap<ClassId, i64> = BTreeMap::new();
        for c in nodes {
            for (class, n) in &c.pods {
                *pods.entry(*class).or_insert(0) += n;
            }
        }
        let pods: Vec<(ClassId, i64)> = pods.into_iter().collect();
        self.world
            .simulate_until(&self.taken, &own, &pods, new_nodeclaims, stop)
    }

    /// Consolidation blockers of a candidate, in the order a user would look for them.
    fn consolidation_blocker(c: &'a Candidate, empty: bool) -> Option<Why<'a>> {
        if let Some(b) = &c.blocked_by {
            return Some(Cow::Borrowed(b));
        }
        if c.consolidate_never {
            return Some(Cow::Owned(Blocker::ConsolidateNever {
                nodepool: c.nodepool.clone(),
            }));
        }
        if !empty && c.policy == ConsolidationPolicy::WhenEmpty {
            return Some(Cow::Owned(Blocker::WhenEmpty {
                nodepool: c.nodepool.clone(),
            }));
        }
        None
    }

    /// Karpenter's methods in order, each in its own file; each sees what the earlier ones took.
    fn run(&mut self) {
        let forced = self.forced_slots();
        self.forceful(&forced);
        self.mark("forced");
        self.emptiness();
        self.mark("empty");
        self.drift(&forced);
        self.mark("drift");
        // Multi-node consolidation's binary search removes up to a hundred nodes per run, each
        // run over the whole cluster when pods spread over zones: while single-node outcomes
        // wait their turn, it runs once per clock minute, and first, so that its runs count
        // against the budget the single-node re-checks then share (an evaluation costs about
        // one budget whichever of the two it runs).
        let multi = if self.multi_due {
            self.multi_ran = true;
            self.multi_node()
        } else {
            None
        };
        self.mark("multi first");
        let options = self.single_node_options();
        self.mark("single");
        self.consolidate(options, multi);
    }

    /// Multi-node consolidation if it finds a command (`multi`, when it already ran), else the
    /// best single-node option; every option is listed once: blocked by budget, chosen, or
    /// waiting its turn.
    fn consolidate(&mut self, mut options: Vec<(&'a Slot, i64)>, multi: Option<Command>) {
        self.balanced_filter(&mut options);
        self.mark("balanced");
        // Not run yet this evaluation: it runs after the single-node options when no re-check
        // is waiting its turn (see `run`).
        let multi = if multi.is_none() && !self.multi_ran && self.deferred.borrow().is_empty() {
            self.multi_ran = true;
            self.multi_node()
        } else {
            multi
        };
        self.mark("multi after");
        let (chosen, waiting) = match multi {
            Some(cmd) => self.take_multi_node(cmd, &options),
            None => self.take_single_node(options),
        };
        for c in waiting {
            self.blocked.push((
                c,
                DisruptionReason::Underutilized,
                Cow::Owned(Blocker::Waiting),
            ));
        }
        self.world.take(&mut self.taken, chosen);
        self.mark("listings");
    }

    /// Counts a run over the whole cluster against the evaluation's budget.
    fn spend_whole_run(&self) {
        let spent = self.whole_spent.get() + self.world.destinations.len();
        self.whole_spent.set(spent);
    }

    /// Each command's disruptions and renamed replacement launches.
    fn command_decisions(&mut self) -> Vec<Decision> {
        let mut out = Vec::new();
        for cmd in std::mem::take(&mut self.commands) {
            let mut names = cmd.nodes.clone();
            names.sort();
            let id = format!("cmd-{:010x}", stable_hash(&names) & 0xff_ffff_ffff);
            let mut replacements = Vec::new();
            for (i, mut l) in cmd.launches.into_iter().enumerate() {
                let h = stable_hash(&(&id, i as u64));
                l.name = format!("{}-{:010x}", l.nodepool, h & 0xff_ffff_ffff);
                replacements.push(l.name.clone());
                out.push(Decision::Launch(l));
            }
            for n in &cmd.nodes {
                let Some(c) = self.candidate(n) else {
                    continue;
                };
                out.push(Decision::Disruption(Disruption {
                    node: n.clone(),
                    nodeclaim: c.nodeclaim.clone(),
                    nodepool: c.nodepool.clone(),
                    reason: cmd.reason,
                    command: Some(id.clone()),
                    replacements: replacements.clone(),
                    savings_per_hour: Price(cmd.savings),
                    blocked_by: None,
                }));
            }
        }
        out
    }
}

/// A blocked candidate's listing.
fn listing(c: &Candidate, reason: DisruptionReason, why: Blocker) -> Decision {
    Decision::Disruption(Disruption {
        node: c.node.clone(),
        nodeclaim: c.nodeclaim.clone(),
        nodepool: c.nodepool.clone(),
        reason,
        command: None,
        replacements: Vec::new(),
        savings_per_hour: Price(0),
        blocked_by: Some(Box::new(why)),
    })
}

/// Whether a listing says what `listing(c, _, why)` would, without building that.
fn listing_is(d: &Decision, c: &Candidate, why: &Blocker) -> bool {
    matches!(d, Decision::Disruption(d)
        if d.blocked_by.as_deref() == Some(why)
            && d.nodeclaim == c.nodeclaim
            && d.nodepool == c.nodepool)
}

/// Whether a node can take pods moved off a disrupted node.
fn is_destination(n: &NodeState) -> bool {
    !n.node.in_flight
        && !n.node.unschedulable
        && !n.node.deleting
        && !n.node.taints.iter().any(|t| t.key == DISRUPTED_TAINT)
}

/// The commands query's state between evaluations: its input parts, and the simulation memo
/// (pure, so an answer is what a fresh evaluation would give).
#[derive(Default)]
struct Commands {
    parts: Parts,
    memo: RefCell<Memo>,
    /// The commands' decisions last answered.
    commanded: HashMap<Decision, isize>,
    /// Evaluations so far.
    evaluation: u64,
    /// The candidate the next evaluation's single-node consolidation starts from: the first
    /// whose re-check the last one deferred.
    cursor: Option<String>,
    /// The clock minute multi-node consolidation last ran in.
    multi_at: Option<i64>,
}

impl Maintained for Commands {
    type In = Part;
    type Out = Decision;

    fn update(&mut self, part: Part, diff: isize) {
        self.parts.update(part, diff);
    }

    fn evaluate(&mut self, out: &mut Vec<(Decision, isize)>) {
        // A tick of the clock that moved no candidate's rank leaves the answer as it was.
        if !std::mem::take(&mut self.parts.dirty) {
            return;
        }
        let mut phases = Phases::start();
        out.extend(self.parts.unlisted.drain(..).map(|d| (d, -1)));
        let memo = &self.memo;
        memo.borrow_mut().next_evaluation();
        phases.mark("memo");
        let parts = &self.parts;
        let pools: Vec<(u64, &PoolTypes)> = parts.pools.values().map(|(h, p)| (*h, p)).collect();
        let classes = parts
            .classes
            .iter()
            .map(|(id, (class, compat, hashes))| (*id, (class, compat, *hashes)))
            .collect();
        let nodes: Vec<(u64, bool, &NodeState)> =
            parts.nodes.values().map(|(f, e, n)| (*f, *e, n)).collect();
        let mut forced: BTreeMap<&str, &Forced> = BTreeMap::new();
        for (n, f) in parts.forced.keys() {
            // Interrupted < Expired < Drifted in the enum order: keep the first.
            let e = forced.entry(n.as_str()).or_insert(f);
            if f < *e {
                *e = f;
            }
        }
        let budgets = parts
            .budgets
            .iter()
            .map(|(pool, a)| (pool.as_str(), a.clone()))
            .collect();
        let spot_to_spot = parts.spot_to_spot > 0;
        let candidates = &parts.candidates;
        if candidates.is_empty() {
            changes(&self.commanded, &HashMap::new(), out);
            self.commanded.clear();
            // No candidate is left to re-check: ticks need not evaluate again.
            self.parts.pending_checks = false;
            return;
        }
        phases.mark("parts");
        let names = parts.names.set();
        let world = World::new(pools, classes, nodes, names, is_destination, memo);
        let mut max_free = Resources::default();
        let mut total_free = Resources::default();
        for f in &world.free {
            max_free = max_free.max_each(f);
            total_free.add_assign(f);
        }
        self.evaluation += 1;
        let mut eval = Evaluation {
            world,
            candidates,
            empty: &parts.empty,
            ranked: &parts.ranked,
            priced: RefCell::new(FxHashMap::default()),
            forced,
            budgets,
            used: BTreeMap::new(),
            spot_to_spot,
            max_free,
            total_free,
            commands: Vec::new(),
            blocked: Vec::new(),
            pool_totals: std::cell::OnceCell::new(),
            taken: Taken::default(),
            now: parts.now,
            check_hits: std::cell::Cell::new(0),
            whole_spent: std::cell::Cell::new(0),
            deferred: RefCell::new(FxHashMap::default()),
            first_deferred: std::cell::Cell::new(None),
            start_at: self.cursor.as_deref(),
            multi_due: self.multi_at != Some(parts.now),
            multi_ran: false,
            phases,
        };
        eval.mark("world");
        eval.run();
        let deferred = eval.deferred.borrow().len();
        let cursor = eval.first_deferred.get().map(str::to_string);
        if eval.multi_ran {
            self.multi_at = Some(parts.now);
        }
        let evaluation = self.evaluation;
        let candidates = eval.candidates.len();
        let mut commanded: HashMap<Decision, isize> = HashMap::new();
        for d in eval.command_decisions() {
            *commanded.entry(d).or_insert(0) += 1;
        }
        changes(&self.commanded, &commanded, out);
        self.commanded = commanded;
        // Listings are compared as (node, reason, why) in place, kept with their candidates:
        // most stay as they were, and rebuilding and hashing ten thousand of them per change was
        // a fifth of it.
        let mut held_count = self.parts.listed;
        let mut seen_count = 0;
        for (c, reason, why) in std::mem::take(&mut eval.blocked) {
            let mut held = c.listed.borrow_mut();
            let why_hash = FxBuildHasher.hash_one(why.as_ref());
            match held.iter_mut().find(|l| l.reason == reason) {
                // The first listing of (node, reason) this evaluation wins.
                Some(l) if l.seen == evaluation => {}
                Some(l)
                    if l.why == why_hash
                        && (l.candidate == c.hash || listing_is(&l.decision, c, &why)) =>
                {
                    l.seen = evaluation;
                    l.candidate = c.hash;
                    seen_count += 1;
                }
                Some(l) => {
                    let new = listing(c, reason, why.into_owned());
                    out.push((std::mem::replace(&mut l.decision, new.clone()), -1));
                    out.push((new, 1));
                    (l.seen, l.candidate, l.why) = (evaluation, c.hash, why_hash);
                    seen_count += 1;
                }
                None => {
                    let decision = listing(c, reason, why.into_owned());
                    out.push((decision.clone(), 1));
                    held.push(Listing {
                        reason,
                        decision,
                        seen: evaluation,
                        candidate: c.hash,
                        why: why_hash,
                    });
                    held_count += 1;
                    seen_count += 1;
                }
            }
        }
        // Only when some listing went unseen is every candidate's looked at.
        if seen_count != held_count {
            for c in eval.candidates.values() {
                c.listed.borrow_mut().retain(|l| {
                    if l.seen != evaluation {
                        out.push((l.decision.clone(), -1));
                        held_count -= 1;
                    }
                    l.seen == evaluation
                });
            }
        }
        eval.mark("answer");
        let m = memo.borrow();
        tracing::debug!(
            candidates,
            simulations_reused = m.hits,
            simulations_run = m.misses,
            walks_reused = m.walk_hits,
            checks_reused = eval.check_hits.get(),
            checks_deferred = deferred,
            runs = ?m.runs,
            phases = ?eval.phases.done,
            micros = eval.phases.started.elapsed().as_micros() as u64,
            "disruption commands evaluated"
        );
        drop(m);
        drop(eval);
        self.parts.listed = held_count;
        self.parts.pending_checks = deferred > 0;
        self.cursor = cursor;
    }
}

/// The commands query over all its parts: one evaluation of the whole cluster per change, kept
/// by [`maintain`] so that a change re-sorts neither the ~30,000 parts nor the ~10,000 listings.
pub fn commands<'s>(parts: VecCollection<'s, Epoch, Part>) -> VecCollection<'s, Epoch, Decision> {
    maintain::<Commands>(parts, "DisruptionCommands")
}
