//! The Alibaba openb GPU-sharing trace (`cluster-trace-gpu-v2023`, ATC'23 "Beware of
//! Fragmentation"), as the derived event CSV `openb_pod_events.csv`:
//! `time_s,event,pod,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos`, sorted by time.

use super::convert::{
    is_label_value, object_name, run, Action, ConvertError, ConvertOptions, ConvertStats, Fields,
    PodTemplate, Row,
};
use super::convert_reason::RowReason;
use super::writer::TraceHeader;
use serde_json::json;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};

/// The `source` of a converted openb trace.
pub const OPENB_SOURCE: &str = "Alibaba openb GPU trace (alibaba/clusterdata cluster-trace-gpu-v2023/csv/openb_pod_list_default.csv, as openb_pod_events.csv)";

const COLUMNS: &[&str] = &[
    "time_s",
    "event",
    "pod",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
];

/// Converts `openb_pod_events.csv` into a trace.
///
/// Only whole-GPU pods can be written: `nvidia.com/gpu` is counted in whole devices, and sharing
/// a GPU needs DRA, which dovetail does not model. A pod converts when `num_gpu` is 0 (and
/// `gpu_milli` 0), or when `gpu_milli` is 1000 (the upstream encoding: per GPU) or
/// 1000 × `num_gpu`; it then asks for `num_gpu` `nvidia.com/gpu` and tolerates the
/// `nvidia.com/gpu` taint. A pod with 0 < `gpu_milli` < 1000 (a fraction of one GPU) is left
/// out with its deletion and counted in [`ConvertStats::skipped_fractional_gpu`]. `qos` becomes
/// label `qos`; a `gpu_spec` (GPU models such as `V100M16|V100M32`) becomes annotation
/// `gpu-spec`, not a constraint, since the models have no AWS instance-type equivalent.
pub fn convert_openb<R: BufRead, W: Write>(
    csv: R,
    opts: &ConvertOptions,
    out: W,
) -> Result<ConvertStats, ConvertError> {
    let mut header = TraceHeader::new(OPENB_SOURCE);
    header.extra.insert(
        "conversion".into(),
        json!({"converter": "openb", "input": "openb_pod_events.csv"}),
    );
    header.extra.insert(
        "terms".into(),
        json!("alibaba/clusterdata: for research or study purposes only; cite the ATC'23 paper named in cluster-trace-gpu-v2023/README.md"),
    );
    run(csv, out, opts, header, COLUMNS, parse_row)
}

fn parse_row(f: &Fields) -> Result<Row, RowReason> {
    let time_s = f.time("time_s")?;
    if time_s < 0.0 {
        return Err(RowReason::NegativeTime { time: time_s });
    }
    let pod = f.get("pod").trim().to_string();
    if object_name(&pod).is_none() {
        return Err(RowReason::PodName { pod });
    }
    match f.get("event").trim() {
        "delete" => {
            return Ok(Row {
                time_s,
                at_start: false,
                pod,
                group: String::new(),
                action: Action::Delete,
            })
        }
        "create" => {}
        other => {
            return Err(RowReason::UnknownEvent {
                found: other.to_string(),
                expected: "create or delete",
            })
        }
    }
    let cpu_milli: u64 = f.parse("cpu_milli", "a whole number of millicores")?;
    let memory_mib: u64 = f.parse("memory_mib", "a whole number of MiB")?;
    let num_gpu: u64 = f.parse("num_gpu", "a whole number of GPUs")?;
    let gpu_milli: u64 = f.parse("gpu_milli", "a whole number of milli-GPUs")?;
    let group = pod.clone();
    let gpus = match (num_gpu, gpu_milli) {
        (0, 0) => 0,
        (0, m) => return Err(RowReason::GpuMilliWithoutGpu { gpu_milli: m }),
        (n, 1000) => n,
        (n, m) if m == 1000 * n => n,
        (1, m) if m > 0 && m < 1000 => {
            return Ok(Row {
                time_s,
                at_start: false,
                pod,
                group,
                action: Action::SkipFractionalGpu,
            })
        }
        (n, m) => {
            return Err(RowReason::GpuShares {
                num_gpu: n,
                gpu_milli: m,
            })
        }
    };
    let mut labels = BTreeMap::new();
    let qos = f.get("qos").trim();
    if !qos.is_empty() {
        if !is_label_value(qos) {
            return Err(RowReason::LabelValue {
                column: "qos",
                value: qos.to_string(),
            });
        }
        labels.insert("qos".to_string(), qos.to_string());
    }
    let mut annotations = BTreeMap::new();
    let spec = f.get("gpu_spec").trim();
    if !spec.is_empty() && spec != "nan" {
        annotations.insert("gpu-spec".to_string(), spec.to_string());
    }
    Ok(Row {
        time_s,
        at_start: false,
        pod,
        group,
        action: Action::Create(Box::new(PodTemplate {
            labels,
            annotations,
            owner: None,
            cpu_milli,
            memory_mib,
            gpus,
            max_per_node: None,
        })),
    })
}
