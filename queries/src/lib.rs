//! dovetail's standing queries, one per file. Each is a typed function from input collections
//! to an output collection, with its rule in plain words in its doc comment; none does I/O.

pub mod bindings;
pub mod compatibility;
pub mod disruption;
pub mod launch_verdicts;
pub mod lower_bound;
pub mod node_usage;
pub mod nodepool_types;
pub mod offering_availability;
pub mod overlay;
pub mod packing;
pub mod packing_groups;
pub mod pod_classes;
pub mod pod_verdicts;
pub mod solver;
pub mod spread_domains;
pub mod types;

use bindings::ClassOutcome;
use differential_dataflow::{AsCollection, VecCollection};
use dovetail_dataflow::decisions::Decision;
use dovetail_dataflow::engine::{Epoch, QueryBuilder};
use dovetail_dataflow::facts::Fact;
use dovetail_dataflow::model::SharedNode;
use packing::Packed;
use timely::dataflow::operators::vec::Partition;

/// Every standing query: provisioning and disruption, facts in, decisions out.
pub fn standing_queries<'s>(
    facts: VecCollection<'s, Epoch, Fact>,
) -> VecCollection<'s, Epoch, Decision> {
    build(
        facts,
        Halves::Both {
            poll_ms: None,
            explain: false,
        },
    )
}

/// Every standing query, plus the verdicts `dovetail explain` reads — each disruption
/// candidate's (`Decision::NodeVerdict`), each pending pod class's (`PodVerdict`) and each
/// launch's (`LaunchVerdict`): what the decisions read, kept as they are.
pub fn standing_queries_explained<'s>(
    facts: VecCollection<'s, Epoch, Fact>,
) -> VecCollection<'s, Epoch, Decision> {
    build(
        facts,
        Halves::Both {
            poll_ms: None,
            explain: true,
        },
    )
}

/// Every standing query, with disruption commands decided at most once per `poll_ms` of logical
/// time, as Karpenter's disruption controller polls every 10 s: the changes of a poll interval
/// are evaluated together at its end (a multiple of `poll_ms`). Provisioning is not delayed.
/// A replay uses this; `plan` and the tests decide at once.
pub fn standing_queries_polled(poll_ms: u64) -> impl QueryBuilder {
    standing_queries_with(Some(poll_ms), false)
}

/// Every standing query, disruption polled every `poll_ms` (None: at every change, as
/// [`standing_queries`]) and, with `explain`, the verdicts of [`standing_queries_explained`]:
/// `dovetail run --explain` keeps them current to answer `/explain/...` without recomputing.
pub fn standing_queries_with(poll_ms: Option<u64>, explain: bool) -> impl QueryBuilder {
    with_builder_signature(move |facts| build(facts, Halves::Both { poll_ms, explain }))
}

/// Pins a closure to the builder's higher-ranked signature (closures are not inferred as such).
fn with_builder_signature<F>(f: F) -> F
where
    F: for<'s> Fn(VecCollection<'s, Epoch, Fact>) -> VecCollection<'s, Epoch, Decision>,
{
    f
}

/// The provisioning half of the engine alone: facts in, launches and bindings out.
pub fn provisioning<'s>(
    facts: VecCollection<'s, Epoch, Fact>,
) -> VecCollection<'s, Epoch, Decision> {
    build(facts, Halves::Provisioning { carry_on: true })
}

/// Provisioning as [`provisioning`] gives it, with every change's packing rebuilt from the last
/// plan instead of carried on from the last run (`solver::warm`): the reference that carrying
/// on is tested against.
pub fn provisioning_rebuilt<'s>(
    facts: VecCollection<'s, Epoch, Fact>,
) -> VecCollection<'s, Epoch, Decision> {
    build(facts, Halves::Provisioning { carry_on: false })
}

/// How many kinds [`fact_kind`] tells apart.
const FACT_KINDS: u64 = 12;

/// The facts split by kind in one operator, indexed by [`fact_kind`]: each fact is moved to the
/// one stream of its kind. A `filter` per kind instead had every fact, whole pods included,
/// cloned to all twelve filters: replaying 20,000 pods that was a third of the peak heap.
fn by_kind<'s>(facts: VecCollection<'s, Epoch, Fact>) -> Vec<VecCollection<'s, Epoch, Fact>> {
    facts
        .inner
        .partition(FACT_KINDS, |(f, t, r)| {
            (u64::from(fact_kind(&f)), (f, t, r))
        })
        .into_iter()
        .map(|s| s.as_collection())
        .collect()
}

fn fact_kind(f: &Fact) -> u8 {
    match f {
        Fact::Pod(_) => 0,
        Fact::Node(_) => 1,
        Fact::NodePool(_) => 2,
        Fact::NodeClass(_) => 3,
        Fact::InstanceType { .. } => 4,
        Fact::Overlay(_) => 5,
        Fact::DaemonSet(_) => 6,
        Fact::Pdb(_) => 7,
        Fact::Interruption(_) => 8,
        Fact::Clock(_) => 9,
        Fact::FeatureGate { .. } => 10,
        Fact::CapacityError { .. } => 11,
    }
}

