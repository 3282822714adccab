//! Go durations as Karpenter's API writes them (`30s`, `720h`, `1h30m`, `Never`).

/// Milliseconds of a Go duration; `Ok(None)` for `Never`. Units: `ns us µs ms s m h`; a bare
/// `0` is zero. Negative durations are refused: no Karpenter field takes one.
pub fn parse_duration(text: &str) -> Result<Option<i64>, DurationError> {
    let t = text.trim();
    if t == "Never" {
        return Ok(None);
    }
    if t == "0" {
        return Ok(Some(0));
    }
    if t.is_empty() {
        return Err(DurationError::Empty);
    }
    let bad = || DurationError::Malformed(text.to_string());
    let mut total_ns: f64 = 0.0;
    let mut rest = t;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if num_len == 0 {
            return Err(bad());
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(bad()),
        };
        total_ns += value * scale;
        rest = &rest[unit_len..];
    }
    Ok(Some((total_ns / 1e6).round() as i64))
}

/// Why a text is not a Go duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("empty duration")]
    Empty,
    #[error("`{0}` is not a duration (like `30s`, `1h30m`, or `Never`)")]
    Malformed(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration("30s"), Ok(Some(30_000)));
        assert_eq!(parse_duration("720h"), Ok(Some(720 * 3_600_000)));
        assert_eq!(parse_duration("1h30m"), Ok(Some(5_400_000)));
        assert_eq!(parse_duration("1.5s"), Ok(Some(1_500)));
        assert_eq!(parse_duration("0"), Ok(Some(0)));
        assert_eq!(parse_duration("Never"), Ok(None));
        assert!(parse_duration("10 minutes").is_err());
        assert!(parse_duration("-5m").is_err());
        assert!(parse_duration("h").is_err());
    }
}
