//! Spot interruption frequency from the AWS Spot Instance Advisor, and the interruption rate
//! the simulator draws from.
//!
//! The advisor puts each type (per region and OS) in one of five buckets of "frequency of
//! interruption" over the last month: 0 `<5%`, 1 `5-10%`, 2 `10-15%`, 3 `15-20%`, 4 `>20%`.
//! The simulator reads the bucket's upper bound as the probability `p` that an instance is
//! interrupted within 30 days and turns it into a constant hazard rate
//! `λ = −ln(1 − p) / 30 days`, so that `P(T ≤ 30 d) = p` for an exponential `T`. The open
//! bucket 4 has no upper bound; 25% is used (the next step of the 5-point ladder). Types the
//! advisor does not list get bucket 2.

use std::collections::BTreeMap;

/// The advisor feed compiled into the binary (us-east-1, Linux; see `data/README.md`).
pub const EMBEDDED_SPOT_ADVISOR: &str = include_str!("../../data/spot/spot_advisor.csv");

/// The bucket of a type the advisor does not list (the middle one, `10-15%`).
pub const DEFAULT_BUCKET: u8 = 2;

/// The probability of an interruption within 30 days assumed for each bucket: the upper bound
/// of its range, and 25% for the open `>20%` bucket.
pub const BUCKET_MONTHLY_PROBABILITY: [f64; 5] = [0.05, 0.10, 0.15, 0.20, 0.25];

/// The advisor's month, in milliseconds.
pub const MONTH_MS: f64 = 30.0 * 24.0 * 3600.0 * 1000.0;

/// Why the advisor CSV could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpotAdvisorError {
    #[error("spot advisor CSV: no header")]
    Empty,
    #[error("spot advisor CSV: the header has no {0:?} column")]
    MissingColumn(&'static str),
    #[error("spot advisor CSV, line {line}: {reason}")]
    Malformed { line: usize, reason: String },
}

/// The interruption bucket of every type the advisor lists for `region` and `os` (`Linux`).
/// Every row is checked, not only the region's.
pub fn interruption_buckets(
    csv: &str,
    region: &str,
    os: &str,
) -> Result<BTreeMap<String, u8>, SpotAdvisorError> {
    let mut lines = csv.lines().enumerate();
    let (_, header) = lines.next().ok_or(SpotAdvisorError::Empty)?;
    let columns: Vec<&str> = header.trim_end_matches('\r').split(',').collect();
    let column = |name: &'static str| {
        columns
            .iter()
            .position(|c| *c == name)
            .ok_or(SpotAdvisorError::MissingColumn(name))
    };
    let (c_region, c_os, c_type, c_bucket) = (
        column("region")?,
        column("os")?,
        column("instance_type")?,
        column("interruption_bucket")?,
    );
    let mut out = BTreeMap::new();
    for (i, raw) in lines {
        let line = i + 1;
        let raw = raw.trim_end_matches('\r');
        if raw.is_empty() {
            continue;
        }
        let fields: Vec<&str> = raw.split(',').collect();
        if fields.len() != columns.len() {
            return Err(SpotAdvisorError::Malformed {
                line,
                reason: format!("{} fields, the header has {}", fields.len(), columns.len()),
            });
        }
        let bucket: u8 = fields[c_bucket]
            .parse()
            .ok()
            .filter(|b| usize::from(*b) < BUCKET_MONTHLY_PROBABILITY.len())
            .ok_or_else(|| SpotAdvisorError::Malformed {
                line,
                reason: format!("interruption_bucket {:?} is not 0..4", fields[c_bucket]),
            })?;
        if fields[c_region] == region
            && fields[c_os] == os
            && out.insert(fields[c_type].to_string(), bucket).is_some()
        {
            return Err(SpotAdvisorError::Malformed {
                line,
                reason: format!("second row for {}", fields[c_type]),
            });
        }
    }
    Ok(out)
}

/// The buckets of the embedded advisor feed for `region` (Linux).
pub fn embedded_interruption_buckets(
    region: &str,
) -> Result<BTreeMap<String, u8>, SpotAdvisorError> {
    interruption_buckets(EMBEDDED_SPOT_ADVISOR, region, "Linux")
}

/// Interruptions per millisecond for a bucket (an unknown bucket counts as
/// [`DEFAULT_BUCKET`]), times `scale`.
pub fn interruption_rate_per_ms(bucket: u8, scale: f64) -> f64 {
    let p = BUCKET_MONTHLY_PROBABILITY
        .get(usize::from(bucket))
        .copied()
        .unwrap_or(BUCKET_MONTHLY_PROBABILITY[usize::from(DEFAULT_BUCKET)]);
    -(1.0 - p).ln() / MONTH_MS * scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_feed_parses() {
        let b = embedded_interruption_buckets("us-east-1").unwrap();
        assert_eq!(b.len(), 894);
        assert_eq!(b.get("a1.large"), Some(&4));
        assert!(embedded_interruption_buckets("mars-1").unwrap().is_empty());
    }

    #[test]
    fn malformed_rows_are_errors() {
        let h = "region,os,instance_type,interruption_bucket\n";
        assert_eq!(
            interruption_buckets(&format!("{h}us-east-1,Linux,x,7\n"), "us-east-1", "Linux"),
            Err(SpotAdvisorError::Malformed {
                line: 2,
                reason: "interruption_bucket \"7\" is not 0..4".into()
            })
        );
        assert!(matches!(
            interruption_buckets(&format!("{h}us-east-1,Linux\n"), "us-east-1", "Linux"),
            Err(SpotAdvisorError::Malformed { line: 2, .. })
        ));
        assert_eq!(
            interruption_buckets("region,os\n", "r", "Linux"),
            Err(SpotAdvisorError::MissingColumn("instance_type"))
        );
    }

    #[test]
    fn rate_matches_the_monthly_probability() {
        for (bucket, p) in BUCKET_MONTHLY_PROBABILITY.iter().enumerate() {
            let rate = interruption_rate_per_ms(bucket as u8, 1.0);
            let within_month = 1.0 - (-rate * MONTH_MS).exp();
            assert!((within_month - p).abs() < 1e-12);
        }
        assert_eq!(
            interruption_rate_per_ms(9, 2.0),
            interruption_rate_per_ms(DEFAULT_BUCKET, 2.0)
        );
    }
}
