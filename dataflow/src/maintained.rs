//! A standing query whose answer is a whole-collection evaluation kept by its own state between
//! epochs, for queries that differential's `reduce` serves badly: one group over the whole
//! cluster.
//!
//! `reduce` hands its logic every input record of the group at every change (re-sorting tens of
//! thousands of records), and sorts the whole output to diff it against the last one. This
//! operator instead applies each epoch's input diffs to a [`Maintained`] state, which may keep
//! indexes and memos from one epoch to the next, asks it for the answer, and emits only the
//! records that changed. Time is totally ordered (the engine's epochs), so epochs are evaluated
//! one after another as the input frontier passes them, and each output equals the answer for
//! exactly the input at its epoch, as a `reduce` would give.

use crate::engine::Epoch;
use differential_dataflow::{AsCollection, VecCollection};
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::Capability;

/// State kept by a [`maintain`] operator.
pub trait Maintained: 'static {
    type In: differential_dataflow::ExchangeData;
    type Out: differential_dataflow::Data;
    /// Applies one input record's change of multiplicity. All of an epoch's changes are applied
    /// before the epoch is evaluated, in no particular order.
    fn update(&mut self, record: Self::In, diff: isize);
    /// Evaluates the input as updated so far and pushes how the answer changed since the last
    /// evaluation: the state remembers what it answered, so that it can tell what changed
    /// without rebuilding (or even comparing) the records that did not.
    fn evaluate(&mut self, changes: &mut Vec<(Self::Out, isize)>);
    /// Whether the state holds nothing and answered nothing, so a [`maintain_by_key`] operator
    /// may forget it.
    fn is_empty(&self) -> bool {
        false
    }
}

/// What changed between two answers given as record counts (the simple way to implement
/// [`Maintained::evaluate`] for an answer that is cheap to rebuild).
pub fn changes<D: Hash + Eq + Clone, S: std::hash::BuildHasher>(
    before: &HashMap<D, isize, S>,
    now: &HashMap<D, isize, S>,
    out: &mut Vec<(D, isize)>,
) {
    for (d, n) in now {
        let b = before.get(d).copied().unwrap_or(0);
        if *n != b {
            out.push((d.clone(), n - b));
        }
    }
    for (d, b) in before {
        if !now.contains_key(d) {
            out.push((d.clone(), -b));
        }
    }
}

/// Adds `diff` to `key`'s multiplicity in `counts`, forgetting the key when it reaches zero: the
/// multiset a [`Maintained`] state usually keeps of its input.
pub fn add_count<K: Hash + Eq, S: std::hash::BuildHasher>(
    counts: &mut HashMap<K, isize, S>,
    key: K,
    diff: isize,
) {
    match counts.get_mut(&key) {
        Some(n) => {
            *n += diff;
            if *n == 0 {
                counts.remove(&key);
            }
        }
        None => {
            if diff != 0 {
                counts.insert(key, diff);
            }
        }
    }
}

/// Each epoch's input changes, held until the input frontier passes the epoch.
type Pending<D> = BTreeMap<Epoch, (Capability<Epoch>, Vec<(D, isize)>)>;

/// Runs one state over the whole of `input`, on one worker (the query is one group), and returns
/// its answers as a collection.
pub fn maintain<'s, M: Maintained + Default>(
    input: VecCollection<'s, Epoch, M::In>,
    name: &str,
) -> VecCollection<'s, Epoch, M::Out> {
    maintain_by_key(input.map(|record| ((), record)), name, M::default)
}

