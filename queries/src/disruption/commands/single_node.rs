//! Methods 4 and 5's single-node half — the candidates with pods that could go on their own:
//! each is pruned cheaply (its pods fit the free room elsewhere, or a NodeClaim for one of them
//! costs less than the node), then checked exactly (its pods fit elsewhere: delete; or on one
//! strictly cheaper NodeClaim: replace), the outcome kept with what it read so that it stands
//! until that changes. Karpenter's `singlenodeconsolidation.go` takes the best savings per unit
//! of disruption cost among them when multi-node consolidation finds nothing.

use super::parts::Slot;
use super::{Command, Evaluation};
use crate::disruption::lifetime::scaled_cost;
use crate::disruption::simulate::Reads;
use crate::disruption::types::Candidate;
use crate::solver::Stop;
use dovetail_dataflow::decisions::{DisruptionReason, Launch};
use dovetail_dataflow::disruption_reasons::Blocker;
use dovetail_dataflow::model::labels::CAPACITY_TYPE_SPOT;
use dovetail_dataflow::model::{Price, Resources};
use dovetail_dataflow::stable_hash::stable_hash;
use rustc_hash::FxHashMap;
use std::borrow::Cow;
use std::cell::RefCell;
use std::ops::Bound::{Excluded, Included, Unbounded};
use std::rc::Rc;

/// A single-node consolidation outcome: the replacement launches and the savings, or why not.
pub(super) type Outcome = Result<(Rc<Vec<Launch>>, i64), Blocker>;

/// An outcome's savings, or why not.
fn savings_of(outcome: &Outcome) -> Result<i64, Blocker> {
    match outcome {
        Ok((_, s)) => Ok(*s),
        Err(why) => Err(why.clone()),
    }
}

/// Narrowed replacement launches, or why none, by (run, price, spot).
pub(super) type PricedLaunches =
    RefCell<FxHashMap<(usize, i64, bool), Result<Rc<Vec<Launch>>, Blocker>>>;

/// A candidate's single-node outcome with what it read: the candidate (by hash), what it read
/// of its pods' classes (the context), the NodePools when it priced a replacement, and the
/// existing nodes it walked.
pub(super) struct Check {
    candidate: u64,
    /// [`super::World::existing_context`] of its pods, and the [`super::World::existing_all`] it was last
    /// found under (while that stands, so does the context, unrecomputed).
    context: u64,
    classes: u64,
    may_replace: bool,
    /// The candidate's price (its hash leaves it out).
    price: Option<Price>,
    /// [`super::World::new_context`] with the spot-to-spot gate, when the outcome read the NodePools.
    /// A delete reads none of it, so a price change leaves most outcomes standing.
    pools: Option<u64>,
    /// [`super::World::in_flight_hash`], when the outcome was a consolidation that pods left over
    /// for new NodeClaims could make wait on an in-flight NodeClaim. A blocker found first
    /// reads none of it, so it stands while NodeClaims come and go.
    in_flight: Option<u64>,
    /// [`super::World::counted_hash`], when the outcome stood on a whole-cluster run.
    counted: Option<u64>,
    reads: Reads,
    /// The existing-node walk it stood on, kept alive while the check is.
    walk: Option<u64>,
    outcome: Outcome,
}

/// What a single-node outcome read, beyond the candidate itself.
pub(super) struct Read {
    reads: Reads,
    pools: bool,
    in_flight: bool,
    counted: bool,
    walk: Option<u64>,
}

/// What the cheap prune reads of a candidate's pods, kept with the candidate (not summed again
/// per evaluation): their total requests, the largest of each resource, and the cheapest launch
/// that could hold any one of them.
#[derive(Default)]
pub(super) struct Demand {
    /// The candidate's hash.
    candidate: u64,
    total: Resources,
    largest: Resources,
    /// The [`super::World::existing_all`] the sums were made under (it names the classes known).
    classes: Option<u64>,
    cheapest: Option<i64>,
    /// The [`super::World::offers_all`] `cheapest` was found under.
    offers: Option<u64>,
}

