//! The controller's Prometheus metrics, rendered by the loop each turn: Karpenter's names where
//! they mean the same (NodeClaims created, disrupted and terminated by reason, cloud provider
//! calls), and the engine's own (epochs, epoch latency, pods pending, watches, leader election).

use super::kube::KubeStats;
use dovetail_actuate::ControlLoop;
use dovetail_aws::calls::CallCount;
use dovetail_kube::leader::Role;
use dovetail_kube::ClusterCounts;
use std::fmt::Write;

/// What one render reads.
pub(crate) struct Snapshot<'a> {
    pub(crate) control: &'a ControlLoop,
    pub(crate) cluster: ClusterCounts,
    pub(crate) kube: &'a KubeStats,
    pub(crate) role: Role,
    pub(crate) calls: Vec<CallCount>,
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The text exposition format (version 0.0.4).
pub(crate) fn render(s: &Snapshot) -> String {
    let mut out = String::new();
    let stats = s.control.actuator().stats();
    family(
        &mut out,
        "karpenter_nodeclaims_launched_total",
        "counter",
        "NodeClaims whose instance the cloud launched.",
    );
    let _ = writeln!(
        out,
        "karpenter_nodeclaims_launched_total {}",
        stats.nodes_launched
    );
    for (name, by_reason, help) in [
        (
            "karpenter_nodeclaims_disrupted_total",
            &stats.disruptions_started_by_reason,
            "NodeClaims whose disruption started, by reason.",
        ),
        (
            "karpenter_nodeclaims_terminated_total",
            &stats.disruptions_terminated_by_reason,
            "NodeClaims disruption terminated, by reason.",
        ),
    ] {
        family(&mut out, name, "counter", help);
        for (reason, n) in by_reason {
            let _ = writeln!(out, "{name}{{reason=\"{}\"}} {n}", escape(reason));
        }
    }
    family(
        &mut out,
        "karpenter_cloudprovider_calls_total",
        "counter",
        "Cloud API calls, by action and result code.",
    );
    for c in &s.calls {
        let _ = writeln!(
            out,
            "karpenter_cloudprovider_calls_total{{action=\"{}\",code=\"{}\"}} {}",
            escape(&c.action),
            escape(&c.code),
            c.calls
        );
    }
    let gauges = [
        (
            "dovetail_pods_pending",
            "Pods the engine sees waiting for capacity.",
            s.cluster.pods_pending as u64,
        ),
        (
            "dovetail_pods_bound",
            "Pods bound to nodes the engine sees.",
            s.cluster.pods_bound as u64,
        ),
        (
            "dovetail_nodeclaims",
            "NodeClaims this controller holds.",
            s.cluster.nodeclaims as u64,
        ),
        (
            "dovetail_nodes",
            "Nodes in the watch cache.",
            s.cluster.nodes as u64,
        ),
        (
            "dovetail_leader",
            "1 while this replica holds the leader Lease.",
            u64::from(s.role == Role::Leader),
        ),
        (
            "dovetail_karpenter_active",
            "1 while Karpenter's controller holds its Lease (dovetail does not act).",
            u64::from(s.role == Role::KarpenterActive),
        ),
    ];
    for (name, help, v) in gauges {
        family(&mut out, name, "gauge", help);
        let _ = writeln!(out, "{name} {v}");
    }
    let counters = [
        (
            "dovetail_engine_epochs_total",
            "Epochs the engine closed.",
            s.control.advances(),
        ),
        (
            "dovetail_capacity_errors_total",
            "Offerings the cloud answered were out of capacity.",
            stats.capacity_errors,
        ),
        (
            "dovetail_nodes_registered_total",
            "Nodes registered for their NodeClaims.",
            s.kube.nodes_registered,
        ),
        (
            "dovetail_nodeclaims_initialized_total",
            "NodeClaims marked Initialized.",
            s.kube.nodeclaims_initialized,
        ),
        (
            "dovetail_watch_relists_total",
            "Complete lists the watches took.",
            s.kube.relists,
        ),
        (
            "dovetail_watch_objects_skipped_total",
            "Objects that failed validation and were skipped.",
            s.kube.objects_skipped,
        ),
        (
            "dovetail_watch_errors_total",
            "Watch failures, each retried.",
            s.kube.watch_errors,
        ),
        (
            "dovetail_writes_withheld_total",
            "Writes not sent (--dry-run).",
            s.kube.writes_withheld,
        ),
        (
            "dovetail_cloud_calls_withheld_total",
            "Cloud calls not made (--dry-run).",
            s.kube.cloud_calls_withheld,
        ),
        (
            "dovetail_events_recorded_total",
            "Kubernetes Events written from decisions (Nominated, FailedScheduling, DisruptionBlocked, Unconsolidatable).",
            s.kube.events_recorded,
        ),
        (
            "dovetail_events_dropped_total",
            "Events not written for the per-turn limit.",
            s.kube.events_dropped,
        ),
        (
            "dovetail_launches_retried_total",
            "CreateFleet calls sent again after the launch timeout (same client token).",
            stats.launches_retried,
        ),
        (
            "dovetail_drains_forced_total",
            "Drains ended by the NodePool's terminationGracePeriod with pods left.",
            stats.drains_forced,
        ),
    ];
    for (name, help, v) in counters {
        family(&mut out, name, "counter", help);
        let _ = writeln!(out, "{name} {v}");
    }
    let h = s.control.latency_micros();
    family(
        &mut out,
        "dovetail_epoch_duration_seconds",
        "summary",
        "Time to close one epoch (apply the facts, run the standing queries).",
    );
    for q in [0.5, 0.9, 0.99] {
        let _ = writeln!(
            out,
            "dovetail_epoch_duration_seconds{{quantile=\"{q}\"}} {}",
            h.value_at_quantile(q) as f64 / 1e6
        );
    }
    let _ = writeln!(out, "dovetail_epoch_duration_seconds_count {}", h.len());
    out
}
