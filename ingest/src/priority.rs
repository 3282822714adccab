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
    classes: BTreeMap<String, i32>,
    global_default: Option<i32>,
}

impl Priorities {
    /// Reads a `scheduling.k8s.io/v1` PriorityClass.
    pub fn add(&mut self, root: &At, name: String) -> FieldResult<()> {
        let value = root
            .i32("value")?
            .ok_or_else(|| root.err_at("value", "required field is missing"))?;
        if root.bool("globalDefault")? == Some(true) {
            self.global_default = Some(value);
        }
        self.classes.insert(name, value);
        Ok(())
    }

    /// The priority of a pod spec: `spec.priority` if set, else its class's value, else the
    /// global default, else 0.
    pub fn resolve(&self, spec: &PodSpec, notes: &mut Notes) -> i32 {
        if spec.explicit_priority {
            return spec.scheduling.priority;
        }
        match &spec.priority_class {
            Some(class) => {
                if let Some(v) = self.classes.get(class) {
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
            None => self.global_default.unwrap_or(0),
        }
    }
}
