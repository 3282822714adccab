//! An EC2 instance as a `Cloud` reports it, and its lifecycle as the cluster sees it.

use super::offering::OfferingKey;
use crate::model::Price;
use serde::{Deserialize, Serialize};

/// Where an instance is in its life. EC2's `pending` / `running` / `shutting-down` /
/// `terminated`, with `running` split by what the node has done since: registered with the API
/// server, then initialised (Ready, startup taints gone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum InstanceState {
    Pending,
    Running,
    Registered,
    Initialized,
    ShuttingDown,
    Terminated,
}

impl InstanceState {
    /// True until the instance is asked to terminate or is reclaimed.
    pub fn is_alive(self) -> bool {
        matches!(
            self,
            InstanceState::Pending
                | InstanceState::Running
                | InstanceState::Registered
                | InstanceState::Initialized
        )
    }
}

/// One instance CreateFleet launched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    /// `i-` and 17 hex digits.
    pub id: String,
    /// The launch (NodeClaim) name it was created for: CreateFleet's client token.
    pub launch: String,
    pub nodepool: String,
    pub instance_type: String,
    pub zone: String,
    /// The zone's id (`use1-az2`), empty when the catalogue has none.
    pub zone_id: String,
    pub region: String,
    /// `on-demand`, `spot` or `reserved`.
    pub capacity_type: String,
    /// What it costs per hour (the offering's price).
    pub price: Price,
    /// When CreateFleet returned it.
    pub launched_ms: i64,
    /// When it is (or was to be) `running`: billing starts here.
    pub running_ms: i64,
    pub state: InstanceState,
    /// When an interruption warning (spot or capacity reservation) was issued, if one was.
    pub interruption_warning_ms: Option<i64>,
    /// When it stopped running: TerminateInstances, or reclaimed. Billing ends here.
    pub stopped_ms: Option<i64>,
    /// Offerings CreateFleet tried first and found without capacity (the
    /// InsufficientInstanceCapacity entries in an instant fleet's `Errors`), cheapest first.
    pub fleet_errors: Vec<OfferingKey>,
    /// The capacity reservation it runs in (`cr-…`), for capacity type `reserved`.
    #[serde(default)]
    pub capacity_reservation_id: Option<String>,
    /// That reservation's type: `default` or `capacity-block`.
    #[serde(default)]
    pub capacity_reservation_type: Option<String>,
}

impl Instance {
    /// The offering (capacity pool) it occupies.
    pub fn offering(&self) -> OfferingKey {
        OfferingKey::new(&self.instance_type, &self.zone, &self.capacity_type)
    }

    /// The Node's `spec.providerID`: `aws:///<zone>/<id>`.
    pub fn provider_id(&self) -> String {
        format!("aws:///{}/{}", self.zone, self.id)
    }

    /// The Node name EKS gives it with resource-based hostnames: `<id>.ec2.internal` in
    /// us-east-1, `<id>.<region>.compute.internal` elsewhere.
    pub fn node_name(&self) -> String {
        if self.region == "us-east-1" {
            format!("{}.ec2.internal", self.id)
        } else {
            format!("{}.{}.compute.internal", self.id, self.region)
        }
    }
}
