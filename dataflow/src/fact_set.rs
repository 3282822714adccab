//! The engine's view of the world as a keyed set of facts: setting a fact under a key records
//! the retraction of the old one and the insertion of the new, so the driver only ever says
//! what is true now.

use crate::facts::Fact;
use std::collections::BTreeMap;

/// The facts currently true, by [`Fact::describe`], and the changes not yet taken.
#[derive(Default)]
pub struct FactSet {
    current: BTreeMap<String, Fact>,
    pending: Vec<(Fact, isize)>,
}

impl FactSet {
    /// Makes `fact` the one true fact under its key.
    pub fn set(&mut self, fact: Fact) {
        let key = fact.describe();
        match self.current.get(&key) {
            Some(old) if *old == fact => {}
            Some(old) => {
                self.pending.push((old.clone(), -1));
                self.pending.push((fact.clone(), 1));
                self.current.insert(key, fact);
            }
            None => {
                self.pending.push((fact.clone(), 1));
                self.current.insert(key, fact);
            }
        }
    }

    /// The fact under `key` (see [`Fact::describe`]), if any.
    pub fn get(&self, key: &str) -> Option<&Fact> {
        self.current.get(key)
    }

    /// Retracts the fact under `key`, if any.
    pub fn remove(&mut self, key: &str) {
        if let Some(old) = self.current.remove(key) {
            self.pending.push((old, -1));
        }
    }

    /// Makes `facts` the whole of one kind (those `of_kind` selects), as a relist after a
    /// watch's 410 Gone says it: each is set as by [`FactSet::set`] (unchanged ones stay
    /// silent), and every fact of the kind not among them is retracted. Nothing is lost or
    /// duplicated, however the watch broke off.
    pub fn replace_all(&mut self, of_kind: impl Fn(&Fact) -> bool, facts: Vec<Fact>) {
        let keep: std::collections::BTreeSet<String> = facts.iter().map(Fact::describe).collect();
        let gone: Vec<String> = self
            .current
            .iter()
            .filter(|(k, f)| of_kind(f) && !keep.contains(*k))
            .map(|(k, _)| k.clone())
            .collect();
        for key in gone {
            self.remove(&key);
        }
        for fact in facts {
            self.set(fact);
        }
    }

    /// The changes since the last call.
    pub fn take_changes(&mut self) -> Vec<(Fact, isize)> {
        std::mem::take(&mut self.pending)
    }

    pub fn has_changes(&self) -> bool {
        !self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Pod;

    fn pod(name: &str, node: Option<&str>) -> Fact {
        Fact::Pod(
            Pod {
                namespace: "default".into(),
                name: name.into(),
                node_name: node.map(str::to_string),
                ..Default::default()
            }
            .into(),
        )
    }

    #[test]
    fn updates_are_retract_then_insert_and_repeats_are_silent() {
        let mut f = FactSet::default();
        f.set(pod("a", None));
        assert_eq!(f.take_changes(), vec![(pod("a", None), 1)]);
        f.set(pod("a", None));
        assert!(!f.has_changes());
        f.set(pod("a", Some("n1")));
        assert_eq!(
            f.take_changes(),
            vec![(pod("a", None), -1), (pod("a", Some("n1")), 1)]
        );
        f.remove("Pod default/a");
        assert_eq!(f.take_changes(), vec![(pod("a", Some("n1")), -1)]);
    }

    #[test]
    fn a_relist_retracts_what_vanished_and_leaves_the_rest_silent() {
        let mut f = FactSet::default();
        f.set(pod("a", None));
        f.set(pod("b", Some("n1")));
        f.set(Fact::Clock(0));
        f.take_changes();
        f.replace_all(
            |x| matches!(x, Fact::Pod(_)),
            vec![pod("b", Some("n1")), pod("c", None)],
        );
        assert_eq!(
            f.take_changes(),
            vec![(pod("a", None), -1), (pod("c", None), 1)]
        );
        assert!(f.get("clock at 0 ms").is_some(), "other kinds untouched");
    }
}
