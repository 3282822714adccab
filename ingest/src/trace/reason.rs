//! Why a trace's header or an event line was refused, as values: the field, what was found and
//! what was expected. Words only in `Display`, so a tool can match on the kind of mistake and a
//! person still reads one clear sentence.

use super::event::{ObjectKind, EVENT_NAMES};
use super::{MAX_TRACE_MS, TIME_UNIT, TRACE_VERSION};
use crate::ManifestError;
use serde_json::Value;
use std::str::Utf8Error;

/// The header a reader expects, as the messages quote it.
const HEADER_FORM: &str = "{\"dovetail_trace\": 1, ...}";

/// Why the first line is not a header this reader understands.
#[derive(Debug, thiserror::Error)]
pub enum HeaderReason {
    #[error("the trace is empty; it must start with a header line such as {{\"dovetail_trace\": 1, \"source\": \"...\", \"time_unit\": \"ms\"}}")]
    EmptyTrace,
    #[error("not UTF-8 text: {0}")]
    NotUtf8(Utf8Error),
    #[error("expected the trace header ({HEADER_FORM}), found an empty line")]
    EmptyLine,
    #[error("expected the trace header ({HEADER_FORM}), found invalid JSON: {0}")]
    InvalidJson(serde_json::Error),
    #[error("expected the trace header ({HEADER_FORM}), found a JSON value that is not an object")]
    NotAnObject,
    #[error("the header has no dovetail_trace field; this is not a dovetail trace")]
    NoVersion,
    #[error("dovetail_trace must be the format version, a whole number; found {found}")]
    VersionNotANumber { found: Value },
    #[error("trace format version {version} is not supported (this dovetail reads version {TRACE_VERSION})")]
    UnsupportedVersion { version: u64 },
    #[error("time_unit {found} is not supported (version {TRACE_VERSION} traces are in \"{TIME_UNIT}\")")]
    UnsupportedTimeUnit { found: Value },
    #[error("source must be a string, found {found}")]
    SourceNotAString { found: Value },
}

/// Why an event line was refused: its JSON, a field, its time against the previous line's, or
/// an embedded manifest.
#[derive(Debug, thiserror::Error)]
pub enum LineReason {
    #[error("not UTF-8 text: {0}")]
    NotUtf8(Utf8Error),
    #[error("not a JSON object: {0}")]
    InvalidJson(serde_json::Error),
    #[error("not a JSON object ({{\"t\": ..., \"event\": ..., ...}})")]
    NotAnObject,
    #[error("missing field t (milliseconds since the trace start)")]
    MissingTime,
    #[error("t must be a whole number of milliseconds ≥ 0, found {found}")]
    TimeNotMilliseconds { found: Value },
    #[error(
        "t={t} is past the trace horizon of {MAX_TRACE_MS} ms (10 years after the trace start)"
    )]
    PastHorizon { t: u64 },
    #[error("t={t} is earlier than the previous event's t={previous}; times must not decrease")]
    TimeDecreased { t: u64, previous: u64 },
    #[error("missing field event (the event kind)")]
    MissingEvent,
    #[error("event must be a string, found {found}")]
    EventNotAString { found: Value },
    #[error("unknown event {name:?} (expected one of {})", EVENT_NAMES.join(", "))]
    UnknownEvent { name: String },
    /// A field of the event is missing, unknown or of the wrong type (serde's words).
    #[error("{event}: {error}")]
    Body {
        event: &'static str,
        error: serde_json::Error,
    },
    /// `pod` or `object` is not a JSON object.
    #[error("{event}: {field} must be {expected} (a JSON object)")]
    NotAManifest {
        event: &'static str,
        field: &'static str,
        expected: &'static str,
    },
    #[error("pod_created: pod is a {kind}, not a Pod (traces carry pods, not the workloads that make them)")]
    PodOfKind { kind: String },
    #[error("pod_created: pod has no kind (a Pod manifest has \"kind\": \"Pod\")")]
    PodWithoutKind,
    #[error("apply: object has no kind")]
    ObjectWithoutKind,
    #[error(
        "apply: {kind} cannot be applied in a trace{}; expected one of {}",
        if kind == "Pod" { " (pods are pod_created events)" } else { "" },
        applicable_kinds()
    )]
    NotApplicable { kind: String },
    /// The manifest loader refused the embedded object (boxed: it is several times the size
    /// of the other reasons).
    #[error("{}", manifest_words(.0))]
    Manifest(Box<ManifestError>),
    /// The loader read nothing of that kind (it skipped the object, saying why in `notes`).
    #[error("{event}: the {what} was not read{}", notes_suffix(.notes))]
    NotRead {
        event: &'static str,
        what: &'static str,
        notes: Vec<String>,
    },
    #[error("{event}: one {what} expected, found {found} (kind: List is not allowed here)")]
    NotOne {
        event: &'static str,
        what: &'static str,
        found: usize,
    },
    #[error("{event}: {field} must not be empty")]
    EmptyField {
        event: &'static str,
        field: &'static str,
    },
    #[error("delete: {} is cluster-scoped and has no namespace", kind.as_str())]
    NamespaceOnClusterScoped { kind: ObjectKind },
    #[error("price: price_per_hour {price} is not a price (a number ≥ 0)")]
    NotAPrice { price: f64 },
    #[error("interrupt: {0}")]
    Interrupt(InterruptReason),
}

/// Why an `interrupt` event names no instances, or names them twice over.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InterruptReason {
    #[error("zone and capacity_type go with instance_type, not with node")]
    OfferingFieldsWithNode,
    #[error("{field} must not be empty")]
    EmptyTarget { field: &'static str },
    #[error("give either node or instance_type, not both")]
    BothTargets,
    #[error("give node or instance_type")]
    NoTarget,
}

fn applicable_kinds() -> String {
    let kinds: Vec<&str> = ObjectKind::ALL.iter().map(|k| k.as_str()).collect();
    kinds.join(", ")
}

/// A loader error without the file and document the trace line already names.
fn manifest_words(e: &ManifestError) -> String {
    match e {
        ManifestError::Field {
            kind,
            object,
            field,
            reason,
            ..
        } => format!("{kind} {object}: {field}: {reason}"),
        other => other.to_string(),
    }
}

fn notes_suffix(notes: &[String]) -> String {
    if notes.is_empty() {
        String::new()
    } else {
        format!(": {}", notes.join("; "))
    }
}
