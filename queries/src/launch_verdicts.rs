//! Query (explaining build only) — launch verdicts: a launch's types as CreateFleet is offered
//! them.
//!
//! Rule: for each launch, each of its instance types with the cheapest available offering the
//! launch's requirements allow (zone and capacity type), from its NodePool's offer — overlays and
//! capacity errors included — cheapest first. The launch's own price is the first of these.

use crate::types::PoolTypes;
use differential_dataflow::VecCollection;
use dovetail_dataflow::decisions::{Decision, Launch};
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::instance_type::offering_allowed;
use dovetail_dataflow::provisioning_verdicts::{LaunchVerdict, TypeOffer};

pub fn launch_verdicts<'s>(
    launches: VecCollection<'s, Epoch, Launch>,
    pools: VecCollection<'s, Epoch, (String, PoolTypes)>,
) -> VecCollection<'s, Epoch, Decision> {
    launches
        .map(|l| (l.nodepool.clone(), l))
        .join_map(pools, |_, l, pool| {
            Decision::LaunchVerdict(Box::new(verdict(l, pool)))
        })
}

fn verdict(l: &Launch, pool: &PoolTypes) -> LaunchVerdict {
    let mut offers: Vec<TypeOffer> = pool
        .types
        .iter()
        .filter(|pt| l.instance_types.contains(&pt.instance_type.name))
        .filter_map(|pt| {
            let it = &pt.instance_type;
            let o = it
                .offerings
                .iter()
                .filter(|o| o.available && offering_allowed(o, &l.requirements))
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
    LaunchVerdict {
        launch: l.name.clone(),
        offers,
    }
}
