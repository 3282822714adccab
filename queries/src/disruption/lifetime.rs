//! Karpenter's `LifetimeRemaining`: the share of a node's lifetime left before it expires, by
//! which consolidation scales its disruption cost, so that nodes near expiry go first (they are
//! about to be disrupted anyway).
//!
//! Rule: remaining = (expiry − now) / `expireAfter`, clamped to [0, 1]; 1 with `expireAfter:
//! Never`. It is kept in thousandths, rounded up (a node reaches 0 only once it has expired),
//! so that a node's scaled cost changes at a thousand instants of its lifetime rather than at
//! every poll: the commands query re-ranks a candidate only when its step passes
//! ([`Lifetime::next_step_ms`]), not every candidate at every tick.

use super::types::Candidate;
use serde::{Deserialize, Serialize};

/// Steps of a whole lifetime.
pub const STEPS: i64 = 1_000;

/// When a node expires and how long its lifetime is (its `expireAfter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Lifetime {
    pub expires_at_ms: i64,
    pub expire_after_ms: i64,
}

impl Lifetime {
    /// The lifetime of a node created (its NodeClaim's creation, as expiration counts it) at
    /// `created_ms` with `expireAfter` of `expire_after_ms` (None: Never).
    pub fn of(created_ms: i64, expire_after_ms: Option<i64>) -> Option<Lifetime> {
        let after = expire_after_ms?;
        Some(Lifetime {
            expires_at_ms: created_ms.saturating_add(after),
            expire_after_ms: after,
        })
    }

    /// The thousandths of the lifetime left at `now_ms`, rounded up, in [0, [`STEPS`]].
    pub fn remaining(&self, now_ms: i64) -> i64 {
        if self.expire_after_ms <= 0 {
            // Expires as it is created: nothing left (Karpenter's ratio is NaN there, which
            // clamps to 0 as well).
            return 0;
        }
        let left = i128::from(self.expires_at_ms) - i128::from(now_ms);
        let steps = (left * i128::from(STEPS)).div_euclid(i128::from(self.expire_after_ms))
            + i128::from(
                (left * i128::from(STEPS)).rem_euclid(i128::from(self.expire_after_ms)) != 0,
            );
        steps.clamp(0, i128::from(STEPS)) as i64
    }

    /// The first time after `now_ms` at which [`Lifetime::remaining`] changes (None: never, it
    /// has expired).
    pub fn next_step_ms(&self, now_ms: i64) -> Option<i64> {
        let k = self.remaining(now_ms);
        if k == 0 {
            return None;
        }
        // remaining(t) ≤ k − 1 ⇔ expiry − t ≤ (k − 1)·after / STEPS.
        let drop = i128::from(k - 1) * i128::from(self.expire_after_ms) / i128::from(STEPS);
        let at = i128::from(self.expires_at_ms) - drop;
        Some(at.max(i128::from(now_ms) + 1).min(i128::from(i64::MAX)) as i64)
    }
}

/// The candidate's disruption cost scaled by its remaining lifetime at `now_ms` (Karpenter's
/// `ReschedulingCost × LifetimeRemaining`), in millionths, at least 1 so that ratios over it
/// stay finite.
pub fn scaled_cost(c: &Candidate, now_ms: i64) -> i64 {
    let remaining = c.lifetime.map_or(STEPS, |l| l.remaining(now_ms));
    (i128::from(c.disruption_cost) * i128::from(remaining) / i128::from(STEPS)).max(1) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;

    #[test]
    fn remaining_falls_from_whole_to_nothing_over_the_lifetime() {
        let l = Lifetime::of(0, Some(100 * HOUR)).expect("a lifetime");
        assert_eq!(l.remaining(-HOUR), STEPS, "not yet created: whole");
        assert_eq!(l.remaining(0), STEPS);
        assert_eq!(l.remaining(1), STEPS, "rounded up");
        assert_eq!(l.remaining(25 * HOUR), 750);
        assert_eq!(l.remaining(100 * HOUR - 1), 1, "only expiry brings it to 0");
        assert_eq!(l.remaining(100 * HOUR), 0);
        assert_eq!(l.remaining(200 * HOUR), 0);
        assert_eq!(Lifetime::of(0, None), None, "Never: no lifetime");
    }

    /// The next step is exactly where `remaining` changes: the value holds until just before.
    #[test]
    fn the_next_step_is_where_remaining_changes() {
        for after in [100 * HOUR, 7, 999, 1_001, 720 * HOUR + 13] {
            let l = Lifetime::of(5, Some(after)).expect("a lifetime");
            let mut now = 5;
            let mut seen = 0;
            while let Some(next) = l.next_step_ms(now) {
                assert!(next > now);
                assert_eq!(
                    l.remaining(next - 1),
                    l.remaining(now),
                    "{after}: {now}..{next}"
                );
                assert!(l.remaining(next) < l.remaining(now), "{after}: {next}");
                now = next;
                seen += 1;
            }
            assert_eq!(l.remaining(now), 0);
            assert!(seen <= STEPS, "{seen} steps");
        }
    }
}
