//! dovetail's standing queries, one per file. Each is a typed function from input collections
//! to an output collection, with its rule in plain words in its doc comment; none does I/O.

pub mod bindings;
pub mod compatibility;
pub mod lower_bound;
pub mod node_usage;
pub mod nodepool_types;
pub mod overlay;
pub mod packing;
pub mod pod_classes;
pub mod solver;
pub mod types;

use bindings::ClassOutcome;
use differential_dataflow::VecCollection;
use dovetail_dataflow::decisions::Decision;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::facts::Fact;
use packing::Packed;

/// The provisioning half of the engine: facts in, decisions out.
pub fn provisioning<'s>(
    facts: VecCollection<'s, Epoch, Fact>,
) -> VecCollection<'s, Epoch, Decision> {
    let pods = facts.clone().flat_map(|f| match f {
        Fact::Pod(p) => Some(p),
        _ => None,
    });
    let nodes = facts.clone().flat_map(|f| match f {
        Fact::Node(n) => Some(n),
        _ => None,
    });
    let nodepools = facts.clone().flat_map(|f| match f {
        Fact::NodePool(p) => Some(p),
        _ => None,
    });
    let nodeclasses = facts.clone().flat_map(|f| match f {
        Fact::NodeClass(c) => Some(c),
        _ => None,
    });
    let instance_types = facts.clone().flat_map(|f| match f {
        Fact::InstanceType {
            node_class,
            instance_type,
        } => Some((node_class, instance_type)),
        _ => None,
    });
    let overlays = facts.clone().flat_map(|f| match f {
        Fact::Overlay(o) => Some(o),
        _ => None,
    });
    let daemonsets = facts.flat_map(|f| match f {
        Fact::DaemonSet(d) => Some(d),
        _ => None,
    });

    let classes = pod_classes::pod_classes(pods.clone());
    let pools = nodepool_types::nodepool_types(
        nodepools,
        nodeclasses,
        instance_types,
        overlays,
        daemonsets.clone(),
    );
    let class_counts = pod_classes::all_pod_classes(pods.clone());
    let specs = class_counts
        .clone()
        .map(|((id, class), _)| (id, class))
        .distinct();
    let compat = compatibility::compatibility(specs, pools.clone());
    let usage = node_usage::node_usage(nodes, pods, daemonsets);
    let cluster_bound = lower_bound::cluster_lower_bound(class_counts, compat.clone());
    let packed = packing::packing(classes.clone(), compat, pools, usage);

    let outcomes = packed.clone().flat_map(|p| match p {
        Packed::Placement(pl) => Some((pl.class, ClassOutcome::Placed(pl))),
        Packed::Failure {
            class,
            count,
            reason,
        } => Some((class, ClassOutcome::Failed { count, reason })),
        _ => None,
    });
    let decided = packed.flat_map(|p| match p {
        Packed::Launch(l) => Some(Decision::Launch(l)),
        Packed::LowerBound(b) => Some(Decision::LowerBound(b)),
        _ => None,
    });
    decided
        .concat(cluster_bound.map(Decision::ClusterLowerBound))
        .concat(bindings::bindings(classes, outcomes))
}
