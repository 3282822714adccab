//! The Alibaba GPU-disaggregated DLRM trace (`cluster-trace-gpu-v2025`, NSDI'25), as the derived
//! event CSV `dlrm_pod_events.csv`:
//! `time_s,event,pod,role,app,cpu_milli,memory_mib,num_gpu,max_per_node`, sorted by time, with
//! `present_at_start` rows (time -1) for the pods running when the trace starts.

use super::convert::{
    is_label_value, object_name, run, Action, ConvertError, ConvertOptions, ConvertStats, Fields,
    PodTemplate, Row,
};
use super::convert_reason::RowReason;
use super::writer::TraceHeader;
use serde_json::json;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};

/// The `source` of a converted DLRM trace.
pub const DLRM_SOURCE: &str = "Alibaba GPU-disaggregated DLRM trace (alibaba/clusterdata cluster-trace-gpu-v2025/disaggregated_DLRM_trace.csv, as dlrm_pod_events.csv)";

const COLUMNS: &[&str] = &[
    "time_s",
    "event",
    "pod",
    "role",
    "app",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "max_per_node",
];

/// Converts `dlrm_pod_events.csv` into a trace.
///
/// Each pod asks for `cpu_milli`, `memory_mib` and (when `num_gpu` ≥ 1) `nvidia.com/gpu`; GPU
/// pods tolerate the `nvidia.com/gpu` taint. It is labelled `app` and `role` (`CN` CPU node
/// pod, `HN` GPU node pod) as in the CSV, and owned by ReplicaSet `<app>-<role>`. A positive
/// `max_per_node` (upstream: the most instances of the app on one node) becomes a
/// `kubernetes.io/hostname` topology spread with that maxSkew over the pods with the same `app`
/// and `role`: Karpenter has no per-node maximum other than spread and anti-affinity (which can
/// only say "one per node").
/// `present_at_start` pods are created at t=0; pod names are the CSV's with `_` as `-`.
pub fn convert_dlrm<R: BufRead, W: Write>(
    csv: R,
    opts: &ConvertOptions,
    out: W,
) -> Result<ConvertStats, ConvertError> {
    let mut header = TraceHeader::new(DLRM_SOURCE);
    header.extra.insert(
        "conversion".into(),
        json!({"converter": "dlrm", "input": "dlrm_pod_events.csv"}),
    );
    header.extra.insert(
        "terms".into(),
        json!("alibaba/clusterdata: for research or study purposes only; cite the NSDI'25 paper named in cluster-trace-gpu-v2025/README.md"),
    );
    run(csv, out, opts, header, COLUMNS, parse_row)
}

fn parse_row(f: &Fields) -> Result<Row, RowReason> {
    let time_s = f.time("time_s")?;
    let pod = f.get("pod").trim().to_string();
    if object_name(&pod).is_none() {
        return Err(RowReason::PodName { pod });
    }
    let event = f.get("event").trim();
    match event {
        "delete" => {
            return Ok(Row {
                time_s,
                at_start: false,
                pod,
                group: String::new(),
                action: Action::Delete,
            })
        }
        "present_at_start" if time_s > 0.0 => return Err(RowReason::PresentLater { time: time_s }),
        "create" if time_s < 0.0 => return Err(RowReason::CreateAtNegativeTime { time: time_s }),
        "present_at_start" | "create" => {}
        other => {
            return Err(RowReason::UnknownEvent {
                found: other.to_string(),
                expected: "present_at_start, create or delete",
            })
        }
    }
    let app = f.get("app").trim();
    let role = f.get("role").trim();
    for (col, v) in [("app", app), ("role", role)] {
        if !is_label_value(v) {
            return Err(RowReason::LabelValue {
                column: col,
                value: v.to_string(),
            });
        }
    }
    let cpu_milli: u64 = f.parse("cpu_milli", "a whole number of millicores")?;
    let memory_mib: u64 = f.parse("memory_mib", "a whole number of MiB")?;
    let gpus: u64 = f.parse("num_gpu", "a whole number of GPUs")?;
    let max_per_node: i64 = f.parse("max_per_node", "a whole number (-1 for none)")?;
    let mut labels = BTreeMap::new();
    labels.insert("app".to_string(), app.to_string());
    labels.insert("role".to_string(), role.to_string());
    let max_per_node = (max_per_node > 0).then_some(max_per_node);
    let owner = object_name(&format!("{app}-{role}")).ok_or_else(|| RowReason::OwnerName {
        app: app.to_string(),
        role: role.to_string(),
    })?;
    Ok(Row {
        time_s,
        at_start: event == "present_at_start",
        pod,
        group: app.to_string(),
        action: Action::Create(Box::new(PodTemplate {
            labels,
            annotations: BTreeMap::new(),
            owner: Some(("ReplicaSet".to_string(), owner)),
            cpu_milli,
            memory_mib,
            gpus,
            max_per_node,
        })),
    })
}
