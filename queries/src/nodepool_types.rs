//! Query — what each NodePool can launch.
//!
//! Rule: a NodePool offers every instance type its EC2NodeClass resolves, after NodeOverlays,
//! whose labels and offerings its requirements admit; each type's room for pending pods is its
//! allocatable minus the requests of the DaemonSets whose pods would land on it (they tolerate
//! the NodePool's taints and their node requirements admit the type). Types are listed cheapest
//! first. A NodePool whose EC2NodeClass is missing, or that is static (`spec.replicas`), is not
//! ready and offers nothing.

use crate::overlay::apply_overlays;
use crate::types::{PoolType, PoolTypes};
use differential_dataflow::VecCollection;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::instance_type::offering_allowed;
use dovetail_dataflow::model::labels::{is_well_known, NODEPOOL};
use dovetail_dataflow::model::taints::first_untolerated;
use dovetail_dataflow::model::{
    DaemonSet, EC2NodeClass, InstanceType, NodeOverlay, NodePool, Requirement, Requirements,
    Resources,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
enum Part {
    Pool(NodePool),
    Class(EC2NodeClass),
    Type(InstanceType),
    Overlay(NodeOverlay),
    Daemon(DaemonSet),
}

/// The node requirements a DaemonSet pod schedules with (node selector and the first required
/// node-affinity term, as Karpenter's overhead estimate does).
fn daemon_requirements(d: &DaemonSet) -> Requirements {
    let mut r = d.scheduling.node_selector.clone();
    if let Some(term) = d.scheduling.required_node_affinity.first() {
        r.add_all(term);
    }
    r
}

fn daemon_lands_on(d: &DaemonSet, pool: &NodePool, it: &InstanceType) -> bool {
    if first_untolerated(&pool.taints, &d.scheduling.tolerations).is_some() {
        return false;
    }
    let reqs = daemon_requirements(d);
    pool.requirements.compatible(&reqs, is_well_known).is_ok()
        && it.requirements.intersects(&reqs).is_ok()
}

/// The NodePool with `karpenter.sh/nodepool In [its name]` among its requirements, as
/// Karpenter's NodeClaim template has: a pod selecting another NodePool is not compatible.
fn with_own_label(pool: &NodePool) -> NodePool {
    let mut pool = pool.clone();
    pool.requirements
        .add(NODEPOOL, Requirement::single(pool.name.clone()));
    pool
}

/// Builds one NodePool's offer from its parts.
fn pool_types(
    pool: &NodePool,
    class: Option<&EC2NodeClass>,
    types: &[&InstanceType],
    overlays: &[&NodeOverlay],
    daemons: &[&DaemonSet],
) -> PoolTypes {
    let not_ready = if pool.replicas.is_some() {
        Some("static NodePool (spec.replicas) is not supported yet".to_string())
    } else {
        match (&pool.node_class, class) {
            (None, _) => Some("spec.template.spec.nodeClassRef is not set".to_string()),
            (Some(name), None) => Some(format!("EC2NodeClass {name} not found")),
            (Some(name), Some(c)) => c
                .status
                .not_ready
                .as_ref()
                .map(|why| format!("EC2NodeClass {name} is not ready: {why}")),
        }
    };
    if not_ready.is_some() {
        return PoolTypes {
            nodepool: with_own_label(pool),
            types: Vec::new(),
            not_ready,
        };
    }
    let mut out: Vec<(i64, PoolType)> = Vec::new();
    for it in types {
        if it.requirements.intersects(&pool.requirements).is_err() {
            continue;
        }
        let mut it = apply_overlays(it, pool, overlays);
        it.offerings
            .retain(|o| offering_allowed(o, &pool.requirements));
        let Some(cheapest) = it.cheapest_offering(&pool.requirements).map(|o| o.price.0) else {
            continue;
        };
        let mut overhead = Resources::default();
        for d in daemons.iter().filter(|d| daemon_lands_on(d, pool, &it)) {
            overhead.add_assign(&d.scheduling.requests);
        }
        let available = it.allocatable().sub(&overhead);
        if available.cpu <= 0 || available.memory <= 0 || available.pods <= 0 {
            continue;
        }
        out.push((
            cheapest,
            PoolType {
                instance_type: std::sync::Arc::new(it),
                available,
            },
        ));
    }
    out.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| a.1.instance_type.name.cmp(&b.1.instance_type.name))
    });
    PoolTypes {
        nodepool: with_own_label(pool),
        types: out.into_iter().map(|(_, t)| t).collect(),
        not_ready: None,
    }
}

pub fn nodepool_types<'s>(
    nodepools: VecCollection<'s, Epoch, NodePool>,
    nodeclasses: VecCollection<'s, Epoch, EC2NodeClass>,
    instance_types: VecCollection<'s, Epoch, (String, InstanceType)>,
    overlays: VecCollection<'s, Epoch, NodeOverlay>,
    daemonsets: VecCollection<'s, Epoch, DaemonSet>,
) -> VecCollection<'s, Epoch, (String, PoolTypes)> {
    let pool_by_class = nodepools
        .clone()
        .map(|p| (p.node_class.clone().unwrap_or_default(), p.name));
    let pool_names = nodepools.clone().map(|p| ((), p.name));
    let pools = nodepools.map(|p| (p.name.clone(), Part::Pool(p)));
    let classes = nodeclasses
        .map(|c| (c.name.clone(), c))
        .join_map(pool_by_class.clone(), |_, c, pool| {
            (pool.clone(), Part::Class(c.clone()))
        });
    let types = instance_types.join_map(pool_by_class, |_, it, pool| {
        (pool.clone(), Part::Type(it.clone()))
    });
    let overlays = overlays
        .map(|o| ((), o))
        .join_map(pool_names.clone(), |_, o, pool| {
            (pool.clone(), Part::Overlay(o.clone()))
        });
    let daemons = daemonsets
        .map(|d| ((), d))
        .join_map(pool_names, |_, d, pool| {
            (pool.clone(), Part::Daemon(d.clone()))
        });
    pools
        .concat(classes)
        .concat(types)
        .concat(overlays)
        .concat(daemons)
        .reduce_named("NodePoolTypes", |_name, parts, out| {
            let mut pool = None;
            let mut class = None;
            let (mut types, mut overlays, mut daemons) = (Vec::new(), Vec::new(), Vec::new());
            for (part, _) in parts {
                match part {
                    Part::Pool(p) => pool = Some(p),
                    Part::Class(c) => class = Some(c),
                    Part::Type(t) => types.push(t),
                    Part::Overlay(o) => overlays.push(o),
                    Part::Daemon(d) => daemons.push(d),
                }
            }
            if let Some(pool) = pool {
                out.push((pool_types(pool, class, &types, &overlays, &daemons), 1));
            }
        })
}
