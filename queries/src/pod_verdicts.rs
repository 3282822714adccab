//! Query (explaining build only) — pod verdicts: where each pending pod class may go.
//!
//! Rule: for each pending class and each NodePool, at each relaxation level, the types that fit
//! (how many, and the cheapest with their cheapest allowed offering) or the first thing that rules
//! the NodePool out — the same fits the compatibility query chooses from, so an explanation
//! cannot disagree with the decision. The chosen level is the strictest at which some NodePool
//! fits, as `compatibility::choose` picks it.

use crate::compatibility::{chosen_level, levels, PoolFit};
use crate::types::{ClassId, ClassMembers, PodClass, PoolTypes, UnitCost};
use differential_dataflow::VecCollection;
use dovetail_dataflow::decisions::Decision;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::instance_type::offering_allowed;
use dovetail_dataflow::provisioning_verdicts::{
    Fits, Level, PodVerdict, PoolVerdict, TypeOffer, CHEAPEST_SHOWN,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
enum Row {
    Members(Box<ClassMembers>),
    Pool(Box<(PoolFit, PoolVerdict)>),
}

pub fn pod_verdicts<'s>(
    classes: VecCollection<'s, Epoch, (ClassId, ClassMembers)>,
    fits: VecCollection<'s, Epoch, (ClassId, PoolFit)>,
    pools: VecCollection<'s, Epoch, (String, PoolTypes)>,
) -> VecCollection<'s, Epoch, Decision> {
    let per_pool = classes
        .clone()
        .join_map(fits, |id, m, f| {
            (f.pool.clone(), (*id, m.class.clone(), f.clone()))
        })
        .join_map(pools, |_, (id, class, fit), pool| {
            let verdict = pool_verdict(class, fit, pool);
            (*id, Row::Pool(Box::new((fit.clone(), verdict))))
        });
    classes
        .map(|(id, m)| (id, Row::Members(Box::new(m))))
        .concat(per_pool)
        .reduce_named("PodVerdicts", |id, rows, out| {
            let mut members = None;
            let mut pools = Vec::new();
            for (row, _) in rows {
                match row {
                    Row::Members(m) => members = Some(m),
                    Row::Pool(p) => pools.push(&**p),
                }
            }
            let Some(m) = members else { return };
            out.push((Decision::PodVerdict(Box::new(verdict(*id, m, &pools))), 1));
        })
        .map(|(_, d)| d)
}

fn verdict(id: ClassId, m: &ClassMembers, pools: &[&(PoolFit, PoolVerdict)]) -> PodVerdict {
    let steps = levels(&m.class);
    let fits: Vec<&PoolFit> = pools.iter().map(|(f, _)| f).collect();
    let chosen = chosen_level(steps.len(), &fits);
    let mut unit_cost: Vec<(String, UnitCost)> = Vec::new();
    for f in &fits {
        if !matches!(f.levels.get(chosen), Some(Ok(v)) if !v.is_empty()) {
            continue;
        }
        for (r, c) in f.unit_costs.get(chosen).into_iter().flatten() {
            match unit_cost.iter_mut().find(|(name, _)| name == r) {
                Some((_, best)) => *best = (*best).min(*c),
                None => unit_cost.push((r.clone(), *c)),
            }
        }
    }
    let mut pool_verdicts: Vec<PoolVerdict> = pools.iter().map(|(_, v)| v.clone()).collect();
    pool_verdicts.sort_by(|a, b| a.nodepool.cmp(&b.nodepool));
    PodVerdict {
        class: id,
        pods: m.members.clone(),
        requests: m.class.scheduling.requests.clone(),
        levels: steps
            .into_iter()
            .map(|(requirements, dropped_preference)| Level {
                requirements,
                dropped_preference,
            })
            .collect(),
        chosen: chosen as u32,
        pools: pool_verdicts,
        unit_cost,
    }
}

/// One NodePool's fit at each level, with the cheapest fitting types priced at the cheapest
/// offering the NodePool's and the level's requirements allow.
fn pool_verdict(class: &PodClass, fit: &PoolFit, pool: &PoolTypes) -> PoolVerdict {
    let steps = levels(class);
    let levels = fit
        .levels
        .iter()
        .enumerate()
        .map(|(l, result)| {
            let types = result.as_ref().map_err(Clone::clone)?;
            let mut merged = pool.nodepool.requirements.clone();
            if let Some((reqs, _)) = steps.get(l) {
                merged.add_all(reqs);
            }
            let mut offers: Vec<TypeOffer> = types
                .iter()
                .filter_map(|&t| {
                    let it = &pool.types.get(t as usize)?.instance_type;
                    let o = it
                        .offerings
                        .iter()
                        .filter(|o| o.available && offering_allowed(o, &merged))
                        .min_by_key(|o| o.price)?;
                    Some(TypeOffer {
                        instance_type: it.name.clone(),
                        zone: o.zone.clone(),
                        capacity_type: o.capacity_type.clone(),
                        price: o.price,
                    })
                })
                .collect();
            offers.sort_by(|a, b| {
                a.price
                    .cmp(&b.price)
                    .then_with(|| a.instance_type.cmp(&b.instance_type))
            });
            offers.truncate(CHEAPEST_SHOWN);
            Ok(Fits {
                types: types.len() as u32,
                cheapest: offers,
            })
        })
        .collect();
    PoolVerdict {
        nodepool: pool.nodepool.name.clone(),
        weight: pool.nodepool.weight,
        levels,
    }
}
