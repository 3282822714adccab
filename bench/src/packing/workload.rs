//! The packing-cost workloads of issue 20: real pod sizes, all pending at once, on NodePools a
//! Karpenter user would write, as manifests (so they go through the same reader as `plan`).
//!
//! - **openb CPU**: the CPU-only pods of the Alibaba openb trace
//!   (`alibaba_openb_pod_list_default.csv`, `num_gpu` 0: 1,088 pods) on one getting-started
//!   NodePool: on-demand, amd64 and arm64, categories c/m/r, generation > 2.
//! - **openb all**: every openb pod that asks for whole GPUs or none (fractional GPU pods need
//!   DRA, which dovetail does not model) on several NodePools: spot first (weight 100), on-demand
//!   fallback (weight 10), an arm64 on-demand pool (weight 50; the pods say nothing of their
//!   architecture, so it competes on price after spot), and a GPU pool behind the
//!   `nvidia.com/gpu` taint that the GPU pods tolerate.
//!
//! Each pod asks for its trace's `cpu_milli` and `memory_mib`; GPU pods ask for `num_gpu`
//! `nvidia.com/gpu`.

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::path::Path;

pub const NAMESPACE: &str = "openb";

/// One pod of the openb trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenbPod {
    pub cpu_milli: u64,
    pub memory_mib: u64,
    pub gpus: u64,
}

/// Reads the openb pod list (`name,cpu_milli,memory_mib,num_gpu,gpu_milli,...`), keeping the
/// pods that ask for no GPU or whole GPUs.
pub fn read_openb(path: &Path) -> Result<Vec<OpenbPod>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the openb pod list {}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h.trim() == name)
            .with_context(|| format!("{}: no column {name:?}", path.display()))
    };
    let (cpu, mem, gpu, gpu_milli) = (
        col("cpu_milli")?,
        col("memory_mib")?,
        col("num_gpu")?,
        col("gpu_milli")?,
    );
    let mut pods = Vec::new();
    for (i, line) in lines.enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        let num = |c: usize, what: &str| -> Result<u64> {
            let v = f.get(c).map(|s| s.trim()).unwrap_or_default();
            v.parse().with_context(|| {
                format!(
                    "{} line {}: {what} {v:?} is not a whole number",
                    path.display(),
                    i + 2
                )
            })
        };
        let p = OpenbPod {
            cpu_milli: num(cpu, "cpu_milli")?,
            memory_mib: num(mem, "memory_mib")?,
            gpus: num(gpu, "num_gpu")?,
        };
        let milli = num(gpu_milli, "gpu_milli")?;
        let whole =
            p.gpus == 0 && milli == 0 || p.gpus > 0 && (milli == 1000 || milli == 1000 * p.gpus);
        if whole {
            pods.push(p);
        }
    }
    if pods.is_empty() {
        bail!("{}: no pod asks for whole GPUs or none", path.display());
    }
    Ok(pods)
}

/// A Pod manifest for `pod`, named by its index.
pub fn pod_manifest(i: usize, pod: &OpenbPod) -> Value {
    let mut requests =
        json!({"cpu": format!("{}m", pod.cpu_milli), "memory": format!("{}Mi", pod.memory_mib)});
    let mut spec = json!({});
    if pod.gpus > 0 {
        requests["nvidia.com/gpu"] = json!(pod.gpus.to_string());
        spec["tolerations"] =
            json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]);
    }
    spec["containers"] = json!([{"name": "main", "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": requests.clone(), "limits": if pod.gpus > 0 {
            json!({"nvidia.com/gpu": pod.gpus.to_string()})
        } else { json!({}) }}}]);
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("openb-{i:05}"), "namespace": NAMESPACE},
        "spec": spec})
}

fn requirement(key: &str, operator: &str, values: &[&str]) -> Value {
    json!({"key": key, "operator": operator, "values": values})
}

/// A NodePool manifest on the `default` EC2NodeClass.
pub fn nodepool(
    name: &str,
    weight: Option<u32>,
    requirements: Vec<Value>,
    gpu_taint: bool,
) -> Value {
    let mut spec = json!({
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": requirements,
    });
    if gpu_taint {
        spec["taints"] =
            json!([{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]);
    }
    let mut pool = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"template": {"spec": spec},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m"}}});
    if let Some(w) = weight {
        pool["spec"]["weight"] = json!(w);
    }
    pool
}

/// The EC2NodeClass every workload's NodePools use, with subnets in three us-east-1 zones.
pub fn nodeclass() -> Value {
    json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "KarpenterNodeRole",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}]},
        "status": {"subnets": [
            {"id": "subnet-a", "zone": "us-east-1a"},
            {"id": "subnet-b", "zone": "us-east-1b"},
            {"id": "subnet-c", "zone": "us-east-1c"}]}})
}

const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
const CATEGORY: &str = "karpenter.k8s.aws/instance-category";
const GENERATION: &str = "karpenter.k8s.aws/instance-generation";
const ARCH: &str = "kubernetes.io/arch";

/// The getting-started NodePool of the openb CPU row.
pub fn getting_started_pools() -> Vec<Value> {
    vec![nodepool(
        "default",
        None,
        vec![
            requirement(CAPACITY_TYPE, "In", &["on-demand"]),
            requirement(ARCH, "In", &["amd64", "arm64"]),
            requirement(CATEGORY, "In", &["c", "m", "r"]),
            requirement(GENERATION, "Gt", &["2"]),
        ],
        false,
    )]
}

/// The several NodePools of the openb-all row.
pub fn several_pools() -> Vec<Value> {
    let cmr = || requirement(CATEGORY, "In", &["c", "m", "r"]);
    let generation = || requirement(GENERATION, "Gt", &["2"]);
    vec![
        nodepool(
            "spot",
            Some(100),
            vec![
                requirement(CAPACITY_TYPE, "In", &["spot"]),
                requirement(ARCH, "In", &["amd64"]),
                cmr(),
                generation(),
            ],
            false,
        ),
        nodepool(
            "arm64",
            Some(50),
            vec![
                requirement(CAPACITY_TYPE, "In", &["on-demand"]),
                requirement(ARCH, "In", &["arm64"]),
                cmr(),
                generation(),
            ],
            false,
        ),
        nodepool(
            "on-demand",
            Some(10),
            vec![
                requirement(CAPACITY_TYPE, "In", &["on-demand"]),
                requirement(ARCH, "In", &["amd64"]),
                cmr(),
                generation(),
            ],
            false,
        ),
        nodepool(
            "gpu",
            None,
            vec![
                requirement(CAPACITY_TYPE, "In", &["on-demand"]),
                requirement(
                    "karpenter.k8s.aws/instance-gpu-manufacturer",
                    "In",
                    &["nvidia"],
                ),
            ],
            true,
        ),
    ]
}
