//! PriorityClasses, to give pods that name one (templates usually do, and only the admission
//! plugin turns the name into `spec.priority`) their priority.

use crate::error::FieldResult;
use crate::fields::At;
use crate::notes::Notes;
use crate::pod::PodSpec;
use std::collections::BTreeMap;

/// Classes every cluster has without them being in the input.
const BUILT_IN: &[(&str, i32)] = &[
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];

/// The PriorityClasses of the input.
#[derive(Debug, Default)]
pub(crate) struct Priorities {
    /// Value and `globalDefault` by class name.
    classes: BTreeMap<String, (i32, bool)>,
}

impl Priorities {
    /// Reads a `scheduling.k8s.io/v1` PriorityClass.
    pub fn add(&mut self, root: &At, name: String) -> FieldResult<()> {
        let value = root
            .i32("value")?
            .ok_or_else(|| root.err_at("value", "required field is missing"))?;
        let global_default = root.bool("globalDefault")? == Some(true);
        self.classes.insert(name, (value, global_default));
        Ok(())
    }

    /// Forgets a class (deleted on a live cluster).
    pub fn remove(&mut self, name: &str) {
        self.classes.remove(name);
    }

    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.classes.keys()
    }

    /// Takes in the classes of `other` (one object read on its own).
    pub fn merge(&mut self, other: Priorities) {
        self.classes.extend(other.classes);
    }

    /// The value pods without a class get: the `globalDefault` class's (the API server allows
    /// one), else 0.
    fn global_default(&self) -> Option<i32> {
        self.classes.values().find(|(_, g)| *g).map(|(v, _)| *v)
    }

    /// The priority of a pod spec: `spec.priority` if set, else its class's value, else the
    /// global default, else 0.
    pub fn resolve(&self, spec: &PodSpec, notes: &mut Notes) -> i32 {
        if spec.explicit_priority {
            return spec.scheduling.priority;
        }
        match &spec.priority_class {
            Some(class) => {
                if let Some((v, _)) = self.classes.get(class) {
                    return *v;
                }
                if let Some((_, v)) = BUILT_IN.iter().find(|(n, _)| n == class) {
                    return *v;
                }
                notes.add(format!(
                    "PriorityClass {class} is not in the input; priority 0 assumed"
                ));
                0
            }
            None => self.global_default().unwrap_or(0),
        }
    }
}