/// Which halves of the engine to build.
#[derive(Clone, Copy)]
enum Halves {
    Provisioning {
        /// See `packing::GroupPlan::carry_on`.
        carry_on: bool,
    },
    /// Provisioning and disruption, with disruption commands evaluated at most once per
    /// `poll_ms` (None: at every change).
    Both {
        poll_ms: Option<u64>,
        /// Also give the node verdicts.
        explain: bool,
    },
}

fn build<'s>(
    facts: VecCollection<'s, Epoch, Fact>,
    halves: Halves,
) -> VecCollection<'s, Epoch, Decision> {
    let kinds = by_kind(facts);
    let split = |kind: usize| kinds[kind].clone();
    let pods = split(0).flat_map(|f| match f {
        Fact::Pod(p) => Some(p),
        _ => None,
    });
    let nodes = split(1).flat_map(|f| match f {
        Fact::Node(n) => Some(SharedNode::new(n)),
        _ => None,
    });
    let nodepools = split(2).flat_map(|f| match f {
        Fact::NodePool(p) => Some(p),
        _ => None,
    });
    let nodeclasses = split(3).flat_map(|f| match f {
        Fact::NodeClass(c) => Some(c),
        _ => None,
    });
    let instance_types = split(4).flat_map(|f| match f {
        Fact::InstanceType {
            node_class,
            instance_type,
        } => Some((node_class, instance_type)),
        _ => None,
    });
    let capacity_errors = split(11).flat_map(|f| match f {
        Fact::CapacityError {
            offering,
            at_ms,
            until_ms,
        } => Some((offering, at_ms, until_ms)),
        _ => None,
    });
    let instance_types =
        offering_availability::offering_availability(instance_types, capacity_errors);
    let overlays = split(5).flat_map(|f| match f {
        Fact::Overlay(o) => Some(o),
        _ => None,
    });
    let daemonsets = split(6).flat_map(|f| match f {
        Fact::DaemonSet(d) => Some(d),
        _ => None,
    });

    let classes = pod_classes::pod_classes(pods.clone());
    let pools = nodepool_types::nodepool_types(
        nodepools.clone(),
        nodeclasses.clone(),
        instance_types,
        overlays,
        daemonsets.clone(),
    );
    let class_counts = pod_classes::all_pod_classes(pods.clone());
    let specs = class_counts
        .clone()
        .map(|((id, class), _)| (id, class))
        .distinct();
    let fits = compatibility::pool_fits(specs.clone(), pools.clone());
    let compat = compatibility::compatibility(specs.clone(), fits.clone());
    let bound = node_usage::bound_pods(pods.clone());
    let bound_labels = node_usage::bound_label_counts(bound.clone());
    let usage = node_usage::node_usage(nodes.clone(), bound, bound_labels.clone(), daemonsets);
    let cluster_bound = lower_bound::cluster_lower_bound(class_counts, compat.clone());
    let groups = packing_groups::packing_groups(
        classes.clone(),
        compat.clone(),
        pools.clone(),
        nodes.clone(),
        bound_labels,
    );
    let spread_domains =
        spread_domains::spread_domains(classes.clone(), compat.clone(), usage.clone());
    let carry_on = !matches!(halves, Halves::Provisioning { carry_on: false });
    let packed = packing::packing(
        classes.clone(),
        compat.clone(),
        pools.clone(),
        usage.clone(),
        groups,
        spread_domains,
        carry_on,
    );

    let placements = packed.clone().flat_map(|p| match p {
        Packed::Placement(pl) => Some(pl),
        _ => None,
    });
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
    let mut provisioning = decided
        .clone()
        .concat(cluster_bound.map(Decision::ClusterLowerBound))
        .concat(bindings::bindings(classes.clone(), outcomes));
    let Halves::Both { poll_ms, explain } = halves else {
        return provisioning;
    };
    if explain {
        let launches = decided.flat_map(|d| match d {
            Decision::Launch(l) => Some(l),
            _ => None,
        });
        provisioning = provisioning
            .concat(pod_verdicts::pod_verdicts(classes, fits, pools.clone()))
            .concat(launch_verdicts::launch_verdicts(launches, pools.clone()));
    }
    let pdbs = split(7).flat_map(|f| match f {
        Fact::Pdb(p) => Some(p),
        _ => None,
    });
    let interruptions = split(8).flat_map(|f| match f {
        Fact::Interruption(i) => Some(i),
        _ => None,
    });
    let clock = split(9).flat_map(|f| match f {
        Fact::Clock(m) => Some(m),
        _ => None,
    });
    let gates = split(10).flat_map(|f| match f {
        Fact::FeatureGate { name, enabled } => enabled.then_some(name),
        _ => None,
    });
    provisioning.concat(disruption::disruption(disruption::Inputs {
        pods,
        nodes,
        nodepools,
        nodeclasses,
        pools,
        usage,
        placements,
        specs,
        compat,
        pdbs,
        interruptions,
        clock,
        gates,
        poll_ms,
        explain,
    }))
}
