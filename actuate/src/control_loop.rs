//! The control loop: facts in, epochs closed, decision diffs acted on, outcomes back as facts.
//!
//! Sources (a trace and the simulated cluster in a replay; watchers and pollers live) set facts;
//! the loop closes an epoch at a time the driver chooses, hands the decision diffs to the
//! [`Actuator`], which talks to a [`Cloud`] and a [`Cluster`]. What comes back (capacity errors,
//! NodeClaims launched) reaches the engine as facts in a later epoch. The loop owns no clock:
//! `replay` drives it on a virtual clock, `run` will on the wall clock.

use crate::actuator::{ActuationSettings, Actuator};
use crate::batching::{Batch, BatchWindow};
use dovetail_dataflow::backend::{Cloud, Cluster};
use dovetail_dataflow::decisions::{Decision, Disruption};
use dovetail_dataflow::engine::{Engine, EngineError, QueryBuilder};
use dovetail_dataflow::fact_set::FactSet;
use dovetail_dataflow::facts::{object_key, Fact};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::time::Instant;

/// The engine, the facts it has been told, and the actuator acting on its decisions.
pub struct ControlLoop {
    engine: Engine,
    facts: FactSet,
    actuator: Actuator,
    window: BatchWindow,
    batch: Batch,
    /// The latest time a source or the driver has told the loop.
    clock_ms: i64,
    advances: u64,
    last_advance_ms: i64,
    latency_micros: Histogram<u64>,
    decision_diffs: Histogram<u64>,
}

/// An auto-resizing histogram with three significant figures.
pub fn histogram() -> Histogram<u64> {
    // A constant configuration that cannot fail.
    Histogram::new(3).expect("3 significant figures is a valid histogram precision")
}

impl ControlLoop {
    /// Starts the engine with `workers` timely workers and the standing queries `queries`.
    pub fn start(
        queries: impl QueryBuilder,
        workers: usize,
        settings: ActuationSettings,
    ) -> Result<ControlLoop, EngineError> {
        Ok(ControlLoop {
            engine: Engine::start(workers, queries)?,
            facts: FactSet::default(),
            actuator: Actuator::new(settings),
            window: BatchWindow::OFF,
            batch: Batch::default(),
            clock_ms: 0,
            advances: 0,
            last_advance_ms: 0,
            latency_micros: histogram(),
            decision_diffs: histogram(),
        })
    }

    /// Batches new pending pods in `window` from now on (see [`crate::batching`]).
    pub fn set_batch_window(&mut self, window: BatchWindow) {
        self.window = window;
    }

    /// Tells the loop the time: facts set from now on arrived at `now_ms`.
    pub fn set_clock(&mut self, now_ms: i64) {
        self.clock_ms = self.clock_ms.max(now_ms);
    }

    /// Makes `fact` the one true fact under its key (NodePools and EC2NodeClasses are also what
    /// actuation launches with). A pod the engine has not seen pending is held until its batch
    /// closes.
    pub fn set_fact(&mut self, fact: Fact) {
        match fact {
            Fact::NodePool(ref p) => self.actuator.set_nodepool(p.clone()),
            Fact::NodeClass(ref c) => self.actuator.set_nodeclass(c.clone()),
            Fact::Pod(p) if !self.window.is_off() => {
                let key = p.key();
                let pending = p.node_name.is_none();
                if self.batch.holds(&key) {
                    if !pending {
                        self.batch.forget(&key);
                        self.facts.set(Fact::Pod(p));
                    } else if let Some(p) = self.batch.update(p) {
                        self.facts.set(Fact::Pod(p));
                    }
                } else if pending && self.facts.get(&object_key("Pod", &key)).is_none() {
                    self.batch.hold(self.clock_ms, p);
                } else {
                    self.facts.set(Fact::Pod(p));
                }
                return;
            }
            _ => {}
        }
        self.facts.set(fact);
    }

    /// When the open batch closes, for the driver to close an epoch then.
    pub fn next_batch_close_ms(&self) -> Option<i64> {
        self.batch.closes_at(self.window)
    }

    /// Makes `facts` the whole of the kind `of_kind` selects (see [`FactSet::replace_all`]): a
    /// fact of the kind not among them is retracted. Not for pods, nodes, NodePools or
    /// EC2NodeClasses, which the actuator also keeps.
    pub fn replace_facts(&mut self, of_kind: impl Fn(&Fact) -> bool, facts: Vec<Fact>) {
        self.facts.replace_all(of_kind, facts);
    }

    /// Retracts the fact under `key` (see [`Fact::describe`]).
    pub fn remove_fact(&mut self, key: &str) {
        if let Some(pod) = key.strip_prefix("Pod ") {
            if self.batch.forget(pod) {
                return;
            }
        }
        match self.facts.get(key) {
            Some(Fact::NodePool(p)) => {
                let name = p.name.clone();
                self.actuator.remove_nodepool(&name);
            }
            Some(Fact::NodeClass(c)) => {
                let name = c.name.clone();
                self.actuator.remove_nodeclass(&name);
            }
            _ => {}
        }
        self.facts.remove(key);
    }

