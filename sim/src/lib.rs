//! dovetail's embedded world: a virtual clock, simulated EC2 ([`SimCloud`]: CreateFleet with
//! capacity and ICE, boot delays, termination, spot interruptions, cost) and a simulated
//! kube-scheduler and kubelet ([`SimCluster`]). They implement the `Cloud` and `Cluster`
//! interfaces of `dovetail_dataflow::backend`, as the real backends do.
//!
//! Nothing here decides what the engine decides, or acts as the controller acts: the cloud fills
//! the requests it is given and the cluster binds pods to the nodes that exist. See
//! `sim/README.md` for the semantics and the defaults.

mod bound_counts;
pub mod clock;
pub mod cloud;
pub mod cluster;
mod cluster_api;
pub mod config;
pub mod cost;
pub mod eventbridge;
pub mod fit;
pub mod interrupt;
pub mod pdb;
pub mod rng;
pub mod score;
pub mod spot_advisor;
mod state;
pub mod stats;

pub use clock::{ClockError, EventQueue, VirtualClock};
pub use cloud::{CloudError, SimCloud};
pub use cluster::{Blocked, ClusterChanges, ClusterError, DrainOutcome, SimCluster};
pub use config::{ConfigError, SimConfig, DEFAULT_ICE_TTL_MS, INTERRUPTION_WARNING_MS};
pub use cost::{CapacityTypeCost, CostReport};
pub use fit::Unfit;
pub use interrupt::InterruptionKind;
pub use rng::SimRng;
pub use stats::percentile;
