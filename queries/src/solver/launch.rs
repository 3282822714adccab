//! Turns a planned bin into a Launch: cheapest types first, the zones and capacity types its
//! offerings allow, and a deterministic name.

use super::cheapest::Cheapest;
use super::ClassInput;
use dovetail_dataflow::decisions::Launch;
use dovetail_dataflow::model::labels::INSTANCE_TYPE;
use dovetail_dataflow::model::{Requirement, Requirements};
use dovetail_dataflow::stable_hash::stable_hash;
use std::collections::BTreeMap;

/// Karpenter sends at most this many instance types to CreateFleet.
pub const MAX_INSTANCE_TYPES: usize = 60;

/// `cheapest` is the NodePool's types under `requirements`' offering filter.
pub fn launch(
    cheapest: &Cheapest<'_>,
    types: &[u32],
    requirements: &Requirements,
    classes_in_bin: &[(usize, i64)],
    classes: &[ClassInput<'_>],
    ordinals: &mut BTreeMap<u64, u32>,
) -> Launch {
    let pool = cheapest.pool();
    let mut priced: Vec<(i64, &str, usize)> = types
        .iter()
        .filter_map(|&t| {
            let pt = pool.types.get(t as usize)?;
            let o = cheapest.of(t)?;
            Some((o.price.0, pt.instance_type.name.as_str(), t as usize))
        })
        .collect();
    // The whole tuple orders: unstable sorting gives the one order.
    priced.sort_unstable();
    priced.truncate(MAX_INSTANCE_TYPES);
    let (zones, capacity_types) = cheapest.places(priced.iter().map(|p| p.2 as u32));
    let names: Vec<String> = priced.iter().map(|(_, n, _)| n.to_string()).collect();
    let mut reqs = requirements.clone();
    reqs.add(
        INSTANCE_TYPE,
        Requirement::finite(names.iter().cloned().collect()),
    );
    // The name identifies the NodeClaim by what it is, not by the pods it holds, so adding a pod
    // to a launch does not rename it.
    let identity = stable_hash(&(&pool.nodepool.name, &reqs));
    let ordinal = ordinals.entry(identity).or_insert(0);
    let hash = stable_hash(&(identity, *ordinal));
    *ordinal += 1;
    let mut pods_by_class: Vec<(u64, i64)> = classes_in_bin
        .iter()
        .map(|&(ci, n)| (classes[ci].id, n))
        .collect();
    pods_by_class.sort();
    Launch {
        name: format!("{}-{:010x}", pool.nodepool.name, hash & 0xff_ffff_ffff),
        nodepool: pool.nodepool.name.clone(),
        instance_types: names,
        zones,
        capacity_types,
        price: dovetail_dataflow::model::Price(priced.first().map(|p| p.0).unwrap_or(0)),
        requirements: reqs,
        pods_by_class,
    }
}
