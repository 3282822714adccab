//! Reading traces: the header, then one event per line, each checked on its own (JSON, fields,
//! embedded manifests) and against the previous one (time order).

use super::event::{RawEvent, TimedEvent};
use super::reason::{HeaderReason, LineReason};
use super::resolve::Resolver;
use super::writer::TraceHeader;
use super::{MAX_TRACE_MS, TIME_UNIT, TRACE_VERSION};
use serde_json::Value;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

/// How many bad lines a skipping reader keeps (it counts all of them).
const KEPT_BAD_LINES: usize = 20;
/// How many loader notes a reader keeps (it counts the rest).
const KEPT_NOTES: usize = 1000;

/// An error reading a trace. Every variant names the trace and the 1-based line (the header is
/// line 1).
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The trace could not be read (`line` is the last line read, 0 if none).
    #[error("{file}: line {line}: {error}")]
    Io {
        file: String,
        line: u64,
        #[source]
        error: io::Error,
    },
    /// The first line is not a header this reader understands (missing, not JSON, another
    /// format version, another time unit). Never skipped.
    #[error("{file}: line {line}: {reason}")]
    Header {
        file: String,
        line: u64,
        reason: HeaderReason,
    },
    /// An event line is malformed: not JSON, a missing or mistyped field, an unknown event, a
    /// time earlier than the previous event's, or an embedded manifest the loader rejects.
    #[error("{file}: line {line}: {reason}")]
    Line {
        file: String,
        line: u64,
        reason: LineReason,
    },
}

impl TraceError {
    /// The 1-based line the error is about.
    pub fn line(&self) -> u64 {
        match self {
            TraceError::Io { line, .. }
            | TraceError::Header { line, .. }
            | TraceError::Line { line, .. } => *line,
        }
    }
}

/// Reads a trace, one [`TimedEvent`] per event line. Blank lines are ignored.
///
/// By default the first bad line is an error and iteration ends there. With
/// [`TraceReader::skip_bad`], bad lines are counted ([`TraceReader::skipped`]), the first few kept
/// ([`TraceReader::bad_lines`]), and reading goes on; only I/O errors end it.
pub struct TraceReader<R> {
    input: R,
    file: String,
    header: TraceHeader,
    resolver: Resolver,
    buf: Vec<u8>,
    line: u64,
    last_t: u64,
    skip_bad: bool,
    skipped: u64,
    bad: Vec<TraceError>,
    notes: Vec<String>,
    notes_dropped: u64,
    done: bool,
}

fn read_line<R: BufRead>(input: &mut R, buf: &mut Vec<u8>) -> io::Result<bool> {
    buf.clear();
    Ok(input.read_until(b'\n', buf)? > 0)
}

/// The text of a line read into `buf`, without the line ending.
fn line_text(buf: &[u8]) -> Result<&str, std::str::Utf8Error> {
    Ok(std::str::from_utf8(buf)?.trim_end_matches(['\n', '\r']))
}

fn parse_header(text: &str) -> Result<TraceHeader, HeaderReason> {
    let text = text.trim_start_matches('\u{feff}').trim();
    if text.is_empty() {
        return Err(HeaderReason::EmptyLine);
    }
    let value: Value = serde_json::from_str(text).map_err(HeaderReason::InvalidJson)?;
    let Value::Object(mut fields) = value else {
        return Err(HeaderReason::NotAnObject);
    };
    let version = match fields.remove("dovetail_trace") {
        None => return Err(HeaderReason::NoVersion),
        Some(v) => v
            .as_u64()
            .ok_or(HeaderReason::VersionNotANumber { found: v })?,
    };
    if version != TRACE_VERSION {
        return Err(HeaderReason::UnsupportedVersion { version });
    }
    let time_unit = match fields.remove("time_unit") {
        None => TIME_UNIT.to_string(),
        Some(Value::String(u)) if u == TIME_UNIT => u,
        Some(found) => return Err(HeaderReason::UnsupportedTimeUnit { found }),
    };
    let source = match fields.remove("source") {
        None => String::new(),
        Some(Value::String(s)) => s,
        Some(found) => return Err(HeaderReason::SourceNotAString { found }),
    };
    Ok(TraceHeader {
        version,
        source,
        time_unit,
        extra: fields,
    })
}

impl TraceReader<BufReader<File>> {
    /// Opens a trace file and reads its header.
    pub fn open(path: &Path) -> Result<TraceReader<BufReader<File>>, TraceError> {
        let file = path.display().to_string();
        let f = File::open(path).map_err(|error| TraceError::Io {
            file: file.clone(),
            line: 0,
            error,
        })?;
        TraceReader::new(&file, BufReader::new(f))
    }
}

