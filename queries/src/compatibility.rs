//! Query 2 — compatibility of pod classes with NodePools' instance types.
//!
//! Rule: a class can use type T of NodePool P when P's taints are tolerated, P's requirements
//! are compatible with the class's (Karpenter's rule: well-known labels may be left open, any
//! other label must be defined by P), T's labels intersect them, T has an available offering
//! they admit, and the class's requests fit T's room after DaemonSet overhead.
//! When no NodePool can take the class, its preferences are relaxed in Karpenter's order:
//! further required node-affinity terms first, then preferred node-affinity terms from the
//! heaviest down, then none. Volume zones and the node selector are never relaxed.

use crate::types::{ClassId, Compatibility, PodClass, PoolTypes, UnitCost};
use differential_dataflow::VecCollection;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::instance_type::offering_allowed;
use dovetail_dataflow::model::labels::{is_well_known, ZONE};
use dovetail_dataflow::model::taints::first_untolerated;
use dovetail_dataflow::model::{Requirement, Requirements};
use dovetail_dataflow::scheduling_reasons::PoolRejection;
use serde::{Deserialize, Serialize};

/// At most this many relaxation levels are tried.
const MAX_LEVELS: usize = 16;

/// The requirement sets a class is tried with, strictest first.
pub fn relaxation_levels(class: &PodClass) -> Vec<Requirements> {
    levels(class).into_iter().map(|(r, _)| r).collect()
}

/// The relaxation levels, each with whether it dropped a preferred node-affinity term.
pub fn levels(class: &PodClass) -> Vec<(Requirements, bool)> {
    let s = &class.scheduling;
    let mut base = s.node_selector.clone();
    if let Some(zones) = &s.volume_zones {
        base.add(ZONE, Requirement::finite(zones.clone()));
    }
    let required: Vec<Option<&Requirements>> = if s.required_node_affinity.is_empty() {
        vec![None]
    } else {
        s.required_node_affinity.iter().map(Some).collect()
    };
    let preferred: Vec<Option<&Requirements>> = s
        .preferred_node_affinity
        .iter()
        .map(|(_, r)| Some(r))
        .chain(std::iter::once(None))
        .collect();
    let combine = |r: Option<&Requirements>, p: Option<&Requirements>| {
        let mut out = base.clone();
        if let Some(r) = r {
            out.add_all(r);
        }
        if let Some(p) = p {
            out.add_all(p);
        }
        out
    };
    let mut levels = Vec::new();
    for r in &required {
        levels.push((combine(*r, preferred[0]), false));
    }
    let last = required.last().copied().flatten();
    for p in preferred.iter().skip(1) {
        levels.push((combine(last, *p), true));
    }
    levels.dedup_by(|later, earlier| later.0 == earlier.0);
    levels.truncate(MAX_LEVELS);
    levels
}

/// For one NodePool: per relaxation level, the compatible type indices or why none.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PoolFit {
    pub pool: String,
    pub levels: Vec<Result<Vec<u32>, PoolRejection>>,
    /// Per level, per requested resource: the cheapest price per milli-unit among compatible
    /// types.
    pub unit_costs: Vec<Vec<(String, UnitCost)>>,
}

pub fn pool_fit(class: &PodClass, pool: &PoolTypes) -> PoolFit {
    let levels = relaxation_levels(class);
    let mut results = Vec::with_capacity(levels.len());
    let mut costs = Vec::with_capacity(levels.len());
    let s = &class.scheduling;
    for reqs in &levels {
        let mut cost: Vec<(String, UnitCost)> = s
            .requests
            .iter()
            .map(|(r, _)| (r.to_string(), UnitCost::new(f64::MAX)))
            .collect();
        let result = (|| {
            if let Some(r) = &pool.not_ready {
                return Err(PoolRejection::NotReady { reason: r.clone() });
            }
            if let Some(t) = first_untolerated(&pool.nodepool.taints, &s.tolerations) {
                return Err(PoolRejection::Taint { taint: t.clone() });
            }
            pool.nodepool
                .requirements
                .compatible(reqs, is_well_known)
                .map_err(|e| match e.sides.map(|s| *s) {
                    Some((pod, nodepool)) => PoolRejection::Requirement {
                        key: e.key,
                        pod: Box::new(pod),
                        nodepool: Box::new(nodepool),
                    },
                    None => PoolRejection::LabelUndefined { key: e.key },
                })?;
            let mut merged = pool.nodepool.requirements.clone();
            merged.add_all(reqs);
            let mut fits = Vec::new();
            let mut largest_cpu: Option<i64> = None;
            for (i, pt) in pool.types.iter().enumerate() {
                let it = &pt.instance_type;
                if it.requirements.intersects(reqs).is_err() {
                    continue;
                }
                let Some(o) = it
                    .offerings
                    .iter()
                    .filter(|o| o.available && offering_allowed(o, &merged))
                    .min_by_key(|o| o.price)
                else {
                    continue;
                };
                largest_cpu = largest_cpu.max(Some(pt.available.cpu));
                if !s.requests.fits_in(&pt.available) {
                    continue;
                }
                let price = o.price.0 as f64;
                for (r, c) in cost.iter_mut() {
                    let have = pt.available.get(r);
                    if have > 0 {
                        *c = (*c).min(UnitCost::new(price / have as f64));
                    }
                }
                fits.push(i as u32);
            }
            if fits.is_empty() {
                let Some(largest_cpu) = largest_cpu else {
                    return Err(no_type_reason(pool, reqs));
                };
                return Err(PoolRejection::TooLarge {
                    requests: s.requests.clone(),
                    largest_cpu,
                });
            }
            Ok(fits)
        })();
        results.push(result);
        costs.push(cost);
    }
    PoolFit {
        pool: pool.nodepool.name.clone(),
        levels: results,
        unit_costs: costs,
    }
}

