//! What a replay reports: the summary and the per-minute timeline.

use serde::Serialize;
use std::collections::BTreeMap;

/// Percentiles of a distribution, in the unit the field name gives.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

impl Percentiles {
    pub fn of(h: &hdrhistogram::Histogram<u64>) -> Percentiles {
        Percentiles {
            count: h.len(),
            p50: h.value_at_quantile(0.50),
            p99: h.value_at_quantile(0.99),
            max: h.max(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct CapacityTypeUsage {
    pub usd: f64,
    pub node_hours: f64,
    pub instances: u32,
}

/// `total_cost_usd − lower_bound_usd`, split by where the money went (each part defined in
/// `breakdown.rs` and the README); the parts add up to `gap_usd`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CostBreakdown {
    pub gap_usd: f64,
    /// Billed before the Node was Ready.
    pub boot_usd: f64,
    /// Ready with no pod but DaemonSet pods, until a pod came (or the replay ended).
    pub idle_usd: f64,
    /// Empty until removed, in a disruption command, or shutting down after the Node went.
    pub disruption_lag_usd: f64,
    /// The unrequested share of running nodes.
    pub packing_waste_usd: f64,
    /// Pods riding along on a node bought for a pod too large for the NodePool's cheapest type
    /// per unit: their share's price above that cheapest rate.
    pub too_large_usd: f64,
    /// On-demand where the NodePool allowed spot: the requested share's price above spot.
    pub spot_premium_usd: f64,
    /// The rest: dearer types per unit than the cheapest a pod could use, DaemonSet requests,
    /// billing minimums, less the bound of pods still pending.
    pub other_usd: f64,
}

impl CostBreakdown {
    /// The parts with their names, in the order the report shows them.
    pub fn parts(&self) -> [(&'static str, f64); 7] {
        [
            ("boot", self.boot_usd),
            ("idle", self.idle_usd),
            ("disruption lag", self.disruption_lag_usd),
            ("packing waste", self.packing_waste_usd),
            ("too large", self.too_large_usd),
            ("spot premium", self.spot_premium_usd),
            ("other", self.other_usd),
        ]
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ReplaySummary {
    pub trace: String,
    pub seed: u64,
    pub simulated_hours: f64,
    pub wall_seconds: f64,
    pub total_cost_usd: f64,
    /// The integral of the cluster-wide lower bound over the replay.
    pub lower_bound_usd: f64,
    pub cost_over_lower_bound: f64,
    pub by_capacity_type: BTreeMap<String, CapacityTypeUsage>,
    /// The gap between cost and lower bound, by where it went.
    pub cost_breakdown: CostBreakdown,
    pub nodes_launched: u64,
    pub nodes_terminated: u64,
    pub peak_nodes: u64,
    /// Nodes whose disruption started, by reason (Interrupted, Expired, Empty, Drifted,
    /// Underutilized).
    pub disruptions_by_reason: BTreeMap<String, u64>,
    /// Disruption commands started (a multi-node consolidation is one command).
    pub disruption_commands: u64,
    /// Commands dropped because a replacement could not be launched or was gone before it was
    /// ready (their nodes went back to service).
    pub disruption_commands_abandoned: u64,
    pub disruption_replacements_launched: u64,
    /// Nodes the disruption drained and terminated, by reason.
    pub nodes_terminated_by_disruption: BTreeMap<String, u64>,
    pub capacity_errors: u64,
    pub interruptions_handled: u64,
    pub pods_created: u64,
    pub pod_pending_seconds: Percentiles,
    /// Pods pending at the end that no node, ready or on its way, was to take.
    pub pods_never_scheduled: u64,
    /// Pods pending at the end that the engine had placed on a node still launching or
    /// booting (only when the replay stopped at its cap).
    pub pods_waiting_for_node: u64,
    /// The replay stopped at its cap (`settle_cap_ms` after the last event) rather than when
    /// the world had settled.
    pub settle_cap_hit: bool,
    pub engine_epochs: u64,
    /// Disruption polls not run because the world was idle (see the README's "Limits and
    /// arithmetic").
    pub disruption_polls_skipped: u64,
    pub engine_update_micros: Percentiles,
    /// Decisions added or retracted per epoch closed.
    pub engine_decision_diffs: Percentiles,
    /// The process's peak resident set at the end (Linux `VmHWM`; `None` elsewhere).
    pub peak_rss_bytes: Option<u64>,
    pub notes: Vec<String>,
}

/// This process's peak resident set so far, from `/proc/self/status` (`VmHWM`, in kB).
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The state during one simulated minute.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineRow {
    pub minute: u64,
    pub nodes: u64,
    pub pods_pending: u64,
    pub pods_running: u64,
    /// $/h of the instances alive.
    pub cost_rate: f64,
    /// $/h: the cluster-wide lower bound for the pods present.
    pub lower_bound_rate: f64,
    /// Nodes in a disruption command under way.
    pub nodes_disrupting: u64,
    /// Nodes terminated by disruption so far.
    pub nodes_disrupted: u64,
}
