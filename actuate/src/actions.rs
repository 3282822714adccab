//! Turning the diffs of launch decisions into actions: a launch that appears is a NodeClaim to
//! create; one that disappears before it was executed is cancelled; a launch whose name stays but
//! whose content changes (a pod joined it) is an update of the pending intent, not a new
//! NodeClaim. Once executed, a launch is a fact (an in-flight NodeClaim) and is never
//! re-planned, so it never needs cancelling here.

use dovetail_dataflow::decisions::{Decision, Launch};
use std::collections::BTreeMap;

/// What a sink is asked to do for one epoch's diffs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Create a NodeClaim (CreateFleet in the AWS backend; the name is the client token).
    Create(Launch),
    /// A launch not yet executed changed shape (types, zones, pods).
    Update(Launch),
    /// A launch not yet executed is no longer wanted.
    Cancel { name: String },
}

/// Turns one epoch's decision diffs into actions, in a stable order (cancels, updates, creates).
pub fn actions(diffs: &[(Decision, isize)]) -> Vec<Action> {
    let mut added: BTreeMap<&str, &Launch> = BTreeMap::new();
    let mut removed: BTreeMap<&str, &Launch> = BTreeMap::new();
    for (d, r) in diffs {
        if let Decision::Launch(l) = d {
            if *r > 0 {
                added.insert(&l.name, l);
            } else if *r < 0 {
                removed.insert(&l.name, l);
            }
        }
    }
    let mut out = Vec::new();
    for name in removed.keys() {
        if !added.contains_key(name) {
            out.push(Action::Cancel {
                name: name.to_string(),
            });
        }
    }
    for (name, l) in &added {
        if removed.contains_key(name) {
            out.push(Action::Update((*l).clone()));
        }
    }
    for (name, l) in &added {
        if !removed.contains_key(name) {
            out.push(Action::Create((*l).clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_dataflow::model::{Price, Requirements};

    fn launch(name: &str, pods: i64) -> Launch {
        Launch {
            name: name.into(),
            nodepool: "default".into(),
            instance_types: vec!["m5.large".into()],
            zones: vec!["us-east-1a".into()],
            capacity_types: vec!["on-demand".into()],
            price: Price(96_000),
            requirements: Requirements::new(),
            pods_by_class: vec![(1, pods)],
        }
    }

    #[test]
    fn diffs_become_create_update_cancel() {
        let diffs = vec![
            (Decision::Launch(launch("a", 1)), -1),
            (Decision::Launch(launch("a", 2)), 1),
            (Decision::Launch(launch("b", 1)), -1),
            (Decision::Launch(launch("c", 1)), 1),
            (
                Decision::Binding {
                    pod: "ns/p".into(),
                    target: "c".into(),
                },
                1,
            ),
        ];
        assert_eq!(
            actions(&diffs),
            vec![
                Action::Cancel { name: "b".into() },
                Action::Update(launch("a", 2)),
                Action::Create(launch("c", 1)),
            ]
        );
    }
}
