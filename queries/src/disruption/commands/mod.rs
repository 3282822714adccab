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
//! Graceful methods (2–5) skip blocked candidates (do-not-disrupt, PodDisruptionBudget,
//! `consolidateAfter: Never`, `WhenEmpty` for a node with pods), and over-budget ones; those
//! are listed with what blocks them. A cheap necessary condition (every pod fits the largest
//! free room elsewhere and all of them the total, or the cheapest launch that could hold any one
//! of its pods costs less than the node) prunes candidates before the exact check, and a
//! candidate no replacement could beat is checked for a delete only.

mod balanced;
mod multi_node;
mod parts;
mod pricing;

use super::lifetime::scaled_cost;
use super::simulate::{Memo, Reads, Simulation, Taken, World};
use super::types::{Allowance, Candidate, Forced};
use crate::types::{ClassId, NodeState, PoolTypes};
use differential_dataflow::VecCollection;
use dovetail_dataflow::decisions::{Decision, Disruption, DisruptionReason, Launch};
use dovetail_dataflow::disruption_reasons::Blocker;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::maintained::{changes, maintain, Maintained};
use dovetail_dataflow::model::labels::{CAPACITY_TYPE_SPOT, DISRUPTED_TAINT};
use dovetail_dataflow::model::{ConsolidationPolicy, Price, Resources};
use dovetail_dataflow::stable_hash::stable_hash;
use multi_node::Rank;
pub use parts::Part;
use parts::{Listing, Parts, Slot};
use rustc_hash::{FxBuildHasher, FxHashMap, FxHashSet};
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::BuildHasher;
use std::rc::Rc;

/// Karpenter's cap on candidates in one multi-node command.
pub const MAX_MULTI_NODE: usize = 100;
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

/// A single-node consolidation outcome: the replacement launches and the savings, or why not.
type Outcome = Result<(Rc<Vec<Launch>>, i64), Blocker>;

/// Narrowed replacement launches, or why none, by (run, price, spot).
type PricedLaunches = RefCell<FxHashMap<(usize, i64, bool), Result<Rc<Vec<Launch>>, Blocker>>>;

/// A candidate's single-node outcome with what it read: the candidate (by hash), what it read
/// of its pods' classes (the context), the NodePools when it priced a replacement, and the
/// existing nodes it walked.
struct Check {
    candidate: u64,
    /// [`World::existing_context`] of its pods, and the [`World::existing_all`] it was last
    /// found under (while that stands, so does the context, unrecomputed).
    context: u64,
    classes: u64,
    may_replace: bool,
    /// The candidate's price (its hash leaves it out).
    price: Option<Price>,
    /// [`World::new_context`] with the spot-to-spot gate, when the outcome read the NodePools.
    /// A delete reads none of it, so a price change leaves most outcomes standing.
    pools: Option<u64>,
    reads: Reads,
    /// The existing-node walk it stood on, kept alive while the check is.
    walk: Option<u64>,
    outcome: Outcome,
}

