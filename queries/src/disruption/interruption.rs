//! Query — interruption: nodes EC2 is about to take away.
//!
//! Rule: a spot interruption warning, a scheduled change, a stopping or terminating instance, or
//! a capacity-reservation interruption for a node's instance (matched by instance id, node name
//! or NodeClaim name) disrupts it at once, outside budgets. A capacity block's node is
//! disrupted 10 minutes before EC2 starts reclaiming it (EC2 starts 30 minutes before the block
//! ends, so 40 minutes before the end). A rebalance recommendation is recorded, not acted on.

use super::types::Forced;
use differential_dataflow::VecCollection;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::facts::{Interruption, InterruptionKind};
use dovetail_dataflow::model::{Node, SharedNode};
use dovetail_dataflow::temporal::during;

/// How long before a capacity block ends its nodes are drained.
pub const CAPACITY_BLOCK_LEAD_MS: i64 = 40 * 60_000;

/// The keys an interruption message may use for a node.
fn keys(n: &Node) -> Vec<String> {
    let mut keys = vec![n.name.clone()];
    if let Some(c) = &n.nodeclaim {
        keys.push(c.clone());
    }
    if let Some(id) = n.provider_id.as_deref().and_then(|p| p.rsplit('/').next()) {
        if !id.is_empty() {
            keys.push(id.to_string());
        }
    }
    keys.sort();
    keys.dedup();
    keys
}

pub fn interruption<'s>(
    nodes: VecCollection<'s, Epoch, SharedNode>,
    interruptions: VecCollection<'s, Epoch, Interruption>,
) -> VecCollection<'s, Epoch, (String, Forced)> {
    let by_key = nodes.flat_map(|n| {
        let name = n.name.clone();
        keys(&n).into_iter().map(move |k| (k, name.clone()))
    });
    let acted = interruptions
        .filter(|i| i.kind != InterruptionKind::RebalanceRecommendation)
        .map(|i| (i.target.clone(), i));
    let timed = during(acted, |(_, i)| {
        let from = match i.kind {
            InterruptionKind::CapacityBlockEnding => i.at_ms - CAPACITY_BLOCK_LEAD_MS,
            _ => 0,
        };
        (from, None)
    });
    timed
        .join_map(by_key, |_, i, node| {
            (node.clone(), Forced::Interrupted(i.kind))
        })
        .distinct()
}
