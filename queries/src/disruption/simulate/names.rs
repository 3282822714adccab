//! The names the cluster's nodes and NodeClaims go by, kept as node states come and go.

use crate::types::NodeState;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// Every node's name and its NodeClaim's, as a launch must not take one (see
/// [`crate::solver::SharedNodes::names`]). The commands query keeps it as node states change:
/// collecting ten thousand names per evaluation was a twentieth of a small one. A name is
/// counted, as a node and an in-flight NodeClaim may both hold it.
#[derive(Debug, Default)]
pub struct NodeNames {
    counts: BTreeMap<String, u32>,
    /// Shared with the evaluation's World; no one holds it between evaluations, so a change
    /// updates it in place.
    set: Rc<BTreeSet<String>>,
}

impl NodeNames {
    pub fn of<'n>(nodes: impl IntoIterator<Item = &'n NodeState>) -> NodeNames {
        let mut names = NodeNames::default();
        for n in nodes {
            names.add(n);
        }
        names
    }

    pub fn add(&mut self, n: &NodeState) {
        for name in std::iter::once(&n.node.name).chain(&n.node.nodeclaim) {
            let count = self.counts.entry(name.clone()).or_insert(0);
            *count += 1;
            if *count == 1 {
                Rc::make_mut(&mut self.set).insert(name.clone());
            }
        }
    }

    pub fn remove(&mut self, n: &NodeState) {
        for name in std::iter::once(&n.node.name).chain(&n.node.nodeclaim) {
            if let Some(count) = self.counts.get_mut(name) {
                *count -= 1;
                if *count == 0 {
                    self.counts.remove(name);
                    Rc::make_mut(&mut self.set).remove(name);
                }
            }
        }
    }

    pub fn set(&self) -> Rc<BTreeSet<String>> {
        Rc::clone(&self.set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_dataflow::model::Node;

    fn node(name: &str, nodeclaim: Option<&str>) -> NodeState {
        NodeState {
            node: Node {
                name: name.to_string(),
                nodeclaim: nodeclaim.map(str::to_string),
                ..Node::default()
            }
            .into(),
            used: Default::default(),
            pods: Default::default(),
        }
    }

    /// A name stays while any node holds it, and the set is the names of the nodes held.
    #[test]
    fn a_name_shared_by_a_node_and_a_nodeclaim_stays_until_both_are_gone() {
        let registered = node("ip-10-0-0-1", Some("general-abc"));
        let in_flight = node("general-abc", Some("general-abc"));
        let mut names = NodeNames::of([&registered, &in_flight]);
        let set = |n: &NodeNames| n.set().iter().cloned().collect::<Vec<_>>();
        assert_eq!(set(&names), ["general-abc", "ip-10-0-0-1"]);
        names.remove(&in_flight);
        assert_eq!(set(&names), ["general-abc", "ip-10-0-0-1"]);
        names.remove(&registered);
        assert!(names.set().is_empty());
        assert!(names.counts.is_empty());
    }
}