/// What the cheap prune reads of a candidate's pods, kept with the candidate: their total
/// requests, the largest of each resource, and the cheapest launch that could hold any one of
/// them. Summing ten thousand candidates' pods per evaluation was a tenth of it.
#[derive(Default)]
struct Demand {
    /// The candidate's hash.
    candidate: u64,
    total: Resources,
    largest: Resources,
    /// The [`World::existing_all`] the sums were made under (it names the classes known).
    classes: Option<u64>,
    cheapest: Option<i64>,
    /// The [`World::offers_all`] `cheapest` was found under.
    offers: Option<u64>,
}

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
        let out = self.simulation(nodes);
        if let Some(f) = out.failures().first() {
            return Err(Blocker::PodsWouldNotFit {
                pods: f.count,
                why: f.reason.clone(),
            });
        }
        Ok(out.launches().to_vec())
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
        self.simulation_with(nodes, true)
    }

    fn simulation_with(&self, nodes: &[&Candidate], new_nodeclaims: bool) -> Simulation {
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
            .simulate(&self.taken, &own, &pods, new_nodeclaims)
    }

    /// The cheap necessary conditions for consolidating one node: whether a delete is
    /// plausible (every pod fits the largest free room elsewhere and all of them the total) and
    /// whether a replacement is (a new NodeClaim holding any of its pods could cost less than
    /// the node). None when a pod's class is unknown.
    fn plausible(&self, c: &Slot) -> Option<(bool, bool)> {
        let mut d = c.demand.borrow_mut();
        if d.candidate != c.hash {
            *d = Demand {
                candidate: c.hash,
                ..Demand::default()
            };
        }
        if d.classes != Some(self.world.existing_all) {
            let (mut total, mut largest) = (Resources::default(), Resources::default());
            for (id, n) in &c.pods {
                let (class, _) = self.world.classes.get(id)?;
                let req = &class.scheduling.requests;
                total.add_assign(&req.times(*n));
                // Every pod fits the largest free room iff the largest of each resource does.
                largest = largest.max_each(req);
            }
            (d.total, d.largest) = (total, largest);
            d.classes = Some(self.world.existing_all);
        }
        if d.offers != Some(self.world.offers_all) {
            d.cheapest = c
                .pods
                .iter()
                .filter_map(|(id, _)| self.world.cheapest_launch_for_one(*id))
                .min();
            d.offers = Some(self.world.offers_all);
        }
        let cheapest_new = d.cheapest;
        // The candidate's own room is among the destinations; the prune may over-count it,
        // which only keeps a candidate for the exact check.
        let delete = d.largest.fits_in(&self.max_free) && d.total.fits_in(&self.total_free);
        // The pods a replacement holds are those the other nodes leave over, at least one of
        // them: it costs at least the cheapest launch for any single one. (A bound over all the
        // pods, as before, could prune a node whose leftovers alone fit a cheaper NodeClaim.)
        let replace = matches!((c.price, cheapest_new), (Some(p), Some(q)) if q < p.0);
        Some((delete, replace))
    }

    /// Single-node consolidation outcome: (launches, savings), or why not.
    /// With `may_replace` false (no replacement could be cheaper), only a delete is checked.
    /// The outcome is kept per candidate with what it read ([`Check`]) and stands while that is
    /// unchanged: most changes touch a few nodes, and re-checking ten thousand candidates
    /// (even with every simulation memoised) was most of a change.
    /// Returns the savings of a consolidation that works; its launches stay in the check
    /// ([`Evaluation::kept_launches`]), not copied for thousands of candidates of which one is
    /// chosen.
    fn consolidate_one(&self, c: &'a Slot, may_replace: bool) -> Result<i64, Blocker> {
        let candidate = c.hash;
        let classes = self.world.existing_all;
        let pools = || {
            stable_hash(&(
                self.world.new_context(&self.taken, &c.pods),
                self.spot_to_spot,
            ))
        };
        if let Some(check) = c.check.borrow_mut().as_mut() {
            // A check that read no NodePools launched nothing: it is a delete, priced at the
            // node's price, or pods that fit nowhere, whatever the price. So it stands through a
            // change of the node's own price, re-priced (a price change of a type two thousand
            // nodes run re-checked them all).
            let repriceable = check.pools.is_none()
                && check
                    .outcome
                    .as_ref()
                    .map_or(true, |(launches, _)| launches.is_empty());
            let priced = check.price == c.price || repriceable;
            if check.candidate == candidate
                && priced
                && check.may_replace == may_replace
                && (check.classes == classes
                    || check.context == self.world.existing_context(&c.pods))
                && check.pools.is_none_or(|p| p == pools())
                && self.world.unchanged(&check.reads, &self.taken)
            {
                if check.price != c.price {
                    if let (Ok((_, savings)), Some(price)) = (&mut check.outcome, c.price) {
                        *savings = price.0;
                    }
                    check.price = c.price;
                }
                check.classes = classes;
                if let Some(w) = check.walk {
                    self.world.keep_walk_alive(w);
                }
                self.check_hits.set(self.check_hits.get() + 1);
                return match &check.outcome {
                    Ok((_, s)) => Ok(*s),
                    Err(why) => Err(why.clone()),
                };
            }
        }
        let (outcome, reads) = self.consolidate_one_now(c, may_replace);
        let savings = match &outcome {
            Ok((_, s)) => Ok(*s),
            Err(why) => Err(why.clone()),
        };
        if let Some((reads, reads_pools, walk)) = reads {
            *c.check.borrow_mut() = Some(Check {
                candidate,
                context: self.world.existing_context(&c.pods),
                classes,
                may_replace,
                price: c.price,
                pools: reads_pools.then(pools),
                reads,
                walk,
                outcome,
            });
        }
        savings
    }

    /// The launches of the candidate's consolidation this evaluation found to work.
    fn kept_launches(c: &Slot) -> Vec<Launch> {
        c.check
            .borrow()
            .as_ref()
            .and_then(|check| check.outcome.as_ref().ok())
            .map(|(launches, _)| launches.as_ref().clone())
            .unwrap_or_default()
    }

    /// [`Evaluation::consolidate_one`] without the kept outcomes, with what it read of the
    /// existing nodes and whether it read the NodePools (None: it read nothing that says when
    /// to check again).
    fn consolidate_one_now(
        &self,
        c: &'a Candidate,
        may_replace: bool,
    ) -> (Outcome, Option<(Reads, bool, Option<u64>)>) {
        let Some(price) = c.price else {
            return (Err(Blocker::PriceUnknown), None);
        };
        let out = self.simulation_with(&[c], may_replace);
        let reads = Some((out.reads, out.reads_pools, out.walk));
        if let Some(f) = out.failures().first() {
            return (
                Err(Blocker::PodsWouldNotFit {
                    pods: f.count,
                    why: f.reason.clone(),
                }),
                reads,
            );
        }
        let outcome = match out.launches() {
            [] => Ok((Rc::new(Vec::new()), price.0)),
            // Narrowing only drops types and offerings, so a launch that is not cheaper at its
            // cheapest never becomes so: no need to copy it to find out.
            [l] if l.price.0 >= price.0 => Err(Blocker::NotCheaper {
                replacement: l.price,
                node: price,
            }),
            [l] => {
                // Candidates whose pods leave the same pods over share a new-NodeClaim run, and
                // many have the same price: narrowing its launch once for them all saved most
                // of an evaluation after a price change (every candidate's context changes).
                let key = out
                    .new_run_id()
                    .map(|id| (id, price.0, c.capacity_type == CAPACITY_TYPE_SPOT));
                let cached = key.and_then(|k| self.priced.borrow().get(&k).cloned());
                let narrowed = cached.unwrap_or_else(|| {
                    let mut l = l.clone();
                    let narrowed = match self.price_replacement(&[c], &mut l, price.0) {
                        Err(why) => Err(why),
                        Ok(()) if l.price.0 >= price.0 => Err(Blocker::NotCheaper {
                            replacement: l.price,
                            node: price,
                        }),
                        Ok(()) => Ok(Rc::new(vec![l])),
                    };
                    if let Some(k) = key {
                        self.priced.borrow_mut().insert(k, narrowed.clone());
                    }
                    narrowed
                });
                narrowed.map(|ls| {
                    let savings = price.0 - ls.iter().map(|l| l.price.0).sum::<i64>();
                    (ls, savings)
                })
            }
            more => Err(Blocker::NeedsNewNodes { count: more.len() }),
        };
        (outcome, reads)
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

    fn run(&mut self) {
        // The few forced nodes, in name order as the candidates are: looking each of ten
        // thousand candidates up among them was a pass's worth of cache misses.
        let forced: Vec<(&'a Slot, &'a Forced)> = self
            .forced
            .iter()
            .filter_map(|(node, f)| Some((self.candidates.get(*node)?, *f)))
            .filter(|(c, _)| !c.disrupting)
            .collect();

        // 1. Interruption and expiration: forceful.
        for &(slot, f) in &forced {
            let c = &slot.candidate;
            let reason = match f {
                Forced::Interrupted(_) => DisruptionReason::Interrupted,
                Forced::Expired { .. } => DisruptionReason::Expired,
                Forced::Drifted(_) => continue,
            };
            let launches = self.simulate(&[c]).unwrap_or_default();
            let savings = price_of(c) - launches.iter().map(|l| l.price.0).sum::<i64>();
            // Outside budgets, but it uses them up: graceful methods see one node fewer.
            self.use_budget(&c.nodepool);
            self.reserve_landing(&[c]);
            self.world.take(&mut self.taken, [c.node.clone()]);
            self.commands.push(Command {
                nodes: vec![c.node.clone()],
                reason,
                launches,
                savings,
            });
        }

        self.mark("forced");
        // 2. Emptiness: one command.
        let mut empty = Vec::new();
        for node in self.empty {
            let Some(c) = self.candidates.get(node) else {
                continue;
            };
            if c.disrupting || self.is_taken(c) || !c.consolidatable {
                continue;
            }
            if let Some(b) = Self::consolidation_blocker(c, true) {
                self.blocked.push((c, DisruptionReason::Empty, b));
            } else if self.take_budget(&c.nodepool, DisruptionReason::Empty) {
                empty.push(c.node.clone());
            } else {
                self.over_budget(c, DisruptionReason::Empty);
            }
        }
        if !empty.is_empty() {
            let savings = empty
                .iter()
                .filter_map(|n| self.candidate(n))
                .map(price_of)
                .sum();
            self.world.take(&mut self.taken, empty.iter().cloned());
            self.commands.push(Command {
                nodes: empty,
                reason: DisruptionReason::Empty,
                launches: Vec::new(),
                savings,
            });
        }

        self.mark("empty");
        // 3. Drift: one command per node.
        for &(slot, f) in &forced {
            let c = &slot.candidate;
            if self.is_taken(slot) || !matches!(f, Forced::Drifted(_)) {
                continue;
            }
            if let Some(b) = &c.blocked_by {
                self.blocked
                    .push((slot, DisruptionReason::Drifted, Cow::Borrowed(b)));
                continue;
            }
            if self.budget_left(&c.nodepool, DisruptionReason::Drifted) <= 0 {
                self.over_budget(slot, DisruptionReason::Drifted);
                continue;
            }
            match self.simulate(&[c]) {
                Ok(launches) => {
                    self.take_budget(&c.nodepool, DisruptionReason::Drifted);
                    let savings = price_of(c) - launches.iter().map(|l| l.price.0).sum::<i64>();
                    self.reserve_landing(&[c]);
                    self.world.take(&mut self.taken, [c.node.clone()]);
                    self.commands.push(Command {
                        nodes: vec![c.node.clone()],
                        reason: DisruptionReason::Drifted,
                        launches,
                        savings,
                    });
                }
                Err(why) => self
                    .blocked
                    .push((slot, DisruptionReason::Drifted, Cow::Owned(why))),
            }
        }

        self.mark("drift");
        // 4 and 5. Consolidation of nodes with pods.
        let mut options: Vec<(&'a Slot, i64)> = Vec::new();
        for c in self.candidates.values() {
            if c.disrupting
                || c.pods.is_empty()
                || !c.consolidatable
                || c.price.is_none()
                || self.is_taken(c)
            {
                continue;
            }
            let Some((delete, replace)) = self.plausible(c) else {
                continue;
            };
            // A candidate that fails the prune or the exact check is listed with why, so that
            // every candidate with pods past `consolidateAfter` says what keeps it.
            if !delete && !replace {
                let node = c.price.unwrap_or_default();
                self.blocked.push((
                    c,
                    DisruptionReason::Underutilized,
                    Cow::Owned(Blocker::NoCheaperPlace { node }),
                ));
                continue;
            }
            let savings = match self.consolidate_one(c, replace) {
                Ok(savings) => savings,
                Err(why) => {
                    self.blocked
                        .push((c, DisruptionReason::Underutilized, Cow::Owned(why)));
                    continue;
                }
            };
            if let Some(b) = Self::consolidation_blocker(c, false) {
                self.blocked.push((c, DisruptionReason::Underutilized, b));
                continue;
            }
            options.push((c, savings));
        }
        self.mark("single");
        self.balanced_filter(&mut options);
        self.mark("balanced");
        let multi = self.multi_node();
        self.mark("multi");
        // Every option is listed once: blocked by budget, chosen, or waiting its turn.
        let (chosen, waiting): (Vec<String>, Vec<&'a Slot>) = match multi {
            Some(cmd) => {
                for n in &cmd.nodes {
                    if let Some(c) = self.candidate(n) {
                        let pool = c.nodepool.clone();
                        self.take_budget(&pool, DisruptionReason::Underutilized);
                    }
                }
                let chosen = cmd.nodes.clone();
                self.commands.push(cmd);
                let taken: FxHashSet<&str> = chosen.iter().map(String::as_str).collect();
                let waiting = options
                    .iter()
                    .map(|(c, _)| *c)
                    .filter(|c| !taken.contains(c.node.as_str()))
                    .collect();
                (chosen, waiting)
            }
            None => {
                let now = self.now;
                options.sort_by(|a, b| {
                    let ra = a.1 as f64 / scaled_cost(a.0, now) as f64;
                    let rb = b.1 as f64 / scaled_cost(b.0, now) as f64;
                    rb.total_cmp(&ra).then_with(|| a.0.node.cmp(&b.0.node))
                });
                let mut picked = Vec::new();
                let mut tried = options.len();
                for (i, (c, savings)) in options.iter().enumerate() {
                    if self.take_budget(&c.nodepool, DisruptionReason::Underutilized) {
                        picked.push(c.node.clone());
                        self.commands.push(Command {
                            nodes: vec![c.node.clone()],
                            reason: DisruptionReason::Underutilized,
                            launches: Self::kept_launches(c),
                            savings: *savings,
                        });
                        tried = i + 1;
                        break;
                    }
                    self.over_budget(c, DisruptionReason::Underutilized);
                }
                let waiting = options.iter().skip(tried).map(|(c, _)| *c).collect();
                (picked, waiting)
            }
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
        let pools: Vec<&PoolTypes> = parts.pools.values().collect();
        let classes = parts
            .classes
            .iter()
            .map(|(id, (class, compat))| (*id, (class, compat)))
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
            return;
        }
        phases.mark("parts");
        let world = World::new(pools, classes, nodes, is_destination, memo);
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
            phases,
        };
        eval.mark("world");
        eval.run();
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
            runs = ?m.runs,
            phases = ?eval.phases.done,
            micros = eval.phases.started.elapsed().as_micros() as u64,
            "disruption commands evaluated"
        );
        drop(m);
        drop(eval);
        self.parts.listed = held_count;
    }
}

/// The commands query over all its parts: one evaluation of the whole cluster per change, kept
/// by [`maintain`] so that a change re-sorts neither the ~30,000 parts nor the ~10,000 listings.
pub fn commands<'s>(parts: VecCollection<'s, Epoch, Part>) -> VecCollection<'s, Epoch, Decision> {
    maintain::<Commands>(parts, "DisruptionCommands")
}
