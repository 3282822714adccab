//! Query — expiration: nodes older than their NodeClaim's `expireAfter`.
//!
//! Rule: a node expires `expireAfter` (default 720h; `Never` disables it) after its NodeClaim
//! was created (Karpenter's expiration controller reads the NodeClaim's `creationTimestamp`; a
//! NodeClaim created long before its Node registered expires that much earlier); a node
//! without a NodeClaim counts from its own creation;
//! from then on it is disrupted forcefully, outside budgets, as Karpenter does. The value is the
//! NodeClaim's own `spec.expireAfter` (Karpenter copies it from the NodePool when it creates the
//! claim, so changing the NodePool's later does not move existing nodes' expiry); the NodePool's
//! current value counts only for a node whose NodeClaim was not read. A timer on the logical
//! clock: nothing is recomputed until the moment comes.

use super::types::Forced;
use differential_dataflow::VecCollection;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::duration::parse_duration;
use dovetail_dataflow::model::labels::NODEPOOL;
use dovetail_dataflow::model::{Node, NodePool, SharedNode};
use dovetail_dataflow::temporal::during;

/// Karpenter's default `expireAfter`.
pub const DEFAULT_EXPIRE_AFTER_MS: i64 = 720 * 3_600_000;

/// `expireAfter` in ms (`None`: Never). Malformed values fall back to the default; the manifest
/// reader reports them.
pub fn expire_after_ms(pool: &NodePool) -> Option<i64> {
    duration_or_default(pool.expire_after.as_deref())
}

fn duration_or_default(value: Option<&str>) -> Option<i64> {
    match value {
        None => Some(DEFAULT_EXPIRE_AFTER_MS),
        Some(v) => parse_duration(v).unwrap_or(Some(DEFAULT_EXPIRE_AFTER_MS)),
    }
}

/// When a node's lifetime starts: its NodeClaim's creation, else its own.
pub fn lifetime_start_ms(n: &Node) -> Option<i64> {
    n.nodeclaim_created_ms.or(n.created_ms)
}

/// A node's `expireAfter` in ms: its NodeClaim's own value, else its NodePool's (`None`: Never).
pub fn node_expire_after_ms(own: Option<&str>, pool: Option<&str>) -> Option<i64> {
    duration_or_default(own.or(pool))
}

/// When each NodePool-managed node expires: (node, ms); none with `expireAfter: Never`.
pub fn expiry_deadlines<'s>(
    nodes: VecCollection<'s, Epoch, SharedNode>,
    nodepools: VecCollection<'s, Epoch, NodePool>,
) -> VecCollection<'s, Epoch, (String, i64)> {
    nodes
        .flat_map(|n| {
            let pool = n.labels.get(NODEPOOL)?.clone();
            let created = lifetime_start_ms(&n)?;
            Some((pool, (n.name.clone(), created, n.expire_after.clone())))
        })
        .join_map(
            nodepools.map(|p| (p.name.clone(), p)),
            |_, (node, created, own), pool| {
                node_expire_after_ms(own.as_deref(), pool.expire_after.as_deref())
                    .map(|after| (node.clone(), created.saturating_add(after)))
            },
        )
        .flat_map(|d| d)
}

/// The nodes whose deadline (from [`expiry_deadlines`]) has come.
pub fn expiration<'s>(
    deadlines: VecCollection<'s, Epoch, (String, i64)>,
) -> VecCollection<'s, Epoch, (String, Forced)> {
    during(deadlines, |(_, at)| (*at, None)).map(|(node, at_ms)| (node, Forced::Expired { at_ms }))
}
