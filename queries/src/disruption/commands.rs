//! Query — disruption commands: which nodes to disrupt now, why, and what replaces them.
//!
//! Rule, in Karpenter's method order, each NodePool's budget shared across methods (a node
//! any command takes counts against every budget of its NodePool, as a node marked for deletion
//! does in Karpenter):
//! 1. interrupted and expired nodes go at once, outside budgets and blockers (though they use
//!    them up), each with the launches its pods need;
//! 2. empty nodes (no movable pods, past `consolidateAfter`) go together in one command;
//! 3. drifted nodes go one command each, with the launches their pods need;
//! 4. multi-node consolidation: candidates by descending price per unit of disruption cost (at
//!    most 100), the longest prefix (found by binary search, as Karpenter) whose pods fit on the
//!    rest of the cluster plus fewer new NodeClaims than it removes (m → n, n < m; Karpenter
//!    allows only n ≤ 1) for a lower total price;
//! 5. otherwise single-node consolidation: the candidate with the best savings per unit of
//!    disruption cost whose pods fit elsewhere (delete) or on one strictly cheaper NodeClaim
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

use super::simulate::{Memo, Reads, Simulation, Taken, World};
use super::types::{Allowance, Candidate, Forced, OfferKey};
use crate::types::{ClassId, Compatibility, NodeState, PodClass, PoolTypes};
use differential_dataflow::VecCollection;
use dovetail_dataflow::decisions::{Decision, Disruption, DisruptionReason, Launch};
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::maintained::{changes, maintain, Maintained};
use dovetail_dataflow::model::labels::{
    CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_SPOT,
    DISRUPTED_TAINT, INSTANCE_TYPE,
};
use dovetail_dataflow::model::{
    ConsolidationPolicy, InstanceType, Offering, Price, Requirement, Resources,
};
use dovetail_dataflow::stable_hash::stable_hash;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

/// Karpenter's cap on candidates in one multi-node command.
pub const MAX_MULTI_NODE: usize = 100;
/// Spot-to-spot replacement needs at least this many cheaper instance types.
pub const MIN_SPOT_TO_SPOT_TYPES: usize = 15;
/// The feature gate that allows spot-to-spot replacement.
pub const SPOT_TO_SPOT_GATE: &str = "SpotToSpotConsolidation";

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Part {
    /// A candidate with its hash, computed as it changes (without its price).
    Candidate(u64, Candidate),
    /// The price of an offering some candidate has.
    Price(OfferKey, Price),
    Forced(String, Forced),
    /// A node's state with its [`super::simulate::fingerprint`], computed as the state changes.
    Node(u64, NodeState),
    Class(ClassId, PodClass, Compatibility),
    Pool(PoolTypes),
    Budget(String, Allowance),
    SpotToSpot,
}

/// A planned command before it becomes decisions.
struct Command {
    nodes: Vec<String>,
    reason: DisruptionReason,
    launches: Vec<Launch>,
    savings: i64,
}

/// Why a candidate is held back. Most are one of a few fixed sentences, which need no copy per
/// candidate.
type Why<'a> = Cow<'a, str>;

/// A single-node consolidation outcome: the replacement launches and the savings, or why not.
type Outcome = Result<(Rc<Vec<Launch>>, i64), String>;

/// Narrowed replacement launches, or why none, by (run, price, spot).
type PricedLaunches = RefCell<FxHashMap<(usize, i64, bool), Result<Rc<Vec<Launch>>, String>>>;

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
    outcome: Rc<Outcome>,
    /// The last evaluation that used it.
    evaluation: u64,
}

/// What the cheap prune reads of a candidate's pods, kept by candidate hash: their total
/// requests, the largest of each resource, and the cheapest launch that could hold any one of
/// them. Summing ten thousand candidates' pods per evaluation was a tenth of it.
#[derive(Default)]
struct Demand {
    total: Resources,
    largest: Resources,
    /// The [`World::existing_all`] the sums were made under (it names the classes known).
    classes: Option<u64>,
    cheapest: Option<i64>,
    /// The [`World::offers_all`] `cheapest` was found under.
    offers: Option<u64>,
    /// The last evaluation that used it.
    evaluation: u64,
}

