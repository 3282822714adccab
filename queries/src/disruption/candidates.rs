//! Query — disruption candidates: every node a NodePool manages, with what the rules read.
//!
//! Rule: a registered node labelled `karpenter.sh/nodepool` with a known NodePool is a
//! candidate. It carries the key of its offering (NodePool, type, zone, capacity type; priced by
//! [`offer_prices`] from the NodePool's current instance types, apart from the candidate), its
//! movable pods by class and their eviction cost, and its blockers: `karpenter.sh/do-not-disrupt:
//! "true"` on the node or NodeClaim, or a pod or PodDisruptionBudget that forbids eviction. It
//! is consolidatable once `consolidateAfter` has passed since its last pod event (or since it
//! was created, when no pod event is recorded) — a timer on the logical clock; never with
//! `consolidateAfter: Never`. A node tainted `karpenter.sh/disrupted` or being deleted is
//! already disrupting. It carries its lifetime (when it expires, and its `expireAfter`), by
//! which the commands query scales its disruption cost as time passes.

use super::expiration::{lifetime_start_ms, node_expire_after_ms};
use super::lifetime::Lifetime;
use super::types::{Candidate, MovablePod, OfferKey};
use crate::types::{ClassId, PoolTypes, SharedType};
use differential_dataflow::operators::CountTotal;
use differential_dataflow::VecCollection;
use dovetail_dataflow::disruption_reasons::Blocker;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::duration::parse_duration;
use dovetail_dataflow::model::labels::{
    CAPACITY_TYPE, DISRUPTED_TAINT, DO_NOT_DISRUPT, INSTANCE_TYPE, NODEPOOL, ZONE,
};
use dovetail_dataflow::model::{ConsolidationPolicy, Node, NodePool, Price, SharedNode};
use dovetail_dataflow::temporal::during;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The disruption cost of a node before its pods (Karpenter's `PerNodeBaseDisruptionCost`, 1.0),
/// in millionths.
pub const NODE_DISRUPTION_COST: i64 = 1_000_000;

/// What a node's NodePool says about it. Its price comes apart (see [`offer_prices`]): a price
/// change must not touch the nodes it prices, let alone every node of the NodePool.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
struct PoolView {
    policy: ConsolidationPolicy,
    /// `None`: `consolidateAfter: Never`.
    consolidate_after_ms: Option<i64>,
    /// Its `expireAfter` as written, for nodes whose NodeClaim has none.
    expire_after: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
enum Part {
    Node(SharedNode),
    /// The NodePool's view, and when the node's `consolidateAfter` starts counting.
    Pool(PoolView, i64),
    /// The node's movable pods of one class: how many, and their eviction costs summed.
    Pods(ClassId, i64, i64),
    Blocker(Blocker),
    Consolidatable,
}

/// A node's [`OfferKey`]; None without an instance-type label (no price).
pub fn offer_key(n: &Node) -> Option<OfferKey> {
    Some((
        n.labels.get(NODEPOOL)?.clone(),
        n.labels.get(INSTANCE_TYPE)?.clone(),
        n.labels.get(ZONE).cloned(),
        n.labels.get(CAPACITY_TYPE).cloned(),
    ))
}

/// The cheapest offering of each NodePool, instance type, zone and capacity type, and of each
/// type with the zone, the capacity type or both left open: a node's price is that of its
/// [`OfferKey`] (its own offering, or the cheapest its labels allow), kept per key. Only the keys
/// of `nodes` are kept: the commands query looks its candidates' prices up in them, so a price
/// change reaches it as a few changed keys, not as the thousands of candidates it prices.
pub fn offer_prices<'s>(
    nodes: VecCollection<'s, Epoch, SharedNode>,
    pools: VecCollection<'s, Epoch, (String, PoolTypes)>,
) -> VecCollection<'s, Epoch, (OfferKey, Price)> {
    let keys = node_offer_keys(nodes);
    // Only the types some node runs are spread into keys, not every type's offerings (tens of
    // thousands of keys) at each price change.
    let node_types = keys
        .clone()
        .map(|((pool, instance_type, _, _), ())| (pool, instance_type))
        .distinct()
        .map(|k| (k, ()));
    pools
        .flat_map(|(pool, pt)| {
            pt.types
                .iter()
                .map(|t| {
                    let key = (pool.clone(), t.instance_type.name.clone());
                    (key, SharedType(t.instance_type.clone()))
                })
                .collect::<Vec<_>>()
        })
        .join_map(node_types, |(pool, _), it, ()| (pool.clone(), it.clone()))
        .flat_map(|(pool, SharedType(it))| {
            let mut out = Vec::new();
            for o in &it.offerings {
                for zone in [Some(&o.zone), None] {
                    for ct in [Some(&o.capacity_type), None] {
                        let key = (pool.clone(), it.name.clone(), zone.cloned(), ct.cloned());
                        out.push((key, o.price));
                    }
                }
            }
            out
        })
        .reduce_named("OfferPrices", |_, prices, out| {
            if let Some(p) = prices
                .iter()
                .filter(|(_, r)| *r > 0)
                .map(|(p, _)| **p)
                .min()
            {
                out.push((p, 1));
            }
        })
        .join_map(keys, |key, price, ()| (key.clone(), *price))
}

/// The offering keys of the managed nodes, each once.
fn node_offer_keys<'s>(
    nodes: VecCollection<'s, Epoch, SharedNode>,
) -> VecCollection<'s, Epoch, (OfferKey, ())> {
    nodes
        .filter(|n| !n.in_flight)
        .flat_map(|n| offer_key(&n))
        .distinct()
        .map(|k| (k, ()))
}

