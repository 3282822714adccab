//! The decisions `explain` reads, indexed by the object asked about: built at once from a
//! plan's decisions (the CLI), or kept current from the control loop's diffs (`dovetail run
//! --explain`: +1 inserts, -1 removes), so an answer looks up a few records instead of
//! scanning every decision or running the queries again.

use dovetail_dataflow::decisions::{Decision, Disruption, Launch};
use dovetail_dataflow::disruption_reasons::NodeVerdict;
use dovetail_dataflow::provisioning_verdicts::{LaunchVerdict, PodVerdict};
use dovetail_dataflow::scheduling_reasons::Unschedulable;
use std::borrow::Borrow;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::Hash;

/// Values per key with their multiplicities. A batch of diffs may add a record's new value
/// before it retracts the old one, so a key holds every value whose count is not zero and
/// answers with one whose count is positive.
#[derive(Clone, Debug)]
struct Keyed<K, V> {
    map: HashMap<K, Vec<(V, isize)>>,
}

impl<K, V> Default for Keyed<K, V> {
    fn default() -> Self {
        Keyed {
            map: HashMap::new(),
        }
    }
}

impl<K: Hash + Eq, V: PartialEq> Keyed<K, V> {
    /// Adds `diff` to the count of `value` under `key`; a key left with nothing is dropped.
    fn update(&mut self, key: K, value: V, diff: isize) {
        match self.map.entry(key) {
            Entry::Occupied(mut e) => {
                let values = e.get_mut();
                match values.iter().position(|(v, _)| *v == value) {
                    Some(i) => {
                        values[i].1 += diff;
                        if values[i].1 == 0 {
                            values.swap_remove(i);
                        }
                    }
                    None => values.push((value, diff)),
                }
                if values.is_empty() {
                    e.remove();
                }
            }
            Entry::Vacant(e) => {
                e.insert(vec![(value, diff)]);
            }
        }
    }

    fn get<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.all(key).next()
    }

    fn all<'a, Q: Hash + Eq + ?Sized>(&'a self, key: &Q) -> impl Iterator<Item = &'a V> + 'a
    where
        K: Borrow<Q>,
    {
        self.map
            .get(key)
            .into_iter()
            .flatten()
            .filter(|(_, n)| *n > 0)
            .map(|(v, _)| v)
    }
}

/// What a pending pod got: the node or launch it is bound to, or why it is unschedulable.
pub type Outcome = Result<String, Unschedulable>;

/// See the module documentation.
#[derive(Clone, Debug, Default)]
pub struct Decided {
    node_verdicts: Keyed<String, NodeVerdict>,
    /// By node.
    disruptions: Keyed<String, Disruption>,
    /// By class.
    pod_verdicts: Keyed<u64, PodVerdict>,
    /// Each pending pod's class, from its class's verdict.
    pod_classes: Keyed<String, u64>,
    /// By pod.
    outcomes: Keyed<String, Outcome>,
    /// The pods bound to each node or launch.
    bound: Keyed<String, String>,
    launches: Keyed<String, Launch>,
    launch_verdicts: Keyed<String, LaunchVerdict>,
}

impl Decided {
    /// The decisions of a plan, all current.
    pub fn of(decisions: &[Decision]) -> Decided {
        let mut d = Decided::default();
        for decision in decisions {
            d.update(decision, 1);
        }
        d
    }

    /// Whether explain reads `decision` (the lower bounds and adoptions it does not).
    pub fn reads(decision: &Decision) -> bool {
        !matches!(
            decision,
            Decision::LowerBound(_) | Decision::ClusterLowerBound(_) | Decision::Adopt { .. }
        )
    }

    /// Applies one diff of the decisions; those explain does not read are ignored.
    pub fn update(&mut self, decision: &Decision, diff: isize) {
        match decision {
            Decision::NodeVerdict(v) => {
                self.node_verdicts
                    .update(v.node.clone(), (**v).clone(), diff);
            }
            Decision::Disruption(d) => {
                self.disruptions.update(d.node.clone(), d.clone(), diff);
            }
            Decision::PodVerdict(v) => {
                for pod in &v.pods {
                    self.pod_classes.update(pod.clone(), v.class, diff);
                }
                self.pod_verdicts.update(v.class, (**v).clone(), diff);
            }
            Decision::Binding { pod, target } => {
                self.outcomes.update(pod.clone(), Ok(target.clone()), diff);
                self.bound.update(target.clone(), pod.clone(), diff);
            }
            Decision::Unschedulable { pod, reason } => {
                self.outcomes.update(pod.clone(), Err(reason.clone()), diff);
            }
            Decision::Launch(l) => {
                self.launches.update(l.name.clone(), l.clone(), diff);
            }
            Decision::LaunchVerdict(v) => {
                self.launch_verdicts
                    .update(v.launch.clone(), (**v).clone(), diff);
            }
            Decision::LowerBound(_) | Decision::ClusterLowerBound(_) | Decision::Adopt { .. } => {}
        }
    }

    pub fn node_verdict(&self, node: &str) -> Option<&NodeVerdict> {
        self.node_verdicts.get(node)
    }

    /// The disruption decisions about `node`: the command it is in, or why each method is
    /// blocked.
    pub fn disruptions(&self, node: &str) -> Vec<&Disruption> {
        let mut all: Vec<&Disruption> = self.disruptions.all(node).collect();
        // In the order a plan lists them, whatever order the diffs came in.
        all.sort();
        all
    }

    /// The verdict of the class `pod` (`namespace/name`) is pending in.
    pub fn pod_verdict(&self, pod: &str) -> Option<&PodVerdict> {
        let class = self.pod_classes.get(pod)?;
        self.class_verdict(*class)
    }

    pub fn class_verdict(&self, class: u64) -> Option<&PodVerdict> {
        self.pod_verdicts.get(&class)
    }

    pub fn outcome(&self, pod: &str) -> Option<&Outcome> {
        self.outcomes.get(pod)
    }

    /// The pods bound to the node or launch `target`.
    pub fn bound_to(&self, target: &str) -> Vec<&String> {
        let mut pods: Vec<&String> = self.bound.all(target).collect();
        pods.sort();
        pods
    }

    pub fn launch(&self, name: &str) -> Option<&Launch> {
        self.launches.get(name)
    }

    pub fn launch_verdict(&self, launch: &str) -> Option<&LaunchVerdict> {
        self.launch_verdicts.get(launch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bind(pod: &str, target: &str) -> Decision {
        Decision::Binding {
            pod: pod.into(),
            target: target.into(),
        }
    }

    #[test]
    fn diffs_in_any_order_leave_the_current_decision() {
        let mut d = Decided::default();
        d.update(&bind("team/web", "general-a"), 1);
        // A re-plan moves the pod: the new binding may come before the old one's retraction.
        d.update(&bind("team/web", "general-b"), 1);
        d.update(&bind("team/web", "general-a"), -1);
        assert_eq!(d.outcome("team/web"), Some(&Ok("general-b".to_string())));
        assert!(d.bound_to("general-a").is_empty());
        assert_eq!(d.bound_to("general-b"), [&"team/web".to_string()]);
        // A retraction seen before its insertion leaves nothing once both are in.
        d.update(&bind("team/db", "general-b"), -1);
        assert_eq!(d.outcome("team/db"), None);
        d.update(&bind("team/db", "general-b"), 1);
        assert_eq!(d.outcome("team/db"), None);
        d.update(&bind("team/web", "general-b"), -1);
        assert_eq!(d.outcome("team/web"), None);
        assert!(d.outcomes.map.is_empty() && d.bound.map.is_empty());
    }
}
