//! dovetail's domain model, embedded EC2 catalogue, and the timely engine harness.

pub mod backend;
pub mod catalog;
pub mod cluster;
pub mod decisions;
pub mod disruption_reasons;
pub mod engine;
pub mod fact_set;
pub mod facts;
pub mod maintained;
pub mod model;
mod operator_time;
pub mod provisioning_verdicts;
pub mod scheduling_reasons;
pub mod stable_hash;
pub mod temporal;
