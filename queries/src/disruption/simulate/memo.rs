//! The memo of simulation results across evaluations: a run's answer is a function of what it
//! is given, so results are kept by a stable hash of exactly that, and a candidate's whole walk
//! over the chunks is kept too, standing while the chunks it read are unchanged.

use super::taken::Removed;
use super::{Reads, World};
use crate::solver::SolverOutput;
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Simulation results kept between evaluations. An entry not used for its kind's number of
/// evaluations (see `keep_for`) is dropped, so the memo holds about as much as the latest
/// evaluations used.
#[derive(Default)]
pub struct Memo {
    pub(super) entries: HashMap<u64, Entry>,
    /// Existing-node walks by candidate (see [`World::existing_run`]).
    pub(super) walks: HashMap<u64, Walk>,
    /// Evaluations started so far.
    pub(super) evaluation: u64,
    pub hits: u64,
    pub misses: u64,
    /// Walks answered without looking at a chunk, in the latest evaluation.
    pub walk_hits: u64,
    /// Per kind of run (existing, new, full): runs and microseconds spent in them, in the
    /// latest evaluation (for the debug log).
    pub runs: BTreeMap<&'static str, (u64, u64)>,
    /// By topology group (a hash of its namespaces and selector), how many pods it counts on a
    /// node, by the node's fingerprint, with the evaluation that last read it: a node whose
    /// state is unchanged is not counted again (counting every node's pods against every
    /// group was a tenth of an evaluation at a thousand nodes).
    pub(super) group_counts: HashMap<u64, (u64, HashMap<u64, i64>)>,
}

pub(super) struct Entry {
    pub(super) out: Rc<SolverOutput>,
    /// The evaluation that last used it.
    pub(super) used: u64,
    pub(super) keep: u64,
}

/// A candidate's existing-node walk with the chunks it read: its answer stands while
/// [`World::unchanged`] holds for them, whatever happens further down the node list.
pub(super) struct Walk {
    pub(super) reads: Reads,
    pub(super) out: Rc<SolverOutput>,
    pub(super) used: u64,
}

/// How many evaluations an unused result of a kind is kept. New-NodeClaim runs depend only on
/// leftovers and the NodePools, so one seen a few evaluations ago often comes back when churn
/// moves a candidate's leftovers back and forth; existing-node runs name exact node states,
/// which churn replaces for good.
pub(super) fn keep_for(kind: &str) -> u64 {
    match kind {
        "new" => 32,
        _ => 1,
    }
}

impl Memo {
    /// Starts a new evaluation, dropping what has gone unused for too long.
    pub fn next_evaluation(&mut self) {
        self.evaluation += 1;
        let now = self.evaluation;
        self.entries.retain(|_, e| e.used + e.keep >= now);
        self.walks.retain(|_, w| w.used + 1 >= now);
        self.group_counts.retain(|_, (used, _)| *used + 1 >= now);
        self.hits = 0;
        self.misses = 0;
        self.walk_hits = 0;
        self.runs.clear();
    }

    /// The result kept for `key`, or `run`'s, kept. The memo is not borrowed while `run` runs,
    /// so that a run may read what the memo keeps for runs (see [`Memo::group_counts`]).
    pub(super) fn get_or(
        cell: &std::cell::RefCell<Memo>,
        kind: &'static str,
        key: u64,
        run: impl FnOnce() -> SolverOutput,
    ) -> Rc<SolverOutput> {
        {
            let mut memo = cell.borrow_mut();
            let evaluation = memo.evaluation;
            if let Some(e) = memo.entries.get_mut(&key) {
                e.used = evaluation;
                let out = e.out.clone();
                memo.hits += 1;
                return out;
            }
            memo.misses += 1;
        }
        let started = std::time::Instant::now();
        let out = Rc::new(run());
        let mut memo = cell.borrow_mut();
        let r = memo.runs.entry(kind).or_insert((0, 0));
        r.0 += 1;
        r.1 += started.elapsed().as_micros() as u64;
        let used = memo.evaluation;
        memo.entries.insert(
            key,
            Entry {
                out: out.clone(),
                used,
                keep: keep_for(kind),
            },
        );
        out
    }

    /// The walk kept for `key`, with what it read, if that is unchanged.
    pub(super) fn walk(
        &mut self,
        key: u64,
        world: &World,
        removed: &Removed,
    ) -> Option<(Rc<SolverOutput>, Reads)> {
        let w = self.walks.get_mut(&key)?;
        if !world.unchanged_for(&w.reads, removed) {
            return None;
        }
        w.used = self.evaluation;
        self.walk_hits += 1;
        Some((w.out.clone(), w.reads))
    }

    pub(super) fn keep_walk(&mut self, key: u64, reads: Reads, out: Rc<SolverOutput>) {
        let used = self.evaluation;
        self.walks.insert(key, Walk { reads, out, used });
    }
}
