//! What the converters share: options, statistics, errors, a strict CSV reader, the pod manifest
//! they write, and the driver that orders, filters, replicates and time-compresses rows into a
//! trace.

use super::convert_reason::{OptionsReason, RowReason};
use super::event::RawEvent;
use super::writer::{TraceHeader, TraceWriter};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashSet};
use std::io::{self, BufRead, BufWriter, Write};

/// How a converter turns a CSV into a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvertOptions {
    /// Each pod becomes this many pods (at least 1): the original name, then `-r1`, `-r2`, ...
    /// Labels are shared, so replicas join their originals' workloads and spread constraints.
    pub replicate: u32,
    /// Trace time is divided by this (> 0): 60 turns a trace minute into a second.
    pub time_compress: f64,
    /// Stop after writing this many events (the header not counted).
    pub max_events: Option<usize>,
    /// Namespace of every pod.
    pub namespace: String,
    /// Keep only rows before this trace time, in seconds of the original trace (before
    /// compression). Pods still alive then stay alive to the end of the trace.
    pub until_s: Option<f64>,
    /// Keep one in this many groups (DLRM: apps; openb: pods), by a stable hash of the group
    /// name: FNV-1a 64 of the name, kept when the hash modulo `sample_one_in` is 0. 1 keeps all.
    pub sample_one_in: u32,
    /// Count rows that do not parse ([`ConvertStats::bad_rows`]) and go on, instead of failing.
    pub skip_bad: bool,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        ConvertOptions {
            replicate: 1,
            time_compress: 1.0,
            max_events: None,
            namespace: "default".to_string(),
            until_s: None,
            sample_one_in: 1,
            skip_bad: false,
        }
    }
}

impl ConvertOptions {
    fn validate(&self) -> Result<(), ConvertError> {
        let bad = |reason: OptionsReason| Err(ConvertError::Options(reason));
        if self.replicate == 0 {
            return bad(OptionsReason::NoReplicas);
        }
        if !(self.time_compress.is_finite() && self.time_compress > 0.0) {
            return bad(OptionsReason::TimeCompress(self.time_compress));
        }
        if self.sample_one_in == 0 {
            return bad(OptionsReason::NoSample);
        }
        if self.until_s.is_some_and(f64::is_nan) {
            return bad(OptionsReason::UntilNotANumber);
        }
        if !is_dns_label(&self.namespace) {
            return bad(OptionsReason::Namespace(self.namespace.clone()));
        }
        Ok(())
    }

    /// The options as recorded in the trace header (`conversion`).
    fn to_json(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("replicate".into(), json!(self.replicate));
        m.insert("time_compress".into(), json!(self.time_compress));
        m.insert("namespace".into(), json!(self.namespace));
        m.insert("sample_one_in".into(), json!(self.sample_one_in));
        if let Some(u) = self.until_s {
            m.insert("until_s".into(), json!(u));
        }
        if let Some(n) = self.max_events {
            m.insert("max_events".into(), json!(n));
        }
        m.insert("skip_bad".into(), json!(self.skip_bad));
        m
    }
}

/// What a conversion did. Pod and event counts are of what was written (each replica counts);
/// skipped and filtered counts are of source pods or rows, before replication.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ConvertStats {
    /// Data rows read (the CSV header not counted).
    pub rows: u64,
    /// Pods written: `pods_at_start + creates`.
    pub pods: u64,
    /// Pods present when the trace starts (DLRM `present_at_start`), written at t=0.
    pub pods_at_start: u64,
    /// `pod_created` events for pods created during the trace.
    pub creates: u64,
    /// `pod_deleted` events.
    pub deletes: u64,
    /// Lines written after the header.
    pub events: u64,
    /// Time of the last event, in milliseconds (after compression).
    pub last_t_ms: u64,
    /// openb pods asking for a fraction of a GPU (GPU sharing), left out with their deletions.
    pub skipped_fractional_gpu: u64,
    /// Pods left out by `sample_one_in`, with their deletions.
    pub sampled_out: u64,
    /// Rows at or after `until_s`, left out.
    pub after_window: u64,
    /// Deletions of pods the trace never created (left out).
    pub unmatched_deletes: u64,
    /// Rows that did not parse (only with `skip_bad`; otherwise the first is the error).
    pub bad_rows: u64,
    /// The first bad rows (at most 10), as `line N: reason`.
    pub bad_row_examples: Vec<String>,
    /// `max_events` was reached before the end of the input.
    pub truncated: bool,
}

/// A conversion error. Rows are named by their line in the CSV (the CSV header is line 1).
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error("line {line}: {reason}")]
    Row { line: u64, reason: RowReason },
    #[error("reading line {line}: {error}")]
    Read {
        line: u64,
        #[source]
        error: io::Error,
    },
    #[error("writing the trace: {0}")]
    Write(#[source] io::Error),
    #[error("invalid options: {0}")]
    Options(OptionsReason),
}

