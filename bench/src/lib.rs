//! dovetail's benchmarks: Karpenter's scheduling-benchmark mix run through the engine, cold and
//! incrementally, against from-scratch recomputation.

pub mod churn;
pub mod disruption;
pub mod measure;
pub mod packing;
pub mod plan_cluster;
pub mod processes;
pub mod report;
pub mod workload;
