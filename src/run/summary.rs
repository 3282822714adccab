//! What a run did, as JSON: EC2 calls by action and result code, instances launched /
//! terminated / still running, NodeClaims, pods bound and pending, garbage collected, the
//! interruption queue's counts.

use super::setup::Live;
use dovetail_aws::calls::CallCount;
use dovetail_aws::interruption_queue::QueueStats;
use dovetail_dataflow::backend::{Cloud, Cluster};
use serde::Serialize;
use std::time::Duration;

#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub region: String,
    pub cluster_name: String,
    pub seconds: f64,
    pub ec2_calls: Vec<CallCount>,
    pub instances: Instances,
    pub nodeclaims: usize,
    /// Offerings CreateFleet answered were out of capacity (cached unavailable for the TTL).
    pub capacity_errors: u64,
    pub pods: Pods,
    pub garbage_collected: Garbage,
    pub interruption_queue: Option<QueueStats>,
    /// With `--cluster kube`: what the watches and the NodeClaim controllers did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<super::kube::KubeStats>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Instances {
    pub launched: u64,
    pub terminated: u64,
    pub running: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Pods {
    pub bound: u64,
    pub pending: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Garbage {
    pub instances: u64,
    pub nodeclaims: u64,
}

pub(crate) fn summarise(live: &Live, elapsed: Duration) -> RunSummary {
    let w = &live.world;
    let stats = w.control.actuator().stats();
    let instances = Cloud::instances(&w.cloud);
    let pending = w.pods_pending();
    let mut notes = live.notes.clone();
    notes.extend(w.notes.iter().cloned());
    notes.extend(w.control.actuator().notes().iter().cloned());
    RunSummary {
        region: live.clients.region.clone(),
        cluster_name: w.cloud.settings().cluster_name.clone(),
        seconds: elapsed.as_secs_f64(),
        ec2_calls: live.calls.counts(),
        instances: Instances {
            launched: stats.nodes_launched,
            terminated: instances.iter().filter(|i| !i.state.is_alive()).count() as u64,
            running: instances.iter().filter(|i| i.state.is_alive()).count() as u64,
        },
        nodeclaims: Cluster::nodeclaims(&w.cluster).len(),
        capacity_errors: stats.capacity_errors,
        pods: Pods {
            bound: w.cluster.pods().count() as u64 - pending,
            pending,
        },
        garbage_collected: Garbage {
            instances: stats.garbage_instances,
            nodeclaims: stats.garbage_nodeclaims,
        },
        interruption_queue: live.queue_stats(),
        kubernetes: None,
        notes,
    }
}
