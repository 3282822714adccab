//! Ranges of the numeric command-line options, checked by clap before anything runs, so a value
//! that would abort (a thousand worker threads) or hang (a replay at speed 0) is refused with a
//! message naming the option.

/// The most timely worker threads `-w` accepts: past this each worker's channels and arenas
/// only add memory (a thousand aborted on allocation), and no machine this runs on has more
/// cores.
pub const MAX_WORKERS: usize = 256;

/// `-w`: a whole number of worker threads in `1..=MAX_WORKERS`.
pub fn parse_workers(text: &str) -> Result<usize, String> {
    let n: usize = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number of worker threads"))?;
    if !(1..=MAX_WORKERS).contains(&n) {
        return Err(format!(
            "{n} worker threads: must be between 1 and {MAX_WORKERS}"
        ));
    }
    Ok(n)
}

/// `--speed`: a finite multiple of real time above zero (`0`, `NaN` and `inf` would sleep
/// forever or not at all).
pub fn parse_speed(text: &str) -> Result<f64, String> {
    let speed: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number (a multiple of real time, e.g. 60)"))?;
    if !speed.is_finite() || speed <= 0.0 {
        return Err(format!(
            "{text:?}: the speed must be a finite number above 0 (a multiple of real time, e.g. 60)"
        ));
    }
    Ok(speed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_are_between_one_and_the_limit() {
        assert_eq!(parse_workers("1"), Ok(1));
        assert_eq!(parse_workers("256"), Ok(256));
        for bad in ["0", "257", "1000", "-1", "two", ""] {
            assert!(parse_workers(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn speed_is_finite_and_positive() {
        assert_eq!(parse_speed("60"), Ok(60.0));
        assert_eq!(parse_speed("0.5"), Ok(0.5));
        for bad in ["0", "-1", "NaN", "inf", "-inf", "1e400", "fast"] {
            assert!(parse_speed(bad).is_err(), "{bad:?} accepted");
        }
    }
}
