//! The interruptions a trace (or test) can force on a simulated instance.

use serde::{Deserialize, Serialize};

/// An interruption a trace (or test) injects with `SimCloud::forced_interrupt`, named after the
/// EventBridge messages Karpenter's interruption controller consumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum InterruptionKind {
    /// "EC2 Spot Instance Interruption Warning": reclaimed two minutes later.
    SpotInterruption,
    /// "EC2 Capacity Reservation Instance Interruption Warning": reclaimed two minutes later.
    CapacityReservationInterruption,
    /// "EC2 Instance Rebalance Recommendation": advice only; nothing happens to the instance.
    RebalanceRecommendation,
    /// "AWS Health Event", category `scheduledChange`: advice only here (the maintenance itself
    /// is days away in reality and is not simulated).
    ScheduledChange,
    /// "EC2 Instance State-change Notification" to stopping, stopped, shutting-down or
    /// terminated: the instance is gone at once.
    StateChange,
}