impl<'a> Evaluation<'a> {
    /// The candidates with pods that single-node consolidation could take, with their savings;
    /// the others past `consolidateAfter` are listed with what keeps them, so that every such
    /// candidate says why.
    ///
    /// Candidates are visited from where the last evaluation's re-checks stopped (see
    /// [`super::WHOLE_RECHECK_NODES`]), so every stale outcome gets its turn.
    pub(super) fn single_node_options(&mut self) -> Vec<(&'a Slot, i64)> {
        let mut options: Vec<(&'a Slot, i64)> = Vec::new();
        let candidates: &'a std::collections::BTreeMap<String, Slot> = self.candidates;
        let start = self.start_at.unwrap_or("");
        let from_start = candidates
            .range::<str, _>((Included(start), Unbounded))
            .chain(candidates.range::<str, _>((Unbounded, Excluded(start))));
        for (_, c) in from_start {
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
            // One never checked waits its turn too, without a listing until then.
            if self.whole_spent.get() >= super::WHOLE_RECHECK_NODES
                && c.check.borrow().is_none()
                && self.world.reads_whole_cluster(&c.pods)
            {
                self.defer(c, replace);
                continue;
            }
            let savings = match self.consolidate_one(c, replace, true) {
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
        options
    }

    /// The first option by savings per unit of (lifetime-scaled) disruption cost that its
    /// budget allows becomes the command; returns it and the options still waiting.
    pub(super) fn take_single_node(
        &mut self,
        mut options: Vec<(&'a Slot, i64)>,
    ) -> (Vec<String>, Vec<&'a Slot>) {
        let now = self.now;
        options.sort_by(|a, b| {
            let ra = a.1 as f64 / scaled_cost(a.0, now) as f64;
            let rb = b.1 as f64 / scaled_cost(b.0, now) as f64;
            rb.total_cmp(&ra).then_with(|| a.0.node.cmp(&b.0.node))
        });
        let mut picked = Vec::new();
        let mut tried = options.len();
        for (i, &(c, savings)) in options.iter().enumerate() {
            if self.budget_left(&c.nodepool, DisruptionReason::Underutilized) <= 0 {
                self.over_budget(c, DisruptionReason::Underutilized);
                continue;
            }
            let mut savings = savings;
            let deferred = self.deferred.borrow().get(c.node.as_str()).copied();
            if let Some(may_replace) = deferred {
                // An outcome that stood past the budget is checked again before it is acted
                // on, with a second budget's worth at most: past that it waits its turn.
                if self.whole_spent.get() >= 2 * super::WHOLE_RECHECK_NODES {
                    self.blocked.push((
                        c,
                        DisruptionReason::Underutilized,
                        Cow::Owned(Blocker::Waiting),
                    ));
                    continue;
                }
                self.deferred.borrow_mut().remove(c.node.as_str());
                let fresh = self
                    .consolidate_one(c, may_replace, false)
                    .and_then(|s| self.balanced(&[&c.candidate], s).map(|()| s));
                match fresh {
                    Ok(s) => savings = s,
                    Err(why) => {
                        self.blocked
                            .push((c, DisruptionReason::Underutilized, Cow::Owned(why)));
                        continue;
                    }
                }
            }
            self.use_budget(&c.nodepool);
            picked.push(c.node.clone());
            self.commands.push(Command {
                nodes: vec![c.node.clone()],
                reason: DisruptionReason::Underutilized,
                launches: Self::kept_launches(c),
                savings,
            });
            tried = i + 1;
            break;
        }
        let waiting = options.iter().skip(tried).map(|(c, _)| *c).collect();
        (picked, waiting)
    }

    /// The cheap necessary conditions for consolidating one node: whether a delete is
    /// plausible (every pod fits the largest free room elsewhere and all of them the total) and
    /// whether a replacement is (a new NodeClaim holding any of its pods could cost less than
    /// the node). None when a pod's class is unknown.
    pub(super) fn plausible(&self, c: &Slot) -> Option<(bool, bool)> {
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
    /// unchanged: most changes touch a few nodes, so most candidates need no new check, even a
    /// memoised one.
    /// Returns the savings of a consolidation that works; its launches stay in the check
    /// ([`Evaluation::kept_launches`]), not copied for thousands of candidates of which one is
    /// chosen.
    /// With `budgeted`, a stale outcome that stood on a whole-cluster run stands a while longer
    /// once the evaluation's re-checks are spent ([`super::WHOLE_RECHECK_NODES`]).
    pub(super) fn consolidate_one(
        &self,
        c: &'a Slot,
        may_replace: bool,
        budgeted: bool,
    ) -> Result<i64, Blocker> {
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
                && check
                    .in_flight
                    .is_none_or(|h| h == self.world.in_flight_hash)
                && check.counted.is_none_or(|h| h == self.world.counted_hash)
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
                return savings_of(&check.outcome);
            }
            if budgeted
                && check.counted.is_some()
                && self.whole_spent.get() >= super::WHOLE_RECHECK_NODES
            {
                self.defer(c, may_replace);
                return savings_of(&check.outcome);
            }
        }
        let (outcome, reads) = self.consolidate_one_now(c, may_replace);
        if reads.as_ref().is_some_and(|r| r.counted) {
            self.spend_whole_run();
        }
        let savings = savings_of(&outcome);
        if let Some(read) = reads {
            *c.check.borrow_mut() = Some(Check {
                candidate,
                context: self.world.existing_context(&c.pods),
                classes,
                may_replace,
                price: c.price,
                pools: read.pools.then(pools),
                in_flight: read.in_flight.then_some(self.world.in_flight_hash),
                counted: read.counted.then_some(self.world.counted_hash),
                reads: read.reads,
                walk: read.walk,
                outcome,
            });
        }
        savings
    }

    /// Leaves the candidate's check for a later evaluation (see
    /// [`super::WHOLE_RECHECK_NODES`]), which starts from the first one left.
    fn defer(&self, c: &'a Slot, may_replace: bool) {
        self.deferred
            .borrow_mut()
            .insert(c.node.as_str(), may_replace);
        if self.first_deferred.get().is_none() {
            self.first_deferred.set(Some(c.node.as_str()));
        }
    }

    /// The launches of the candidate's consolidation this evaluation found to work.
    pub(super) fn kept_launches(c: &Slot) -> Vec<Launch> {
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
    pub(super) fn consolidate_one_now(
        &self,
        c: &'a Candidate,
        may_replace: bool,
    ) -> (Outcome, Option<Read>) {
        let Some(price) = c.price else {
            return (Err(Blocker::PriceUnknown), None);
        };
        let out = self.simulation_with(&[c], may_replace, Stop::NEVER);
        let mut read = Read {
            reads: out.reads,
            pools: out.reads_pools,
            in_flight: false,
            counted: out.reads_counted,
            walk: out.walk,
        };
        if let Err(why) = Self::all_placed(&out) {
            return (Err(why), Some(read));
        }
        let mut outcome = match out.launches() {
            [] => Ok((Rc::new(Vec::new()), price.0)),
            // Narrowing only drops types and offerings, so a launch that is not cheaper at its
            // cheapest never becomes so: no need to copy it to find out.
            [l] if l.price.0 >= price.0 => Err(Blocker::NotCheaper {
                replacement: l.price,
                node: price,
            }),
            [l] => {
                // Candidates whose pods leave the same pods over share a new-NodeClaim run, and
                // many have the same price: its launch is narrowed once for them all (after a
                // price change every candidate's context changes at once).
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
        // Only a consolidation that works otherwise waits on an in-flight NodeClaim (Karpenter's
        // `UninitializedNodeError`): a candidate that needs two NodeClaims, or no cheaper one,
        // says so whatever NodeClaims are launching, so its listing does not flip to this and
        // back as every other command launches and initializes its replacement. It waits as an
        // option not chosen does, until that NodeClaim is up.
        if outcome.is_ok() && out.reads_in_flight {
            read.in_flight = true;
            if out.uninitialized_destination().is_some() {
                outcome = Err(Blocker::Waiting);
            }
        }
        (outcome, Some(read))
    }
}