/// FNV-1a, 64 bits: the stable hash `sample_one_in` uses.
pub(crate) fn fnv1a(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// True when `sample_one_in` keeps `group`.
pub(crate) fn sampled_in(group: &str, one_in: u32) -> bool {
    let remainder = fnv1a(group) % u64::from(one_in.max(1));
    remainder == 0
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A source name as a Kubernetes object name: lower case, `_` as `-`; `None` if that is still
/// not a DNS-1123 subdomain (with room for a replica suffix).
pub(crate) fn object_name(source: &str) -> Option<String> {
    let name: String = source
        .chars()
        .map(|c| {
            if c == '_' {
                '-'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect();
    let ok = !name.is_empty() && name.len() <= 240 && name.split('.').all(is_dns_label);
    ok.then_some(name)
}

/// True for a valid label value that is not empty.
pub(crate) fn is_label_value(s: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    s.len() <= 63
        && alnum(s.chars().next())
        && alnum(s.chars().last())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The pod a converter writes, before it is named.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PodTemplate {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Kind and name of the controlling owner (apiVersion `apps/v1`).
    pub owner: Option<(String, String)>,
    pub cpu_milli: u64,
    pub memory_mib: u64,
    /// Whole `nvidia.com/gpu`s; > 0 also tolerates the `nvidia.com/gpu` taint.
    pub gpus: u64,
    /// A `kubernetes.io/hostname` spread with this maxSkew over the pods with the same labels
    /// (all of `labels` are the selector).
    pub max_per_node: Option<i64>,
}

const IMAGE: &str = "registry.k8s.io/pause:3.10";

fn cpu_quantity(milli: u64) -> String {
    let (whole, fraction) = (milli / 1000, milli % 1000);
    if fraction == 0 {
        whole.to_string()
    } else {
        format!("{milli}m")
    }
}

impl PodTemplate {
    /// The Pod manifest.
    pub fn manifest(&self, name: &str, namespace: &str) -> Value {
        let mut metadata = Map::new();
        metadata.insert("name".into(), json!(name));
        metadata.insert("namespace".into(), json!(namespace));
        if !self.labels.is_empty() {
            metadata.insert("labels".into(), json!(self.labels));
        }
        if !self.annotations.is_empty() {
            metadata.insert("annotations".into(), json!(self.annotations));
        }
        if let Some((kind, owner)) = &self.owner {
            metadata.insert(
                "ownerReferences".into(),
                json!([{"apiVersion": "apps/v1", "kind": kind, "name": owner, "controller": true}]),
            );
        }
        let mut requests = Map::new();
        requests.insert("cpu".into(), json!(cpu_quantity(self.cpu_milli)));
        requests.insert("memory".into(), json!(format!("{}Mi", self.memory_mib)));
        let mut resources = Map::new();
        if self.gpus > 0 {
            let gpus = json!(self.gpus.to_string());
            requests.insert("nvidia.com/gpu".into(), gpus.clone());
            resources.insert("limits".into(), json!({ "nvidia.com/gpu": gpus }));
        }
        resources.insert("requests".into(), Value::Object(requests));
        let mut spec = Map::new();
        spec.insert(
            "containers".into(),
            json!([{"name": "main", "image": IMAGE, "resources": resources}]),
        );
        if self.gpus > 0 {
            spec.insert(
                "tolerations".into(),
                json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]),
            );
        }
        if let Some(skew) = self.max_per_node {
            spec.insert(
                "topologySpreadConstraints".into(),
                json!([{
                    "maxSkew": skew,
                    "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": self.labels},
                }]),
            );
        }
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
    }
}

/// What a row asks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    Create(Box<PodTemplate>),
    /// A pod the format cannot express (a fractional GPU): left out, with its deletion.
    SkipFractionalGpu,
    Delete,
}

/// One parsed row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    /// Seconds since the trace start (negative is written as 0).
    pub time_s: f64,
    /// A pod running when the trace starts (DLRM `present_at_start`), counted apart.
    pub at_start: bool,
    /// The pod's name in the source.
    pub pod: String,
    /// What `sample_one_in` samples by (only read for creations).
    pub group: String,
    pub action: Action,
}

/// One CSV row's fields, by column name.
pub(crate) struct Fields<'a> {
    columns: &'a [(&'static str, usize)],
    values: Vec<&'a str>,
}

