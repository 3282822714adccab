//! From [`RawEvent`] to [`TraceEvent`]: embedded manifests go through the manifest loader (the
//! same code as `dovetail plan -f`), everything else is checked for values the JSON types cannot
//! rule out (empty names, negative prices).

use super::event::{AppliedObject, ObjectKind, RawEvent, TraceEvent};
use super::reason::LineReason;
use crate::loader::assemble;
use crate::yaml::Document;
use crate::Manifests;
use serde_json::Value;
use std::collections::BTreeMap;

/// Turns raw events into typed ones. It remembers the PriorityClasses applied so far, so that a
/// pod (or DaemonSet) naming one gets its priority, as it would in a manifest set.
pub(crate) struct Resolver {
    source: String,
    priority_classes: BTreeMap<String, Value>,
}

fn exactly_one<T>(
    mut items: Vec<T>,
    event: &'static str,
    what: &'static str,
    notes: &[String],
) -> Result<T, LineReason> {
    match (items.pop(), items.is_empty()) {
        (Some(item), true) => Ok(item),
        (Some(_), false) => Err(LineReason::NotOne {
            event,
            what,
            found: items.len() + 1,
        }),
        (None, _) => Err(LineReason::NotRead {
            event,
            what,
            notes: notes.to_vec(),
        }),
    }
}

fn non_empty(event: &'static str, field: &'static str, value: &str) -> Result<(), LineReason> {
    if value.is_empty() {
        Err(LineReason::EmptyField { event, field })
    } else {
        Ok(())
    }
}

impl Resolver {
    pub fn new(source: &str) -> Resolver {
        Resolver {
            source: source.to_string(),
            priority_classes: BTreeMap::new(),
        }
    }

    /// Loads `object` (from line `line`) after the PriorityClasses applied so far; returns what
    /// the loader read and the object back.
    fn load(&self, line: u64, object: Value) -> Result<(Manifests, Value), LineReason> {
        let mut docs: Vec<Document> = self
            .priority_classes
            .values()
            .map(|pc| Document {
                file: format!("{} (PriorityClass applied earlier)", self.source),
                index: 1,
                value: pc.clone(),
            })
            .collect();
        docs.push(Document {
            file: self.source.clone(),
            index: usize::try_from(line).unwrap_or(usize::MAX),
            value: object,
        });
        let manifests = assemble(&docs).map_err(|e| LineReason::Manifest(Box::new(e)))?;
        let object = docs.pop().map(|d| d.value).unwrap_or(Value::Null);
        Ok((manifests, object))
    }

    /// The typed event, and the loader's notes about it.
    pub fn resolve(
        &mut self,
        line: u64,
        raw: RawEvent,
    ) -> Result<(TraceEvent, Vec<String>), LineReason> {
        Ok(match raw {
            RawEvent::PodCreated { pod } => {
                match pod.get("kind").and_then(Value::as_str) {
                    Some("Pod") => {}
                    Some(other) => {
                        return Err(LineReason::PodOfKind {
                            kind: other.to_string(),
                        })
                    }
                    None => return Err(LineReason::PodWithoutKind),
                }
                let (m, _) = self.load(line, pod)?;
                let pod = exactly_one(m.pods, "pod_created", "pod", &m.notes)?;
                (TraceEvent::PodCreated(Box::new(pod)), m.notes)
            }
            RawEvent::PodDeleted(r) => {
                non_empty("pod_deleted", "namespace", &r.namespace)?;
                non_empty("pod_deleted", "name", &r.name)?;
                (TraceEvent::PodDeleted(r), Vec::new())
            }
            RawEvent::Apply { object } => self.apply(line, object)?,
            RawEvent::Delete(mut r) => {
                non_empty("delete", "name", &r.name)?;
                if r.kind.namespaced() {
                    let ns = r.namespace.take().unwrap_or_default();
                    r.namespace = Some(if ns.is_empty() {
                        "default".to_string()
                    } else {
                        ns
                    });
                } else if r.namespace.is_some() {
                    return Err(LineReason::NamespaceOnClusterScoped { kind: r.kind });
                }
                if r.kind == ObjectKind::PriorityClass {
                    self.priority_classes.remove(&r.name);
                }
                (TraceEvent::Delete(r), Vec::new())
            }
            RawEvent::Price(p) => {
                non_empty("price", "instance_type", &p.instance_type)?;
                if let Some(z) = &p.zone {
                    non_empty("price", "zone", z)?;
                }
                if !p.price_per_hour.is_finite() || p.price_per_hour < 0.0 {
                    return Err(LineReason::NotAPrice {
                        price: p.price_per_hour,
                    });
                }
                (TraceEvent::Price(p), Vec::new())
            }
            RawEvent::Capacity(c) => {
                non_empty("capacity", "instance_type", &c.instance_type)?;
                if let Some(z) = &c.zone {
                    non_empty("capacity", "zone", z)?;
                }
                (TraceEvent::Capacity(c), Vec::new())
            }
            RawEvent::Interrupt(i) => (TraceEvent::Interrupt(i), Vec::new()),
        })
    }

    fn apply(&mut self, line: u64, object: Value) -> Result<(TraceEvent, Vec<String>), LineReason> {
        let kind_name = match object.get("kind").and_then(Value::as_str) {
            Some(k) => k.to_string(),
            None => return Err(LineReason::ObjectWithoutKind),
        };
        let Some(kind) = ObjectKind::from_kind(&kind_name) else {
            return Err(LineReason::NotApplicable { kind: kind_name });
        };
        let (m, object) = self.load(line, object)?;
        let notes = m.notes;
        let what = kind.as_str();
        let applied = match kind {
            ObjectKind::NodePool => {
                AppliedObject::NodePool(exactly_one(m.nodepools, "apply", what, &notes)?)
            }
            ObjectKind::EC2NodeClass => {
                AppliedObject::EC2NodeClass(exactly_one(m.nodeclasses, "apply", what, &notes)?)
            }
            ObjectKind::NodeOverlay => {
                AppliedObject::NodeOverlay(exactly_one(m.overlays, "apply", what, &notes)?)
            }
            ObjectKind::DaemonSet => {
                AppliedObject::DaemonSet(exactly_one(m.daemonsets, "apply", what, &notes)?)
            }
            ObjectKind::PodDisruptionBudget => {
                AppliedObject::PodDisruptionBudget(exactly_one(m.pdbs, "apply", what, &notes)?)
            }
            ObjectKind::PriorityClass => {
                // The loader has checked it (metadata.name, an int32 value); read the fields it
                // keeps to itself.
                let name = match object.pointer("/metadata/name") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Number(n)) => n.to_string(),
                    _ => String::new(),
                };
                let value = object
                    .get("value")
                    .and_then(|v| {
                        v.as_i64()
                            .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
                    })
                    .and_then(|v| i32::try_from(v).ok());
                let (false, Some(value)) = (name.is_empty(), value) else {
                    return Err(LineReason::NotRead {
                        event: "apply",
                        what,
                        notes,
                    });
                };
                let global_default = object
                    .get("globalDefault")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                self.priority_classes.insert(name.clone(), object);
                AppliedObject::PriorityClass {
                    name,
                    value,
                    global_default,
                }
            }
        };
        Ok((TraceEvent::Apply(Box::new(applied)), notes))
    }
}