/// Why no type of the pool matches `reqs` with an available offering: each requirement that no
/// type meets on its own (`no instance type has kubernetes.io/os In [windows]`), or, when every
/// one is met by some type, the requirements taken together. (The pool's types are already
/// narrowed to its own requirements and their offerings to its zones and capacity types.)
fn no_type_reason(pool: &PoolTypes, reqs: &Requirements) -> PoolRejection {
    if pool.types.is_empty() {
        return PoolRejection::NoInstanceTypes;
    }
    let unmet: Vec<(String, Requirement)> = reqs
        .0
        .iter()
        .filter(|(key, req)| {
            let mut one = Requirements::new();
            one.add(key.as_str(), (*req).clone());
            !pool.types.iter().any(|pt| {
                let it = &pt.instance_type;
                it.requirements.intersects(&one).is_ok()
                    && it
                        .offerings
                        .iter()
                        .any(|o| o.available && offering_allowed(o, &one))
            })
        })
        .map(|(key, req)| (key.clone(), req.clone()))
        .collect();
    if unmet.is_empty() {
        PoolRejection::NoTypeMeetsAll {
            requirements: reqs.clone(),
        }
    } else {
        PoolRejection::NoTypeHas { unmet }
    }
}

/// The strictest of `levels` levels at which some NodePool fits (0 when none does).
pub fn chosen_level(levels: usize, fits: &[&PoolFit]) -> usize {
    (0..levels)
        .find(|&l| {
            fits.iter()
                .any(|f| matches!(f.levels.get(l), Some(Ok(v)) if !v.is_empty()))
        })
        .unwrap_or(0)
}

/// Chooses the strictest level at which some NodePool fits.
pub fn choose(class: &PodClass, fits: &[&PoolFit]) -> Compatibility {
    let levels = levels(class);
    let chosen = chosen_level(levels.len(), fits);
    let mut pools = Vec::new();
    let mut rejections = Vec::new();
    let mut unit_cost: Vec<(String, UnitCost)> = Vec::new();
    for f in fits {
        match f.levels.get(chosen) {
            Some(Ok(types)) => {
                pools.push((f.pool.clone(), types.clone()));
                if let Some(costs) = f.unit_costs.get(chosen) {
                    for (r, c) in costs {
                        match unit_cost.iter_mut().find(|(name, _)| name == r) {
                            Some((_, best)) => *best = (*best).min(*c),
                            None => unit_cost.push((r.clone(), *c)),
                        }
                    }
                }
            }
            Some(Err(reason)) => rejections.push((f.pool.clone(), reason.clone())),
            None => {}
        }
    }
    pools.sort();
    rejections.sort();
    Compatibility {
        requirements: levels
            .get(chosen)
            .map(|(r, _)| r.clone())
            .unwrap_or_default(),
        relaxation: chosen as u32,
        dropped_node_preference: levels.get(chosen).is_some_and(|(_, dropped)| *dropped),
        pools,
        rejections,
        unit_cost,
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
enum Row {
    /// Boxed: a class is several times the size of a fit.
    Class(Box<PodClass>),
    Fit(PoolFit),
}

/// Each class spec against each NodePool: per relaxation level, the compatible types or the
/// first thing that rules the NodePool out. `specs` are distinct class specs: only a class's
/// spec matters here, not its pods, so a pod joining a class changes nothing.
pub fn pool_fits<'s>(
    specs: VecCollection<'s, Epoch, (ClassId, PodClass)>,
    pools: VecCollection<'s, Epoch, (String, PoolTypes)>,
) -> VecCollection<'s, Epoch, (ClassId, PoolFit)> {
    specs
        .map(|(id, c)| ((), (id, c)))
        .join_map(pools.map(|(_, p)| ((), p)), |_, (id, class), pool| {
            (*id, pool_fit(class, pool))
        })
}

/// Where each class goes: the strictest relaxation level at which some NodePool fits, and the
/// NodePools' types at that level (see [`choose`]).
pub fn compatibility<'s>(
    specs: VecCollection<'s, Epoch, (ClassId, PodClass)>,
    fits: VecCollection<'s, Epoch, (ClassId, PoolFit)>,
) -> VecCollection<'s, Epoch, (ClassId, Compatibility)> {
    specs
        .map(|(id, c)| (id, Row::Class(Box::new(c))))
        .concat(fits.map(|(id, f)| (id, Row::Fit(f))))
        .reduce_named("Compatibility", |_id, rows, out| {
            let mut class = None;
            let mut fits = Vec::new();
            for (row, _) in rows {
                match row {
                    Row::Class(c) => class = Some(c),
                    Row::Fit(f) => fits.push(f),
                }
            }
            if let Some(class) = class {
                out.push((choose(class, &fits), 1));
            }
        })
}
