//! PodDisruptionBudget arithmetic, as the Kubernetes disruption controller does it.
//!
//! For the pods a budget selects (same namespace, selector matches): `expected` is their number
//! (the simulator's pending pods are replicas their controller recreated, so they count),
//! `healthy` those bound to a Ready node. `maxUnavailable` gives
//! `desired = expected − scaled(maxUnavailable)`, `minAvailable` gives `desired =
//! scaled(minAvailable)`, a percentage scaled against `expected` and rounded up (both, as
//! `GetScaledValueFromIntOrPercent(…, roundUp=true)`). `disruptionsAllowed = max(0, healthy −
//! desired)`. A budget with neither field allows every disruption.

use dovetail_dataflow::model::PodDisruptionBudget;
use serde::{Deserialize, Serialize};

/// Why the Eviction API refuses to evict a pod now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum EvictionRefused {
    #[error("no pod {pod}")]
    UnknownPod { pod: String },
    #[error(
        "PodDisruptionBudget {namespace}/{name}: {field} {value:?} is not an integer or percentage"
    )]
    BadBudget {
        namespace: String,
        name: String,
        field: String,
        value: String,
    },
    #[error("PodDisruptionBudget {namespace}/{name} allows no disruption ({healthy} of {expected} healthy)")]
    NoDisruptionAllowed {
        namespace: String,
        name: String,
        healthy: i64,
        expected: i64,
    },
    #[error("{count} PodDisruptionBudgets select the pod; eviction needs at most one")]
    SeveralBudgets { count: usize },
}

/// `"3"` or `"25%"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOrPercent {
    Int(i64),
    Percent(i64),
}

/// Parses an IntOrString budget value; `None` when it is neither a non-negative integer nor a
/// non-negative integer percentage.
pub fn parse_int_or_percent(text: &str) -> Option<IntOrPercent> {
    let t = text.trim();
    match t.strip_suffix('%') {
        Some(p) => p
            .parse::<i64>()
            .ok()
            .filter(|v| *v >= 0)
            .map(IntOrPercent::Percent),
        None => t
            .parse::<i64>()
            .ok()
            .filter(|v| *v >= 0)
            .map(IntOrPercent::Int),
    }
}

/// The value scaled against `total`, a percentage rounded up.
pub fn scaled(value: IntOrPercent, total: i64) -> i64 {
    match value {
        IntOrPercent::Int(n) => n,
        IntOrPercent::Percent(p) => (p * total + 99).div_euclid(100),
    }
}

/// How many of the selected pods may be disrupted now, or why the budget cannot be read.
pub fn disruptions_allowed(
    pdb: &PodDisruptionBudget,
    expected: i64,
    healthy: i64,
) -> Result<i64, EvictionRefused> {
    let parse = |field: &str, v: &str| {
        parse_int_or_percent(v).ok_or_else(|| EvictionRefused::BadBudget {
            namespace: pdb.namespace.clone(),
            name: pdb.name.clone(),
            field: field.to_string(),
            value: v.to_string(),
        })
    };
    let desired = if let Some(max) = &pdb.max_unavailable {
        (expected - scaled(parse("maxUnavailable", max)?, expected)).max(0)
    } else if let Some(min) = &pdb.min_available {
        scaled(parse("minAvailable", min)?, expected)
    } else {
        0
    };
    Ok((healthy - desired).max(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pdb(min: Option<&str>, max: Option<&str>) -> PodDisruptionBudget {
        PodDisruptionBudget {
            namespace: "ns".into(),
            name: "b".into(),
            min_available: min.map(Into::into),
            max_unavailable: max.map(Into::into),
            ..Default::default()
        }
    }

    #[test]
    fn budgets() {
        assert_eq!(disruptions_allowed(&pdb(Some("2"), None), 3, 3), Ok(1));
        assert_eq!(disruptions_allowed(&pdb(Some("2"), None), 3, 2), Ok(0));
        // 50% of 3 rounds up to 2.
        assert_eq!(disruptions_allowed(&pdb(Some("50%"), None), 3, 3), Ok(1));
        assert_eq!(disruptions_allowed(&pdb(None, Some("1")), 4, 4), Ok(1));
        assert_eq!(disruptions_allowed(&pdb(None, Some("1")), 4, 3), Ok(0));
        // 10% of 4 rounds up to 1.
        assert_eq!(disruptions_allowed(&pdb(None, Some("10%")), 4, 4), Ok(1));
        assert_eq!(disruptions_allowed(&pdb(None, Some("0")), 4, 4), Ok(0));
        assert_eq!(disruptions_allowed(&pdb(None, None), 4, 4), Ok(4));
        assert_eq!(
            disruptions_allowed(&pdb(Some("x"), None), 4, 4),
            Err(EvictionRefused::BadBudget {
                namespace: "ns".into(),
                name: "b".into(),
                field: "minAvailable".into(),
                value: "x".into(),
            })
        );
        assert_eq!(parse_int_or_percent("-1"), None);
    }
}
