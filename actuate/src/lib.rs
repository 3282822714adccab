//! dovetail's actuation, backend-neutral: the control loop, launch execution (CreateFleet
//! overrides, NodeClaim names), registration, the disruption executor and the capacity-error
//! cache. It talks to the world only through the `Cloud` and `Cluster` interfaces of
//! `dovetail_dataflow::backend`, and decides nothing.

mod actions;
mod actuator;
pub mod batching;
pub mod capacity_errors;
mod control_loop;
pub mod disruption;
pub mod drain;
pub mod driver;
pub mod garbage_collection;
mod instance_types;
mod launch;
mod launch_timeout;
pub mod naming;
pub mod overrides;
pub mod registration;

pub use actions::{actions, Action};
pub use actuator::{ActuationSettings, ActuationStats, Actuator};
pub use batching::BatchWindow;
pub use control_loop::{histogram, ControlLoop};
pub use disruption::POLL_INTERVAL_MS;
