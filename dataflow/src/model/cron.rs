//! Cron schedules of NodePool disruption budgets, as Karpenter parses them (robfig/cron's
//! standard five fields, UTC): `minute hour day-of-month month day-of-week`, with `*`, `?`,
//! lists, ranges, steps, month and weekday names, and the `@yearly`, `@monthly`, `@weekly`,
//! `@daily`, `@hourly` macros.

use serde::{Deserialize, Serialize};

const MINUTE_MS: i64 = 60_000;

/// Why a schedule is not a cron schedule; `field` is `minute`, `hour`, `day-of-month`, `month`
/// or `day-of-week`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("schedule `{text}` needs five fields (minute hour day-of-month month day-of-week)")]
    FieldCount { text: String },
    #[error("{field} `{value}` is not a number or name")]
    NotANumber { field: &'static str, value: String },
    #[error("{field} step `{step}` is not a number")]
    BadStep { field: &'static str, step: String },
    #[error("{field} step must be positive")]
    ZeroStep { field: &'static str },
    #[error("{field} `{part}` is outside {min}-{max}")]
    OutOfRange {
        field: &'static str,
        part: String,
        min: u32,
        max: u32,
    },
}

/// A parsed schedule: one bit per allowed value of each field.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Schedule {
    minutes: u64,
    hours: u32,
    days_of_month: u32,
    months: u16,
    days_of_week: u8,
    /// Day-of-month or day-of-week was `*`/`?`: then both must match; otherwise either may.
    dom_star: bool,
    dow_star: bool,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

fn field(
    text: &str,
    min: u32,
    max: u32,
    names: &[&str],
    what: &'static str,
) -> Result<(u64, bool), ScheduleError> {
    let value = |v: &str| -> Result<u32, ScheduleError> {
        let lower = v.to_ascii_lowercase();
        if let Some(i) = names.iter().position(|n| *n == lower) {
            return Ok(i as u32 + min);
        }
        v.parse::<u32>().map_err(|_| ScheduleError::NotANumber {
            field: what,
            value: v.to_string(),
        })
    };
    let mut bits = 0u64;
    let star = text == "*" || text == "?";
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (
                r,
                s.parse::<u32>().map_err(|_| ScheduleError::BadStep {
                    field: what,
                    step: s.to_string(),
                })?,
            ),
            None => (part, 1),
        };
        if step == 0 {
            return Err(ScheduleError::ZeroStep { field: what });
        }
        let (lo, hi) = if range == "*" || range == "?" {
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a)?, value(b)?)
        } else {
            let v = value(range)?;
            (v, if part.contains('/') { max } else { v })
        };
        // Sunday may be written 7.
        let (lo, hi) = if what == "day-of-week" && hi == 7 && lo <= 7 {
            if lo == 7 {
                (0, 0)
            } else {
                bits |= 1;
                (lo, 6)
            }
        } else {
            (lo, hi)
        };
        if lo < min || hi > max || lo > hi {
            return Err(ScheduleError::OutOfRange {
                field: what,
                part: part.to_string(),
                min,
                max,
            });
        }
        let mut v = lo;
        while v <= hi {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok((bits, star))
}