impl Fields<'_> {
    pub fn get(&self, name: &str) -> &str {
        self.columns
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, i)| self.values.get(*i).copied())
            .unwrap_or("")
    }

    /// Column `name` as a `T`; `expected` says what it must be, for the error.
    pub fn parse<T: std::str::FromStr>(
        &self,
        name: &'static str,
        expected: &'static str,
    ) -> Result<T, RowReason> {
        let text = self.get(name);
        text.trim().parse().map_err(|_| RowReason::NotA {
            column: name,
            value: text.to_string(),
            expected,
        })
    }

    /// The time column, seconds, finite.
    pub fn time(&self, name: &'static str) -> Result<f64, RowReason> {
        const EXPECTED: &str = "a time in seconds";
        let t: f64 = self.parse(name, EXPECTED)?;
        if t.is_finite() {
            Ok(t)
        } else {
            Err(RowReason::NotA {
                column: name,
                value: self.get(name).to_string(),
                expected: EXPECTED,
            })
        }
    }
}

/// Reads the CSV in `input` and writes the trace. `columns` are the columns the converter needs
/// (found by name in the CSV header); `parse` turns a row into a [`Row`].
pub(crate) fn run<R: BufRead, W: Write>(
    mut input: R,
    out: W,
    opts: &ConvertOptions,
    mut header: TraceHeader,
    columns: &[&'static str],
    parse: impl Fn(&Fields) -> Result<Row, RowReason>,
) -> Result<ConvertStats, ConvertError> {
    opts.validate()?;
    let mut buf = Vec::new();
    let read = |input: &mut R, buf: &mut Vec<u8>, line: u64| -> Result<bool, ConvertError> {
        buf.clear();
        input
            .read_until(b'\n', buf)
            .map(|n| n > 0)
            .map_err(|error| ConvertError::Read { line, error })
    };
    if !read(&mut input, &mut buf, 1)? {
        return Err(ConvertError::Row {
            line: 1,
            reason: RowReason::EmptyCsv {
                columns: columns.to_vec(),
            },
        });
    }
    let head = line_fields(&buf).map_err(|reason| ConvertError::Row { line: 1, reason })?;
    let mut index = Vec::new();
    for c in columns {
        match head
            .iter()
            .position(|h| h.trim_start_matches('\u{feff}').trim() == *c)
        {
            Some(i) => index.push((*c, i)),
            None => {
                return Err(ConvertError::Row {
                    line: 1,
                    reason: RowReason::MissingColumn {
                        column: c,
                        columns: columns.to_vec(),
                    },
                })
            }
        }
    }
    let width = head.len();

    if let Some(Value::Object(conv)) = header.extra.get_mut("conversion") {
        conv.extend(opts.to_json());
    }
    let writer = TraceWriter::new(BufWriter::new(out), &header).map_err(ConvertError::Write)?;
    let mut d = Driver {
        opts,
        writer,
        stats: ConvertStats::default(),
        created: HashSet::new(),
        alive: HashSet::new(),
        dropped: HashSet::new(),
        group_time: None,
        group: Vec::new(),
        last_time: f64::NEG_INFINITY,
    };
    let mut line = 1u64;
    loop {
        if !read(&mut input, &mut buf, line + 1)? {
            break;
        }
        line += 1;
        let row = match line_fields(&buf) {
            Ok(v) if v.len() == 1 && v[0].trim().is_empty() => continue,
            Ok(v) if v.len() != width => Err(RowReason::FieldCount {
                found: v.len(),
                expected: width,
            }),
            Ok(values) => parse(&Fields {
                columns: &index,
                values,
            }),
            Err(reason) => Err(reason),
        };
        d.stats.rows += 1;
        let outcome = match row {
            Ok(row) => d.push(row),
            Err(reason) => Err(Stop::Bad(reason)),
        };
        match outcome {
            Ok(true) => {}
            Ok(false) => break,
            Err(Stop::Write(e)) => return Err(ConvertError::Write(e)),
            Err(Stop::Bad(reason)) => {
                if !opts.skip_bad {
                    return Err(ConvertError::Row { line, reason });
                }
                d.stats.bad_rows += 1;
                if d.stats.bad_row_examples.len() < 10 {
                    d.stats
                        .bad_row_examples
                        .push(format!("line {line}: {reason}"));
                }
            }
        }
    }
    if !d.stats.truncated {
        d.flush().map_err(ConvertError::Write)?;
    }
    let Driver {
        writer, mut stats, ..
    } = d;
    stats.events = writer.events_written();
    stats.last_t_ms = writer.last_t();
    writer.finish().map_err(ConvertError::Write)?;
    Ok(stats)
}

/// The comma-separated fields of a line (no quoting: a quote is an error).
fn line_fields(buf: &[u8]) -> Result<Vec<&str>, RowReason> {
    let text = std::str::from_utf8(buf).map_err(RowReason::NotUtf8)?;
    let text = text.trim_end_matches(['\n', '\r']);
    if text.contains('"') {
        return Err(RowReason::Quoted);
    }
    Ok(text.split(',').collect())
}

/// Why [`Driver::push`] did not take a row.
enum Stop {
    /// The row is bad in context (time going backwards, a pod created twice).
    Bad(RowReason),
    /// Writing the trace failed.
    Write(io::Error),
}

/// Orders rows (creations before deletions at the same time), filters, replicates and writes.
struct Driver<'a, W: Write> {
    opts: &'a ConvertOptions,
    writer: TraceWriter<BufWriter<W>>,
    stats: ConvertStats,
    /// Source pods created (or left out) so far.
    created: HashSet<String>,
    /// Source pods created and not yet deleted.
    alive: HashSet<String>,
    /// Source pods left out (fraction of a GPU, sampled out): their deletions are dropped.
    dropped: HashSet<String>,
    /// The time of the rows in `group`.
    group_time: Option<f64>,
    group: Vec<(String, bool, Action)>,
    last_time: f64,
}

