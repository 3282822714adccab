//! `dovetail replay`: a workload trace against the embedded simulation of Kubernetes and EC2
//! (`dovetail-sim`), with the real engine making every decision and the control loop
//! (`dovetail-actuate`) acting on them through the simulated `Cloud` and `Cluster`.

mod breakdown;
mod error;
mod idle;
mod node_facts;
mod report;
mod run;
mod summary;
mod too_large;
pub(crate) mod world;

pub use error::ReplayError;
pub use report::{svg_line_chart, write_report, Series};
pub use run::{replay, Progress, ReplayOptions, ReplayOutcome};
pub use summary::{CapacityTypeUsage, CostBreakdown, Percentiles, ReplaySummary, TimelineRow};