impl Schedule {
    pub fn parse(text: &str) -> Result<Schedule, ScheduleError> {
        let expanded = match text.trim() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other => other,
        };
        let parts: Vec<&str> = expanded.split_whitespace().collect();
        let [mi, h, dom, mo, dow] = parts[..] else {
            return Err(ScheduleError::FieldCount {
                text: text.to_string(),
            });
        };
        let (minutes, _) = field(mi, 0, 59, &[], "minute")?;
        let (hours, _) = field(h, 0, 23, &[], "hour")?;
        let (days_of_month, dom_star) = field(dom, 1, 31, &[], "day-of-month")?;
        let (months, _) = field(mo, 1, 12, &MONTHS, "month")?;
        let (days_of_week, dow_star) = field(dow, 0, 6, &DAYS, "day-of-week")?;
        Ok(Schedule {
            minutes,
            hours: hours as u32,
            days_of_month: days_of_month as u32,
            months: months as u16,
            days_of_week: days_of_week as u8,
            dom_star,
            dow_star,
        })
    }

    /// Whether the schedule fires at the minute starting at `ms` (UTC).
    pub fn fires_at(&self, ms: i64) -> bool {
        let minute_of_day = ms.div_euclid(MINUTE_MS).rem_euclid(1440);
        let days = ms.div_euclid(86_400_000);
        let (_, month, day) = civil_from_days(days);
        // 1970-01-01 was a Thursday (4).
        let weekday = (days + 4).rem_euclid(7) as u32;
        let dom_ok = self.days_of_month & (1 << day) != 0;
        let dow_ok = self.days_of_week & (1 << weekday) != 0;
        let day_ok = if self.dom_star || self.dow_star {
            dom_ok && dow_ok
        } else {
            dom_ok || dow_ok
        };
        self.minutes & (1 << (minute_of_day % 60)) != 0
            && self.hours & (1 << (minute_of_day / 60)) != 0
            && self.months & (1 << month) != 0
            && day_ok
    }

    /// Whether a window of `duration_ms` opened by the schedule covers `now_ms`: the schedule
    /// fired at some minute in `(now − duration, now]` (Karpenter's `Budget.IsActive`).
    pub fn active(&self, now_ms: i64, duration_ms: i64) -> bool {
        let mut m = now_ms.div_euclid(MINUTE_MS) * MINUTE_MS;
        while m > now_ms - duration_ms {
            if self.fires_at(m) {
                return true;
            }
            m -= MINUTE_MS;
        }
        false
    }
}

/// (year, month 1–12, day 1–31) of a day count since 1970-01-01 (Howard Hinnant's algorithm).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2026-11-30 was a Monday.
    const MON_2026_11_30: i64 = 1_795_996_800_000;
    const HOUR: i64 = 3_600_000;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(MON_2026_11_30 / 86_400_000), (2026, 11, 30));
    }

    #[test]
    fn business_hours_window() {
        let s = Schedule::parse("0 9 * * mon-fri").unwrap();
        assert!(s.fires_at(MON_2026_11_30 + 9 * HOUR));
        assert!(!s.fires_at(MON_2026_11_30 + 9 * HOUR + 60_000));
        assert!(s.active(MON_2026_11_30 + 12 * HOUR, 8 * HOUR));
        assert!(!s.active(MON_2026_11_30 + 17 * HOUR, 8 * HOUR));
        assert!(!s.active(MON_2026_11_30 + 8 * HOUR, 8 * HOUR));
        // Saturday 2026-11-28.
        assert!(!s.active(MON_2026_11_30 - 2 * 24 * HOUR + 12 * HOUR, 8 * HOUR));
    }

    #[test]
    fn macros_lists_steps_and_sunday_as_seven() {
        let daily = Schedule::parse("@daily").unwrap();
        assert!(daily.fires_at(MON_2026_11_30));
        let s = Schedule::parse("*/15 0,12 * * 7").unwrap();
        let sunday = MON_2026_11_30 - 24 * HOUR;
        assert!(s.fires_at(sunday + 12 * HOUR + 45 * 60_000));
        assert!(!s.fires_at(sunday + 12 * HOUR + 50 * 60_000));
        assert!(!s.fires_at(MON_2026_11_30));
    }

    #[test]
    fn bad_schedules_say_why() {
        assert!(Schedule::parse("0 9 * *")
            .unwrap_err()
            .to_string()
            .contains("five fields"));
        assert_eq!(
            Schedule::parse("61 * * * *"),
            Err(ScheduleError::OutOfRange {
                field: "minute",
                part: "61".into(),
                min: 0,
                max: 59
            })
        );
        assert_eq!(
            Schedule::parse("0 9 * * funday"),
            Err(ScheduleError::NotANumber {
                field: "day-of-week",
                value: "funday".into()
            })
        );
    }
}
