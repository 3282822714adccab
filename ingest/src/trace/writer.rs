//! Writing traces: the header line and one line per [`RawEvent`], with `t` and `event` first so
//! that a trace reads well in a pager.

use super::event::RawEvent;
use super::{TIME_UNIT, TRACE_VERSION};
use serde_json::{Map, Value};
use std::io::{self, Write};

/// The first line of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceHeader {
    /// `dovetail_trace`: the format version.
    pub version: u64,
    /// `source`: where the trace came from, free text.
    pub source: String,
    /// `time_unit`: always `ms` in version 1.
    pub time_unit: String,
    /// Any other fields of the header (a converter records its input, options and the upstream
    /// terms here), kept as written and otherwise ignored.
    pub extra: Map<String, Value>,
}

impl TraceHeader {
    /// A version-1 header with times in milliseconds.
    pub fn new(source: impl Into<String>) -> TraceHeader {
        TraceHeader {
            version: TRACE_VERSION,
            source: source.into(),
            time_unit: TIME_UNIT.to_string(),
            extra: Map::new(),
        }
    }

    /// The header line, without the newline.
    pub fn to_line(&self) -> String {
        let mut out = format!(
            "{{\"dovetail_trace\":{},\"source\":{},\"time_unit\":{}",
            self.version,
            Value::String(self.source.clone()),
            Value::String(self.time_unit.clone())
        );
        for (k, v) in &self.extra {
            if matches!(k.as_str(), "dovetail_trace" | "source" | "time_unit") {
                continue;
            }
            out.push(',');
            out.push_str(&Value::String(k.clone()).to_string());
            out.push(':');
            out.push_str(&v.to_string());
        }
        out.push('}');
        out
    }
}

/// One event line, without the newline: `{"t":T,"event":"NAME",...}`.
pub fn format_event_line(t: u64, event: &RawEvent) -> Result<String, serde_json::Error> {
    let mut out = format!("{{\"t\":{t},\"event\":\"{}\"", event.name());
    for (k, v) in event.body()? {
        out.push(',');
        out.push_str(&Value::String(k).to_string());
        out.push(':');
        out.push_str(&serde_json::to_string(&v)?);
    }
    out.push('}');
    Ok(out)
}

/// Writes a trace: the header when created, then events in time order.
pub struct TraceWriter<W: Write> {
    out: W,
    last_t: u64,
    events: u64,
}

impl<W: Write> TraceWriter<W> {
    /// Writes the header line. For files, pass a [`std::io::BufWriter`].
    pub fn new(mut out: W, header: &TraceHeader) -> io::Result<TraceWriter<W>> {
        out.write_all(header.to_line().as_bytes())?;
        out.write_all(b"\n")?;
        Ok(TraceWriter {
            out,
            last_t: 0,
            events: 0,
        })
    }

    /// Writes one event at `t` milliseconds. Times must not decrease: an earlier `t` than the
    /// previous event's, or one past the horizon ([`super::MAX_TRACE_MS`]), is an
    /// [`io::ErrorKind::InvalidInput`] error and nothing is written.
    pub fn write(&mut self, t: u64, event: &RawEvent) -> io::Result<()> {
        if t > super::MAX_TRACE_MS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "t={t} is past the trace horizon of {} ms (10 years)",
                    super::MAX_TRACE_MS
                ),
            ));
        }
        if t < self.last_t {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "trace times must not decrease: t={t} after t={}",
                    self.last_t
                ),
            ));
        }
        let line = format_event_line(t, event).map_err(io::Error::other)?;
        self.out.write_all(line.as_bytes())?;
        self.out.write_all(b"\n")?;
        self.last_t = t;
        self.events += 1;
        Ok(())
    }

    /// Events written so far (the header not counted).
    pub fn events_written(&self) -> u64 {
        self.events
    }

    /// The time of the last event written (0 before any).
    pub fn last_t(&self) -> u64 {
        self.last_t
    }

    /// Flushes and returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}
