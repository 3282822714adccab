//! This cluster's instances from DescribeInstances (filtered by the cluster tag, paginated), as
//! [`Instance`] records: the NodeClaim and NodePool from the tags Karpenter puts at launch, the
//! offering from type, zone and lifecycle, the price from the catalogue.

use crate::calls::Calls;
use crate::error::{from_sdk, AwsError};
use aws_sdk_ec2::types::{Filter, InstanceStateName};
use dovetail_dataflow::backend::{Instance, InstanceState, OfferingKey};
use dovetail_dataflow::model::Price;
use std::collections::BTreeSet;

const ACTION: &str = "DescribeInstances";

/// EC2's state as the backend's (an instance EC2 lists as `running` has not registered as far
/// as EC2 knows; registration is the cluster's to report).
pub fn state(name: &InstanceStateName) -> InstanceState {
    match name {
        InstanceStateName::Pending => InstanceState::Pending,
        InstanceStateName::Running => InstanceState::Running,
        InstanceStateName::ShuttingDown | InstanceStateName::Stopping => {
            InstanceState::ShuttingDown
        }
        _ => InstanceState::Terminated,
    }
}

/// One listing of this cluster's instances.
#[derive(Debug, Clone, Default)]
pub struct Listed {
    pub instances: Vec<Instance>,
    /// The instance profiles (by name) the instances not yet terminated run with: what
    /// instance-profile garbage collection must keep.
    pub profiles: BTreeSet<String>,
}

/// Every instance tagged `kubernetes.io/cluster/NAME`, terminated ones included while EC2 still
/// lists them (so a termination is seen, not just an absence).
pub async fn describe_cluster_instances(
    ec2: &aws_sdk_ec2::Client,
    calls: &Calls,
    cluster_tag: &str,
    region: &str,
    now_ms: i64,
    price: &(dyn Fn(&OfferingKey) -> Option<Price> + Sync),
) -> Result<Listed, AwsError> {
    let pages = calls
        .pages(
            ACTION,
            usize::MAX,
            |token| async move {
                ec2.describe_instances()
                    .filters(
                        Filter::builder()
                            .name("tag-key")
                            .values(cluster_tag)
                            .build(),
                    )
                    .set_next_token(token)
                    .max_results(1000)
                    .send()
                    .await
                    .map_err(|e| from_sdk(ACTION, e))
            },
            |p| p.next_token(),
        )
        .await?;
    let mut out = Vec::new();
    let mut profiles = BTreeSet::new();
    for page in &pages {
        for reservation in page.reservations() {
            for i in reservation.instances() {
                let id = i
                    .instance_id()
                    .ok_or_else(|| {
                        AwsError::response(ACTION, "an instance", "InstanceId", "missing")
                    })?
                    .to_string();
                let object = format!("instance {id}");
                let tag = |k: &str| {
                    i.tags()
                        .iter()
                        .find(|t| t.key() == Some(k))
                        .and_then(|t| t.value())
                        .map(str::to_string)
                };
                let instance_type = i
                    .instance_type()
                    .map(|t| t.as_str().to_string())
                    .ok_or_else(|| {
                        AwsError::response(ACTION, object.clone(), "InstanceType", "missing")
                    })?;
                let zone = i
                    .placement()
                    .and_then(|p| p.availability_zone())
                    .map(str::to_string)
                    .ok_or_else(|| {
                        AwsError::response(
                            ACTION,
                            object.clone(),
                            "Placement.AvailabilityZone",
                            "missing",
                        )
                    })?;
                let lifecycle = i.instance_lifecycle().map(|l| l.as_str());
                let capacity_type = match lifecycle {
                    Some("spot") => "spot",
                    _ if i.capacity_reservation_id().is_some() => "reserved",
                    _ => "on-demand",
                };
                let state = i.state().and_then(|s| s.name()).map(state).ok_or_else(|| {
                    AwsError::response(ACTION, object.clone(), "State.Name", "missing")
                })?;
                if state != InstanceState::Terminated {
                    let profile = i.iam_instance_profile().and_then(|p| p.arn());
                    if let Some(name) = profile.and_then(|arn| arn.rsplit('/').next()) {
                        profiles.insert(name.to_string());
                    }
                }
                let launched_ms = i
                    .launch_time()
                    .and_then(|t| t.to_millis().ok())
                    .unwrap_or(now_ms);
                let key = OfferingKey::new(instance_type.clone(), zone.clone(), capacity_type);
                out.push(Instance {
                    id,
                    launch: tag("karpenter.sh/nodeclaim").unwrap_or_default(),
                    nodepool: tag("karpenter.sh/nodepool").unwrap_or_default(),
                    price: price(&key).unwrap_or(Price::from_dollars(0.0)),
                    instance_type,
                    zone,
                    zone_id: i
                        .placement()
                        .and_then(|p| p.availability_zone_id())
                        .unwrap_or_default()
                        .to_string(),
                    region: region.to_string(),
                    capacity_type: capacity_type.to_string(),
                    launched_ms,
                    running_ms: launched_ms,
                    state,
                    interruption_warning_ms: None,
                    stopped_ms: None,
                    fleet_errors: Vec::new(),
                    capacity_reservation_id: i.capacity_reservation_id().map(str::to_string),
                    capacity_reservation_type: i.capacity_reservation_id().map(|_| {
                        if lifecycle == Some("capacity-block") {
                            "capacity-block".to_string()
                        } else {
                            "default".to_string()
                        }
                    }),
                });
            }
        }
    }
    Ok(Listed {
        instances: out,
        profiles,
    })
}
