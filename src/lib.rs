//! The drivers of dovetail's control loop, shared by the binary, its tests and the benchmarks:
//! `replay` runs the loop against the simulated cloud and cluster on a virtual clock; `run` runs
//! it on the wall clock against a real cloud (EC2) with the simulated cluster.

pub mod crds;
pub mod replay;
pub mod run;
