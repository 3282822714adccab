//! Helpers for replays of small hand-written traces.
#![allow(dead_code)]

use dovetail::replay::{replay, ReplayOptions, ReplayOutcome};
use dovetail_dataflow::catalog::{embedded, ResolveOptions};
use dovetail_ingest::trace::read_trace;
use dovetail_sim::SimConfig;

pub const HEADER: &str = r#"{"dovetail_trace":1,"source":"test","time_unit":"ms"}"#;
pub const MINUTE: i64 = 60_000;

/// A NodePool `default` and its EC2NodeClass in us-east-1a only: `requirements` are YAML flow
/// items, `extra` is indented under the NodePool's `spec:` (e.g. a `disruption:` block) and
/// `template` under `spec.template.spec:` (e.g. `expireAfter: 10m`).
pub fn nodepool(requirements: &[&str], template: &str, extra: &str) -> dovetail_ingest::Manifests {
    let reqs: String = requirements
        .iter()
        .map(|r| format!("        - {r}\n"))
        .collect();
    let yaml = format!(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
{reqs}      {template}
  {extra}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec: {{}}
status:
  subnets: [{{id: subnet-a, zone: us-east-1a}}]
"#
    );
    dovetail_ingest::load_str("nodepools.yaml", &yaml).expect("nodepools parse")
}

/// A NodePool of m5 instances of one capacity type in us-east-1a only, and its EC2NodeClass.
pub fn m5_pool(capacity_type: &str) -> dovetail_ingest::Manifests {
    nodepool(
        &[
            &format!(
                "{{key: karpenter.sh/capacity-type, operator: In, values: [{capacity_type}]}}"
            ),
            "{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}",
        ],
        "",
        "",
    )
}

pub fn pod_line(t: i64, name: &str, cpu: &str) -> String {
    format!(
        r#"{{"t":{t},"event":"pod_created","pod":{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"default","labels":{{"app":"a"}}}},"spec":{{"containers":[{{"name":"c","image":"i","resources":{{"requests":{{"cpu":"{cpu}","memory":"1Gi"}}}}}}]}}}}}}"#
    )
}

pub fn delete_line(t: i64, name: &str) -> String {
    format!(r#"{{"t":{t},"event":"pod_deleted","namespace":"default","name":"{name}"}}"#)
}

pub fn quiet() -> SimConfig {
    SimConfig {
        spot_interruptions: false,
        ..SimConfig::default()
    }
}

/// Replays `lines` against `pools`, simulating `settle_ms` past the last line.
pub fn run_with(
    lines: &[String],
    pools: &dovetail_ingest::Manifests,
    sim: SimConfig,
    settle_ms: i64,
) -> ReplayOutcome {
    let text = std::iter::once(HEADER.to_string())
        .chain(lines.iter().cloned())
        .collect::<Vec<_>>()
        .join("\n");
    let trace = read_trace("test.jsonl", text.as_bytes(), false).expect("trace parses");
    let opts = ReplayOptions {
        sim,
        settle_ms,
        ..ReplayOptions::default()
    };
    replay(&trace.events, pools, &opts, |_| {}).expect("replay runs")
}

/// The cheapest on-demand m5 type in us-east-1a with room for `pods` pods of 1 CPU and 1 GiB.
pub fn cheapest_m5_for(pods: i64) -> (String, i64) {
    embedded("us-east-1")
        .expect("catalogue")
        .instance_types(&ResolveOptions::default())
        .into_iter()
        .filter(|t| t.name.starts_with("m5.") && !t.name.contains("metal"))
        .filter(|t| {
            let a = t.allocatable();
            a.cpu >= pods * 1000
                && a.memory >= pods * 1024 * 1024 * 1024 * 1000
                && a.pods >= pods * 1000
        })
        .filter_map(|t| {
            let p = t
                .offerings
                .iter()
                .find(|o| o.zone == "us-east-1a" && o.capacity_type == "on-demand")?
                .price
                .0;
            Some((t.name, p))
        })
        .min_by_key(|(_, p)| *p)
        .expect("some m5 type fits")
}

/// Pods bound to a node at the end of the replay.
pub fn running_at_end(out: &ReplayOutcome) -> u64 {
    out.timeline.last().map(|r| r.pods_running).unwrap_or(0)
}
