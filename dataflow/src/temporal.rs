//! Timers without a wall clock: a record valid over a window of logical time is inserted when
//! the window opens and retracted when it closes, both scheduled on the dataflow's own clock.
//!
//! A query that needs "has `consolidateAfter` passed since the last pod event?" keeps the
//! record `Consolidatable(node)` during `[last event + consolidateAfter, ∞)`; the engine
//! reports the change when the clock reaches that time (see [`crate::engine`]). Nothing is
//! recomputed in between, and a replay and a from-scratch run agree.

use crate::engine::Epoch;
use differential_dataflow::{AsCollection, VecCollection};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use timely::dataflow::operators::vec::Map;

/// The future times [`during`] has scheduled an update at, shared by an engine's workers, so a
/// driver can skip the instants between where nothing can change: with no new facts, a
/// dataflow's output changes only at a time some window opens or closes. A window whose record
/// was retracted stays listed (an extra wake-up, never a missed one) until the clock passes it.
#[derive(Debug, Clone, Default)]
pub struct Timers(Arc<Mutex<BTreeSet<Epoch>>>);

impl Timers {
    fn note(&self, at: Epoch) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(at);
    }

    /// The first scheduled time at or after `epoch`; earlier ones are forgotten.
    pub fn next_at_or_after(&self, epoch: Epoch) -> Option<Epoch> {
        let mut times = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        while times.first().is_some_and(|t| *t < epoch) {
            times.pop_first();
        }
        times.first().copied()
    }
}

thread_local! {
    /// The timers of the dataflow being built on this thread (set by the engine around its
    /// query builder, read once per [`during`] at build time).
    static BUILDING: RefCell<Option<Timers>> = const { RefCell::new(None) };
}

/// Runs `build` with `timers` collecting the times of every [`during`] it builds.
pub(crate) fn building_with<R>(timers: &Timers, build: impl FnOnce() -> R) -> R {
    BUILDING.with(|b| *b.borrow_mut() = Some(timers.clone()));
    let out = build();
    BUILDING.with(|b| *b.borrow_mut() = None);
    out
}

/// Milliseconds as a logical time (negative times are the start of time).
pub fn at(ms: i64) -> Epoch {
    ms.max(0) as Epoch
}

/// Keeps each record only while the clock is within the window `valid(record)` gives:
/// `[from, until)`, with `until: None` for "forever". An update at time `t` takes effect at
/// `max(t, from)` and is undone at `max(t, until)`.
pub fn during<'s, D>(
    records: VecCollection<'s, Epoch, D>,
    valid: impl Fn(&D) -> (i64, Option<i64>) + 'static,
) -> VecCollection<'s, Epoch, D>
where
    D: differential_dataflow::Data,
{
    let timers = BUILDING.with(|b| b.borrow().clone());
    records
        .inner
        .flat_map(move |(d, t, r)| {
            let (from, until) = valid(&d);
            let start = t.max(at(from));
            let end = until.map(|u| t.max(at(u)));
            if let Some(timers) = &timers {
                for future in [Some(start), end].into_iter().flatten().filter(|f| *f > t) {
                    timers.note(future);
                }
            }
            match end {
                Some(end) if end <= start => vec![],
                Some(end) => vec![(d.clone(), start, r), (d, end, -r)],
                None => vec![(d, start, r)],
            }
        })
        .as_collection()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decisions::Decision;
    use crate::engine::Engine;
    use crate::facts::Fact;
    use crate::model::Price;

    /// A clock fact `Clock(m)` turns into a lower bound that exists from m + 60 s to m + 120 s.
    fn engine() -> Engine {
        Engine::start(1, |facts| {
            let clocks = facts.flat_map(|f| match f {
                Fact::Pdb(p) => p.name.parse::<i64>().ok(),
                _ => None,
            });
            during(clocks, |m| (m + 60_000, Some(m + 120_000)))
                .map(|m| Decision::LowerBound(Price(m)))
        })
        .expect("engine starts")
    }

    fn pdb(name: &str) -> Fact {
        Fact::Pdb(crate::model::PodDisruptionBudget {
            name: name.to_string(),
            ..Default::default()
        })
    }

    #[test]
    fn a_window_opens_and_closes_on_the_logical_clock() {
        let mut e = engine();
        let d = e.advance(1_000, vec![(pdb("0"), 1)]).expect("advance");
        assert!(d.is_empty(), "nothing before the window opens: {d:?}");
        let d = e.advance(60_000, vec![]).expect("advance");
        assert!(
            d.is_empty(),
            "the window opens at 60 000, not before: {d:?}"
        );
        let d = e.advance(60_001, vec![]).expect("advance");
        assert_eq!(d, vec![(Decision::LowerBound(Price(0)), 1)]);
        let d = e.advance(200_000, vec![]).expect("advance");
        assert_eq!(d, vec![(Decision::LowerBound(Price(0)), -1)]);
    }

    #[test]
    fn the_engine_knows_when_a_window_opens_or_closes() {
        let mut e = engine();
        assert_eq!(e.next_timer(), None);
        e.advance(1_000, vec![(pdb("0"), 1)]).expect("advance");
        assert_eq!(e.next_timer(), Some(60_000));
        e.advance(60_001, vec![]).expect("advance");
        assert_eq!(e.next_timer(), Some(120_000));
        e.advance(120_001, vec![]).expect("advance");
        assert_eq!(e.next_timer(), None);
    }

    #[test]
    fn a_retraction_before_the_window_cancels_it() {
        let mut e = engine();
        e.advance(1_000, vec![(pdb("0"), 1)]).expect("advance");
        e.advance(2_000, vec![(pdb("0"), -1)]).expect("advance");
        let d = e.advance(300_000, vec![]).expect("advance");
        assert!(d.is_empty(), "{d:?}");
    }

    #[test]
    fn a_record_inserted_inside_its_window_counts_at_once() {
        let mut e = engine();
        e.advance(90_000, vec![]).expect("advance");
        let d = e.advance(90_001, vec![(pdb("0"), 1)]).expect("advance");
        assert_eq!(d, vec![(Decision::LowerBound(Price(0)), 1)]);
    }
}
