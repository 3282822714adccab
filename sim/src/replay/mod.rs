//! `dovetail replay`: a workload trace against the embedded simulation of Kubernetes and EC2,
//! with the real engine making every decision.

mod facts;
mod report;
mod summary;
mod world;

pub use report::{svg_line_chart, write_report, Series};
pub use summary::{CapacityTypeUsage, Percentiles, ReplaySummary, TimelineRow};
pub use world::{replay, Progress, ReplayError, ReplayOptions, ReplayOutcome};
