//! dovetail's embedded world for `dovetail replay`: a virtual clock, simulated EC2
//! ([`SimCloud`]: CreateFleet with capacity and ICE, boot delays, termination, spot
//! interruptions, cost) and a simulated kube-scheduler and kubelet ([`SimCluster`]).
//!
//! Nothing here decides what the engine decides: the cloud fills the launches it is given and
//! the cluster binds pods to the nodes that exist. See `sim/README.md` for the semantics and the
//! defaults.

pub mod clock;
pub mod cloud;
pub mod cluster;
pub mod config;
pub mod cost;
pub mod eventbridge;
pub mod events;
pub mod fit;
pub mod fleet;
pub mod instance;
pub mod key;
pub mod node;
pub mod pdb;
pub mod replay;
pub mod rng;
pub mod spot_advisor;
pub mod stats;

pub use clock::{ClockError, EventQueue, VirtualClock};
pub use cloud::{CloudError, SimCloud};
pub use cluster::{Blocked, ClusterError, DrainOutcome, SimCluster};
pub use config::{ConfigError, SimConfig, DEFAULT_ICE_TTL_MS, INTERRUPTION_WARNING_MS};
pub use cost::{CapacityTypeCost, CostReport};
pub use events::{CloudEvent, CloudEventKind, InterruptionKind, TerminationCause};
pub use fit::Unfit;
pub use fleet::{fleet_candidates, fleet_capacity_type, FleetCandidate, FleetError};
pub use instance::{Instance, InstanceState};
pub use key::OfferingKey;
pub use node::node_for_instance;
pub use rng::SimRng;
pub use stats::percentile;