impl<W: Write> Driver<'_, W> {
    /// Takes one row; `Ok(false)` once `max_events` is reached; `Err` for a row that is bad in
    /// context (time going backwards, a pod created twice).
    fn push(&mut self, row: Row) -> Result<bool, Stop> {
        if row.time_s < self.last_time {
            return Err(Stop::Bad(RowReason::TimeDecreased {
                time: row.time_s,
                previous: self.last_time,
            }));
        }
        if matches!(row.action, Action::Create(_) | Action::SkipFractionalGpu)
            && !self.created.insert(row.pod.clone())
        {
            return Err(Stop::Bad(RowReason::CreatedTwice { pod: row.pod }));
        }
        self.last_time = row.time_s;
        if self.opts.until_s.is_some_and(|u| row.time_s >= u) {
            self.stats.after_window += 1;
            return Ok(true);
        }
        if self.group_time != Some(row.time_s) {
            if !self.flush().map_err(Stop::Write)? {
                return Ok(false);
            }
            self.group_time = Some(row.time_s);
        }
        match row.action {
            Action::Create(_) if !sampled_in(&row.group, self.opts.sample_one_in) => {
                self.stats.sampled_out += 1;
                self.dropped.insert(row.pod);
            }
            Action::SkipFractionalGpu => {
                self.stats.skipped_fractional_gpu += 1;
                self.dropped.insert(row.pod);
            }
            Action::Delete if self.dropped.remove(&row.pod) => {}
            action => self.group.push((row.pod, row.at_start, action)),
        }
        Ok(true)
    }

    /// Writes `group`: creations first, then deletions. `Ok(false)` once `max_events` is
    /// reached (the rest is dropped).
    fn flush(&mut self) -> io::Result<bool> {
        let Some(time_s) = self.group_time else {
            return Ok(true);
        };
        let t = (time_s.max(0.0) * 1000.0 / self.opts.time_compress).round() as u64;
        let group = std::mem::take(&mut self.group);
        let (creates, deletes): (Vec<_>, Vec<_>) = group
            .into_iter()
            .partition(|(_, _, a)| matches!(a, Action::Create(_)));
        let ns = self.opts.namespace.clone();
        for (pod, at_start, action) in creates {
            let Action::Create(template) = action else {
                continue;
            };
            let Some(base) = object_name(&pod) else {
                continue;
            };
            for copy in 0..self.opts.replicate {
                let name = replica_name(&base, copy);
                let event = RawEvent::PodCreated {
                    pod: template.manifest(&name, &ns),
                };
                if !self.write(t, &event)? {
                    return Ok(false);
                }
                if at_start {
                    self.stats.pods_at_start += 1;
                } else {
                    self.stats.creates += 1;
                }
                self.stats.pods += 1;
            }
            self.alive.insert(pod);
        }
        for (pod, _, _) in deletes {
            if self.dropped.remove(&pod) {
                continue;
            }
            if !self.alive.remove(&pod) {
                self.stats.unmatched_deletes += 1;
                continue;
            }
            let Some(base) = object_name(&pod) else {
                continue;
            };
            for copy in 0..self.opts.replicate {
                let event = RawEvent::PodDeleted(super::event::PodRef {
                    namespace: ns.clone(),
                    name: replica_name(&base, copy),
                });
                if !self.write(t, &event)? {
                    return Ok(false);
                }
                self.stats.deletes += 1;
            }
        }
        Ok(true)
    }

    fn write(&mut self, t: u64, event: &RawEvent) -> io::Result<bool> {
        if let Some(max) = self.opts.max_events {
            if self.writer.events_written() >= max as u64 {
                self.stats.truncated = true;
                return Ok(false);
            }
        }
        self.writer.write(t, event)?;
        Ok(true)
    }
}

/// The name of copy `copy` of a pod: the original for copy 0, then `-r1`, `-r2`, ...
pub(crate) fn replica_name(base: &str, copy: u32) -> String {
    if copy == 0 {
        base.to_string()
    } else {
        format!("{base}-r{copy}")
    }
}
