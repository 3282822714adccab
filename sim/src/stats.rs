//! Percentiles of pending times.

/// The `q`-th percentile (0–100) of `values` by the nearest-rank method (the smallest value with
/// at least `q`% of the values at or below it); `None` for no values. `q` outside 0–100 is
/// clamped.
pub fn percentile(values: &[i64], q: f64) -> Option<i64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    let q = if q.is_nan() {
        100.0
    } else {
        q.clamp(0.0, 100.0)
    };
    let rank = ((q / 100.0) * n as f64).ceil() as usize;
    sorted.get(rank.clamp(1, n) - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let v = [15, 20, 35, 40, 50];
        assert_eq!(percentile(&v, 5.0), Some(15));
        assert_eq!(percentile(&v, 30.0), Some(20));
        assert_eq!(percentile(&v, 40.0), Some(20));
        assert_eq!(percentile(&v, 50.0), Some(35));
        assert_eq!(percentile(&v, 100.0), Some(50));
        assert_eq!(percentile(&v, 0.0), Some(15));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
