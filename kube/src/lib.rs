//! dovetail on Kubernetes: the controller's watches of Pods, Nodes and Karpenter's own objects
//! (`karpenter.sh/v1`, `karpenter.k8s.aws/v1`) read into engine facts, and its writes (NodeClaims
//! as Karpenter writes them, Node taints / cordons / annotations, evictions). A leaf crate only
//! the binary depends on. Kubernetes API types of 1.33 (`k8s-openapi` feature `v1_33`).

pub mod kinds;
pub mod nodeclaim;
pub mod provisionable;
pub mod test_peer;
pub mod watch;
pub mod writes;

pub use kinds::{WatchedKind, WATCHED};
pub use watch::{watch_all, FactUpdate, WatchStats};
pub use writes::ClusterWriter;
