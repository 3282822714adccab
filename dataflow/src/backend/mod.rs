//! The two interfaces actuation talks to the world through — [`Cloud`] (EC2) and [`Cluster`]
//! (Kubernetes) — and the backend-neutral records they exchange. The simulator implements both
//! on a virtual clock; the AWS and Kubernetes clients implement them on the wall clock.
//!
//! Both are shaped for slow, asynchronous backends: a call that changes the world is *submitted*
//! and returns at once; what came of it is collected later with `poll_replies`. A synchronous
//! backend (the simulator) answers before the next poll; an async client answers when its call
//! completes, and the control loop keeps closing epochs meanwhile. Reads (`instance`, `node`,
//! `pods_on`, `nodeclaims`) come from the backend's own cache of the world (a watch cache, the
//! last DescribeInstances), never from a blocking call.

mod cloud;
mod cluster;
mod events;
mod instance;
mod nodeclaim;
mod offering;

pub use cloud::{Cloud, CloudReply, FleetOverride, FleetRequest, LaunchError};
pub use cluster::{Cluster, ClusterEvent, ClusterReply};
pub use events::{CloudEvent, CloudEventKind, TerminationCause};
pub use instance::{Instance, InstanceState};
pub use nodeclaim::NodeClaim;
pub use offering::{OfferingKey, OfferingKeyError, CAPACITY_TYPES};
