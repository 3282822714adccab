//! dovetail on Kubernetes: the controller's watches of Pods, Nodes and Karpenter's own objects
//! (`karpenter.sh/v1`, `karpenter.k8s.aws/v1`) read into engine facts, its writes (NodeClaims
//! as Karpenter writes them, Node registration / taints / cordons, evictions, Events), and the
//! live cluster as actuation's `Cluster`. A leaf crate only the binary depends on. Kubernetes
//! API types of 1.33 (`k8s-openapi` feature `v1_33`).

pub mod cluster;
pub mod connect;
pub mod decision_events;
pub mod drifted;
pub mod eviction_backoff;
pub mod kinds;
pub mod leader;
pub mod nodeclaim;
pub mod nodeclaim_deletions;
pub mod nodeclass_status;
pub mod provisionable;
pub mod test_peer;
pub mod watch;
pub mod writes;

pub use cluster::{ClusterCounts, KubeCluster};
pub use kinds::{WatchedKind, WATCHED};
pub use watch::{watch_all, FactUpdate, SkippedObject, WatchStats};
pub use writes::ClusterWriter;
