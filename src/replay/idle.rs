//! Idle gaps: when the simulated world is settled and the last polls changed nothing, the
//! disruption poll need not run every 10 s. With no new facts the engine's decisions change
//! only when one of its timers is due (a `consolidateAfter`, an `expireAfter`, a do-not-disrupt
//! window, …) or a budget's cron window opens or closes, so the poll skips to the first of
//! those — an idle simulated year costs a handful of epochs instead of three million.

use dovetail_actuate::POLL_INTERVAL_MS;
use dovetail_dataflow::model::cron::Schedule;
use dovetail_dataflow::model::duration::parse_duration;
use dovetail_dataflow::model::NodePool;

const MINUTE_MS: i64 = 60_000;
/// How far ahead a budget's schedule is searched for its next firing (minute by minute): a
/// schedule that fires less often than this wakes the poll once per span, harmlessly.
const SCHEDULE_SEARCH_MS: i64 = 366 * 24 * 3_600_000;

/// Consecutive quiet polls before polls are skipped: the first quiet poll after a change may
/// still have judged budgets by the minute of an earlier epoch (the engine's clock lags one
/// epoch), the second cannot.
pub(super) const QUIET_POLLS_BEFORE_SKIPPING: u32 = 2;

/// The first poll instant (a multiple of the interval) after `last_ms`.
pub(super) fn next_poll_after(last_ms: i64) -> i64 {
    last_ms
        .div_euclid(POLL_INTERVAL_MS)
        .saturating_add(1)
        .saturating_mul(POLL_INTERVAL_MS)
}

/// The poll instant an idle world wakes at: the first poll at or after `wake_ms` (disruption
/// is decided at poll instants, so a timer due between two is seen at the later), never before
/// the next regular one.
pub(super) fn poll_at_or_after(last_ms: i64, wake_ms: i64) -> i64 {
    let at = wake_ms
        .div_euclid(POLL_INTERVAL_MS)
        .saturating_add(i64::from(wake_ms.rem_euclid(POLL_INTERVAL_MS) != 0))
        .saturating_mul(POLL_INTERVAL_MS);
    at.max(next_poll_after(last_ms))
}

/// The first minute after `now_ms` at which some scheduled budget of `pools` opens (its cron
/// fires) or may close (`duration` after the latest firing), searched up to `until_ms`.
pub(super) fn next_budget_change_ms<'a>(
    pools: impl IntoIterator<Item = &'a NodePool>,
    now_ms: i64,
    until_ms: i64,
) -> Option<i64> {
    let mut next: Option<i64> = None;
    let first = now_ms.div_euclid(MINUTE_MS) * MINUTE_MS;
    for budget in pools.into_iter().flat_map(|p| &p.disruption.budgets) {
        let Some(text) = &budget.schedule else {
            continue;
        };
        let Ok(schedule) = Schedule::parse(text) else {
            continue;
        };
        let duration = budget
            .duration
            .as_deref()
            .and_then(|d| parse_duration(d).ok().flatten())
            .unwrap_or(0);
        let limit = until_ms
            .min(next.unwrap_or(i64::MAX))
            .min(first.saturating_add(SCHEDULE_SEARCH_MS));
        // The window now open (if any) closes `duration` after its latest firing.
        let mut m = first;
        while m > now_ms.saturating_sub(duration) && m > first - SCHEDULE_SEARCH_MS {
            if schedule.fires_at(m) {
                let closes = m.saturating_add(duration);
                if closes > now_ms {
                    next = Some(next.map_or(closes, |n| n.min(closes)));
                }
                break;
            }
            m -= MINUTE_MS;
        }
        let mut m = first + MINUTE_MS;
        while m <= limit {
            if schedule.fires_at(m) {
                next = Some(next.map_or(m, |n| n.min(m)));
                break;
            }
            m += MINUTE_MS;
        }
        // A schedule that never fired in the search span still wakes the poll at its end.
        if m > limit && limit < until_ms {
            next = Some(next.map_or(limit, |n| n.min(limit)));
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_dataflow::model::Budget;

    fn pool(schedule: &str, duration: &str) -> NodePool {
        let mut p = NodePool::default();
        p.disruption.budgets = vec![Budget {
            nodes: "0".into(),
            schedule: Some(schedule.into()),
            duration: Some(duration.into()),
            reasons: vec![],
        }];
        p
    }

    #[test]
    fn polls_fall_on_multiples_of_the_interval() {
        assert_eq!(next_poll_after(0), 10_000);
        assert_eq!(next_poll_after(10_000), 20_000);
        assert_eq!(next_poll_after(12_345), 20_000);
        assert_eq!(poll_at_or_after(0, 3_600_000), 3_600_000);
        assert_eq!(poll_at_or_after(0, 3_600_001), 3_610_000);
        assert_eq!(poll_at_or_after(50_000, 1), 60_000);
        assert_eq!(
            poll_at_or_after(0, i64::MAX),
            i64::MAX,
            "saturates, never wraps"
        );
    }

    #[test]
    fn budget_windows_wake_the_poll_when_they_open_and_close() {
        // Daily at 09:00 for 8 hours; day 0 is 1970-01-01.
        let pools = [pool("0 9 * * *", "8h")];
        let nine = 9 * 3_600_000;
        assert_eq!(next_budget_change_ms(&pools, 0, i64::MAX), Some(nine));
        assert_eq!(
            next_budget_change_ms(&pools, nine + 1, i64::MAX),
            Some(nine + 8 * 3_600_000)
        );
        let next_day = nine + 24 * 3_600_000;
        assert_eq!(
            next_budget_change_ms(&pools, nine + 8 * 3_600_000, i64::MAX),
            Some(next_day)
        );
        // Nothing scheduled: no wake-up; searched only up to the limit.
        assert_eq!(
            next_budget_change_ms(&[NodePool::default()], 0, i64::MAX),
            None
        );
        assert_eq!(next_budget_change_ms(&pools, 0, 60_000), None);
    }
}
