//! `Cloud`: what actuation asks of EC2 — CreateFleet, TerminateInstances, the instances tagged
//! as this cluster's, and the events about them.

use super::events::CloudEvent;
use super::instance::Instance;
use super::offering::OfferingKey;
use crate::model::{Price, Taint};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One offering a fleet request may fill (a CreateFleet launch template override: type, zone and
/// the subnet chosen for it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetOverride {
    pub key: OfferingKey,
    /// The zone's id (`use1-az2`), empty when unknown.
    pub zone_id: String,
    pub price: Price,
}

/// CreateFleet `Type=instant` for one instance of one NodeClaim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetRequest {
    /// The NodeClaim the instance is for (tagged `karpenter.sh/nodeclaim`).
    pub nodeclaim: String,
    pub nodepool: String,
    /// The NodePool's EC2NodeClass (`nodeClassRef.name`): subnets, AMIs, launch template.
    pub node_class: Option<String>,
    /// The NodeClaim's identity (its name and creation time, standing in for its uid: a name can
    /// recur). Idempotency: a request repeated with the same token and overrides launches
    /// nothing new.
    pub client_token: String,
    /// One capacity type per request (reserved, spot or on-demand).
    pub capacity_type: String,
    /// The offerings to try, in the order EC2 should prefer them (cheapest first).
    pub overrides: Vec<FleetOverride>,
    /// The labels the kubelet registers the Node with (`--node-labels`): the NodeClaim's, as
    /// Karpenter injects them into user data.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The taints the kubelet registers the Node with: the NodePool's taints and startup taints
    /// (`karpenter.sh/unregistered` is added by the cloud's bootstrap).
    #[serde(default)]
    pub taints: Vec<Taint>,
}

/// Why a CreateFleet launched nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum LaunchError {
    /// Every override was out of capacity (InsufficientInstanceCapacity and its kin), in the
    /// order tried.
    #[error("InsufficientInstanceCapacity in {}", list(.tried))]
    InsufficientCapacity { tried: Vec<OfferingKey> },
    /// No override matched anything the cloud sells.
    #[error("no offering matches the request")]
    NoMatchingOfferings,
    /// Anything else (an API error, throttling past the retries): the launch is retried later.
    #[error("{0}")]
    Failed(String),
}

fn list(keys: &[OfferingKey]) -> String {
    keys.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What came of a call, collected by [`Cloud::poll_replies`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CloudReply {
    /// CreateFleet answered. On success the instance's `fleet_errors` lists the offerings that
    /// were out of capacity before one was filled.
    Launched {
        nodeclaim: String,
        result: Result<Box<Instance>, LaunchError>,
    },
    /// TerminateInstances failed for this instance (it is retried by whoever asked).
    TerminateFailed { instance_id: String, error: String },
}

/// EC2, as actuation sees it. Calls take the caller's clock (`now_ms`, virtual or wall) and
/// return at once; see the module documentation of [`crate::backend`].
pub trait Cloud {
    /// Submits CreateFleet for one NodeClaim; the answer comes from [`Cloud::poll_replies`].
    fn create_fleet(&mut self, now_ms: i64, request: FleetRequest);
    /// Submits TerminateInstances for one instance. Terminating an instance already shutting
    /// down or gone does nothing, as in EC2.
    fn terminate(&mut self, now_ms: i64, instance_id: &str);
    /// The answers to calls submitted so far that have arrived by `now_ms`.
    fn poll_replies(&mut self, now_ms: i64) -> Vec<CloudReply>;
    /// Lifecycle and interruption events due at or before `now_ms`, in time order.
    fn poll_events(&mut self, now_ms: i64) -> Vec<CloudEvent>;
    /// The instance with this id, as last seen.
    fn instance(&self, id: &str) -> Option<&Instance>;
    /// The live instance launched for a NodeClaim (tagged `karpenter.sh/nodeclaim`).
    fn instance_for_nodeclaim(&self, nodeclaim: &str) -> Option<&Instance>;
    /// Every instance tagged as this cluster's, as last seen (for recovery and garbage
    /// collection).
    fn instances(&self) -> Vec<&Instance>;
    /// When the backend next has something to report on its own (a virtual clock's next event);
    /// `None` for a backend on the wall clock, which is polled on the loop's tick.
    fn next_due_ms(&self) -> Option<i64> {
        None
    }
}
