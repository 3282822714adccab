//! Why a converter refused a CSV row or its options, as values: the column, what was found and
//! what was expected. Words only in `Display`.

use std::str::Utf8Error;

/// Why a row (or the CSV header, line 1) was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RowReason {
    #[error("the CSV is empty; expected a header with {}", columns.join(","))]
    EmptyCsv { columns: Vec<&'static str> },
    #[error("the CSV header has no column {column} (expected {})", columns.join(","))]
    MissingColumn {
        column: &'static str,
        columns: Vec<&'static str>,
    },
    #[error("not UTF-8 text: {0}")]
    NotUtf8(Utf8Error),
    #[error("quoted CSV fields are not supported")]
    Quoted,
    #[error("{found} fields, but the header has {expected}")]
    FieldCount { found: usize, expected: usize },
    /// A column's text does not parse as what it holds.
    #[error("{column} {value:?} is not {expected}")]
    NotA {
        column: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error(
        "time {time} is earlier than the previous row's {previous}; rows must be sorted by time"
    )]
    TimeDecreased { time: f64, previous: f64 },
    #[error("pod {pod} is created twice")]
    CreatedTwice { pod: String },
    #[error("pod {pod:?} cannot be made a Kubernetes pod name")]
    PodName { pod: String },
    #[error("negative time {time}")]
    NegativeTime { time: f64 },
    #[error("create at negative time {time}")]
    CreateAtNegativeTime { time: f64 },
    #[error("present_at_start at time {time}; expected -1 (before the trace starts)")]
    PresentLater { time: f64 },
    #[error("event {found:?} is not {expected}")]
    UnknownEvent {
        found: String,
        expected: &'static str,
    },
    #[error("{column} {value:?} is not a valid label value")]
    LabelValue { column: &'static str, value: String },
    #[error("app {app:?} and role {role:?} do not make an owner name")]
    OwnerName { app: String, role: String },
    #[error("gpu_milli {gpu_milli} without a GPU (num_gpu 0)")]
    GpuMilliWithoutGpu { gpu_milli: u64 },
    #[error("num_gpu {num_gpu} with gpu_milli {gpu_milli} is neither whole GPUs (1000 per GPU) nor a share of one GPU")]
    GpuShares { num_gpu: u64, gpu_milli: u64 },
}

/// Why [`super::ConvertOptions`] cannot drive a conversion.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OptionsReason {
    #[error("replicate must be at least 1")]
    NoReplicas,
    #[error("time_compress must be a number > 0, not {0}")]
    TimeCompress(f64),
    #[error("sample_one_in must be at least 1")]
    NoSample,
    #[error("until_s must be a number")]
    UntilNotANumber,
    #[error("namespace {0:?} is not a valid namespace name (lower-case letters, digits and '-', at most 63)")]
    Namespace(String),
}
