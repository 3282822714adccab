//! What the instances cost: price × billed running time, by capacity type.
//!
//! EC2 bills Linux instances per second from `running` until `shutting-down`, with a one-minute
//! minimum; an instance that never reached `running` costs nothing. Sums are kept exactly
//! (micro-dollars per hour × milliseconds, in `i128`) and turned into floats only for the report.

use dovetail_dataflow::backend::Instance;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The minimum billed time of an instance that ran (60 s for Linux per-second billing).
pub const MIN_BILLED_MS: i64 = 60_000;

const MS_PER_HOUR: f64 = 3_600_000.0;

/// Cost and node-hours of one capacity type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CapacityTypeCost {
    pub usd: f64,
    pub node_hours: f64,
    /// Instances launched (whether or not they reached `running`).
    pub instances: u32,
}

/// Cost so far of everything launched.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CostReport {
    pub at_ms: i64,
    pub total_usd: f64,
    pub node_hours: f64,
    /// Keyed by capacity type (`on-demand`, `spot`, `reserved`).
    pub by_capacity_type: BTreeMap<String, CapacityTypeCost>,
}

/// Milliseconds of `instance` billed up to `now_ms`.
pub fn billed_ms(instance: &Instance, now_ms: i64) -> i64 {
    let end = instance.stopped_ms.map_or(now_ms, |s| s.min(now_ms));
    if end <= instance.running_ms {
        return 0;
    }
    let ran = end - instance.running_ms;
    if instance.stopped_ms.is_some_and(|s| s <= now_ms) {
        ran.max(MIN_BILLED_MS)
    } else {
        ran
    }
}

/// The cost of `instances` up to `now_ms`.
pub fn cost_report<'a>(
    instances: impl IntoIterator<Item = &'a Instance>,
    now_ms: i64,
) -> CostReport {
    // capacity type -> (micro-dollars/hour × ms, ms, instances)
    let mut sums: BTreeMap<&str, (i128, i128, u32)> = BTreeMap::new();
    for i in instances {
        let ms = billed_ms(i, now_ms);
        let s = sums.entry(i.capacity_type.as_str()).or_default();
        s.0 += i128::from(i.price.0) * i128::from(ms);
        s.1 += i128::from(ms);
        s.2 += 1;
    }
    let mut report = CostReport {
        at_ms: now_ms,
        ..CostReport::default()
    };
    let (mut total_micro_ms, mut total_ms) = (0i128, 0i128);
    for (ct, (micro_ms, ms, n)) in sums {
        total_micro_ms += micro_ms;
        total_ms += ms;
        report.by_capacity_type.insert(
            ct.to_string(),
            CapacityTypeCost {
                usd: micro_ms as f64 / MS_PER_HOUR / 1e6,
                node_hours: ms as f64 / MS_PER_HOUR,
                instances: n,
            },
        );
    }
    report.total_usd = total_micro_ms as f64 / MS_PER_HOUR / 1e6;
    report.node_hours = total_ms as f64 / MS_PER_HOUR;
    report
}
