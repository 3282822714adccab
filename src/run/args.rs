//! `dovetail run`'s flags. Region, cluster name and queue come by flag or by environment, with
//! Karpenter's names (`AWS_REGION`, `CLUSTER_NAME`, `INTERRUPTION_QUEUE`); the endpoint comes
//! from the SDK's standard configuration (`AWS_ENDPOINT_URL`, profiles).

use clap::{Args, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CloudKind {
    /// EC2, through the SDK's standard configuration.
    Aws,
    /// The simulated cloud (the replay's), on the wall clock; with `--cluster kube` it also
    /// plays kubelet, registering each instance's Node.
    Sim,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ClusterKind {
    /// The simulated cluster, started from the manifests given with `-f`.
    Sim,
    /// A Kubernetes API server (`--kubeconfig`, `KUBECONFIG`, or in-cluster).
    Kube,
}

fn duration_ms(text: &str) -> Result<i64, String> {
    match dovetail_dataflow::model::duration::parse_duration(text).map_err(|e| e.to_string())? {
        Some(ms) if ms >= 0 => Ok(ms),
        _ => Err(format!("{text:?}: expected a duration such as 30s or 2m")),
    }
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[arg(long, value_enum)]
    pub cloud: CloudKind,
    #[arg(long, value_enum)]
    pub cluster: ClusterKind,
    /// The simulated cluster's starting state: NodePools, EC2NodeClasses, pods, ... (files or
    /// folders, YAML or JSON).
    /// (`--cluster sim` only.)
    #[arg(short = 'f', long = "filename", num_args = 1..)]
    pub paths: Vec<PathBuf>,
    /// The kubeconfig of the cluster (`--cluster kube`); default: `KUBECONFIG`,
    /// `~/.kube/config`, then the in-cluster service account.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The simulated cloud's settings (`--cloud sim`), JSON as `dovetail replay --sim-config`.
    #[arg(long = "sim-config")]
    pub sim_config: Option<PathBuf>,
    /// Watch, decide and log, but write nothing to the cluster or the cloud (how a Karpenter
    /// user tries dovetail beside Karpenter). `--cluster kube` only.
    #[arg(long)]
    pub dry_run: bool,
    /// Act without leader election (one replica only). `--cluster kube` only.
    #[arg(long)]
    pub no_leader_elect: bool,
    /// The namespace of dovetail's leader Lease (`dovetail-leader-election`).
    #[arg(long, env = "SYSTEM_NAMESPACE", default_value = "kube-system")]
    pub leader_namespace: String,
    /// How long a leader Lease unrenewed is held before a standby takes over.
    #[arg(long = "leader-lease-duration", default_value = "15s", value_parser = duration_ms)]
    pub leader_lease_duration_ms: i64,
    /// Where Karpenter's leader Lease (`karpenter-leader-election`) is looked for: dovetail
    /// does not act while Karpenter's controller holds it. `none`: not looked for.
    #[arg(long, env = "KARPENTER_NAMESPACE", default_value = "kube-system")]
    pub karpenter_namespace: String,
    /// Prometheus metrics on `0.0.0.0:PORT/metrics` (`--cluster kube`; 0: off).
    #[arg(long, env = "METRICS_PORT", default_value_t = 8080)]
    pub metrics_port: u16,
    /// Keep the verdicts `dovetail explain` reads and serve them on the metrics port:
    /// `/explain/pod/NAMESPACE/NAME`, `/explain/node/NAME`, `/explain/launch/NAME` (text;
    /// JSON with `?o=json` or `Accept: application/json`). `--cluster kube`, with a metrics
    /// port.
    #[arg(long, env = "EXPLAIN", default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub explain: bool,
    /// `/healthz` and `/readyz` on `0.0.0.0:PORT` (`--cluster kube`; 0: off).
    #[arg(long, env = "HEALTH_PROBE_PORT", default_value_t = 8081)]
    pub health_probe_port: u16,
    /// A NodeClaim launched whose Node has not registered after this long is given up: its
    /// instance terminated, the NodeClaim deleted (Karpenter's registration TTL, 15 min).
    /// `--cluster kube`.
    #[arg(long = "registration-ttl", default_value = "15m", value_parser = duration_ms)]
    pub registration_ttl_ms: i64,
    /// A CreateFleet unanswered after this long is sent again under the same client token
    /// (idempotent: nothing launches twice). `--cluster kube`.
    #[arg(long = "launch-timeout", default_value = "5m", value_parser = duration_ms)]
    pub launch_timeout_ms: i64,
    /// How long a consolidation command waits before it is validated and acted on
    /// (Karpenter: 15 s).
    #[arg(long = "consolidation-validation", value_parser = duration_ms)]
    pub consolidation_validation_ms: Option<i64>,
    /// Stop after this long (Go duration: `90s`, `10m`); runs until interrupted otherwise.
    #[arg(long = "for", value_parser = duration_ms)]
    pub for_ms: Option<i64>,
    /// Write the summary (JSON) here instead of standard output.
    #[arg(long)]
    pub summary: Option<PathBuf>,
    /// The AWS region (default: the SDK's configuration, `AWS_REGION`).
    #[arg(long)]
    pub region: Option<String>,
    /// The cluster's name: instances are tagged `kubernetes.io/cluster/NAME`.
    #[arg(long, env = "CLUSTER_NAME")]
    pub cluster_name: Option<String>,
    /// The API server URL nodes join (user data).
    #[arg(long, env = "CLUSTER_ENDPOINT")]
    pub cluster_endpoint: Option<String>,
    /// The cluster's Kubernetes version (`1.33`): what `alias` AMI terms resolve for (the
    /// Kubernetes controller will read it from the API server).
    #[arg(long, env = "KUBERNETES_VERSION")]
    pub kubernetes_version: Option<String>,
    /// The SQS interruption queue, by name or URL.
    #[arg(long, env = "INTERRUPTION_QUEUE")]
    pub interruption_queue: Option<String>,
    /// How often this cluster's instances are listed (DescribeInstances).
    #[arg(long = "describe-interval", default_value = "10s", value_parser = duration_ms)]
    pub describe_interval_ms: i64,
    /// How often EC2NodeClass selector terms are resolved again.
    #[arg(long = "nodeclass-refresh", default_value = "1m", value_parser = duration_ms)]
    pub nodeclass_refresh_ms: i64,
    /// How often the catalogue (instance types, zones, spot prices) is discovered again.
    #[arg(long = "catalog-refresh", default_value = "12h", value_parser = duration_ms)]
    pub catalog_refresh_ms: i64,
    /// How often garbage collection runs.
    #[arg(long = "gc-interval", default_value = "10s", value_parser = duration_ms)]
    pub gc_interval_ms: i64,
    /// How old an instance with no NodeClaim must be before it is terminated.
    #[arg(long = "gc-grace", default_value = "30s", value_parser = duration_ms)]
    pub gc_grace_ms: i64,
    /// How long an offering that failed with a capacity error stays unavailable.
    #[arg(long = "capacity-error-ttl", default_value = "3m", value_parser = duration_ms)]
    pub capacity_error_ttl_ms: i64,
    /// The loop wakes at least this often.
    #[arg(long = "tick", default_value = "1s", value_parser = duration_ms)]
    pub tick_ms: i64,
}
