//! The engine harness: timely workers that hold the standing queries, fed with facts epoch by
//! epoch, with the decisions they maintain collected on the caller's thread.
//!
//! The caller owns the clock: [`Engine::advance`] sends the updates of one epoch, closes it,
//! and returns the decisions' diffs once every worker has caught up. Queries are built by a
//! caller-supplied function, so this crate knows nothing of what they compute.
//!
//! Several processes run one engine as a timely cluster ([`Placement`], [`crate::cluster`]):
//! process 0, the driver, holds the caller and feeds every fact; the others ([`serve`]) hold
//! their share of the same dataflow with their inputs closed at once, so progress is governed
//! by the driver's inputs alone. Every decision is exchanged to worker 0 before it is
//! collected. When the driver finishes it closes a second input that only exists to tell the
//! followers so; a peer that goes away before that is an error on every side, never a wait
//! without end.

use crate::cluster::{Cluster, ClusterError, PeerWatch};
use crate::decisions::Decision;
use crate::facts::{Fact, Minute};
use crate::operator_time::OperatorTime;
use crate::temporal::{building_with, Timers};
use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError, Sender};
use differential_dataflow::input::Input;
use differential_dataflow::{AsCollection, VecCollection};
use rustc_hash::FxHashMap as HashMap;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use thiserror::Error;
use timely::dataflow::operators::Exchange;
use timely::dataflow::ProbeHandle;
use timely::WorkerConfig;

/// Logical time: milliseconds of the (virtual) clock at which an epoch closes.
pub type Epoch = u64;

/// How long a follower keeps going after a peer's connection closed, for the last progress
/// messages that came with it: a driver that finished closes its connections right after
/// telling everyone so.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// How often a wait on the workers looks up from its channel to check on the peers.
const PEER_CHECK: Duration = Duration::from_millis(100);

/// How long the driver waits, on shutdown, for its network threads to say goodbye to the peers.
const GOODBYE_WAIT: Duration = Duration::from_secs(10);

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
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error("a peer process went away before the engine finished (membership is fixed: restart every process)")]
    PeerLost,
    #[error("process {0} is a follower: only process 0 feeds the engine (serve it instead)")]
    NotTheDriver(usize),
    #[error("process 0 feeds the engine: a follower has --process-index 1 or more")]
    NotAFollower,
    #[error(
        "this process has already run its engine on the cluster (its followers serve one engine)"
    )]
    ClusterUsed,
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
    /// A follower's worker saw the driver finish.
    Finished,
    /// A follower's worker lost a peer before the driver finished.
    Lost,
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

/// Where an engine's workers run: `threads` timely workers in this process and, in a cluster,
/// as many in each other process.
#[derive(Debug, Clone)]
pub struct Placement {
    pub threads: usize,
    pub cluster: Option<Cluster>,
}

impl Placement {
    /// `threads` workers in this process alone.
    pub fn local(threads: usize) -> Placement {
        Placement {
            threads: threads.max(1),
            cluster: None,
        }
    }
}

/// The cluster this process belongs to, for [`Engine::start`] (see [`join_cluster`]).
enum Membership {
    Alone,
    Joined(Cluster),
    Used,
}

static MEMBERSHIP: Mutex<Membership> = Mutex::new(Membership::Alone);

/// Makes this process a member of `cluster` for the one engine it starts next with
/// [`Engine::start`]. Membership belongs to the process (as timely's own `-n`/`-p` flags do), so
/// the binary's edge sets it once and every command that runs an engine runs it on the cluster
/// without passing it down.
pub fn join_cluster(cluster: Cluster) {
    if let Ok(mut m) = MEMBERSHIP.lock() {
        *m = Membership::Joined(cluster);
    }
}

/// Running workers and the current value of every decision.
pub struct Engine {
    commands: Vec<Sender<Command>>,
    messages: Receiver<Message>,
    guards: Option<timely::communication::WorkerGuards<()>>,
    /// Connections to the other processes, when there are any.
    peers: Option<PeerWatch>,
    epoch: Epoch,
    decisions: HashMap<Decision, isize>,
    /// Whether `decisions` is kept (see [`Engine::forget_decisions`]).
    holds_decisions: bool,
    /// The `Fact::Clock` currently inserted.
    clock: Option<Minute>,
    /// The times this process's workers' queries scheduled (see [`Engine::next_timer`]).
    timers: Timers,
    /// A worker panicked: the survivors cannot finish, so they are not joined.
    poisoned: bool,
}

