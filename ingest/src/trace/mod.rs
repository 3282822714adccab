//! Workload traces for `dovetail replay`: a versioned JSON-lines format (documented in
//! `docs/trace-format.md`), its reader and writer, and converters from the Alibaba cluster traces.
//!
//! A trace is a header line followed by one event per line, each stamped with milliseconds since
//! the start of the trace:
//!
//! ```text
//! {"dovetail_trace":1,"source":"example","time_unit":"ms"}
//! {"t":0,"event":"pod_created","pod":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c"}]}}}
//! {"t":1500,"event":"pod_deleted","namespace":"default","name":"a"}
//! ```
//!
//! Embedded objects (pods, NodePools, EC2NodeClasses, ...) are Kubernetes manifests in JSON form
//! and are read by the same loader as `dovetail plan -f` ([`crate::load_str`]), so a trace means
//! exactly what the same manifests would mean in a file.
//!
//! - [`TraceReader`] reads a trace from any [`std::io::BufRead`] into [`TimedEvent`]s; a bad line is
//!   a [`TraceError`] naming its line number and holding a typed reason ([`HeaderReason`],
//!   [`LineReason`]), or with [`TraceReader::skip_bad`] is counted and skipped.
//! - [`TraceWriter`] writes [`RawEvent`]s (events whose objects are still JSON manifests).
//! - [`convert_dlrm`] and [`convert_openb`] turn the Alibaba DLRM and openb GPU pod event CSVs
//!   into traces, with [`ConvertOptions`] to replicate, time-compress, sample and cut them.

mod convert;
mod convert_dlrm;
mod convert_openb;
mod convert_reason;
mod event;
mod reader;
mod reason;
mod resolve;
mod writer;

pub use convert::{ConvertError, ConvertOptions, ConvertStats};
pub use convert_dlrm::{convert_dlrm, DLRM_SOURCE};
pub use convert_openb::{convert_openb, OPENB_SOURCE};
pub use convert_reason::{OptionsReason, RowReason};
pub use event::{
    AppliedObject, CapacityChange, CapacityType, InterruptKind, InterruptTarget, Interruption,
    ObjectKind, ObjectRef, PodRef, PriceChange, RawEvent, TimedEvent, TraceEvent,
};
pub use reader::{read_trace, Trace, TraceError, TraceReader};
pub use reason::{HeaderReason, InterruptReason, LineReason};
pub use writer::{format_event_line, TraceHeader, TraceWriter};

/// The trace format version this code reads and writes (the header's `dovetail_trace`).
pub const TRACE_VERSION: u64 = 1;

/// The only time unit of version 1 (the header's `time_unit`): `t` is in milliseconds.
pub const TIME_UNIT: &str = "ms";

/// The trace horizon: no event may be stamped later than 10 years (of 365 days) after the trace
/// start. A replay simulates every instant up to its last event, so a stray `t` of 10^15 (31,700
/// years) would run for days, and times near `u64::MAX` would wrap the replay's signed clock;
/// a trace past the horizon is refused at the line that crosses it instead.
pub const MAX_TRACE_MS: u64 = 10 * 365 * 24 * 3_600_000;
