//! The engine harness: timely workers that hold the standing queries, fed with facts epoch by
//! epoch, with the decisions they maintain collected on the caller's thread.
//!
//! The caller owns the clock: [`Engine::advance`] sends the updates of one epoch, closes it,
//! and returns the decisions' diffs once every worker has caught up. Queries are built by a
//! caller-supplied function, so this crate knows nothing of what they compute.

use crate::decisions::Decision;
use crate::facts::{Fact, Minute};
use crate::temporal::{building_with, Timers};
use crossbeam_channel::{unbounded, Receiver, Sender};
use differential_dataflow::input::Input;
use differential_dataflow::VecCollection;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use thiserror::Error;
use timely::dataflow::ProbeHandle;
use timely::WorkerConfig;

/// Logical time: milliseconds of the (virtual) clock at which an epoch closes.
pub type Epoch = u64;

#[derive(Debug, Error)]
pub enum EngineError {
    #[error("could not start timely workers: {0}")]
    Start(String),
    #[error("the engine's workers stopped unexpectedly")]
    WorkersGone,
    #[error("an engine worker panicked (a bug in a standing query); see the log above")]
    WorkerPanicked,
    #[error("epoch {next} is not after the current epoch {current}")]
    EpochNotIncreasing { current: Epoch, next: Epoch },
}

enum Command {
    Advance {
        to: Epoch,
        updates: Vec<(Fact, isize)>,
    },
}

enum Message {
    Output(Decision, isize),
    Caught,
    /// A worker is unwinding from a panic: the others would wait for it forever.
    Panicked,
}

/// Tells the caller when its worker thread unwinds, so a panic in a query surfaces as an error
/// instead of an engine that never catches up.
struct PanicAlarm(Sender<Message>);

impl Drop for PanicAlarm {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.0.send(Message::Panicked);
        }
    }
}

/// Builds the standing queries from the fact collection.
pub trait QueryBuilder:
    for<'s> Fn(VecCollection<'s, Epoch, Fact>) -> VecCollection<'s, Epoch, Decision>
    + Send
    + Sync
    + 'static
{
}
impl<F> QueryBuilder for F where
    F: for<'s> Fn(VecCollection<'s, Epoch, Fact>) -> VecCollection<'s, Epoch, Decision>
        + Send
        + Sync
        + 'static
{
}

/// Running workers and the current value of every decision.
pub struct Engine {
    commands: Vec<Sender<Command>>,
    messages: Receiver<Message>,
    guards: Option<timely::communication::WorkerGuards<()>>,
    epoch: Epoch,
    decisions: HashMap<Decision, isize>,
    /// The `Fact::Clock` currently inserted.
    clock: Option<Minute>,
    timers: Timers,
    /// A worker panicked: the survivors cannot finish, so they are not joined.
    poisoned: bool,
}

