//! EC2 interruption messages: the EventBridge events Karpenter's interruption controller reads
//! from its SQS queue, as the queue delivers their bodies.
//!
//! Routing follows Karpenter's parsers (`pkg/controllers/interruption/messages`): a message is
//! chosen by (`version`, `source`, `detail-type`), and one that matches no parser is ignored, as
//! Karpenter deletes it unread. A state change counts only for `stopping`, `stopped`,
//! `shutting-down` and `terminated`; an AWS Health event only for service `EC2` and category
//! `scheduledChange`. A message that matches a parser but lacks what it needs (the instance id)
//! is an error naming the message and the field: acting on part of it would be guessing.

use crate::error::{FieldResult, ManifestError};
use crate::fields::At;
use crate::time::parse_rfc3339_ms;
use crate::yaml;
use dovetail_dataflow::facts::{Interruption, InterruptionKind};
use serde_json::Value;
use std::path::PathBuf;

/// What one message says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    /// Interruptions of one or more instances (by instance id).
    Interruptions(Vec<Interruption>),
    /// A message Karpenter does not act on, with why.
    Ignored(String),
}

/// A message that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MessageError {
    /// A file or folder could not be read.
    #[error(transparent)]
    Io(#[from] ManifestError),
    /// The body is not JSON.
    #[error("{origin}: message {position}: not JSON: {reason}")]
    Json {
        /// The file (or queue) the message came from.
        origin: String,
        /// 1-based position of the message in it.
        position: usize,
        reason: String,
    },
    /// A field is missing, mistyped or invalid.
    #[error("{origin}: message {position}{}: {field}: {reason}", id.as_deref().map(|i| format!(" (id {i})")).unwrap_or_default())]
    Field {
        origin: String,
        position: usize,
        /// The event's `id`, when it has one.
        id: Option<String>,
        /// A path into the event, e.g. `detail.instance-id`.
        field: String,
        reason: String,
    },
}

/// The state changes Karpenter acts on.
const ACTED_STATES: &[&str] = &["stopping", "stopped", "shutting-down", "terminated"];

/// Reads one message body. `origin` and `position` say where it came from, for errors.
pub fn parse_message(origin: &str, position: usize, body: &str) -> Result<Reading, MessageError> {
    let value: Value = serde_json::from_str(body).map_err(|e| MessageError::Json {
        origin: origin.to_string(),
        position,
        reason: e.to_string(),
    })?;
    read_value(origin, position, &value)
}

fn read_value(origin: &str, position: usize, value: &Value) -> Result<Reading, MessageError> {
    read_event(&At::root(value, "")).map_err(|e| MessageError::Field {
        origin: origin.to_string(),
        position,
        id: value.get("id").and_then(Value::as_str).map(str::to_string),
        field: e.field,
        reason: e.reason,
    })
}

fn read_event(event: &At) -> FieldResult<Reading> {
    let version = event.req_str("version")?;
    let source = event.req_str("source")?;
    let detail_type = event.req_str("detail-type")?;
    let kind = match (version.as_str(), source.as_str(), detail_type.as_str()) {
        ("0", "aws.ec2", "EC2 Spot Instance Interruption Warning") => {
            InterruptionKind::SpotInterruption
        }
        ("0", "aws.ec2", "EC2 Instance Rebalance Recommendation") => {
            InterruptionKind::RebalanceRecommendation
        }
        ("0", "aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning") => {
            InterruptionKind::CapacityReservationInterruption
        }
        ("0", "aws.ec2", "EC2 Instance State-change Notification") => InterruptionKind::StateChange,
        ("0", "aws.health", "AWS Health Event") => InterruptionKind::ScheduledChange,
        _ => {
            return Ok(Reading::Ignored(format!(
                "no interruption parser for version {version:?}, source {source:?}, \
                 detail-type {detail_type:?}"
            )))
        }
    };
    let at_ms = sent_at(event)?;
    let detail = event.req_obj("detail")?;
    let targets = match kind {
        InterruptionKind::ScheduledChange => {
            if let Some(why) = unwatched_health_event(&detail)? {
                return Ok(Reading::Ignored(why));
            }
            let mut ids = Vec::new();
            for entity in detail.req_list("affectedEntities")? {
                ids.push(instance_id(&entity, "entityValue")?);
            }
            if ids.is_empty() {
                return Ok(Reading::Ignored(
                    "scheduled change with no affected entities".to_string(),
                ));
            }
            ids
        }
        InterruptionKind::StateChange => {
            let state = detail.req_str("state")?.to_ascii_lowercase();
            if !ACTED_STATES.contains(&state.as_str()) {
                return Ok(Reading::Ignored(format!(
                    "instance state {state:?} is not acted on (only {})",
                    ACTED_STATES.join(", ")
                )));
            }
            vec![instance_id(&detail, "instance-id")?]
        }
        _ => vec![instance_id(&detail, "instance-id")?],
    };
    Ok(Reading::Interruptions(
        targets
            .into_iter()
            .map(|target| Interruption {
                target,
                kind,
                at_ms,
            })
            .collect(),
    ))
}

/// The event's `time`, in ms since the epoch.
fn sent_at(event: &At) -> FieldResult<i64> {
    let time = event.require("time")?;
    let text = time.as_string()?;
    parse_rfc3339_ms(&text).ok_or_else(|| time.err(format!("{text:?} is not an RFC 3339 time")))
}

/// Why an AWS Health event is not one Karpenter watches; `None` when it is.
fn unwatched_health_event(detail: &At) -> FieldResult<Option<String>> {
    let service = detail.str("service")?.unwrap_or_default();
    let category = detail.str("eventTypeCategory")?.unwrap_or_default();
    Ok(
        (service != "EC2" || category != "scheduledChange").then(|| {
            format!(
                "AWS Health event of service {service:?}, category {category:?} (only EC2 \
             scheduledChange is acted on)"
            )
        }),
    )
}

fn instance_id(at: &At, key: &str) -> FieldResult<String> {
    let id = at.req_str(key)?;
    if id.trim().is_empty() {
        return Err(at.err_at(key, "must not be empty"));
    }
    Ok(id)
}

/// Messages read from files, and what was skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Messages {
    pub interruptions: Vec<Interruption>,
    /// One sentence per ignored message, naming it.
    pub notes: Vec<String>,
}

/// Reads message bodies from files and folders (`*.json` and `*.jsonl`, sorted; `-` is standard
/// input). A file holds one or more bodies, one after another or one per line; a JSON array
/// holds one body per element. The first bad message stops the load.
pub fn load_messages(paths: &[PathBuf]) -> Result<Messages, MessageError> {
    let mut out = Messages::default();
    for path in yaml::expand_paths(paths, is_message_file)? {
        let text = yaml::read(&path)?;
        let origin = path.display().to_string();
        let mut position = 0;
        for value in serde_json::Deserializer::from_str(&text).into_iter::<Value>() {
            let value = value.map_err(|e| MessageError::Json {
                origin: origin.clone(),
                position: position + 1,
                reason: e.to_string(),
            })?;
            let bodies = match value {
                Value::Array(items) => items,
                one => vec![one],
            };
            for body in bodies {
                position += 1;
                match read_value(&origin, position, &body)? {
                    Reading::Interruptions(i) => out.interruptions.extend(i),
                    Reading::Ignored(why) => out
                        .notes
                        .push(format!("{origin}: message {position}: ignored: {why}")),
                }
            }
        }
    }
    Ok(out)
}

fn is_message_file(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.ends_with(".json") || lower.ends_with(".jsonl")
}
