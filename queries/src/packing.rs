//! Queries 3 and 4 — existing capacity first, then the cheapest packing of the rest.
//!
//! Rule: pending pod classes, largest first (CPU, then memory), fill existing nodes and
//! in-flight NodeClaims as kube-scheduler would, then NodeClaims planned in this run, then new
//! NodeClaims from the NodePools in weight order; each planned NodeClaim keeps every instance
//! type that still fits its pods and launches the cheapest (see `solver` for the details).
//! NodePool limits are charged with the largest candidate type, as Karpenter does.
//!
//! It runs per packing group (`packing_groups`): classes that share no NodePool, no existing
//! node and no topology term cannot affect each other, so a change re-plans only its group, at
//! O(classes × bins) of that group, not O(pods). The lower bound is summed over the groups.

use crate::packing_groups::{GroupId, Member, NodeSignature};
use crate::solver::{solve, ClassInput, Failure, SolverInput};
use crate::types::{ClassId, ClassMembers, Compatibility, NodeState, PodClass, PoolTypes};
use differential_dataflow::VecCollection;
use dovetail_dataflow::decisions::{Launch, Placement};
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::Price;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
enum Part {
    Pool(PoolTypes),
    Class(ClassId, PodClass, i64, Compatibility),
    Node(NodeState),
}

/// What the packing decides.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Packed {
    Launch(Launch),
    Placement(Placement),
    Failure {
        class: ClassId,
        count: i64,
        reason: String,
    },
    LowerBound(Price),
}

pub fn packing<'s>(
    classes: VecCollection<'s, Epoch, (ClassId, ClassMembers)>,
    compat: VecCollection<'s, Epoch, (ClassId, Compatibility)>,
    pools: VecCollection<'s, Epoch, (String, PoolTypes)>,
    nodes: VecCollection<'s, Epoch, (String, NodeState)>,
    groups: VecCollection<'s, Epoch, (Member, GroupId)>,
) -> VecCollection<'s, Epoch, Packed> {
    let class_groups = groups.clone().flat_map(|(m, g)| match m {
        Member::Class(id) => Some((id, g)),
        _ => None,
    });
    let pool_groups = groups.clone().flat_map(|(m, g)| match m {
        Member::NodePool(name) => Some((name, g)),
        _ => None,
    });
    let node_groups = groups.flat_map(|(m, g)| match m {
        Member::Nodes(sig) => Some((sig, g)),
        _ => None,
    });
    let classes = classes
        .join_map(compat, |id, m, c| {
            (
                *id,
                Part::Class(*id, m.class.clone(), m.members.len() as i64, c.clone()),
            )
        })
        .join_map(class_groups, |_, part, g| (*g, part.clone()));
    let pools = pools.join_map(pool_groups, |_, p, g| (*g, Part::Pool(p.clone())));
    let nodes = nodes
        .map(|(_, n)| (NodeSignature::of(&n.node).id(), n))
        .join_map(node_groups, |_, n, g| (*g, Part::Node(n.clone())));
    let packed = pools
        .concat(nodes)
        .concat(classes)
        .reduce_named("Packing", |_group, parts, out| {
            let mut input = SolverInput {
                pools: Vec::new(),
                classes: Vec::new(),
                nodes: Vec::new(),
                bystanders: Vec::new(),
            };
            for (part, _) in parts {
                match part {
                    Part::Pool(p) => input.pools.push(p),
                    Part::Node(n) => input.nodes.push(n),
                    Part::Class(id, class, count, compat) => input.classes.push(ClassInput {
                        id: *id,
                        class,
                        count: *count,
                        compat,
                    }),
                }
            }
            let solved = solve(input);
            for l in solved.launches {
                out.push((Packed::Launch(l), 1));
            }
            for p in solved.placements {
                out.push((Packed::Placement(p), 1));
            }
            for Failure {
                class,
                count,
                reason,
            } in solved.failures
            {
                out.push((
                    Packed::Failure {
                        class,
                        count,
                        reason,
                    },
                    1,
                ));
            }
            out.push((Packed::LowerBound(solved.lower_bound), 1));
        })
        .map(|(_, p)| p);
    let bound = packed
        .clone()
        .flat_map(|p| match p {
            Packed::LowerBound(b) => Some(((), b)),
            _ => None,
        })
        .reduce_named("LowerBoundSum", |_unit, bounds, out| {
            let sum: i64 = bounds.iter().map(|(b, n)| b.0 * (*n as i64)).sum();
            out.push((Price(sum), 1));
        })
        .map(|((), b)| Packed::LowerBound(b));
    packed
        .filter(|p| !matches!(p, Packed::LowerBound(_)))
        .concat(bound)
}
