//! Virtual time: a clock that only moves forward, and a queue of future events that come due at
//! exact instants.
//!
//! Times are milliseconds on the simulation's own timeline (the replay trace's, not the wall
//! clock's). Events scheduled for the same instant come out in the order they were scheduled
//! (a sequence number breaks the tie), so a run never depends on heap internals.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Why the clock refused to move.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClockError {
    /// Virtual time never goes backwards.
    #[error("virtual time cannot go backwards: the clock is at {now_ms} ms, asked for {requested_ms} ms")]
    Backwards { now_ms: i64, requested_ms: i64 },
}

/// A clock in virtual milliseconds that only moves forward.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VirtualClock {
    now_ms: i64,
}

impl VirtualClock {
    /// A clock reading `start_ms`.
    pub fn new(start_ms: i64) -> VirtualClock {
        VirtualClock { now_ms: start_ms }
    }

    /// The current virtual time.
    pub fn now_ms(&self) -> i64 {
        self.now_ms
    }

    /// Moves the clock to `t_ms`; moving to the current time is a no-op, moving back an error.
    pub fn advance_to(&mut self, t_ms: i64) -> Result<(), ClockError> {
        if t_ms < self.now_ms {
            return Err(ClockError::Backwards {
                now_ms: self.now_ms,
                requested_ms: t_ms,
            });
        }
        self.now_ms = t_ms;
        Ok(())
    }

    /// Moves the clock forward by `delta_ms` (not negative) and returns the new time.
    pub fn advance_by(&mut self, delta_ms: i64) -> Result<i64, ClockError> {
        self.advance_to(self.now_ms.saturating_add(delta_ms))?;
        Ok(self.now_ms)
    }

    /// Moves the clock to `t_ms` if that is later; an earlier time leaves it where it is.
    /// Returns the (possibly unchanged) current time.
    pub fn catch_up(&mut self, t_ms: i64) -> i64 {
        self.now_ms = self.now_ms.max(t_ms);
        self.now_ms
    }
}

/// One scheduled event. Ordered by (time, sequence) only, so `E` needs no ordering.
#[derive(Debug, Clone)]
struct Entry<E> {
    at_ms: i64,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at_ms, self.seq) == (other.at_ms, other.seq)
    }
}

impl<E> Eq for Entry<E> {}

impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Entry<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at_ms, self.seq).cmp(&(other.at_ms, other.seq))
    }
}

/// Future events, popped earliest first; events at the same instant in the order they were
/// scheduled.
#[derive(Debug, Clone)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<Entry<E>>>,
    next_seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            next_seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> EventQueue<E> {
        EventQueue::default()
    }

    /// Schedules `event` at `at_ms` and returns its sequence number (unique, increasing).
    pub fn schedule(&mut self, at_ms: i64, event: E) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Reverse(Entry { at_ms, seq, event }));
        seq
    }

    /// The instant of the earliest event, if any.
    pub fn peek_time(&self) -> Option<i64> {
        self.heap.peek().map(|Reverse(e)| e.at_ms)
    }

    /// Removes and returns the earliest event if it is due at or before `now_ms`.
    pub fn pop_due(&mut self, now_ms: i64) -> Option<(i64, E)> {
        if self.peek_time()? > now_ms {
            return None;
        }
        self.heap.pop().map(|Reverse(e)| (e.at_ms, e.event))
    }

    /// Removes and returns every event due at or before `now_ms`, in order.
    pub fn drain_due(&mut self, now_ms: i64) -> Vec<(i64, E)> {
        let mut out = Vec::new();
        while let Some(due) = self.pop_due(now_ms) {
            out.push(due);
        }
        out
    }

    /// Keeps only the events `keep` accepts (cancels the rest); order is unaffected.
    pub fn retain(&mut self, mut keep: impl FnMut(&E) -> bool) {
        self.heap.retain(|Reverse(e)| keep(&e.event));
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_moves_forward_only() {
        let mut c = VirtualClock::new(10);
        assert_eq!(c.advance_by(5), Ok(15));
        assert!(c.advance_to(15).is_ok());
        assert_eq!(
            c.advance_to(14),
            Err(ClockError::Backwards {
                now_ms: 15,
                requested_ms: 14
            })
        );
        assert!(c.advance_by(-1).is_err());
        assert_eq!(c.catch_up(3), 15);
        assert_eq!(c.catch_up(20), 20);
    }

    #[test]
    fn events_come_out_by_time_then_sequence() {
        let mut q = EventQueue::new();
        q.schedule(30, "c");
        q.schedule(10, "a1");
        q.schedule(20, "b");
        q.schedule(10, "a2");
        q.schedule(10, "a3");
        assert_eq!(q.peek_time(), Some(10));
        assert_eq!(q.pop_due(9), None);
        assert_eq!(
            q.drain_due(20),
            vec![(10, "a1"), (10, "a2"), (10, "a3"), (20, "b")]
        );
        assert_eq!(q.len(), 1);
        q.retain(|e| *e != "c");
        assert!(q.is_empty());
    }
}