impl Engine {
    /// Starts `workers` timely worker threads in this process.
    pub fn start(workers: usize, build: impl QueryBuilder) -> Result<Engine, EngineError> {
        let workers = workers.max(1);
        let (out_tx, out_rx) = unbounded::<Message>();
        let mut command_txs = Vec::with_capacity(workers);
        let mut command_rxs = Vec::with_capacity(workers);
        for _ in 0..workers {
            let (tx, rx) = unbounded::<Command>();
            command_txs.push(tx);
            command_rxs.push(std::sync::Mutex::new(Some(rx)));
        }
        let config = timely::Config {
            communication: if workers == 1 {
                timely::CommunicationConfig::Thread
            } else {
                timely::CommunicationConfig::Process(workers)
            },
            worker: WorkerConfig::default(),
        };
        let timers = Timers::default();
        let worker_timers = timers.clone();
        let guards = timely::execute(config, move |worker| {
            let index = worker.index();
            let Some(commands) = command_rxs
                .get(index)
                .and_then(|slot| slot.lock().ok().and_then(|mut s| s.take()))
            else {
                return;
            };
            let out = out_tx.clone();
            let _alarm = PanicAlarm(out_tx.clone());
            let probe = ProbeHandle::<Epoch>::new();
            // Outputs are held until their time is closed: a query may emit an update at a
            // future time (a timer, e.g. a node that expires at its `expireAfter`), and it is
            // not a decision until the clock reaches it.
            let held: Rc<RefCell<Vec<(Decision, Epoch, isize)>>> = Rc::default();
            let mut facts_in = worker.dataflow::<Epoch, _, _>(|scope| {
                let (input, facts) = scope.new_collection::<Fact, isize>();
                let sink = held.clone();
                building_with(&worker_timers, || build(facts))
                    .inspect(move |(decision, time, diff)| {
                        sink.borrow_mut().push((decision.clone(), *time, *diff));
                    })
                    .probe_with(&probe);
                input
            });
            'commands: while let Ok(command) = commands.recv() {
                match command {
                    Command::Advance { to, updates } => {
                        for (fact, diff) in updates {
                            facts_in.update(fact, diff);
                        }
                        facts_in.advance_to(to);
                        facts_in.flush();
                        // Park briefly when there is nothing to do rather than spin: on two
                        // cores a spinning worker starves the one doing the work. The bound
                        // keeps a missed wake-up from stalling an epoch.
                        worker
                            .step_or_park_while(Some(std::time::Duration::from_millis(1)), || {
                                probe.less_than(&to)
                            });
                        let mut due = Vec::new();
                        held.borrow_mut().retain(|(d, t, r)| {
                            if *t < to {
                                due.push(Message::Output(d.clone(), *r));
                                false
                            } else {
                                true
                            }
                        });
                        for m in due {
                            if out.send(m).is_err() {
                                break 'commands;
                            }
                        }
                        if out.send(Message::Caught).is_err() {
                            break 'commands;
                        }
                    }
                }
            }
            // The engine is gone. Closing the input would make the worker run every timer
            // still pending in the future (expiries weeks ahead) before it can stop: drop the
            // dataflow instead, with the input still open.
            for dataflow in worker.installed_dataflows() {
                worker.drop_dataflow(dataflow);
            }
            drop(facts_in);
        })
        .map_err(EngineError::Start)?;
        Ok(Engine {
            commands: command_txs,
            messages: out_rx,
            guards: Some(guards),
            epoch: 0,
            decisions: HashMap::new(),
            clock: None,
            timers,
            poisoned: false,
        })
    }

    /// The epoch the engine has caught up to.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The first time not yet reached at which a timer of the queries (a [`crate::temporal`]
    /// window opening or closing) may change a decision without any new fact; `None` when no
    /// timer is pending. Between now and then, with no new facts, advancing changes nothing
    /// but the minute clock.
    pub fn next_timer(&self) -> Option<Epoch> {
        self.timers.next_at_or_after(self.epoch)
    }

    /// Applies `updates` at the current epoch, closes it, moves to `next`, and returns the
    /// decisions' diffs (consolidated: a decision retracted and re-asserted is not listed).
    pub fn advance(
        &mut self,
        next: Epoch,
        updates: Vec<(Fact, isize)>,
    ) -> Result<Vec<(Decision, isize)>, EngineError> {
        if next <= self.epoch {
            return Err(EngineError::EpochNotIncreasing {
                current: self.epoch,
                next,
            });
        }
        let mut updates = updates;
        let minute = (self.epoch as i64).div_euclid(60_000) * 60_000;
        if self.clock != Some(minute) {
            if let Some(old) = self.clock.replace(minute) {
                updates.push((Fact::Clock(old), -1));
            }
            updates.push((Fact::Clock(minute), 1));
        }
        // Facts are routed by timely's exchange, so feeding them all through worker 0 is
        // correct; every other worker still has to advance its input for progress.
        let mut updates = Some(updates);
        for tx in &self.commands {
            let command = Command::Advance {
                to: next,
                updates: updates.take().unwrap_or_default(),
            };
            tx.send(command).map_err(|_| EngineError::WorkersGone)?;
        }
        let mut caught = 0;
        let mut diffs: HashMap<Decision, isize> = HashMap::new();
        while caught < self.commands.len() {
            match self.messages.recv().map_err(|_| EngineError::WorkersGone)? {
                Message::Output(d, r) => *diffs.entry(d).or_insert(0) += r,
                Message::Caught => caught += 1,
                Message::Panicked => {
                    self.poisoned = true;
                    return Err(EngineError::WorkerPanicked);
                }
            }
        }
        self.epoch = next;
        // Forget the timers passed, so a long-running controller that never asks for the next
        // one does not keep every window it ever scheduled.
        self.timers.next_at_or_after(next);
        let mut out: Vec<(Decision, isize)> = diffs.into_iter().filter(|(_, r)| *r != 0).collect();
        out.sort();
        for (d, r) in &out {
            let e = self.decisions.entry(d.clone()).or_insert(0);
            *e += r;
            if *e == 0 {
                self.decisions.remove(d);
            }
        }
        Ok(out)
    }

    /// Every decision currently held, sorted.
    pub fn decisions(&self) -> Vec<Decision> {
        let mut out: Vec<Decision> = self
            .decisions
            .iter()
            .flat_map(|(d, r)| std::iter::repeat_n(d.clone(), (*r).max(0) as usize))
            .collect();
        out.sort();
        out
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Closing the command channels ends each worker's loop; then the guards join them.
        self.commands.clear();
        if let Some(guards) = self.guards.take() {
            if self.poisoned {
                // The surviving workers wait for the dead one's progress forever; joining
                // them would hang the caller. Leave them to the process's end.
                std::mem::forget(guards);
            } else {
                drop(guards);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_query_is_an_error_not_a_hang() {
        let mut engine = Engine::start(2, |facts| {
            facts.map(|f| match f {
                Fact::Clock(m) if m > 0 => panic!("a query bug"),
                _ => Decision::LowerBound(crate::model::Price(0)),
            })
        })
        .expect("engine starts");
        engine
            .advance(120_000, Vec::new())
            .expect("minute 0 is fine");
        let err = engine
            .advance(120_001, Vec::new())
            .expect_err("minute 2 panics");
        assert!(matches!(err, EngineError::WorkerPanicked), "{err}");
    }

    /// Updates the dataflow saw stamped at or after the far-future time below.
    static FAR_FUTURE_SEEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    #[test]
    fn dropping_the_engine_does_not_run_future_timers() {
        const FAR: Epoch = 1 << 50;
        let mut engine = Engine::start(1, |facts| {
            // `consolidate` holds an update until the frontier passes its time, as every
            // stateful query does.
            crate::temporal::during(facts, |_| (FAR as i64, None))
                .consolidate()
                .inspect(|(_, t, _)| {
                    if *t >= FAR {
                        FAR_FUTURE_SEEN.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                })
                .map(|_| Decision::LowerBound(crate::model::Price(0)))
        })
        .expect("engine starts");
        let d = engine
            .advance(1, vec![(Fact::Clock(0), 1)])
            .expect("advance");
        assert!(d.is_empty(), "the timer is far ahead: {d:?}");
        drop(engine);
        assert_eq!(
            FAR_FUTURE_SEEN.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "shutting down ran the dataflow up to a timer weeks ahead"
        );
    }
}