/// `consolidateAfter` in ms (`None`: Never). Malformed values count as 0s, as Karpenter's
/// default; the manifest reader reports them.
pub fn consolidate_after_ms(pool: &NodePool) -> Option<i64> {
    match pool.disruption.consolidate_after.as_deref() {
        None => Some(0),
        Some(v) => parse_duration(v).unwrap_or(Some(0)),
    }
}

/// Each node's movable pods by class, with their eviction costs summed, kept up to date per
/// pod: a pod binding or leaving moves one count, where passing every pod through the
/// candidates' reduce cost a node's ~80 pods for each pod that moved (a drained node's pods
/// landing on a hundred nodes at once took most of such an epoch at 100,000 pods).
fn pods_by_class<'s>(
    pods: VecCollection<'s, Epoch, (String, MovablePod)>,
) -> VecCollection<'s, Epoch, (String, Part)> {
    pods.explode(|(node, p)| {
        // A pod with a negative eviction cost must not make its node look cheaper to disrupt
        // than an empty one (Karpenter clamps it to 0).
        let cost = p.eviction_cost.max(0) as isize;
        Some(((node, p.class), (1isize, cost)))
    })
    .count_total()
    .map(|((node, class), (n, cost))| (node, Part::Pods(class, n as i64, cost as i64)))
}

pub fn candidates<'s>(
    nodes: VecCollection<'s, Epoch, SharedNode>,
    pools: VecCollection<'s, Epoch, (String, PoolTypes)>,
    pods: VecCollection<'s, Epoch, (String, MovablePod)>,
    blockers: VecCollection<'s, Epoch, (String, Blocker)>,
) -> VecCollection<'s, Epoch, (String, Candidate)> {
    let managed = nodes.filter(|n| !n.in_flight && n.labels.contains_key(NODEPOOL));
    let by_pool = managed.clone().map(|n| {
        let pool = n.labels.get(NODEPOOL).cloned().unwrap_or_default();
        (pool, n)
    });
    let settings = pools.clone().map(|(name, pool)| {
        let view = PoolView {
            policy: pool.nodepool.disruption.consolidation_policy,
            consolidate_after_ms: consolidate_after_ms(&pool.nodepool),
            expire_after: pool.nodepool.expire_after.clone(),
        };
        (name, view)
    });
    let views = by_pool.join_map(settings, |_, n, view| {
        let since = n.last_pod_event_ms.or(n.created_ms).unwrap_or(0);
        (n.name.clone(), view.clone(), since)
    });
    let consolidatable = during(
        views.clone().flat_map(|(node, v, since)| {
            v.consolidate_after_ms
                .map(|a| (node, since.saturating_add(a)))
        }),
        |(_, from)| (*from, None),
    )
    .map(|(node, _)| (node, Part::Consolidatable));
    managed
        .map(|n| (n.name.clone(), Part::Node(n)))
        .concat(views.map(|(node, v, since)| (node, Part::Pool(v, since))))
        .concat(pods_by_class(pods))
        .concat(blockers.map(|(node, b)| (node, Part::Blocker(b))))
        .concat(consolidatable)
        .reduce_named("DisruptionCandidates", |name, parts, out| {
            let mut node = None;
            let mut view = None;
            let mut pods: BTreeMap<u64, i64> = BTreeMap::new();
            let mut cost = NODE_DISRUPTION_COST;
            let mut blocker = None;
            let mut consolidatable = false;
            for (part, r) in parts {
                let r = *r as i64;
                match part {
                    Part::Node(n) => node = Some(n),
                    Part::Pool(v, since) => view = Some((v, *since)),
                    Part::Pods(class, n, evictions) => {
                        *pods.entry(*class).or_insert(0) += n * r;
                        cost += evictions * r;
                    }
                    Part::Blocker(b) => {
                        if blocker.is_none() {
                            blocker = Some(b.clone());
                        }
                    }
                    Part::Consolidatable => consolidatable = true,
                }
            }
            let (Some(node), Some((view, since))) = (node, view) else {
                return;
            };
            let lifetime = lifetime_start_ms(node).and_then(|created| {
                let after = node_expire_after_ms(
                    node.expire_after.as_deref(),
                    view.expire_after.as_deref(),
                );
                Lifetime::of(created, after)
            });
            let node_blocker = node
                .annotations
                .get(DO_NOT_DISRUPT)
                .is_some_and(|v| v.trim() == "true")
                .then(|| Blocker::NodeDoNotDisrupt { node: name.clone() });
            out.push((
                Candidate {
                    node: name.clone(),
                    nodeclaim: node.nodeclaim.clone(),
                    nodepool: node.labels.get(NODEPOOL).cloned().unwrap_or_default(),
                    policy: view.policy,
                    consolidate_never: view.consolidate_after_ms.is_none(),
                    consolidatable,
                    consolidatable_at_ms: view
                        .consolidate_after_ms
                        .map(|a| since.saturating_add(a)),
                    capacity_type: node.labels.get(CAPACITY_TYPE).cloned().unwrap_or_default(),
                    instance_type: node.labels.get(INSTANCE_TYPE).cloned().unwrap_or_default(),
                    offer: offer_key(node),
                    price: None,
                    pods: pods.into_iter().filter(|(_, n)| *n > 0).collect(),
                    disruption_cost: cost,
                    lifetime,
                    blocked_by: node_blocker.or(blocker),
                    disrupting: node.deleting
                        || node.taints.iter().any(|t| t.key == DISRUPTED_TAINT),
                },
                1,
            ));
        })
}