    /// Whether facts changed since the last epoch closed (pods held in an open batch do not
    /// count until it closes).
    pub fn has_changes(&self) -> bool {
        self.facts.has_changes()
    }

    pub fn actuator(&self) -> &Actuator {
        &self.actuator
    }

    pub fn actuator_mut(&mut self) -> &mut Actuator {
        &mut self.actuator
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// How many epochs were closed.
    pub fn advances(&self) -> u64 {
        self.advances
    }

    /// When a timer of the standing queries is next due (see [`Engine::next_timer`]): with no
    /// new facts, nothing the engine decides changes before it (the minute clock aside).
    pub fn next_engine_timer_ms(&self) -> Option<i64> {
        self.engine
            .next_timer()
            .map(|t| i64::try_from(t).unwrap_or(i64::MAX))
    }

    /// The clock of the last epoch closed.
    pub fn last_advance_ms(&self) -> i64 {
        self.last_advance_ms
    }

    /// Microseconds per [`ControlLoop::advance`].
    pub fn latency_micros(&self) -> &Histogram<u64> {
        &self.latency_micros
    }

    /// Decision diffs (each decision added or retracted) per [`ControlLoop::advance`]: what a
    /// change costs downstream, as issue 20 counts it.
    pub fn decision_diffs(&self) -> &Histogram<u64> {
        &self.decision_diffs
    }

    /// Closes the epoch at `now` with what changed and returns the decisions' diffs. Timers
    /// due before `now` fire first, on the clock they were set for; later epochs at the same
    /// instant take the next milliseconds.
    pub fn advance(&mut self, now: i64) -> Result<Vec<(Decision, isize)>, EngineError> {
        self.set_clock(now);
        for pod in self.batch.release(now, self.window) {
            self.facts.set(Fact::Pod(pod));
        }
        self.take_actuation_facts();
        let changes = self.facts.take_changes();
        let changed = if tracing::enabled!(tracing::Level::DEBUG) {
            fact_kinds(&changes)
        } else {
            BTreeMap::new()
        };
        let at = (now.max(0) as u64).max(self.engine.epoch());
        let started = Instant::now();
        let mut diffs = Vec::new();
        // With nothing to apply, one advance past `at` fires the same timers.
        if self.engine.epoch() < at && !changes.is_empty() {
            diffs = self.engine.advance(at, Vec::new())?;
            self.advances += 1;
        }
        let more = self.engine.advance(at + 1, changes)?;
        self.advances += 1;
        let diffs = if diffs.is_empty() {
            more
        } else {
            let mut sum: BTreeMap<Decision, isize> = BTreeMap::new();
            for (d, r) in diffs.into_iter().chain(more) {
                *sum.entry(d).or_insert(0) += r;
            }
            sum.into_iter().filter(|(_, r)| *r != 0).collect()
        };
        let micros = started.elapsed().as_micros() as u64;
        let _ = self.latency_micros.record(micros.max(1));
        let _ = self.decision_diffs.record(diffs.len() as u64);
        if diffs.len() > MANY_DIFFS {
            log_many_diffs(now, &diffs);
        }
        if micros > SLOW_EPOCH_MICROS {
            tracing::debug!(now, micros, diffs = diffs.len(), ?changed, "slow epoch");
        }
        self.last_advance_ms = now;
        Ok(diffs)
    }

    /// After a restart, before the first epoch: finishes what the previous process left between
    /// creating a NodeClaim and recording its instance (see [`Actuator::recover`]).
    pub fn recover(&mut self, now: i64, cloud: &mut impl Cloud, cluster: &mut impl Cluster) {
        self.actuator.recover(now, cloud, cluster);
        self.take_actuation_facts();
    }

    /// Acts on one epoch's diffs through the backends.
    pub fn act(
        &mut self,
        now: i64,
        diffs: &[(Decision, isize)],
        cloud: &mut impl Cloud,
        cluster: &mut impl Cluster,
    ) {
        self.actuator.act(now, diffs, cloud, cluster);
        self.take_actuation_facts();
    }

    /// Forgets capacity errors past their TTL (the engine's timers have already re-offered
    /// their offerings).
    pub fn expire_capacity_errors(&mut self, now: i64) {
        self.actuator.expire_unavailable(now);
        self.take_actuation_facts();
    }

    /// What actuation learned (capacity errors) becomes facts for the next epoch.
    fn take_actuation_facts(&mut self) {
        for (key, fact) in self.actuator.take_fact_changes() {
            match fact {
                Some(f) => self.facts.set(f),
                None => self.facts.remove(&key),
            }
        }
    }
}

/// Issue 20's budget of decision diffs per change: an epoch above it is logged (debug) with
/// what kinds of decision moved, so a replay can tell which query spends it.
const MANY_DIFFS: usize = 100;

/// Issue 20's bound on an epoch's engine update: a slower one is logged (debug) with the kinds
/// of fact that changed in it.
const SLOW_EPOCH_MICROS: u64 = 50_000;

/// How many facts of each kind (the first word of [`Fact::describe`]) an epoch changes.
fn fact_kinds(changes: &[(Fact, isize)]) -> BTreeMap<String, usize> {
    let mut kinds = BTreeMap::new();
    for (f, _) in changes {
        let d = f.describe();
        let kind = d.split_once(' ').map_or(d.as_str(), |(k, _)| k).to_string();
        *kinds.entry(kind).or_insert(0) += 1;
    }
    kinds
}

fn log_many_diffs(now: i64, diffs: &[(Decision, isize)]) {
    let (mut bindings, mut launches, mut unschedulable) = (0u64, 0u64, 0u64);
    let (mut commands, mut listings, mut other) = (0u64, 0u64, 0u64);
    for (d, _) in diffs {
        match d {
            Decision::Binding { .. } => bindings += 1,
            Decision::Launch(_) => launches += 1,
            Decision::Unschedulable { .. } => unschedulable += 1,
            Decision::Disruption(d) if d.command.is_some() => commands += 1,
            Decision::Disruption(_) => listings += 1,
            _ => other += 1,
        }
    }
    tracing::debug!(
        now,
        diffs = diffs.len(),
        bindings,
        launches,
        unschedulable,
        commands,
        listings,
        other,
        "epoch with many decision diffs"
    );
    if tracing::enabled!(tracing::Level::DEBUG) {
        tracing::debug!(now, moves = ?listing_moves(diffs), "listings moved");
    }
}

/// How blocked candidates' listings moved in an epoch, node by node: "from->to" by blocker kind
/// (`-` for no listing, `Chosen` for a node in a command), with how many nodes moved so. A
/// listing whose blocker kept its kind but changed its numbers (a count, a price) counts as
/// "kind->kind".
fn listing_moves(diffs: &[(Decision, isize)]) -> BTreeMap<String, usize> {
    let kind = |d: &Disruption| match &d.blocked_by {
        Some(b) => b.kind(),
        None => "Chosen",
    };
    let mut by_node: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
    for (d, r) in diffs {
        if let Decision::Disruption(d) = d {
            let e = by_node.entry(d.node.as_str()).or_insert(("-", "-"));
            if *r > 0 {
                e.1 = kind(d);
            } else {
                e.0 = kind(d);
            }
        }
    }
    let mut moves = BTreeMap::new();
    for (from, to) in by_node.into_values() {
        *moves.entry(format!("{from}->{to}")).or_insert(0) += 1;
    }
    moves
}

#[cfg(test)]
mod tests {
    use super::listing_moves;
    use dovetail_dataflow::decisions::{Decision, Disruption, DisruptionReason};
    use dovetail_dataflow::disruption_reasons::Blocker;
    use dovetail_dataflow::model::Price;

