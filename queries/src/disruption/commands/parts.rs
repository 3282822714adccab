//! The commands query's inputs, indexed as they change, and what it keeps about each
//! candidate between evaluations.

use super::super::simulate::{ends_chunk, pool_hash, ClassHashes, NodeNames};
use super::super::types::{Allowance, Candidate, Forced, OfferKey};
use super::multi_node::Rank;
use super::{Check, Demand};
use crate::types::{ClassId, Compatibility, NodeState, PodClass, PoolTypes};
use dovetail_dataflow::decisions::{Decision, DisruptionReason};
use dovetail_dataflow::facts::Minute;
use dovetail_dataflow::model::Price;
use dovetail_dataflow::stable_hash::stable_hash;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Part {
    /// A candidate with its hash, computed as it changes (without its price).
    Candidate(u64, Candidate),
    /// The price of an offering some candidate has.
    Price(OfferKey, Price),
    Forced(String, Forced),
    /// A node's state with its [`super::super::simulate::fingerprint`], computed as the state changes.
    Node(u64, NodeState),
    Class(ClassId, PodClass, Compatibility),
    Pool(PoolTypes),
    Budget(String, Allowance),
    SpotToSpot,
    /// The engine's clock, to the minute: candidates' disruption costs shrink as they near
    /// expiry ([`super::super::lifetime`]).
    Clock(Minute),
}

/// The commands query's inputs, indexed as they change. Each keyed collection holds at most
/// one record per key at a time (candidates and node states per node, classes per id, pools
/// and budgets per NodePool), so an update replaces or removes the record of its key; within
/// an epoch a record's retraction may come after its successor's insertion, so a retraction
/// removes only the record it names.
#[derive(Default)]
pub(super) struct Parts {
    /// Candidates by node, with their prices filled in from `prices`.
    pub candidates: BTreeMap<String, Slot>,
    /// Listings of candidates that are gone, to retract at the next evaluation.
    pub unlisted: Vec<Decision>,
    /// How many listings the candidates hold.
    pub listed: usize,
    /// Candidates without pods, for emptiness (a few among ten thousand).
    pub empty: BTreeSet<String>,
    /// Candidates multi-node consolidation may take, best first (see [`Rank`]): it wants the
    /// first hundred or so, so the order is kept as candidates change, not sorted per
    /// evaluation.
    pub ranked: BTreeSet<(Rank, String)>,
    pub prices: BTreeMap<OfferKey, Price>,
    /// The candidates of each offering, to re-price them as its price changes.
    pub offer_nodes: BTreeMap<OfferKey, BTreeSet<String>>,
    pub forced: BTreeMap<(String, Forced), isize>,
    /// Node states by name, with their fingerprints and whether they end a chunk.
    pub nodes: BTreeMap<String, (u64, bool, NodeState)>,
    /// The names `nodes` and their NodeClaims go by.
    pub names: NodeNames,
    /// Classes by id, with their hashes (computed as they change).
    pub classes: BTreeMap<ClassId, (PodClass, Compatibility, ClassHashes)>,
    /// NodePools by name, with their [`pool_hash`]es.
    pub pools: BTreeMap<String, (u64, PoolTypes)>,
    pub budgets: BTreeMap<String, Allowance>,
    pub spot_to_spot: isize,
    /// The clock facts held (one but for an epoch's moment between retraction and insertion).
    clocks: BTreeMap<Minute, isize>,
    /// The time ranks are computed at (the latest clock).
    pub now: i64,
    /// Ranked candidates by when their lifetime's next step passes: a tick re-ranks only the
    /// candidates whose scaled cost it changes.
    steps: BTreeSet<(i64, String)>,
    /// Whether anything the evaluation reads changed since the last one: a tick that moves no
    /// candidate's cost needs none.
    pub dirty: bool,
    /// Whether the last evaluation left stale outcomes for later (see
    /// [`super::WHOLE_RECHECK_NODES`]): the next tick of the clock evaluates again, so a quiet
    /// cluster still works through them.
    pub pending_checks: bool,
}

