//! The messages the simulated cloud sends to the interruption queue: each interruption event as
//! the EventBridge event EC2 or AWS Health would send (the shapes in `data/events/`), so the
//! replay reads them through the same reader as `dovetail plan --interruptions`.

use dovetail_dataflow::backend::Instance;
use dovetail_dataflow::backend::{CloudEvent, CloudEventKind};
use dovetail_ingest::format_rfc3339_ms;
use serde_json::{json, Value};

/// The account the simulated instances belong to.
const ACCOUNT: &str = "123456789012";

/// The message body for an event about `instance`; `None` for events that send no message
/// Karpenter acts on (lifecycle events; termination, which the replay sees directly).
pub fn message_body(event: &CloudEvent, instance: &Instance, sequence: u64) -> Option<String> {
    let id = &instance.id;
    let (source, detail_type, detail) = match &event.kind {
        CloudEventKind::SpotInterruptionWarning { .. } => (
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            json!({"instance-id": id, "instance-action": "terminate"}),
        ),
        CloudEventKind::CapacityReservationInterruptionWarning { terminate_at_ms } => (
            "aws.ec2",
            "EC2 Capacity Reservation Instance Interruption Warning",
            json!({
                "instance-id": id,
                "instance-action": "terminate",
                "instance-termination-time": format_rfc3339_ms(*terminate_at_ms),
                "azId": instance.zone_id,
            }),
        ),
        CloudEventKind::RebalanceRecommendation => (
            "aws.ec2",
            "EC2 Instance Rebalance Recommendation",
            json!({"instance-id": id}),
        ),
        CloudEventKind::ScheduledChange => (
            "aws.health",
            "AWS Health Event",
            json!({
                "service": "EC2",
                "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
                "eventTypeCategory": "scheduledChange",
                "affectedEntities": [{"entityValue": id}],
            }),
        ),
        CloudEventKind::Running
        | CloudEventKind::NodeRegistered
        | CloudEventKind::NodeInitialized
        | CloudEventKind::Terminated { .. } => return None,
    };
    let resources: Value = if source == "aws.health" {
        json!([id])
    } else {
        json!([format!(
            "arn:aws:ec2:{}:{ACCOUNT}:instance/{id}",
            instance.region
        )])
    };
    Some(
        json!({
            "version": "0",
            "id": format!("sim-{sequence:012}"),
            "detail-type": detail_type,
            "source": source,
            "account": ACCOUNT,
            "time": format_rfc3339_ms(event.at_ms),
            "region": instance.region,
            "resources": resources,
            "detail": detail,
        })
        .to_string(),
    )
}
