//! The domain model: what Kubernetes and Karpenter objects mean to the scheduler.

pub mod cron;
pub mod duration;
pub mod instance_type;
pub mod kubelet;
pub mod label_set;
pub mod labels;
pub mod node;
pub mod nodepool;
pub mod pod;
pub mod quantity;
pub mod requirements;
pub mod resources;
pub mod selector;
pub mod shared;
pub mod taints;

pub use instance_type::{InstanceType, Offering, Price, UnitCost};
pub use kubelet::{KubeletConfig, Threshold};
pub use label_set::LabelSet;
pub use node::{DaemonSet, LaunchedWith, Node, PodDisruptionBudget, SharedNode};
pub use nodepool::{
    Budget, CapacityReservation, ConsolidationPolicy, Disruption, EC2NodeClass, NodeClassStatus,
    NodeOverlay, NodePool,
};
pub use pod::{Pod, PodAffinityTerm, PodScheduling, SharedPod, TopologySpread, WhenUnsatisfiable};
pub use quantity::{parse_quantity, Milli};
pub use requirements::{Operator, Requirement, Requirements};
pub use resources::Resources;
pub use selector::LabelSelector;
pub use shared::Shared;
pub use taints::{Effect, Taint, Toleration, TolerationOperator};
