//! `dovetail replay`: a workload trace against the embedded simulation of Kubernetes and EC2,
//! with the real engine making every decision.

mod disruption;
mod facts;
mod launch;
mod node_facts;
mod report;
mod run;
mod summary;
mod world;

pub use report::{svg_line_chart, write_report, Series};
pub use run::{replay, Progress, ReplayError, ReplayOptions, ReplayOutcome};
pub use summary::{CapacityTypeUsage, Percentiles, ReplaySummary, TimelineRow};
