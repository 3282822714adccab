//! The drivers of dovetail's control loop, shared by the binary, its tests and the benchmarks:
//! `replay` runs the loop against the simulated cloud and cluster on a virtual clock.

pub mod replay;