    fn listing(node: &str, why: Option<Blocker>) -> Decision {
        Decision::Disruption(Disruption {
            node: node.to_string(),
            nodeclaim: None,
            nodepool: "default".to_string(),
            reason: DisruptionReason::Underutilized,
            command: why.is_none().then(|| "cmd-1".to_string()),
            replacements: Vec::new(),
            savings_per_hour: Price(0),
            blocked_by: why.map(Box::new),
        })
    }

    #[test]
    fn listing_moves_pair_each_nodes_old_and_new_blocker_by_kind() {
        let diffs = vec![
            (listing("a", Some(Blocker::Waiting)), -1),
            (listing("a", Some(Blocker::NeedsNewNodes { count: 2 })), 1),
            (listing("b", Some(Blocker::NeedsNewNodes { count: 4 })), -1),
            (listing("b", Some(Blocker::NeedsNewNodes { count: 2 })), 1),
            (listing("c", Some(Blocker::NeedsNewNodes { count: 3 })), -1),
            (listing("c", Some(Blocker::NeedsNewNodes { count: 5 })), 1),
            (listing("d", Some(Blocker::Waiting)), -1),
            (listing("e", None), 1),
            (Decision::LowerBound(Price(1)), 1),
        ];
        let moves = listing_moves(&diffs);
        let got: Vec<(&str, usize)> = moves.iter().map(|(k, n)| (k.as_str(), *n)).collect();
        assert_eq!(
            got,
            [
                ("-->Chosen", 1),
                ("NeedsNewNodes->NeedsNewNodes", 2),
                ("Waiting->-", 1),
                ("Waiting->NeedsNewNodes", 1),
            ]
        );
    }
}
