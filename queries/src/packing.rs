//! Queries 3 and 4 — existing capacity first, then the cheapest packing of the rest.
//!
//! Rule: pending pod classes, largest first (CPU, then memory), fill existing nodes and
//! in-flight NodeClaims as kube-scheduler would, then NodeClaims planned in this run, then new
//! NodeClaims from the NodePools in weight order; each planned NodeClaim keeps every instance
//! type that still fits its pods and launches the cheapest (see `solver` for the details).
//! NodePool limits are charged with the largest candidate type, as Karpenter does.
//!
//! The packing is one group: NodePools share limits, existing nodes and topology domains, so a
//! change anywhere may move any bin. Its cost is O(classes × bins) per change, not O(pods).

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
) -> VecCollection<'s, Epoch, Packed> {
    let classes = classes.join_map(compat, |id, m, c| {
        (
            (),
            Part::Class(*id, m.class.clone(), m.members.len() as i64, c.clone()),
        )
    });
    pools
        .map(|(_, p)| ((), Part::Pool(p)))
        .concat(nodes.map(|(_, n)| ((), Part::Node(n))))
        .concat(classes)
        .reduce_named("Packing", |_unit, parts, out| {
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
        .map(|((), p)| p)
}
