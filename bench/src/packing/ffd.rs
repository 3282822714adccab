//! The Karpenter-style baseline: first-fit decreasing as Karpenter's scheduler does it, written
//! apart from dovetail's solver so that the comparison does not share its code.
//!
//! Pods are taken largest first (CPU, then memory, descending). Each goes to the planned
//! NodeClaim with the fewest pods that still has a candidate type able to hold it (Karpenter
//! sorts its new NodeClaims by pod count before each pod), which narrows that NodeClaim's
//! candidates to the types that hold all its pods; otherwise a new NodeClaim is opened from the
//! first NodePool by weight that tolerates the pod and has a type that holds it, with every such
//! type as a candidate. Each NodeClaim launches its cheapest remaining candidate.

use dovetail_dataflow::model::taints::first_untolerated;
use dovetail_dataflow::model::{Pod, Resources, Taint};

/// One instance type as a NodePool offers it.
#[derive(Debug, Clone)]
pub struct OfferedType {
    pub name: String,
    /// What pods may request: allocatable (no DaemonSets in these workloads).
    pub available: Resources,
    /// Raw capacity (for the bound).
    pub capacity: Resources,
    /// The cheapest offering the NodePool allows, in micro-dollars per hour.
    pub price: i64,
}

/// A NodePool's offer.
#[derive(Debug, Clone)]
pub struct PoolOffer {
    pub name: String,
    pub weight: i32,
    pub taints: Vec<Taint>,
    pub types: Vec<OfferedType>,
}

impl PoolOffer {
    pub fn takes(&self, pod: &Pod) -> bool {
        first_untolerated(&self.taints, &pod.scheduling.tolerations).is_none()
    }
}

/// What a packing launched.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Packing {
    pub nodeclaims: usize,
    /// Micro-dollars per hour.
    pub price: i64,
    pub unplaced: usize,
}

struct Claim {
    pool: usize,
    candidates: Vec<usize>,
    used: Resources,
    pods: usize,
}

/// Packs `pods` onto new NodeClaims from `pools` in Karpenter's way.
pub fn karpenter_ffd(pools: &[PoolOffer], pods: &[Pod]) -> Packing {
    let mut order: Vec<&Pod> = pods.iter().collect();
    order.sort_by(|a, b| {
        let (ra, rb) = (&a.scheduling.requests, &b.scheduling.requests);
        rb.cpu.cmp(&ra.cpu).then(rb.memory.cmp(&ra.memory))
    });
    let mut by_weight: Vec<usize> = (0..pools.len()).collect();
    by_weight.sort_by(|&a, &b| {
        pools[b]
            .weight
            .cmp(&pools[a].weight)
            .then_with(|| pools[a].name.cmp(&pools[b].name))
    });
    let mut claims: Vec<Claim> = Vec::new();
    let mut unplaced = 0;
    for pod in order {
        let req = &pod.scheduling.requests;
        claims.sort_by_key(|c| c.pods);
        let existing = claims.iter_mut().find_map(|c| {
            if !pools[c.pool].takes(pod) {
                return None;
            }
            let need = c.used.add(req);
            let types = &pools[c.pool].types;
            let fitting: Vec<usize> = c
                .candidates
                .iter()
                .copied()
                .filter(|&t| need.fits_in(&types[t].available))
                .collect();
            (!fitting.is_empty()).then_some((c, fitting, need))
        });
        if let Some((c, fitting, need)) = existing {
            c.candidates = fitting;
            c.used = need;
            c.pods += 1;
            continue;
        }
        let opened = by_weight.iter().find_map(|&p| {
            if !pools[p].takes(pod) {
                return None;
            }
            let fitting: Vec<usize> = (0..pools[p].types.len())
                .filter(|&t| req.fits_in(&pools[p].types[t].available))
                .collect();
            (!fitting.is_empty()).then(|| Claim {
                pool: p,
                candidates: fitting,
                used: req.clone(),
                pods: 1,
            })
        });
        match opened {
            Some(c) => claims.push(c),
            None => unplaced += 1,
        }
    }
    let price = claims
        .iter()
        .map(|c| {
            c.candidates
                .iter()
                .map(|&t| pools[c.pool].types[t].price)
                .min()
                .unwrap_or(0)
        })
        .sum();
    Packing {
        nodeclaims: claims.len(),
        price,
        unplaced,
    }
}