/// A candidate (with its hash, computed as it changes) and what the query keeps about it
/// between evaluations. Kept together, as every evaluation visits every candidate, so one
/// lookup finds its check, demand and listings.
pub(super) struct Slot {
    pub hash: u64,
    pub candidate: Candidate,
    /// The [`stable_hash`] of its node's name (see [`super::super::simulate::Taken`]).
    pub name_hash: u64,
    /// Its single-node outcome with what it read (see [`super::Evaluation::consolidate_one`]).
    pub check: RefCell<Option<Check>>,
    /// What the cheap prune reads of its pods (see [`super::Evaluation::plausible`]).
    pub demand: RefCell<Demand>,
    /// Its listings last answered, one per reason.
    pub listed: RefCell<Vec<Listing>>,
    /// Its place in [`Parts::ranked`], if it has one.
    pub rank: Option<Rank>,
    /// Its entry in [`Parts::steps`], if it has one.
    pub next_step: Option<i64>,
}

/// A blocked candidate's listing as last answered.
pub(super) struct Listing {
    pub reason: DisruptionReason,
    pub decision: Decision,
    /// The last evaluation that gave it.
    pub seen: u64,
    /// The hash of the candidate it was made for, and of why it is blocked: while both stand,
    /// so does the listing, with no string compared (ten thousand listings' strings were a
    /// tenth of an evaluation in cache misses).
    pub candidate: u64,
    pub why: u64,
}

impl std::ops::Deref for Slot {
    type Target = Candidate;

    fn deref(&self) -> &Candidate {
        &self.candidate
    }
}

/// Inserts (`diff > 0`) or retracts a keyed record; `same` tells whether the record held is
/// the one retracted. Returns the record that left the map, replaced or retracted.
fn keyed<K: Ord, V>(
    map: &mut BTreeMap<K, V>,
    key: K,
    value: V,
    diff: isize,
    same: impl Fn(&V, &V) -> bool,
) -> Option<V> {
    if diff > 0 {
        map.insert(key, value)
    } else if map.get(&key).is_some_and(|held| same(held, &value)) {
        map.remove(&key)
    } else {
        None
    }
}

/// Moves a candidate to its place in [`Parts::ranked`] as it stands at `now`, and to its next
/// lifetime step in [`Parts::steps`]; true when its rank changed.
fn rerank(
    candidates: &mut BTreeMap<String, Slot>,
    ranked: &mut BTreeSet<(Rank, String)>,
    steps: &mut BTreeSet<(i64, String)>,
    now: i64,
    node: &str,
) -> bool {
    let Some(slot) = candidates.get_mut(node) else {
        return false;
    };
    let rank = Rank::of(&slot.candidate, now);
    // Only a ranked candidate's step matters: the rest are ordered per evaluation, if at all.
    let next = rank
        .and(slot.candidate.lifetime)
        .and_then(|l| l.next_step_ms(now));
    if next != slot.next_step {
        if let Some(old) = std::mem::replace(&mut slot.next_step, next) {
            steps.remove(&(old, node.to_string()));
        }
        if let Some(new) = next {
            steps.insert((new, node.to_string()));
        }
    }
    if rank == slot.rank {
        return false;
    }
    if let Some(old) = std::mem::replace(&mut slot.rank, rank) {
        ranked.remove(&(old, node.to_string()));
    }
    if let Some(new) = rank {
        ranked.insert((new, node.to_string()));
    }
    true
}

