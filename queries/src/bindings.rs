//! Queries — bindings and unschedulable pods (query 5).
//!
//! Rule: each of a class's pending pods gets one of the class's placements (a node or launch,
//! each taking as many of its pods as the placement's count) or, past them, the packing's reason
//! why it is unschedulable. The answer is sticky, as the packing is: a pod keeps what it had while
//! that still has room, and only the pods left without (new pods, or pods whose place shrank) are
//! dealt out, by name, to what has room, in the placements' order. From nothing that deals the
//! sorted pods out in order. A pod bound to a node name is kube-scheduler's job; one bound to a
//! launch waits for that NodeClaim.

use crate::types::{ClassId, ClassMembers};
use differential_dataflow::VecCollection;
use dovetail_dataflow::decisions::{Decision, Placement};
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::maintained::{add_count, maintain_by_key, Maintained};
use dovetail_dataflow::scheduling_reasons::Unschedulable;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ClassOutcome {
    Placed(Placement),
    Failed { count: i64, reason: Unschedulable },
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
    let parts = classes
        .map(|(id, m)| (id, Part::Members(m.members)))
        .concat(outcomes.map(|(id, o)| (id, Part::Outcome(o))));
    maintain_by_key(parts, "Bindings", ClassBindings::default)
}

/// What a pod of the class can be given: a node or launch, or a reason it is unschedulable.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Slot {
    Target(String),
    Failed(Unschedulable),
}

impl Slot {
    fn of(d: &Decision) -> Option<Slot> {
        match d {
            Decision::Binding { target, .. } => Some(Slot::Target(target.clone())),
            Decision::Unschedulable { reason, .. } => Some(Slot::Failed(reason.clone())),
            _ => None,
        }
    }

    fn decision(&self, pod: &str) -> Decision {
        match self {
            Slot::Target(target) => Decision::Binding {
                pod: pod.to_string(),
                target: target.clone(),
            },
            Slot::Failed(reason) => Decision::Unschedulable {
                pod: pod.to_string(),
                reason: reason.clone(),
            },
        }
    }
}

/// One class's pods, its packing's outcomes, and what each pod was answered with.
#[derive(Default)]
struct ClassBindings {
    members: HashMap<Vec<String>, isize>,
    outcomes: HashMap<ClassOutcome, isize>,
    answered: BTreeMap<String, Decision>,
}

impl Maintained for ClassBindings {
    type In = Part;
    type Out = Decision;

    fn update(&mut self, part: Part, diff: isize) {
        match part {
            Part::Members(m) => add_count(&mut self.members, m, diff),
            Part::Outcome(o) => add_count(&mut self.outcomes, o, diff),
        }
    }

    fn evaluate(&mut self, out: &mut Vec<(Decision, isize)>) {
        let members: &[String] = self
            .members
            .iter()
            .find(|(_, n)| **n > 0)
            .map_or(&[], |(m, _)| m.as_slice());
        let mut placed: Vec<&Placement> = Vec::new();
        let mut failed: Vec<(&Unschedulable, i64)> = Vec::new();
        for (o, n) in &self.outcomes {
            if *n <= 0 {
                continue;
            }
            match o {
                ClassOutcome::Placed(p) => placed.push(p),
                ClassOutcome::Failed { count, reason } => failed.push((reason, *count)),
            }
        }
        placed.sort_by_key(|p| p.order);
        failed.sort();
        // Room per slot, in dealing order; a target placed twice (seeded, then topped up) is
        // one slot.
        let mut room: Vec<(Slot, i64)> = Vec::new();
        let mut index: HashMap<Slot, usize> = HashMap::new();
        let slots = placed
            .iter()
            .map(|p| (Slot::Target(p.target.clone()), p.count))
            .chain(failed.iter().map(|(r, n)| (Slot::Failed((*r).clone()), *n)));
        for (slot, n) in slots {
            match index.get(&slot) {
                Some(&i) => room[i].1 += n.max(0),
                None => {
                    index.insert(slot.clone(), room.len());
                    room.push((slot, n.max(0)));
                }
            }
        }
        let present: HashSet<&str> = members.iter().map(String::as_str).collect();
        let mut now: BTreeMap<String, Decision> = BTreeMap::new();
        for (pod, d) in &self.answered {
            if !present.contains(pod.as_str()) {
                continue;
            }
            let Some(i) = Slot::of(d).and_then(|s| index.get(&s).copied()) else {
                continue;
            };
            if room[i].1 > 0 {
                room[i].1 -= 1;
                now.insert(pod.clone(), d.clone());
            }
        }
        let mut cursor = 0;
        for pod in members {
            if now.contains_key(pod) {
                continue;
            }
            while cursor < room.len() && room[cursor].1 == 0 {
                cursor += 1;
            }
            let Some((slot, left)) = room.get_mut(cursor) else {
                break;
            };
            *left -= 1;
            now.insert(pod.clone(), slot.decision(pod));
        }
        for (pod, d) in &self.answered {
            if now.get(pod) != Some(d) {
                out.push((d.clone(), -1));
            }
        }
        for (pod, d) in &now {
            if self.answered.get(pod) != Some(d) {
                out.push((d.clone(), 1));
            }
        }
        self.answered = now;
    }

    fn is_empty(&self) -> bool {
        self.members.is_empty() && self.outcomes.is_empty() && self.answered.is_empty()
    }
}
