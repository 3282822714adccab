//! What a cloud reports about the instances it runs: lifecycle steps and interruption warnings,
//! each at an exact instant. The simulator emits them on its virtual clock; the AWS backend turns
//! DescribeInstances changes and SQS messages into the same events.

use serde::{Deserialize, Serialize};

/// Why an instance ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TerminationCause {
    /// TerminateInstances was called.
    Requested,
    /// Reclaimed after a spot interruption warning.
    SpotInterruption,
    /// Reclaimed after a capacity reservation interruption warning.
    CapacityReservationInterruption,
    /// Stopped or terminated outside the autoscaler (a state-change notification).
    StateChange,
}

/// What happened to an instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CloudEventKind {
    /// EC2 state `running`.
    Running,
    /// The kubelet registered the Node (add it to the cluster, not yet schedulable).
    NodeRegistered,
    /// The Node is initialised: Ready, startup taints removed.
    NodeInitialized,
    /// Two-minute warning; reclaimed at `terminate_at_ms` unless terminated first.
    SpotInterruptionWarning {
        terminate_at_ms: i64,
    },
    /// Two-minute warning for an instance in an interruptible capacity reservation.
    CapacityReservationInterruptionWarning {
        terminate_at_ms: i64,
    },
    RebalanceRecommendation,
    ScheduledChange,
    /// The instance is gone (EC2 state `terminated`): remove its Node.
    Terminated {
        cause: TerminationCause,
    },
}

/// One event at an exact virtual instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloudEvent {
    pub at_ms: i64,
    pub instance_id: String,
    pub kind: CloudEventKind,
}