/// Runs one `fresh()` state per key over `input`, which carries `(key, record)`: each key's state
/// sees only its own records and is evaluated only at epochs that changed them. Keys are spread
/// over the workers by hash, so the query runs on all of them.
pub fn maintain_by_key<'s, K, M, F>(
    input: VecCollection<'s, Epoch, (K, M::In)>,
    name: &str,
    fresh: F,
) -> VecCollection<'s, Epoch, M::Out>
where
    K: differential_dataflow::ExchangeData + Hash + Eq,
    M: Maintained,
    F: Fn() -> M + 'static,
{
    input
        .inner
        .unary_frontier(
            Exchange::new(|((k, _), _, _): &((K, M::In), Epoch, isize)| {
                crate::stable_hash::stable_hash(k)
            }),
            name,
            move |_capability, _info| {
                let mut pending: Pending<(K, M::In)> = BTreeMap::new();
                let mut states: HashMap<K, M> = HashMap::new();
                let mut changed = Vec::new();
                move |(input, frontier), output| {
                    input.for_each(|cap, data| {
                        for (record, time, diff) in data.drain(..) {
                            pending
                                .entry(time)
                                .or_insert_with(|| (cap.delayed(&time, 0), Vec::new()))
                                .1
                                .push((record, diff));
                        }
                    });
                    while let Some(entry) = pending.first_entry() {
                        if frontier.less_equal(entry.key()) {
                            break;
                        }
                        let (time, (cap, updates)) = entry.remove_entry();
                        let mut touched: std::collections::HashSet<K> =
                            std::collections::HashSet::new();
                        for ((key, record), diff) in updates {
                            states
                                .entry(key.clone())
                                .or_insert_with(&fresh)
                                .update(record, diff);
                            touched.insert(key);
                        }
                        let mut session = output.session(&cap);
                        for key in touched {
                            let Some(state) = states.get_mut(&key) else {
                                continue;
                            };
                            state.evaluate(&mut changed);
                            for (out, diff) in changed.drain(..) {
                                if diff != 0 {
                                    session.give((out, time, diff));
                                }
                            }
                            if state.is_empty() {
                                states.remove(&key);
                            }
                        }
                    }
                }
            },
        )
        .as_collection()
}

#[cfg(test)]
mod tests {
    use super::*;
    use differential_dataflow::input::Input;
    use std::sync::{Arc, Mutex};
    use timely::dataflow::operators::Probe;
    use timely::dataflow::ProbeHandle;

    /// Answers each word with how many times it is present, the way a `reduce` would.
    #[derive(Default)]
    struct WordCounts {
        counts: BTreeMap<String, isize>,
        answered: HashMap<(String, isize), isize>,
    }

    impl Maintained for WordCounts {
        type In = String;
        type Out = (String, isize);
        fn update(&mut self, word: String, diff: isize) {
            *self.counts.entry(word).or_insert(0) += diff;
            self.counts.retain(|_, n| *n != 0);
        }
        fn evaluate(&mut self, out: &mut Vec<((String, isize), isize)>) {
            let now: HashMap<(String, isize), isize> = self
                .counts
                .iter()
                .map(|(w, n)| ((w.clone(), *n), 1))
                .collect();
            changes(&self.answered, &now, out);
            self.answered = now;
        }
    }

    /// An output diff as the test sees it.
    type Seen = ((String, isize), Epoch, isize);

    #[test]
    fn answers_change_by_epoch_as_the_input_does() {
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let sink = seen.clone();
        timely::execute_directly(move |worker| {
            let probe = ProbeHandle::new();
            let mut input = worker.dataflow::<Epoch, _, _>(|scope| {
                let (input, words) = scope.new_collection::<String, isize>();
                let sink = sink.clone();
                maintain::<WordCounts>(words, "WordCounts")
                    .inspect(move |x| sink.lock().expect("sink").push(x.clone()))
                    .inner
                    .probe_with(&probe);
                input
            });
            let steps: [&[(&str, isize)]; 3] = [
                &[("a", 1), ("b", 1), ("a", 1)],
                &[("b", -1), ("c", 1)],
                &[("a", -1)],
            ];
            for (epoch, step) in steps.iter().enumerate() {
                for (w, d) in step.iter() {
                    input.update(w.to_string(), *d);
                }
                input.advance_to(epoch as Epoch + 1);
                input.flush();
                worker.step_while(|| probe.less_than(input.time()));
            }
        });
        // The answer at each epoch, accumulated from the diffs.
        let at = |epoch: Epoch| {
            let mut acc: BTreeMap<(String, isize), isize> = BTreeMap::new();
            for (d, t, r) in seen.lock().expect("seen").iter() {
                if *t <= epoch {
                    *acc.entry(d.clone()).or_insert(0) += r;
                }
            }
            acc.retain(|_, r| *r != 0);
            acc.into_iter().collect::<Vec<_>>()
        };
        let w = |s: &str, n: isize| ((s.to_string(), n), 1);
        assert_eq!(at(0), vec![w("a", 2), w("b", 1)]);
        assert_eq!(at(1), vec![w("a", 2), w("c", 1)]);
        assert_eq!(at(2), vec![w("a", 1), w("c", 1)]);
        // Only changes are emitted: "a" stays at 2 through epoch 1, so nothing about it then.
        assert!(!seen
            .lock()
            .expect("seen")
            .iter()
            .any(|(d, t, _)| *t == 1 && d.0 == "a"));
    }
}
