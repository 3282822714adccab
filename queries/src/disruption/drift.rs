//! Query — drift: nodes that no longer match what their NodePool and EC2NodeClass would launch.
//!
//! Rule, checked in this order (the first that holds is the reason):
//! 1. the NodeClaim's `dovetail.sh/nodepool-hash` differs from the NodePool's current hash of its
//!    template without requirements and resources, or its `dovetail.sh/nodeclass-hash` from the
//!    EC2NodeClass's hash of its spec without selector terms; a NodeClaim without those
//!    annotations is adopted with the current hashes (an `Adopt` decision), not drifted;
//! 2. its labels no longer satisfy the NodePool's requirements;
//! 3. its AMI is not among the EC2NodeClass's resolved `status.amis`;
//! 4. its subnet is not among `status.subnets`, or its security groups differ from
//!    `status.securityGroups`;
//! 5. its Nitro Enclaves setting differs from the EC2NodeClass's;
//! 6. its instance type is no longer offered by the NodePool.
//!
//! Unknown launch details (no AMI, subnet or groups recorded; a status not resolved yet) are not
//! drift.

use super::types::Forced;
use crate::types::PoolTypes;
use differential_dataflow::VecCollection;
use dovetail_dataflow::decisions::Decision;
use dovetail_dataflow::disruption_reasons::DriftReason;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::labels::{INSTANCE_TYPE, NODECLASS_HASH, NODEPOOL, NODEPOOL_HASH};
use dovetail_dataflow::model::{EC2NodeClass, Node, Requirements, SharedNode};
use std::collections::BTreeSet;

/// What a node's NodePool says about its drift (computed where the NodePool's offer is at hand,
/// so the offer itself is not copied per node).
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct PoolDrift {
    pub nodepool_hash: String,
    pub template: Option<DriftReason>,
    pub requirements: Option<DriftReason>,
    pub instance_type: Option<DriftReason>,
}

/// What drift reads of a NodePool and its offer. Prices and offerings are left out: a price
/// change rewrites the NodePool's whole offer, and joining nodes against the offer re-checked
/// every node of the pool at each one (a sixth of a change's cost at 10,000 nodes).
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct PoolView {
    pub name: String,
    pub node_class: String,
    pub drift_hash: String,
    pub requirements: Requirements,
    /// The instance types it offers; None while it cannot launch anything (then no type has
    /// drifted).
    pub types: Option<BTreeSet<String>>,
}

impl PoolView {
    pub fn of(pool: &PoolTypes) -> PoolView {
        let np = &pool.nodepool;
        PoolView {
            name: np.name.clone(),
            node_class: np.node_class.clone().unwrap_or_default(),
            drift_hash: np.drift_hash(),
            requirements: np.requirements.clone(),
            types: pool.not_ready.is_none().then(|| {
                pool.types
                    .iter()
                    .map(|t| t.instance_type.name.clone())
                    .collect()
            }),
        }
    }
}

/// Rules 1 (NodePool half), 2 and 6.
pub fn pool_drift(node: &Node, pool: &PoolView) -> PoolDrift {
    let now = pool.drift_hash.clone();
    let template = node
        .annotations
        .get(NODEPOOL_HASH)
        .filter(|h| **h != now)
        .map(|h| DriftReason::NodePoolHash {
            nodepool: pool.name.clone(),
            was: h.clone(),
            now: now.clone(),
        });
    let requirements = Requirements::from_labels(&node.labels)
        .compatible(&pool.requirements, |_| false)
        .err()
        .map(|e| DriftReason::Requirements {
            nodepool: pool.name.clone(),
            key: e.key.to_string(),
            detail: e.detail.to_string(),
        });
    let instance_type = node.labels.get(INSTANCE_TYPE).and_then(|t| {
        let offered = pool.types.as_ref().is_none_or(|types| types.contains(t));
        (!offered).then(|| DriftReason::InstanceType {
            instance_type: t.clone(),
            nodepool: pool.name.clone(),
        })
    });
    PoolDrift {
        nodepool_hash: now,
        template,
        requirements,
        instance_type,
    }
}

/// The first drift reason of a node, in the rule's order.
pub fn drift_reason(node: &Node, pool: &PoolDrift, class: &EC2NodeClass) -> Option<DriftReason> {
    if pool.template.is_some() {
        return pool.template.clone();
    }
    if let Some(h) = node.annotations.get(NODECLASS_HASH) {
        let now = class.drift_hash();
        if *h != now {
            return Some(DriftReason::NodeClassHash {
                nodeclass: class.name.clone(),
                was: h.clone(),
                now,
            });
        }
    }
    if pool.requirements.is_some() {
        return pool.requirements.clone();
    }
    let status = &class.status;
    let l = &node.launched;
    if let Some(ami) = &l.image_id {
        if !status.ami_ids.is_empty() && !status.ami_ids.contains(ami) {
            return Some(DriftReason::Ami {
                ami: ami.clone(),
                nodeclass: class.name.clone(),
            });
        }
    }
    if let Some(subnet) = &l.subnet_id {
        if !status.subnet_ids.is_empty() && !status.subnet_ids.contains(subnet) {
            return Some(DriftReason::Subnet {
                subnet: subnet.clone(),
                nodeclass: class.name.clone(),
            });
        }
    }
    if !l.security_group_ids.is_empty() && !status.security_group_ids.is_empty() {
        let launched: BTreeSet<&String> = l.security_group_ids.iter().collect();
        let selected: BTreeSet<&String> = status.security_group_ids.iter().collect();
        if launched != selected {
            return Some(DriftReason::SecurityGroups {
                nodeclass: class.name.clone(),
            });
        }
    }
    if let Some(e) = l.enclaves {
        if e != class.enclaves_enabled {
            return Some(DriftReason::Enclaves {
                nodeclass: class.name.clone(),
            });
        }
    }
    pool.instance_type.clone()
}

/// What the drift query says about one node.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum DriftOut {
    Drifted(String, Forced),
    Adopt(Decision),
}

pub fn drift<'s>(
    nodes: VecCollection<'s, Epoch, SharedNode>,
    pools: VecCollection<'s, Epoch, (String, PoolTypes)>,
    nodeclasses: VecCollection<'s, Epoch, EC2NodeClass>,
) -> VecCollection<'s, Epoch, DriftOut> {
    let managed = nodes
        .filter(|n| n.labels.contains_key(NODEPOOL))
        .map(|n| (n.labels.get(NODEPOOL).cloned().unwrap_or_default(), n));
    // Mapped before the join: a change that leaves the view as it was (a price) cancels out
    // when the join arranges it, and reaches no node.
    let views = pools.map(|(name, pool)| (name, PoolView::of(&pool)));
    managed
        .join_map(views, |_, n, pool| {
            (pool.node_class.clone(), (n.clone(), pool_drift(n, pool)))
        })
        .join_map(
            nodeclasses.map(|c| (c.name.clone(), c)),
            |_, (n, pool), class| {
                let mut out = Vec::new();
                if let Some(claim) = &n.nodeclaim {
                    if !n.annotations.contains_key(NODEPOOL_HASH)
                        || !n.annotations.contains_key(NODECLASS_HASH)
                    {
                        out.push(DriftOut::Adopt(Decision::Adopt {
                            nodeclaim: claim.clone(),
                            nodepool_hash: pool.nodepool_hash.clone(),
                            nodeclass_hash: class.drift_hash(),
                        }));
                    }
                }
                if let Some(reason) = drift_reason(n, pool, class) {
                    out.push(DriftOut::Drifted(n.name.clone(), Forced::Drifted(reason)));
                }
                out
            },
        )
        .flat_map(|v| v)
}
