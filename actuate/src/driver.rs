//! Driving the loop from sources on a clock, as `dovetail run` will: sources (watchers, pollers,
//! the interruption queue) send fact changes through a channel from their own threads; the loop
//! applies whatever has arrived, closes an epoch, acts, and sleeps until the next thing is due —
//! a change arriving, the batch window closing, a capacity error expiring, a consolidation
//! command to validate, an answer or event the cloud expects, or the periodic tick that lets
//! timers fire (Karpenter's 10 s disruption poll). Slow calls never hold an epoch: their answers
//! are collected when they come.

use crate::control_loop::ControlLoop;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use dovetail_dataflow::backend::{Cloud, Cluster};
use dovetail_dataflow::engine::EngineError;
use dovetail_dataflow::facts::Fact;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What a source tells the loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FactChange {
    /// This fact is now the one true fact under its key.
    Set(Box<Fact>),
    /// The fact under this key ([`Fact::describe`]) is no longer true.
    Remove(String),
}

/// The time, and a way to wait for it while listening to the sources.
pub trait Clock {
    fn now_ms(&self) -> i64;
    /// Waits until `until_ms`, or until a change arrives (returned). `None`: the time came, or
    /// every source has gone.
    fn wait(&mut self, until_ms: i64, sources: &Receiver<FactChange>) -> Option<FactChange>;
}

/// The wall clock: milliseconds since the Unix epoch, waiting on the channel.
pub struct WallClock {
    started: Instant,
    started_ms: i64,
}

impl Default for WallClock {
    fn default() -> Self {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        WallClock {
            started: Instant::now(),
            started_ms: i64::try_from(since.as_millis()).unwrap_or(i64::MAX),
        }
    }
}

impl Clock for WallClock {
    fn now_ms(&self) -> i64 {
        let elapsed = i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX);
        self.started_ms.saturating_add(elapsed)
    }

    fn wait(&mut self, until_ms: i64, sources: &Receiver<FactChange>) -> Option<FactChange> {
        let wait = until_ms.saturating_sub(self.now_ms()).max(0) as u64;
        match sources.recv_timeout(Duration::from_millis(wait)) {
            Ok(change) => Some(change),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                // Nothing more will arrive: still wake when the time is due.
                std::thread::sleep(Duration::from_millis(
                    until_ms.saturating_sub(self.now_ms()).max(0) as u64,
                ));
                None
            }
        }
    }
}

/// When the loop wakes on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriveSettings {
    /// At least this often an epoch closes, so timers fire (Karpenter's disruption loop polls
    /// every 10 s).
    pub tick_ms: i64,
}

impl Default for DriveSettings {
    fn default() -> Self {
        DriveSettings { tick_ms: 10_000 }
    }
}

fn apply(control: &mut ControlLoop, change: FactChange) {
    match change {
        FactChange::Set(fact) => control.set_fact(*fact),
        FactChange::Remove(key) => control.remove_fact(&key),
    }
}

/// Runs the loop until `stop` says so (it is asked once per epoch, after acting).
pub fn drive<C: Cloud, K: Cluster>(
    control: &mut ControlLoop,
    cloud: &mut C,
    cluster: &mut K,
    sources: &Receiver<FactChange>,
    clock: &mut impl Clock,
    settings: DriveSettings,
    mut stop: impl FnMut(&ControlLoop, &C, &K) -> bool,
) -> Result<(), EngineError> {
    loop {
        let now = clock.now_ms();
        control.set_clock(now);
        while let Ok(change) = sources.try_recv() {
            apply(control, change);
        }
        control.expire_capacity_errors(now);
        let diffs = control.advance(now)?;
        control.act(now, &diffs, cloud, cluster);
        if stop(control, cloud, cluster) {
            return Ok(());
        }
        let actuator = control.actuator();
        let due = [
            Some(now.saturating_add(settings.tick_ms.max(1))),
            control.next_batch_close_ms(),
            actuator.next_expiry_ms(),
            actuator.next_validation_ms(now),
            cloud.next_due_ms(),
        ]
        .into_iter()
        .flatten()
        .map(|t| t.max(now.saturating_add(1)))
        .min()
        .unwrap_or(now.saturating_add(1));
        if let Some(change) = clock.wait(due, sources) {
            control.set_clock(clock.now_ms());
            apply(control, change);
        }
    }
}