impl<R: BufRead> TraceReader<R> {
    /// Reads the header from `input`. `file` names the trace in errors and notes.
    pub fn new(file: &str, mut input: R) -> Result<TraceReader<R>, TraceError> {
        let mut buf = Vec::new();
        let header_error = |reason: HeaderReason| TraceError::Header {
            file: file.to_string(),
            line: 1,
            reason,
        };
        let got = read_line(&mut input, &mut buf).map_err(|error| TraceError::Io {
            file: file.to_string(),
            line: 1,
            error,
        })?;
        if !got {
            return Err(header_error(HeaderReason::EmptyTrace));
        }
        let header = line_text(&buf)
            .map_err(HeaderReason::NotUtf8)
            .and_then(parse_header)
            .map_err(header_error)?;
        Ok(TraceReader {
            input,
            file: file.to_string(),
            header,
            resolver: Resolver::new(file),
            buf,
            line: 1,
            last_t: 0,
            skip_bad: false,
            skipped: 0,
            bad: Vec::new(),
            notes: Vec::new(),
            notes_dropped: 0,
            done: false,
        })
    }

    /// With `true`, bad lines are counted and skipped instead of ending the trace.
    pub fn skip_bad(mut self, skip: bool) -> TraceReader<R> {
        self.skip_bad = skip;
        self
    }

    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    /// Lines read so far, the header included.
    pub fn lines_read(&self) -> u64 {
        self.line
    }

    /// Bad lines skipped so far (only with [`TraceReader::skip_bad`]).
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The first bad lines skipped (at most 20), with what was wrong with them.
    pub fn bad_lines(&self) -> &[TraceError] {
        &self.bad
    }

    /// What the manifest loader noted about embedded objects (assumptions, ignored fields), each
    /// prefixed with its line; at most 1000, the rest counted by [`TraceReader::notes_dropped`].
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    pub fn notes_dropped(&self) -> u64 {
        self.notes_dropped
    }

    /// Parses the line in `self.buf`: `None` for a blank line.
    fn parse(&mut self) -> Result<Option<TimedEvent>, LineReason> {
        let text = line_text(&self.buf).map_err(LineReason::NotUtf8)?.trim();
        if text.is_empty() {
            return Ok(None);
        }
        let value: Value = serde_json::from_str(text).map_err(LineReason::InvalidJson)?;
        let Value::Object(mut fields) = value else {
            return Err(LineReason::NotAnObject);
        };
        let t = match fields.remove("t") {
            None => return Err(LineReason::MissingTime),
            Some(v) => v
                .as_u64()
                .ok_or(LineReason::TimeNotMilliseconds { found: v })?,
        };
        if t > MAX_TRACE_MS {
            return Err(LineReason::PastHorizon { t });
        }
        if t < self.last_t {
            return Err(LineReason::TimeDecreased {
                t,
                previous: self.last_t,
            });
        }
        let name = match fields.remove("event") {
            None => return Err(LineReason::MissingEvent),
            Some(Value::String(s)) => s,
            Some(found) => return Err(LineReason::EventNotAString { found }),
        };
        let raw = RawEvent::from_body(&name, fields)?;
        let (event, notes) = self.resolver.resolve(self.line, raw)?;
        for note in notes {
            if self.notes.len() < KEPT_NOTES {
                self.notes.push(format!("line {}: {note}", self.line));
            } else {
                self.notes_dropped += 1;
            }
        }
        self.last_t = t;
        Ok(Some(TimedEvent {
            line: self.line,
            t,
            event,
        }))
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<TimedEvent, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            match read_line(&mut self.input, &mut self.buf) {
                Ok(true) => {}
                Ok(false) => {
                    self.done = true;
                    break;
                }
                Err(error) => {
                    self.done = true;
                    return Some(Err(TraceError::Io {
                        file: self.file.clone(),
                        line: self.line + 1,
                        error,
                    }));
                }
            }
            self.line += 1;
            match self.parse() {
                Ok(None) => continue,
                Ok(Some(event)) => return Some(Ok(event)),
                Err(reason) => {
                    let err = TraceError::Line {
                        file: self.file.clone(),
                        line: self.line,
                        reason,
                    };
                    if self.skip_bad {
                        self.skipped += 1;
                        if self.bad.len() < KEPT_BAD_LINES {
                            self.bad.push(err);
                        }
                        continue;
                    }
                    self.done = true;
                    return Some(Err(err));
                }
            }
        }
        None
    }
}

/// A whole trace, read into memory.
#[derive(Debug)]
pub struct Trace {
    pub header: TraceHeader,
    pub events: Vec<TimedEvent>,
    /// Bad lines skipped (0 unless read with `skip_bad`).
    pub skipped: u64,
    /// The first bad lines skipped.
    pub bad_lines: Vec<TraceError>,
    /// The manifest loader's notes, each prefixed with its line (at most 1000).
    pub notes: Vec<String>,
}

/// Reads a whole trace. Without `skip_bad` the first bad line is the error.
pub fn read_trace<R: BufRead>(file: &str, input: R, skip_bad: bool) -> Result<Trace, TraceError> {
    let mut reader = TraceReader::new(file, input)?.skip_bad(skip_bad);
    let mut events = Vec::new();
    for event in reader.by_ref() {
        events.push(event?);
    }
    Ok(Trace {
        header: reader.header.clone(),
        events,
        skipped: reader.skipped,
        bad_lines: std::mem::take(&mut reader.bad),
        notes: std::mem::take(&mut reader.notes),
    })
}
