//! Queries — bindings and unschedulable pods (query 5).
//!
//! Rule: a class's pending pods, sorted by name, are dealt out to its placements in order, and
//! whatever is left is unschedulable with the packing's reason. A pod bound to a node name is
//! kube-scheduler's job; one bound to a launch waits for that NodeClaim.

use crate::types::{ClassId, ClassMembers};
use differential_dataflow::VecCollection;
use dovetail_dataflow::decisions::{Decision, Placement};
use dovetail_dataflow::engine::Epoch;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ClassOutcome {
    Placed(Placement),
    Failed { count: i64, reason: String },
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
enum Part {
    Members(Vec<String>),
    Outcome(ClassOutcome),
}

pub fn bindings<'s>(
    classes: VecCollection<'s, Epoch, (ClassId, ClassMembers)>,
    outcomes: VecCollection<'s, Epoch, (ClassId, ClassOutcome)>,
) -> VecCollection<'s, Epoch, Decision> {
    classes
        .map(|(id, m)| (id, Part::Members(m.members)))
        .concat(outcomes.map(|(id, o)| (id, Part::Outcome(o))))
        .reduce_named("Bindings", |_id, parts, out| {
            let mut members: &[String] = &[];
            let mut placed: Vec<&Placement> = Vec::new();
            let mut failed: Vec<(i64, &String)> = Vec::new();
            for (part, _) in parts {
                match part {
                    Part::Members(m) => members = m,
                    Part::Outcome(ClassOutcome::Placed(p)) => placed.push(p),
                    Part::Outcome(ClassOutcome::Failed { count, reason }) => {
                        failed.push((*count, reason))
                    }
                }
            }
            placed.sort_by_key(|p| p.order);
            let mut pods = members.iter();
            for p in placed {
                for pod in pods.by_ref().take(p.count.max(0) as usize) {
                    out.push((
                        Decision::Binding {
                            pod: pod.clone(),
                            target: p.target.clone(),
                        },
                        1,
                    ));
                }
            }
            for (count, reason) in failed {
                for pod in pods.by_ref().take(count.max(0) as usize) {
                    out.push((
                        Decision::Unschedulable {
                            pod: pod.clone(),
                            reason: reason.clone(),
                        },
                        1,
                    ));
                }
            }
        })
        .map(|(_, d)| d)
}