impl Parts {
    /// Inserts or retracts a candidate (as [`keyed`] does), priced from `prices` and indexed
    /// by its offering.
    fn update_candidate(&mut self, hash: u64, mut c: Candidate, diff: isize) {
        let held = self
            .candidates
            .get(&c.node)
            .map(|s| (s.hash, s.candidate.offer.clone()));
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
            // What was kept about the node's earlier candidate stays: each part names the
            // candidate it was made for.
            let node = c.node.clone();
            if c.pods.is_empty() {
                self.empty.insert(node.clone());
            } else {
                self.empty.remove(&node);
            }
            match self.candidates.get_mut(&node) {
                Some(slot) => {
                    slot.hash = hash;
                    slot.candidate = c;
                }
                None => {
                    let slot = Slot {
                        hash,
                        name_hash: stable_hash(&c.node),
                        candidate: c,
                        check: RefCell::new(None),
                        demand: RefCell::default(),
                        listed: RefCell::default(),
                        rank: None,
                        next_step: None,
                    };
                    self.candidates.insert(node.clone(), slot);
                }
            }
            rerank(
                &mut self.candidates,
                &mut self.ranked,
                &mut self.steps,
                self.now,
                &node,
            );
        } else if held.as_ref().is_some_and(|(h, _)| *h == hash) {
            if let Some((_, Some(old))) = &held {
                self.unindex(old, &c.node);
            }
            self.empty.remove(&c.node);
            if let Some(slot) = self.candidates.remove(&c.node) {
                if let Some(rank) = slot.rank {
                    self.ranked.remove(&(rank, c.node.clone()));
                }
                if let Some(step) = slot.next_step {
                    self.steps.remove(&(step, c.node.clone()));
                }
                let listed = slot.listed.into_inner();
                self.listed -= listed.len();
                self.unlisted.extend(listed.into_iter().map(|l| l.decision));
            }
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

    /// Moves the ranking's clock to `now`, re-ranking the candidates whose lifetime step it
    /// passes; true when a rank changed.
    fn advance_to(&mut self, now: i64) -> bool {
        let earlier = now < self.now;
        self.now = now;
        let due: Vec<String> = if earlier {
            // The engine's clock only moves forward; should it not, every rank is redone.
            self.candidates.keys().cloned().collect()
        } else {
            let mut due = Vec::new();
            while self.steps.first().is_some_and(|(at, _)| *at <= now) {
                if let Some((_, node)) = self.steps.pop_first() {
                    due.push(node);
                }
            }
            due
        };
        let mut changed = false;
        for node in due {
            if let Some(slot) = self.candidates.get_mut(&node) {
                // Popped from `steps`: it must be put back wherever it now belongs.
                if !earlier {
                    slot.next_step = None;
                }
            }
            changed |= rerank(
                &mut self.candidates,
                &mut self.ranked,
                &mut self.steps,
                now,
                &node,
            );
        }
        changed
    }

    pub fn update(&mut self, part: Part, diff: isize) {
        if let Part::Clock(m) = part {
            let n = self.clocks.entry(m).or_insert(0);
            *n += diff;
            if *n == 0 {
                self.clocks.remove(&m);
            }
            let latest = self.clocks.iter().rev().find(|(_, n)| **n > 0);
            if let Some((&now, _)) = latest {
                if now != self.now {
                    let moved = self.advance_to(now);
                    self.dirty |= moved || self.pending_checks;
                }
            }
            return;
        }
        self.dirty = true;
        match part {
            Part::Candidate(h, c) => self.update_candidate(h, c, diff),
            Part::Price(key, price) => {
                let was = self.prices.get(&key).copied();
                keyed(&mut self.prices, key.clone(), price, diff, |a, b| a == b);
                let now = self.prices.get(&key).copied();
                if now != was {
                    let Parts {
                        offer_nodes,
                        candidates,
                        ranked,
                        steps,
                        now: clock,
                        ..
                    } = self;
                    for node in offer_nodes.get(&key).into_iter().flatten() {
                        if let Some(slot) = candidates.get_mut(node) {
                            slot.candidate.price = now;
                        }
                        rerank(candidates, ranked, steps, *clock, node);
                    }
                }
            }
            Part::Node(f, n) => {
                if diff > 0 {
                    self.names.add(&n);
                }
                let end = ends_chunk(&n.node.name);
                let gone = keyed(
                    &mut self.nodes,
                    n.node.name.clone(),
                    (f, end, n),
                    diff,
                    |a, b| a.0 == b.0,
                );
                if let Some((_, _, gone)) = gone {
                    self.names.remove(&gone);
                }
            }
            Part::Class(id, class, compat) => {
                let hashes = ClassHashes::of(&compat);
                keyed(
                    &mut self.classes,
                    id,
                    (class, compat, hashes),
                    diff,
                    |a, b| a.2 == b.2 && a.0 == b.0,
                );
            }
            Part::Pool(p) => {
                let hash = pool_hash(&p);
                keyed(
                    &mut self.pools,
                    p.nodepool.name.clone(),
                    (hash, p),
                    diff,
                    |a, b| a.0 == b.0,
                );
            }
            Part::Budget(pool, a) => {
                keyed(&mut self.budgets, pool, a, diff, |a, b| a == b);
            }
            Part::Forced(n, f) => {
                let e = self.forced.entry((n.clone(), f.clone())).or_insert(0);
                *e += diff;
                if *e == 0 {
                    self.forced.remove(&(n, f));
                }
            }
            Part::SpotToSpot => self.spot_to_spot += diff,
            Part::Clock(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_dataflow::disruption_reasons::Blocker;
    use dovetail_dataflow::model::ConsolidationPolicy;

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
            consolidatable_at_ms: Some(0),
            capacity_type: "on-demand".to_string(),
            instance_type: instance_type.to_string(),
            offer: Some(key(instance_type)),
            price: None,
            pods: Vec::new(),
            disruption_cost: 1_000_000,
            lifetime: None,
            blocked_by: None,
            disrupting: false,
        }
    }

    fn price(parts: &Parts, node: &str) -> Option<Price> {
        parts.candidates.get(node).and_then(|s| s.price)
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

    fn ranked(parts: &Parts) -> Vec<&str> {
        parts.ranked.iter().map(|(_, n)| n.as_str()).collect()
    }

    /// Multi-node consolidation's order and the empty nodes follow the candidates and their
    /// prices as they change, in whatever order an epoch's records come.
    #[test]
    fn ranking_and_empty_nodes_follow_candidates_and_prices() {
        let mut parts = Parts::default();
        let with_pods = |node: &str, t: &str| Candidate {
            pods: vec![(7, 1)],
            ..candidate(node, t)
        };
        parts.update(Part::Price(key("m5.large"), Price(100)), 1);
        parts.update(Part::Price(key("m5.xlarge"), Price(200)), 1);
        parts.update(Part::Candidate(1, with_pods("a", "m5.large")), 1);
        parts.update(Part::Candidate(2, with_pods("b", "m5.xlarge")), 1);
        parts.update(Part::Candidate(3, candidate("c", "m5.large")), 1);
        assert_eq!(
            ranked(&parts),
            ["b", "a"],
            "dearer per disruption cost first"
        );
        assert_eq!(parts.empty.iter().collect::<Vec<_>>(), ["c"]);

        parts.update(Part::Price(key("m5.large"), Price(300)), 1);
        parts.update(Part::Price(key("m5.large"), Price(100)), -1);
        assert_eq!(ranked(&parts), ["a", "b"], "re-ranked by its new price");

        // `a` loses its pods (new record before the old one leaves) and `c` gains some.
        parts.update(Part::Candidate(4, candidate("a", "m5.large")), 1);
        parts.update(Part::Candidate(1, with_pods("a", "m5.large")), -1);
        parts.update(Part::Candidate(3, candidate("c", "m5.large")), -1);
        parts.update(Part::Candidate(5, with_pods("c", "m5.large")), 1);
        assert_eq!(ranked(&parts), ["c", "b"]);
        assert_eq!(parts.empty.iter().collect::<Vec<_>>(), ["a"]);

        // Blocked or unpriced candidates are not ranked; a removed one is nowhere.
        parts.update(Part::Candidate(2, with_pods("b", "m5.xlarge")), -1);
        parts.update(
            Part::Candidate(
                6,
                Candidate {
                    blocked_by: Some(Blocker::NodeDoNotDisrupt {
                        node: "b".to_string(),
                    }),
                    ..with_pods("b", "m5.xlarge")
                },
            ),
            1,
        );
        parts.update(Part::Price(key("m5.large"), Price(300)), -1);
        assert_eq!(ranked(&parts), Vec::<&str>::new());
        parts.update(Part::Candidate(4, candidate("a", "m5.large")), -1);
        assert!(parts.empty.is_empty());
    }
}
