//! Query — pending pods' room: the capacity on existing nodes that pending pods are planned to
//! take, which consolidation must not count as free.
//!
//! Rule: Karpenter's `SimulateScheduling` (pkg/controllers/disruption/helpers.go) schedules the
//! pending pods together with the candidates' pods onto the cluster's nodes, in-flight
//! NodeClaims included, so a node is never consolidated into room that pending pods need. Here
//! the provisioning half has already placed each pending pod — on an existing node, on an
//! in-flight NodeClaim, or on a launch — so each node's state as disruption reads it carries,
//! on top of its bound pods, the requests of the pending pods placed on it. Pending pods placed
//! on in-flight NodeClaims take that room instead of an existing node's; candidates' pods
//! themselves do not land on in-flight NodeClaims (Karpenter refuses a command that would
//! schedule them on an uninitialized node).

use crate::types::{ClassId, NodeState, PodClass};
use differential_dataflow::VecCollection;
use dovetail_dataflow::decisions::Placement;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::Resources;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
enum Part {
    State(Box<NodeState>),
    /// Requests of pending pods placed on the node.
    Pending(Resources),
}

/// Each node's state with the requests of the pending pods placed on it added to `used`.
/// Nodes without pending pods pass through unchanged.
pub fn with_pending_pods<'s>(
    usage: VecCollection<'s, Epoch, (String, NodeState)>,
    placements: VecCollection<'s, Epoch, Placement>,
    specs: VecCollection<'s, Epoch, (ClassId, PodClass)>,
) -> VecCollection<'s, Epoch, (String, NodeState)> {
    let pending = placements.map(|p| (p.class, (p.target, p.count))).join_map(
        specs,
        |_, (target, count), class| {
            (
                target.clone(),
                Part::Pending(class.scheduling.requests.times(*count)),
            )
        },
    );
    usage
        .map(|(name, state)| (name, Part::State(Box::new(state))))
        .concat(pending)
        .reduce_named("PendingRoom", |_, parts, out| {
            let mut state = None;
            let mut pending = Resources::default();
            for (part, r) in parts {
                match part {
                    Part::State(s) => state = Some(s),
                    Part::Pending(req) => pending.add_assign(&req.times(*r as i64)),
                }
            }
            let Some(state) = state else {
                return;
            };
            let mut state = (**state).clone();
            state.used.add_assign(&pending);
            out.push((state, 1));
        })
}
