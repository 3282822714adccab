//! RFC 3339 timestamps (`metadata.creationTimestamp`) to milliseconds since the epoch, without a
//! date-time dependency: Kubernetes only ever writes `YYYY-MM-DDThh:mm:ss[.frac](Z|±hh:mm)`.

use dovetail_dataflow::model::cron::civil_from_days;

/// Milliseconds since 1970-01-01T00:00:00Z, or `None` when `text` is not RFC 3339.
pub fn parse_rfc3339_ms(text: &str) -> Option<i64> {
    let b = text.trim().as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(range)?;
        if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    let sep = |i: usize, allowed: &[u8]| b.get(i).is_some_and(|c| allowed.contains(c));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut i = 19;
    let mut millis = 0;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        let mut end = start;
        while b.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        if end == start {
            return None;
        }
        // Only the first three digits matter; the rest are truncated.
        let digits = b.get(start..end.min(start + 3)).unwrap_or_default();
        let mut ms = 0i64;
        for k in 0..3 {
            ms = ms * 10 + digits.get(k).map_or(0, |d| i64::from(d - b'0'));
        }
        millis = ms;
        i = end;
    }
    let offset_minutes = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if i + 6 == b.len() && sep(i + 3, b":") => {
            let (h, m) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            if h > 23 || m > 59 {
                return None;
            }
            let total = h * 60 + m;
            if *sign == b'+' {
                total
            } else {
                -total
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Some(seconds * 1000 + millis)
}

/// `ms` since the epoch as RFC 3339 UTC with milliseconds (`2026-11-30T00:00:00.000Z`), as
/// EventBridge and Kubernetes write times.
pub fn format_rfc3339_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let rem = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        ms.rem_euclid(1000)
    )
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_what_it_parses() {
        for ms in [0, 1_795_996_800_000, 1_709_296_215_123, 951_782_400_999, -1] {
            let text = format_rfc3339_ms(ms);
            assert_eq!(parse_rfc3339_ms(&text), Some(ms), "{text}");
        }
        assert_eq!(
            format_rfc3339_ms(1_795_996_800_000),
            "2026-11-30T00:00:00.000Z"
        );
    }

    #[test]
    fn parses_kubernetes_timestamps() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339_ms("2024-03-01T12:30:15Z"),
            Some(1_709_296_215_000)
        );
        assert_eq!(
            parse_rfc3339_ms("2024-03-01T12:30:15.25Z"),
            Some(1_709_296_215_250)
        );
        assert_eq!(
            parse_rfc3339_ms("2024-03-01T14:30:15+02:00"),
            Some(1_709_296_215_000)
        );
        assert_eq!(
            parse_rfc3339_ms("2024-03-01T10:00:15-02:30"),
            Some(1_709_296_215_000)
        );
        assert_eq!(
            parse_rfc3339_ms("2000-02-29T00:00:00Z"),
            Some(951_782_400_000)
        );
    }

    #[test]
    fn rejects_malformed_timestamps() {
        for bad in [
            "",
            "yesterday",
            "2024-13-01T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-03-01T12:30:15",
            "2024-03-01T12:30:15.Z",
            "2024-03-01T12:30:15Zjunk",
            "２024-03-01T12:30:15Z",
        ] {
            assert_eq!(parse_rfc3339_ms(bad), None, "{bad}");
        }
    }
}