/// Started workers: the channels to and from process 0's, their guards, and the peers.
struct Workers {
    commands: Vec<Sender<Command>>,
    messages: Receiver<Message>,
    guards: timely::communication::WorkerGuards<()>,
    peers: Option<PeerWatch>,
    timers: Timers,
}

/// Starts the workers of `placement`: process 0's get command channels (the caller feeds them);
/// a follower's hold the same dataflow and no facts.
fn launch(placement: &Placement, build: impl QueryBuilder) -> Result<Workers, EngineError> {
    let threads = placement.threads.max(1);
    let (out_tx, out_rx) = unbounded::<Message>();
    let driver = placement.cluster.as_ref().is_none_or(|c| c.index == 0);
    let mut command_txs = Vec::new();
    let mut command_rxs = Vec::new();
    if driver {
        for _ in 0..threads {
            let (tx, rx) = unbounded::<Command>();
            command_txs.push(tx);
            command_rxs.push(std::sync::Mutex::new(Some(rx)));
        }
    }
    let (builders, others, peers) = match &placement.cluster {
        Some(cluster) if cluster.processes() > 1 => {
            let c = cluster.connect(threads)?;
            (c.builders, c.guard, Some(c.peers))
        }
        _ => {
            let communication = if threads == 1 {
                timely::CommunicationConfig::Thread
            } else {
                timely::CommunicationConfig::Process(threads)
            };
            let (b, o) = communication.try_build().map_err(EngineError::Start)?;
            (b, o, None)
        }
    };
    let watch = peers.clone();
    let timers = Timers::default();
    let worker_timers = timers.clone();
    let guards =
        timely::execute::execute_from(builders, others, WorkerConfig::default(), move |worker| {
            let commands = command_rxs
                .get(worker.index())
                .and_then(|slot| slot.lock().ok().and_then(|mut s| s.take()));
            let out = out_tx.clone();
            let _alarm = PanicAlarm(out_tx.clone());
            let probe = ProbeHandle::<Epoch>::new();
            // Empty once every worker has closed its `running` input: how followers learn that
            // the driver is done.
            let running_probe = ProbeHandle::<Epoch>::new();
            // Outputs are held until their time is closed: a query may emit an update at a
            // future time (a timer, e.g. a node that expires at its `expireAfter`), and it is
            // not a decision until the clock reaches it.
            let held: Rc<RefCell<Vec<(Decision, Epoch, isize)>>> = Rc::default();
            let gather = watch.is_some();
            // Before the dataflow is built, so that its operators' names are logged.
            let operator_time = OperatorTime::install(worker);
            let (mut facts_in, running) = worker.dataflow::<Epoch, _, _>(|scope| {
                let (input, facts) = scope.new_collection::<Fact, isize>();
                let (running, alive) = scope.new_collection::<(), isize>();
                alive.probe_with(&running_probe);
                let sink = held.clone();
                let decisions = building_with(&worker_timers, || build(facts));
                // Only process 0's workers talk to the caller: every decision goes to worker 0.
                let decisions = if gather {
                    decisions.inner.exchange(|_| 0).as_collection()
                } else {
                    decisions
                };
                decisions
                    .inspect(move |(decision, time, diff)| {
                        sink.borrow_mut().push((decision.clone(), *time, *diff));
                    })
                    .probe_with(&probe);
                (input, running)
            });
            let Some(commands) = commands else {
                // A follower: no facts of its own, so progress is the driver's inputs'.
                drop(facts_in);
                drop(running);
                let finished = follow(worker, &running_probe, watch.as_ref());
                for dataflow in worker.installed_dataflows() {
                    worker.drop_dataflow(dataflow);
                }
                let _ = out.send(if finished {
                    Message::Finished
                } else {
                    Message::Lost
                });
                return;
            };
            'commands: while let Ok(command) = commands.recv() {
                match command {
                    Command::Advance { to, updates } => {
                        for (fact, diff) in updates {
                            facts_in.update(fact, diff);
                        }
                        facts_in.advance_to(to);
                        facts_in.flush();
                        let started = Instant::now();
                        // Park briefly when there is nothing to do rather than spin: on two
                        // cores a spinning worker starves the one doing the work. The bound
                        // keeps a missed wake-up from stalling an epoch.
                        worker.step_or_park_while(Some(Duration::from_millis(1)), || {
                            probe.less_than(&to) && !watch.as_ref().is_some_and(PeerWatch::closed)
                        });
                        if let Some(t) = &operator_time {
                            t.epoch_done(worker, to, started.elapsed());
                        }
                        if probe.less_than(&to) {
                            // A peer went away: this epoch can never close.
                            let _ = out.send(Message::Lost);
                            break 'commands;
                        }
                        // Moved out, not copied: a cold solve's every decision passes here.
                        let (due, later): (Vec<_>, Vec<_>) =
                            std::mem::take(&mut *held.borrow_mut())
                                .into_iter()
                                .partition(|(_, t, _)| *t < to);
                        *held.borrow_mut() = later;
                        let due = due.into_iter().map(|(d, _, r)| Message::Output(d, r));
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
            // Tell the followers: they stop once every driver worker has closed `running`.
            drop(running);
            if let Some(watch) = &watch {
                worker.step_or_park_while(Some(Duration::from_millis(1)), || {
                    !running_probe.done() && !watch.closed()
                });
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
    Ok(Workers {
        commands: command_txs,
        messages: out_rx,
        guards,
        peers,
        timers,
    })
}

/// A follower's worker: steps the dataflow until the driver has finished (true) or a peer is
/// gone for good (false).
fn follow(
    worker: &mut timely::worker::Worker,
    running: &ProbeHandle<Epoch>,
    watch: Option<&PeerWatch>,
) -> bool {
    let mut closed_at: Option<Instant> = None;
    while !running.done() {
        worker.step_or_park(Some(Duration::from_millis(10)));
        if watch.is_some_and(PeerWatch::closed) {
            let since = *closed_at.get_or_insert_with(Instant::now);
            if since.elapsed() > CLOSE_GRACE {
                return false;
            }
        }
    }
    true
}

/// Serves the engine as a follower (`cluster.index` above 0): holds its share of the dataflow
/// that process 0 feeds, and returns once process 0 has finished with it. A peer that goes
/// away first is an error.
pub fn serve(placement: &Placement, build: impl QueryBuilder) -> Result<(), EngineError> {
    match &placement.cluster {
        Some(c) if c.index > 0 => {}
        _ => return Err(EngineError::NotAFollower),
    }
    let Workers {
        messages,
        guards,
        peers,
        ..
    } = launch(placement, build)?;
    let lost = || peers.as_ref().is_some_and(PeerWatch::closed);
    let mut finished = 0;
    while finished < placement.threads.max(1) {
        match messages.recv() {
            Ok(Message::Finished) => finished += 1,
            Ok(Message::Lost) => {
                // The network threads have panicked on the closed connection: joining them
                // would panic too. The process is about to end.
                std::mem::forget(guards);
                return Err(EngineError::PeerLost);
            }
            Ok(Message::Panicked) => {
                std::mem::forget(guards);
                // timely's network thread panics on a closed connection, and the workers
                // reading from it after: the cause is the peer, not a query.
                return Err(if lost() {
                    EngineError::PeerLost
                } else {
                    EngineError::WorkerPanicked
                });
            }
            Ok(_) => {}
            Err(_) => {
                std::mem::forget(guards);
                return Err(EngineError::WorkersGone);
            }
        }
    }
    drop(guards);
    Ok(())
}

impl Engine {
    /// Starts `workers` timely worker threads in this process, or, once the process has
    /// joined a cluster ([`join_cluster`]), as its driver with `workers` threads per process.
    pub fn start(workers: usize, build: impl QueryBuilder) -> Result<Engine, EngineError> {
        let cluster = match MEMBERSHIP.lock() {
            Ok(mut m) => match std::mem::replace(&mut *m, Membership::Alone) {
                Membership::Alone => None,
                Membership::Joined(c) => {
                    *m = Membership::Used;
                    Some(c)
                }
                Membership::Used => {
                    *m = Membership::Used;
                    return Err(EngineError::ClusterUsed);
                }
            },
            Err(_) => None,
        };
        Engine::start_on(
            &Placement {
                threads: workers.max(1),
                cluster,
            },
            build,
        )
    }

    /// Starts the engine's workers where `placement` says; in a cluster this process must be
    /// process 0, the driver, and the followers must [`serve`] the same queries.
    pub fn start_on(
        placement: &Placement,
        build: impl QueryBuilder,
    ) -> Result<Engine, EngineError> {
        if let Some(c) = placement.cluster.as_ref().filter(|c| c.index > 0) {
            return Err(EngineError::NotTheDriver(c.index));
        }
        let Workers {
            commands,
            messages,
            guards,
            peers,
            timers,
        } = launch(placement, build)?;
        Ok(Engine {
            commands,
            messages,
            guards: Some(guards),
            peers,
            epoch: 0,
            decisions: HashMap::default(),
            holds_decisions: true,
            clock: None,
            timers,
            poisoned: false,
        })
    }

    /// The next message from the workers; with peers, a peer that went away is an error
    /// instead of a wait that never ends.
    fn next_message(&mut self) -> Result<Message, EngineError> {
        let Some(peers) = &self.peers else {
            return self.messages.recv().map_err(|_| EngineError::WorkersGone);
        };
        loop {
            match self.messages.recv_timeout(PEER_CHECK) {
                Ok(m) => return Ok(m),
                Err(RecvTimeoutError::Timeout) if peers.closed() => {
                    self.poisoned = true;
                    return Err(EngineError::PeerLost);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Err(EngineError::WorkersGone),
            }
        }
    }

    /// The epoch the engine has caught up to.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The first time not yet reached at which a timer of the queries (a [`crate::temporal`]
    /// window opening or closing) may change a decision without any new fact; `None` when no
    /// timer is pending. Between now and then, with no new facts, advancing changes nothing
    /// but the minute clock. On several processes the followers' timers are not seen here, so
    /// the answer is "now": a caller that skips idle time must not skip past them.
    pub fn next_timer(&self) -> Option<Epoch> {
        if self.peers.is_some() {
            return Some(self.epoch);
        }
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
        // Decisions carry whole launches (requirements, types, pods): hashed with SipHash, this
        // map and the held one were half of the caller's thread in a cold solve of 100k pods.
        let mut diffs: HashMap<Decision, isize> = HashMap::default();
        while caught < self.commands.len() {
            match self.next_message()? {
                Message::Output(d, r) => *diffs.entry(d).or_insert(0) += r,
                Message::Caught => caught += 1,
                Message::Panicked => {
                    self.poisoned = true;
                    // A closed connection makes the workers panic too (see `serve`).
                    return Err(if self.peers.as_ref().is_some_and(PeerWatch::closed) {
                        EngineError::PeerLost
                    } else {
                        EngineError::WorkerPanicked
                    });
                }
                Message::Lost => {
                    self.poisoned = true;
                    return Err(EngineError::PeerLost);
                }
                Message::Finished => {}
            }
        }
        self.epoch = next;
        // Forget the timers passed, so a long-running controller that never asks for the next
        // one does not keep every window it ever scheduled.
        self.timers.next_at_or_after(next);
        let mut out: Vec<(Decision, isize)> = diffs.into_iter().filter(|(_, r)| *r != 0).collect();
        out.sort();
        for (d, r) in out.iter().filter(|_| self.holds_decisions) {
            // Copied only when new: a retraction finds its decision held.
            match self.decisions.get_mut(d) {
                Some(e) => {
                    *e += r;
                    if *e == 0 {
                        self.decisions.remove(d);
                    }
                }
                None => {
                    self.decisions.insert(d.clone(), *r);
                }
            }
        }
        Ok(out)
    }

    /// Stops keeping the current decisions, for a caller that needs only what
    /// [`Engine::advance`] returns (a from-scratch baseline): the engine's copy would double
    /// the memory its decisions take (~210 MiB at 100k pods). [`Engine::decisions`] is empty
    /// from then on.
    pub fn forget_decisions(&mut self) {
        self.holds_decisions = false;
        self.decisions = HashMap::default();
    }

    /// The decisions currently held, each once with its multiplicity, in no order: for a
    /// caller that reads them without a copy.
    pub fn held_decisions(&self) -> impl Iterator<Item = (&Decision, isize)> {
        self.decisions.iter().map(|(d, r)| (d, *r))
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
            } else if self.peers.is_some() {
                // Joining waits for every peer to close its connections in turn; a peer that
                // hangs must not hang the caller.
                let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(1);
                std::thread::spawn(move || {
                    drop(guards);
                    let _ = done_tx.send(());
                });
                if done_rx.recv_timeout(GOODBYE_WAIT).is_err() {
                    tracing::warn!(
                        "the engine's peers did not close their connections within {GOODBYE_WAIT:?}"
                    );
                }
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
