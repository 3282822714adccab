//! The drivers of dovetail's control loop, shared by the binary, its tests and the benchmarks:
//! `replay` runs the loop against the simulated cloud and cluster on a virtual clock; `run` runs
//! it on the wall clock against a real cloud (EC2) with the simulated cluster; `plan` and
//! `explain` answer from manifests, and `run` serves the same explanations over HTTP.

pub mod crds;
pub mod explain;
pub mod feature_gates;
pub mod output;
pub mod plan;
pub mod replay;
pub mod run;
