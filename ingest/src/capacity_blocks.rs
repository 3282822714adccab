//! Capacity blocks ending: an EC2NodeClass's `status.capacityReservations` lists the
//! reservations its nodes may use, with `reservationType` and `endTime`; a node launched into one
//! carries its id in the `karpenter.k8s.aws/capacity-reservation-id` label. A capacity block's
//! nodes are interrupted before the block ends (the interruption query says when), as
//! Karpenter's `capacityreservation.expiration` controller deletes their NodeClaims.

use crate::error::FieldResult;
use crate::fields::At;
use crate::time::parse_rfc3339_ms;
use dovetail_dataflow::facts::{Interruption, InterruptionKind};
use dovetail_dataflow::model::Node;
use std::collections::BTreeMap;

/// The label Karpenter puts on a NodeClaim (and its Node) launched into a capacity reservation.
pub use dovetail_dataflow::model::labels::CAPACITY_RESERVATION_ID as RESERVATION_ID_LABEL;

/// A capacity block and when it ends (ms since the epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CapacityBlock {
    pub id: String,
    pub end_ms: i64,
}

/// The capacity blocks in an EC2NodeClass's status. Reservations of another type never end
/// by themselves and are left out; a capacity block must say when it ends.
pub(crate) fn capacity_blocks(root: &At) -> FieldResult<Vec<CapacityBlock>> {
    let Some(status) = root.obj("status")? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for r in status.list("capacityReservations")? {
        if r.str("reservationType")?.as_deref() != Some("capacity-block") {
            continue;
        }
        let id = r.req_str("id")?;
        let end = r.require("endTime")?;
        let text = end.as_string()?;
        let end_ms = parse_rfc3339_ms(&text)
            .ok_or_else(|| end.err(format!("{text:?} is not an RFC 3339 time")))?;
        out.push(CapacityBlock { id, end_ms });
    }
    Ok(out)
}

/// One interruption per node in a capacity block, timed at the block's end.
pub(crate) fn blocks_ending(blocks: &[CapacityBlock], nodes: &[Node]) -> Vec<Interruption> {
    let ends: BTreeMap<&str, i64> = blocks.iter().map(|b| (b.id.as_str(), b.end_ms)).collect();
    nodes
        .iter()
        .filter_map(|n| {
            let id = n.labels.get(RESERVATION_ID_LABEL)?;
            Some(Interruption {
                target: n.name.clone(),
                kind: InterruptionKind::CapacityBlockEnding,
                at_ms: *ends.get(id.as_str())?,
            })
        })
        .collect()
}