/// The evaluation's state: inputs indexed, budgets left, commands and blocked candidates.
struct Evaluation<'a> {
    world: World<'a>,
    /// Every candidate by node, with its hash (computed as it changes).
    candidates: &'a BTreeMap<String, (u64, Candidate)>,
    /// Single-node outcomes kept from earlier evaluations, by node.
    checks: &'a RefCell<FxHashMap<String, Check>>,
    /// Candidates' demands (see [`Evaluation::plausible`]), by candidate hash.
    demands: &'a RefCell<FxHashMap<u64, Demand>>,
    /// This evaluation's number (for dropping checks no longer used).
    evaluation: u64,
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
    blocked: Vec<(&'a Candidate, DisruptionReason, Why<'a>)>,
    /// Per NodePool, the price and disruption cost of all its nodes (for `Balanced`), summed
    /// at the first use, not per option.
    pool_totals: std::cell::OnceCell<BTreeMap<&'a str, (i64, i64)>>,
    taken: Taken,
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
        self.candidates.get(node).map(|(_, c)| c)
    }

    fn mark(&mut self, phase: &'static str) {
        self.phases.mark(phase);
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

    fn over_budget(&mut self, c: &'a Candidate, reason: DisruptionReason) {
        self.blocked.push((
            c,
            reason,
            Cow::Owned(format!(
                "budget: NodePool {} allows no more {} disruptions now",
                c.nodepool,
                reason.as_str()
            )),
        ));
    }

    /// A simulation of removing `nodes`: the launches it needs, or why it fails.
    fn simulate(&self, nodes: &[&Candidate]) -> Result<Vec<Launch>, String> {
        let out = self.simulation(nodes);
        if let Some(f) = out.failures().first() {
            return Err(format!("{} pods would not fit: {}", f.count, f.reason));
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
    fn plausible(&self, hash: u64, c: &Candidate) -> Option<(bool, bool)> {
        let mut demands = self.demands.borrow_mut();
        let d = demands.entry(hash).or_default();
        d.evaluation = self.evaluation;
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
    fn consolidate_one(&self, candidate: u64, c: &'a Candidate, may_replace: bool) -> Rc<Outcome> {
        let classes = self.world.existing_all;
        let pools = || {
            stable_hash(&(
                self.world.new_context(&self.taken, &c.pods),
                self.spot_to_spot,
            ))
        };
        if let Some(check) = self.checks.borrow_mut().get_mut(&c.node) {
            if check.candidate == candidate
                && check.price == c.price
                && check.may_replace == may_replace
                && (check.classes == classes
                    || check.context == self.world.existing_context(&c.pods))
                && check.pools.is_none_or(|p| p == pools())
                && self
                    .world
                    .unchanged(&check.reads, &self.taken, &[c.node.as_str()])
            {
                check.evaluation = self.evaluation;
                check.classes = classes;
                if let Some(w) = check.walk {
                    self.world.keep_walk_alive(w);
                }
                self.check_hits.set(self.check_hits.get() + 1);
                return check.outcome.clone();
            }
        }
        let (outcome, reads) = self.consolidate_one_now(c, may_replace);
        let outcome = Rc::new(outcome);
        if let Some((reads, reads_pools, walk)) = reads {
            self.checks.borrow_mut().insert(
                c.node.clone(),
                Check {
                    candidate,
                    context: self.world.existing_context(&c.pods),
                    classes,
                    may_replace,
                    price: c.price,
                    pools: reads_pools.then(pools),
                    reads,
                    walk,
                    outcome: outcome.clone(),
                    evaluation: self.evaluation,
                },
            );
        }
        outcome
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
            return (Err("its offering's price is not known".to_string()), None);
        };
        let out = self.simulation_with(&[c], may_replace);
        let reads = Some((out.reads, out.reads_pools, out.walk));
        if let Some(f) = out.failures().first() {
            return (
                Err(format!("{} pods would not fit: {}", f.count, f.reason)),
                reads,
            );
        }
        let outcome = match out.launches() {
            [] => Ok((Rc::new(Vec::new()), price.0)),
            // Narrowing only drops types and offerings, so a launch that is not cheaper at its
            // cheapest never becomes so: no need to copy it to find out.
            [l] if l.price.0 >= price.0 => {
                Err(format!("no cheaper replacement ({} vs {})", l.price, price))
            }
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
                        Ok(()) if l.price.0 >= price.0 => {
                            Err(format!("no cheaper replacement ({} vs {})", l.price, price))
                        }
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
            more => Err(format!("its pods need {} new nodes", more.len())),
        };
        (outcome, reads)
    }

    /// Narrows a consolidation replacement to what keeps it cheaper than `max_price`, as
    /// Karpenter's `computeConsolidation` does: when every removed node is spot and the launch
    /// may be spot, it is spot-to-spot (only with the SpotToSpotConsolidation gate, spot only;
    /// a single node needs at least 15 cheaper types and the list is cut to max(15,
    /// minValues)); otherwise only types cheaper than `max_price` at their worst launch price
    /// are kept.
    fn price_replacement(
        &self,
        nodes: &[&Candidate],
        l: &mut Launch,
        max_price: i64,
    ) -> Result<(), String> {
        let all_spot = nodes.iter().all(|c| c.capacity_type == CAPACITY_TYPE_SPOT);
        if !(all_spot && l.capacity_types.iter().any(|t| t == CAPACITY_TYPE_SPOT)) {
            return self.keep_cheaper(l, max_price);
        }
        if !self.spot_to_spot {
            return Err(
                "spot-to-spot consolidation is disabled (SpotToSpotConsolidation)".to_string(),
            );
        }
        l.capacity_types = vec![CAPACITY_TYPE_SPOT.to_string()];
        l.requirements.add(
            CAPACITY_TYPE,
            Requirement::single(CAPACITY_TYPE_SPOT.to_string()),
        );
        self.keep_cheaper(l, max_price)?;
        if nodes.len() > 1 {
            // Karpenter asks no minimum flexibility of a multi-node spot-to-spot command.
            return Ok(());
        }
        if l.instance_types.len() < MIN_SPOT_TO_SPOT_TYPES {
            return Err(format!(
                "spot-to-spot replacement needs at least {MIN_SPOT_TO_SPOT_TYPES} cheaper instance types, found {}",
                l.instance_types.len()
            ));
        }
        let keep = MIN_SPOT_TO_SPOT_TYPES.max(min_instance_types(l));
        let kept: Vec<String> = l.instance_types.iter().take(keep).cloned().collect();
        self.set_types(l, kept)
    }

    /// Keeps the launch's instance types whose worst launch price is below `max_price`
    /// (Karpenter's `RemoveInstanceTypeOptionsByPriceAndMinValues`): whichever offering EC2
    /// picks, the replacement is cheaper than what it replaces. A launch that may be spot or
    /// on-demand was priced as spot, so it is narrowed to spot: if spot capacity runs out the
    /// launch fails rather than buying a dearer on-demand node.
    ///
    /// Without this, the replacement listed every type that fits (cheapest first), and a
    /// fleet request falling back from the cheapest could launch a node dearer than the one it
    /// replaced.
    fn keep_cheaper(&self, l: &mut Launch, max_price: i64) -> Result<(), String> {
        let pool = self.pool(&l.nodepool)?;
        let kept: Vec<String> = l
            .instance_types
            .iter()
            .filter(|name| {
                pool.types
                    .iter()
                    .find(|t| &&t.instance_type.name == name)
                    .and_then(|t| worst_launch_price(&t.instance_type, l))
                    .is_some_and(|p| p < max_price)
            })
            .cloned()
            .collect();
        if kept.is_empty() {
            return Err(format!(
                "no cheaper replacement (no instance type costs less than {})",
                Price(max_price)
            ));
        }
        let min_values = min_instance_types(l);
        if kept.len() < min_values {
            return Err(format!(
                "only {} instance types are cheaper than {}, minValues needs {min_values}",
                kept.len(),
                Price(max_price)
            ));
        }
        let spot = CAPACITY_TYPE_SPOT.to_string();
        if l.capacity_types.contains(&spot) && l.capacity_types.len() > 1 {
            l.capacity_types = vec![spot.clone()];
            l.requirements.add(CAPACITY_TYPE, Requirement::single(spot));
        }
        self.set_types(l, kept)
    }

    /// Sets a launch's instance types (cheapest first, as given) and recomputes what follows
    /// from them: its requirement, zones and cheapest price. Types left without an offering the
    /// launch allows are dropped.
    fn set_types(&self, l: &mut Launch, types: Vec<String>) -> Result<(), String> {
        let pool = self.pool(&l.nodepool)?;
        let mut kept = Vec::new();
        let mut zones = BTreeSet::new();
        let mut price: Option<i64> = None;
        for name in types {
            let Some(t) = pool.types.iter().find(|t| t.instance_type.name == name) else {
                continue;
            };
            let mut any = false;
            for o in t
                .instance_type
                .offerings
                .iter()
                .filter(|o| launch_allows(l, o))
            {
                any = true;
                zones.insert(o.zone.clone());
                price = Some(price.map_or(o.price.0, |p| p.min(o.price.0)));
            }
            if any {
                kept.push(name);
            }
        }
        let Some(price) = price else {
            return Err("no instance type has an offering the replacement allows".to_string());
        };
        l.requirements.add(
            INSTANCE_TYPE,
            Requirement::finite(kept.iter().cloned().collect()),
        );
        l.instance_types = kept;
        l.zones = zones.into_iter().collect();
        l.price = Price(price);
        Ok(())
    }

    fn pool(&self, name: &str) -> Result<&'a PoolTypes, String> {
        self.world
            .pools
            .iter()
            .copied()
            .find(|p| p.nodepool.name == name)
            .ok_or_else(|| format!("NodePool {name} is gone"))
    }

    /// Consolidation blockers of a candidate, in the order a user would look for them.
    fn consolidation_blocker(c: &'a Candidate, empty: bool) -> Option<Why<'a>> {
        if let Some(b) = &c.blocked_by {
            return Some(Cow::Borrowed(b));
        }
        if c.consolidate_never {
            return Some(Cow::Borrowed("consolidateAfter: Never"));
        }
        if !empty && c.policy == ConsolidationPolicy::WhenEmpty {
            return Some(Cow::Borrowed("consolidationPolicy: WhenEmpty"));
        }
        None
    }

    fn run(&mut self) {
        let candidates: Vec<&'a Candidate> = self
            .candidates
            .values()
            .map(|(_, c)| c)
            .filter(|c| !c.disrupting)
            .collect();

        // 1. Interruption and expiration: forceful.
        for c in &candidates {
            let Some(f) = self.forced.get(c.node.as_str()).copied() else {
                continue;
            };
            let reason = match f {
                Forced::Interrupted(_) => DisruptionReason::Interrupted,
                Forced::Expired => DisruptionReason::Expired,
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
        for c in &candidates {
            if self.taken.contains(&c.node) || !c.pods.is_empty() || !c.consolidatable {
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
        for c in &candidates {
            if self.taken.contains(&c.node) {
                continue;
            }
            let Some(Forced::Drifted(_)) = self.forced.get(c.node.as_str()) else {
                continue;
            };
            if let Some(b) = &c.blocked_by {
                self.blocked
                    .push((c, DisruptionReason::Drifted, Cow::Borrowed(b)));
                continue;
            }
            if self.budget_left(&c.nodepool, DisruptionReason::Drifted) <= 0 {
                self.over_budget(c, DisruptionReason::Drifted);
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
                Err(why) => self.blocked.push((
                    c,
                    DisruptionReason::Drifted,
                    Cow::Owned(format!("no replacement: {why}")),
                )),
            }
        }

        self.mark("drift");
        // 4 and 5. Consolidation of nodes with pods.
        let mut options: Vec<(&'a Candidate, Rc<Vec<Launch>>, i64)> = Vec::new();
        // Over the map itself, which holds each candidate's hash with it.
        for (hash, c) in self.candidates.values() {
            if c.disrupting
                || c.pods.is_empty()
                || !c.consolidatable
                || c.price.is_none()
                || self.taken.contains(&c.node)
            {
                continue;
            }
            let Some((delete, replace)) = self.plausible(*hash, c) else {
                continue;
            };
            if !delete && !replace {
                continue;
            }
            let outcome = self.consolidate_one(*hash, c, replace);
            let Ok((launches, savings)) = outcome.as_ref() else {
                continue;
            };
            let (launches, savings) = (launches.clone(), *savings);
            if let Some(b) = Self::consolidation_blocker(c, false) {
                self.blocked.push((c, DisruptionReason::Underutilized, b));
                continue;
            }
            options.push((c, launches, savings));
        }
        self.mark("single");
        self.balanced_filter(&mut options);
        self.mark("balanced");
        let multi = self.multi_node(&candidates);
        self.mark("multi");
        let chosen: BTreeSet<String> = match multi {
            Some(cmd) => {
                let nodes = cmd.nodes.iter().cloned().collect();
                for n in &cmd.nodes {
                    if let Some(c) = self.candidate(n) {
                        let pool = c.nodepool.clone();
                        self.take_budget(&pool, DisruptionReason::Underutilized);
                    }
                }
                self.commands.push(cmd);
                nodes
            }
            None => {
                options.sort_by(|a, b| {
                    let ra = a.2 as f64 / a.0.disruption_cost.max(1) as f64;
                    let rb = b.2 as f64 / b.0.disruption_cost.max(1) as f64;
                    rb.total_cmp(&ra).then_with(|| a.0.node.cmp(&b.0.node))
                });
                let mut picked = BTreeSet::new();
                for (c, launches, savings) in options.iter() {
                    if self.take_budget(&c.nodepool, DisruptionReason::Underutilized) {
                        picked.insert(c.node.clone());
                        self.commands.push(Command {
                            nodes: vec![c.node.clone()],
                            reason: DisruptionReason::Underutilized,
                            launches: launches.as_ref().clone(),
                            savings: *savings,
                        });
                        break;
                    }
                    self.over_budget(c, DisruptionReason::Underutilized);
                }
                picked
            }
        };
        // A set, not a scan of `blocked` per option: at 10k nodes that scan was 10⁸ string
        // comparisons, a quarter of an evaluation.
        let mut already: FxHashSet<&str> = self
            .blocked
            .iter()
            .filter(|(_, r, _)| *r == DisruptionReason::Underutilized)
            .map(|(c, _, _)| c.node.as_str())
            .collect();
        // Hashed, not looked up in `chosen`: ten thousand B-tree searches by name were a tenth
        // of an evaluation.
        already.extend(chosen.iter().map(String::as_str));
        let waiting: Vec<&'a Candidate> = options
            .iter()
            .map(|(c, _, _)| *c)
            .filter(|c| !already.contains(c.node.as_str()))
            .collect();
        for c in waiting {
            self.blocked.push((
                c,
                DisruptionReason::Underutilized,
                Cow::Borrowed("waiting: one consolidation command at a time, as Karpenter"),
            ));
        }
        self.world.take(&mut self.taken, chosen);
        self.mark("listings");
    }

    /// `Balanced`: drop options whose savings share is under half their disruption share.
    fn balanced_filter(&mut self, options: &mut Vec<(&'a Candidate, Rc<Vec<Launch>>, i64)>) {
        let mut kept = Vec::new();
        for (c, launches, savings) in options.drain(..) {
            if let Err(why) = self.balanced(&[c], savings) {
                self.blocked
                    .push((c, DisruptionReason::Underutilized, Cow::Owned(why)));
                continue;
            }
            kept.push((c, launches, savings));
        }
        *options = kept;
    }

    /// Karpenter's `Balanced` score of a move (single- or multi-node): for each NodePool of the
    /// removed nodes whose policy is `Balanced`, its share of the savings (split between pools
    /// by the removed nodes' prices) over its NodePool's total price, divided by the removed
    /// nodes' disruption cost over the NodePool's total disruption cost, must be at least 1/2.
    /// Totals are over every node of the NodePool, candidates or not.
    fn balanced(&self, nodes: &[&Candidate], savings: i64) -> Result<(), String> {
        if !nodes
            .iter()
            .any(|c| c.policy == ConsolidationPolicy::Balanced)
        {
            return Ok(());
        }
        let source: i64 = nodes.iter().map(|c| price_of(c)).sum();
        let mut pools: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
        for c in nodes {
            let e = pools.entry(c.nodepool.as_str()).or_insert((0, 0));
            e.0 += price_of(c);
            e.1 += c.disruption_cost;
        }
        for (pool, (price, cost)) in pools {
            let balanced = nodes
                .iter()
                .any(|c| c.nodepool == pool && c.policy == ConsolidationPolicy::Balanced);
            if !balanced {
                continue;
            }
            let totals = self.pool_totals.get_or_init(|| {
                let mut totals: BTreeMap<&'a str, (i64, i64)> = BTreeMap::new();
                for (_, c) in self.candidates.values() {
                    let t = totals.entry(c.nodepool.as_str()).or_insert((0, 0));
                    t.0 += price_of(c);
                    t.1 += c.disruption_cost;
                }
                totals
            });
            let (price_total, cost_total) = totals.get(pool).copied().unwrap_or((0, 0));
            let pool_savings = if nodes.len() > 1 && source > 0 {
                savings as f64 * price as f64 / source as f64
            } else {
                savings as f64
            };
            let savings_share = if price_total > 0 {
                pool_savings / price_total as f64
            } else {
                0.0
            };
            let disruption_share = if cost_total > 0 {
                cost as f64 / cost_total as f64
            } else {
                0.0
            };
            // A zero disruption share cannot happen (every node costs at least its base);
            // treat it as a score of 0 rather than dividing by it.
            let score = if disruption_share > 0.0 {
                savings_share / disruption_share
            } else {
                0.0
            };
            if score < 0.5 {
                return Err(format!(
                    "consolidationPolicy: Balanced (NodePool {pool}: savings share {savings_share:.3} < half of disruption share {disruption_share:.3})"
                ));
            }
        }
        Ok(())
    }

    /// Multi-node consolidation over unblocked, consolidatable candidates within budget.
    fn multi_node(&mut self, candidates: &[&'a Candidate]) -> Option<Command> {
        let mut pool_left: BTreeMap<String, i64> = BTreeMap::new();
        let mut list: Vec<&'a Candidate> = Vec::new();
        let mut sorted: std::collections::BinaryHeap<Ranked<'a>> = candidates
            .iter()
            .copied()
            .filter(|c| {
                // Empty nodes are emptiness's alone, under the Empty budget (Karpenter leaves
                // them out of consolidation "for correct budget accounting"): one the Empty
                // budget holds back must not go as Underutilized instead.
                !self.taken.contains(&c.node)
                    && !c.pods.is_empty()
                    && c.consolidatable
                    && c.price.is_some()
                    && Self::consolidation_blocker(c, false).is_none()
            })
            .map(|c| Ranked(price_of(c) as f64 / c.disruption_cost.max(1) as f64, c))
            .collect();
        // Highest price per unit of disruption cost first (Karpenter's `SavingsRatio`): the
        // prefix the binary search tries holds the nodes most worth removing. A heap, as only
        // the first hundred or so of ten thousand are wanted.
        while let Some(Ranked(_, c)) = sorted.pop() {
            let left = match pool_left.get(&c.nodepool) {
                Some(l) => *l,
                None => {
                    let l = self.budget_left(&c.nodepool, DisruptionReason::Underutilized);
                    pool_left.insert(c.nodepool.clone(), l);
                    l
                }
            };
            if left <= 0 {
                continue;
            }
            pool_left.insert(c.nodepool.clone(), left - 1);
            list.push(c);
            if list.len() == MAX_MULTI_NODE {
                break;
            }
        }
        if list.len() < 2 {
            return None;
        }
        let (mut lo, mut hi) = (2usize, list.len());
        let mut best: Option<Command> = None;
        while lo <= hi {
            let mid = (lo + hi) / 2;
            match self.multi_option(&list[..mid]) {
                Some(cmd) => {
                    best = Some(cmd);
                    lo = mid + 1;
                }
                None => hi = mid - 1,
            }
        }
        best
    }

    /// Removing all of `nodes` for fewer, cheaper new ones, if that works.
    fn multi_option(&self, nodes: &[&'a Candidate]) -> Option<Command> {
        let mut launches = self.simulate(nodes).ok()?;
        if launches.len() >= nodes.len() {
            return None;
        }
        let old: i64 = nodes.iter().map(|c| price_of(c)).sum();
        let cheapest: i64 = launches.iter().map(|l| l.price.0).sum();
        if cheapest >= old {
            return None;
        }
        // Each replacement must stay cheaper whatever offering it gets: it keeps the types under
        // its cheapest price plus an equal share of the savings (for one replacement, under
        // the removed nodes' total, as Karpenter). A replacement that could be one of the
        // removed nodes' types must be cheaper than that node, or keeping the node and only
        // deleting the others disrupts less (Karpenter's `filterOutSameInstanceType`).
        let share = (old - cheapest) / launches.len().max(1) as i64;
        for l in &mut launches {
            let mut limit = l.price.0 + share;
            for c in nodes {
                if l.instance_types.contains(&c.instance_type) {
                    limit = limit.min(price_of(c));
                }
            }
            self.price_replacement(nodes, l, limit).ok()?;
        }
        let new: i64 = launches.iter().map(|l| l.price.0).sum();
        if new >= old {
            return None;
        }
        self.balanced(nodes, old - new).ok()?;
        Some(Command {
            nodes: nodes.iter().map(|c| c.node.clone()).collect(),
            reason: DisruptionReason::Underutilized,
            launches,
            savings: old - new,
        })
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

/// A multi-node candidate by its price per unit of disruption cost: the greatest first, then
/// by node name.
struct Ranked<'a>(f64, &'a Candidate);

impl Ord for Ranked<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0
            .total_cmp(&other.0)
            .then_with(|| other.1.node.cmp(&self.1.node))
    }
}

impl PartialOrd for Ranked<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Ranked<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for Ranked<'_> {}

/// A blocked candidate's listing.
fn listing(c: &Candidate, reason: DisruptionReason, why: String) -> Decision {
    Decision::Disruption(Disruption {
        node: c.node.clone(),
        nodeclaim: c.nodeclaim.clone(),
        nodepool: c.nodepool.clone(),
        reason,
        command: None,
        replacements: Vec::new(),
        savings_per_hour: Price(0),
        blocked_by: Some(why),
    })
}

/// Whether a listing says what `listing(c, _, why)` would, without building that.
fn listing_is(d: &Decision, c: &Candidate, why: &str) -> bool {
    matches!(d, Decision::Disruption(d)
        if d.blocked_by.as_deref() == Some(why)
            && d.nodeclaim == c.nodeclaim
            && d.nodepool == c.nodepool)
}

/// The `minValues` of a launch's instance-type requirement (0 without one).
fn min_instance_types(l: &Launch) -> usize {
    l.requirements
        .get(INSTANCE_TYPE)
        .and_then(|r| r.min_values)
        .unwrap_or(0) as usize
}

/// Whether a launch may get this offering: available, in its zones and capacity types.
fn launch_allows(l: &Launch, o: &Offering) -> bool {
    o.available && l.zones.contains(&o.zone) && l.capacity_types.contains(&o.capacity_type)
}

/// The most a launch may pay for a type (Karpenter's `WorstLaunchPrice`): the dearest offering
/// the launch allows of the capacity type it would get — reserved, else spot, else on-demand.
fn worst_launch_price(it: &InstanceType, l: &Launch) -> Option<i64> {
    [
        CAPACITY_TYPE_RESERVED,
        CAPACITY_TYPE_SPOT,
        CAPACITY_TYPE_ON_DEMAND,
    ]
    .iter()
    .find_map(|ct| {
        it.offerings
            .iter()
            .filter(|o| o.capacity_type == *ct && launch_allows(l, o))
            .map(|o| o.price.0)
            .max()
    })
}

/// Whether a node can take pods moved off a disrupted node.
fn is_destination(n: &NodeState) -> bool {
    !n.node.in_flight
        && !n.node.unschedulable
        && !n.node.deleting
        && !n.node.taints.iter().any(|t| t.key == DISRUPTED_TAINT)
}

/// The commands query's inputs, indexed as they change. Each keyed collection holds at most
/// one record per key at a time (candidates and node states per node, classes per id, pools
/// and budgets per NodePool), so an update replaces or removes the record of its key; within
/// an epoch a record's retraction may come after its successor's insertion, so a retraction
/// removes only the record it names.
#[derive(Default)]
struct Parts {
    /// Candidates by node, with their prices filled in from `prices`.
    candidates: BTreeMap<String, (u64, Candidate)>,
    prices: BTreeMap<OfferKey, Price>,
    /// The candidates of each offering, to re-price them as its price changes.
    offer_nodes: BTreeMap<OfferKey, BTreeSet<String>>,
    forced: BTreeMap<(String, Forced), isize>,
    /// Node states by name, with their fingerprints.
    nodes: BTreeMap<String, (u64, NodeState)>,
    classes: BTreeMap<ClassId, (PodClass, Compatibility)>,
    pools: BTreeMap<String, PoolTypes>,
    budgets: BTreeMap<String, Allowance>,
    spot_to_spot: isize,
}

/// Inserts (`diff > 0`) or retracts a keyed record; `same` tells whether the record held is
/// the one retracted.
fn keyed<K: Ord, V>(
    map: &mut BTreeMap<K, V>,
    key: K,
    value: V,
    diff: isize,
    same: impl Fn(&V, &V) -> bool,
) {
    if diff > 0 {
        map.insert(key, value);
    } else if map.get(&key).is_some_and(|held| same(held, &value)) {
        map.remove(&key);
    }
}

impl Parts {
    /// Inserts or retracts a candidate (as [`keyed`] does), priced from `prices` and indexed
    /// by its offering.
    fn update_candidate(&mut self, hash: u64, mut c: Candidate, diff: isize) {
        let held = self
            .candidates
            .get(&c.node)
            .map(|(h, c)| (*h, c.offer.clone()));
        if diff > 0 {
            if let Some((_, Some(old))) = &held {
                self.unindex(old, &c.node);
            }
            if let Some(key) = &c.offer {
                c.price = self.prices.get(key).copied();
                self.offer_nodes
                    .entry(key.clone())
                    .or_default()
                    .insert(c.node.clone());
            }
            self.candidates.insert(c.node.clone(), (hash, c));
        } else if held.as_ref().is_some_and(|(h, _)| *h == hash) {
            if let Some((_, Some(old))) = &held {
                self.unindex(old, &c.node);
            }
            self.candidates.remove(&c.node);
        }
    }

    fn unindex(&mut self, key: &OfferKey, node: &str) {
        if let Some(nodes) = self.offer_nodes.get_mut(key) {
            nodes.remove(node);
            if nodes.is_empty() {
                self.offer_nodes.remove(key);
            }
        }
    }

    fn update(&mut self, part: Part, diff: isize) {
        match part {
            Part::Candidate(h, c) => self.update_candidate(h, c, diff),
            Part::Price(key, price) => {
                let was = self.prices.get(&key).copied();
                keyed(&mut self.prices, key.clone(), price, diff, |a, b| a == b);
                let now = self.prices.get(&key).copied();
                if now != was {
                    for node in self.offer_nodes.get(&key).into_iter().flatten() {
                        if let Some((_, c)) = self.candidates.get_mut(node) {
                            c.price = now;
                        }
                    }
                }
            }
            Part::Node(f, n) => keyed(
                &mut self.nodes,
                n.node.name.clone(),
                (f, n),
                diff,
                |a, b| a.0 == b.0,
            ),
            Part::Class(id, class, compat) => {
                keyed(&mut self.classes, id, (class, compat), diff, |a, b| a == b)
            }
            Part::Pool(p) => keyed(&mut self.pools, p.nodepool.name.clone(), p, diff, |a, b| {
                a == b
            }),
            Part::Budget(pool, a) => keyed(&mut self.budgets, pool, a, diff, |a, b| a == b),
            Part::Forced(n, f) => {
                let e = self.forced.entry((n.clone(), f.clone())).or_insert(0);
                *e += diff;
                if *e == 0 {
                    self.forced.remove(&(n, f));
                }
            }
            Part::SpotToSpot => self.spot_to_spot += diff,
        }
    }
}

/// The commands query's state between evaluations: its input parts, and the simulation memo
/// (pure, so an answer is what a fresh evaluation would give).
#[derive(Default)]
struct Commands {
    parts: Parts,
    memo: RefCell<Memo>,
    /// The commands' decisions last answered.
    commanded: HashMap<Decision, isize>,
    /// The blocked candidates' listings last answered, by node: per reason, the listing and
    /// the evaluation that last gave it.
    listed: FxHashMap<String, Vec<(DisruptionReason, Decision, u64)>>,
    /// Single-node outcomes (see [`Evaluation::consolidate_one`]).
    checks: RefCell<FxHashMap<String, Check>>,
    /// Candidates' demands (see [`Evaluation::plausible`]).
    demands: RefCell<FxHashMap<u64, Demand>>,
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
        let mut phases = Phases::start();
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
        let nodes: Vec<(u64, &NodeState)> = parts.nodes.values().map(|(f, n)| (*f, n)).collect();
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
            for (_, ds) in self.listed.drain() {
                out.extend(ds.into_iter().map(|(_, d, _)| (d, -1)));
            }
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
            checks: &self.checks,
            demands: &self.demands,
            evaluation: self.evaluation,
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
            check_hits: std::cell::Cell::new(0),
            phases,
        };
        eval.mark("world");
        eval.run();
        let evaluation = self.evaluation;
        self.checks
            .borrow_mut()
            .retain(|_, c| c.evaluation == evaluation);
        self.demands
            .borrow_mut()
            .retain(|_, d| d.evaluation == evaluation);
        let candidates = eval.candidates.len();
        eval.mark("checks");
        let mut commanded: HashMap<Decision, isize> = HashMap::new();
        for d in eval.command_decisions() {
            *commanded.entry(d).or_insert(0) += 1;
        }
        changes(&self.commanded, &commanded, out);
        self.commanded = commanded;
        // Listings are compared as (node, reason, why) in place: most stay as they were, and
        // rebuilding and hashing ten thousand of them per change was a fifth of it.
        for (c, reason, why) in std::mem::take(&mut eval.blocked) {
            let held = match self.listed.get_mut(c.node.as_str()) {
                Some(held) => held,
                None => self.listed.entry(c.node.clone()).or_default(),
            };
            match held.iter_mut().find(|(r, _, _)| *r == reason) {
                // The first listing of (node, reason) this evaluation wins.
                Some((_, _, seen)) if *seen == evaluation => {}
                Some((_, d, seen)) if listing_is(d, c, &why) => *seen = evaluation,
                Some((_, d, seen)) => {
                    let new = listing(c, reason, why.into_owned());
                    out.push((std::mem::replace(d, new.clone()), -1));
                    out.push((new, 1));
                    *seen = evaluation;
                }
                None => {
                    let d = listing(c, reason, why.into_owned());
                    out.push((d.clone(), 1));
                    held.push((reason, d, evaluation));
                }
            }
        }
        self.listed.retain(|_, held| {
            held.retain(|(_, d, seen)| {
                if *seen != evaluation {
                    out.push((d.clone(), -1));
                }
                *seen == evaluation
            });
            !held.is_empty()
        });
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
    }
}

/// The commands query over all its parts: one evaluation of the whole cluster per change, kept
/// by [`maintain`] so that a change re-sorts neither the ~30,000 parts nor the ~10,000 listings.
pub fn commands<'s>(parts: VecCollection<'s, Epoch, Part>) -> VecCollection<'s, Epoch, Decision> {
    maintain(parts, "DisruptionCommands", Commands::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(instance_type: &str) -> OfferKey {
        (
            "general".to_string(),
            instance_type.to_string(),
            Some("us-east-1a".to_string()),
            Some("on-demand".to_string()),
        )
    }

    fn candidate(node: &str, instance_type: &str) -> Candidate {
        Candidate {
            node: node.to_string(),
            nodeclaim: None,
            nodepool: "general".to_string(),
            policy: ConsolidationPolicy::WhenEmptyOrUnderutilized,
            consolidate_never: false,
            consolidatable: true,
            capacity_type: "on-demand".to_string(),
            instance_type: instance_type.to_string(),
            offer: Some(key(instance_type)),
            price: None,
            pods: Vec::new(),
            disruption_cost: 1_000_000,
            blocked_by: None,
            disrupting: false,
        }
    }

    fn price(parts: &Parts, node: &str) -> Option<Price> {
        parts.candidates.get(node).and_then(|(_, c)| c.price)
    }

    /// Within an epoch a record's retraction may come before or after its successor, and a
    /// candidate before or after its offering's price: the candidate ends priced right.
    #[test]
    fn candidates_are_priced_from_the_offers_in_any_order() {
        let mut parts = Parts::default();
        parts.update(Part::Candidate(1, candidate("a", "m5.large")), 1);
        assert_eq!(price(&parts, "a"), None, "no price known yet");
        parts.update(Part::Price(key("m5.large"), Price(100)), 1);
        assert_eq!(price(&parts, "a"), Some(Price(100)));

        parts.update(Part::Price(key("m5.large"), Price(90)), 1);
        parts.update(Part::Price(key("m5.large"), Price(100)), -1);
        assert_eq!(
            price(&parts, "a"),
            Some(Price(90)),
            "new price before the old retracted"
        );

        // The node's offering changes: the new candidate arrives before the old one leaves.
        parts.update(Part::Price(key("m5.xlarge"), Price(200)), 1);
        parts.update(Part::Candidate(2, candidate("a", "m5.xlarge")), 1);
        parts.update(Part::Candidate(1, candidate("a", "m5.large")), -1);
        assert_eq!(price(&parts, "a"), Some(Price(200)));
        parts.update(Part::Price(key("m5.large"), Price(90)), -1);
        assert_eq!(
            price(&parts, "a"),
            Some(Price(200)),
            "its old offering's price no longer reaches it"
        );

        parts.update(Part::Price(key("m5.xlarge"), Price(200)), -1);
        assert_eq!(price(&parts, "a"), None, "not offered any more");
        parts.update(Part::Candidate(2, candidate("a", "m5.xlarge")), -1);
        assert!(parts.candidates.is_empty());
        assert!(parts.offer_nodes.is_empty(), "{:?}", parts.offer_nodes);
    }
}
