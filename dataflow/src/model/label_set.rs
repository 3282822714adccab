//! A bound pod's namespace and labels, as topology and affinity count it: one shared copy per
//! distinct set, compared by a hash first.
//!
//! A node's pods are kept as counts per (namespace, labels), and those counts pass through
//! differential's reduces and the disruption and packing solvers' per-node tables. With the
//! label map inline, every sort, merge and lookup compared or hashed the maps' strings; a
//! cluster's pods share a few hundred sets, so equal sets share one allocation (interned per
//! thread) and compare by pointer, and unequal ones almost always differ in their hash.

use crate::stable_hash::stable_hash;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Weak};

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Inner {
    /// The stable hash of (namespace, labels): the same in every process and run.
    hash: u64,
    namespace: String,
    labels: BTreeMap<String, String>,
}

/// A pod's (namespace, labels), shared by every holder of an equal set on this thread.
#[derive(Clone)]
pub struct LabelSet(Arc<Inner>);

thread_local! {
    /// Live sets by hash, so that equal sets made on this thread share one allocation. Dead
    /// entries are dropped when the table has doubled since the last sweep.
    static INTERNED: RefCell<(HashMap<u64, Weak<Inner>>, usize)> =
        RefCell::new((HashMap::new(), 1024));
}

impl LabelSet {
    pub fn new(namespace: &str, labels: &BTreeMap<String, String>) -> LabelSet {
        let hash = stable_hash(&(namespace, labels));
        INTERNED.with(|table| {
            let mut table = table.borrow_mut();
            let (sets, sweep_at) = &mut *table;
            let collides = match sets.get(&hash).and_then(Weak::upgrade) {
                Some(live) if live.namespace == namespace && live.labels == *labels => {
                    return LabelSet(live);
                }
                // Another set with the same hash: correct, only not shared.
                Some(_) => true,
                None => false,
            };
            let set = Arc::new(Inner {
                hash,
                namespace: namespace.to_string(),
                labels: labels.clone(),
            });
            if !collides {
                sets.insert(hash, Arc::downgrade(&set));
                if sets.len() >= *sweep_at {
                    sets.retain(|_, w| w.strong_count() > 0);
                    *sweep_at = (2 * sets.len()).max(1024);
                }
            }
            LabelSet(set)
        })
    }

    pub fn namespace(&self) -> &str {
        &self.0.namespace
    }

    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.0.labels
    }

    /// The set's stable hash: equal sets have equal ids (unequal ones almost never do).
    pub fn id(&self) -> u64 {
        self.0.hash
    }
}

impl PartialEq for LabelSet {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || *self.0 == *other.0
    }
}

impl Eq for LabelSet {}

/// By hash, then namespace and labels: a total order, the same in every process.
impl Ord for LabelSet {
    fn cmp(&self, other: &Self) -> Ordering {
        if Arc::ptr_eq(&self.0, &other.0) {
            return Ordering::Equal;
        }
        self.0.cmp(&other.0)
    }
}

impl PartialOrd for LabelSet {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Hash for LabelSet {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.hash);
    }
}

impl std::fmt::Debug for LabelSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{:?}", self.0.namespace, self.0.labels)
    }
}

/// Carried between processes as (namespace, labels), interned again on arrival.
impl Serialize for LabelSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (&self.0.namespace, &self.0.labels).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for LabelSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (namespace, labels) = <(String, BTreeMap<String, String>)>::deserialize(deserializer)?;
        Ok(LabelSet::new(&namespace, &labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn equal_sets_share_one_copy() {
        let a = LabelSet::new("default", &labels(&[("app", "web")]));
        let b = LabelSet::new("default", &labels(&[("app", "web")]));
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert_eq!(a, b);
        assert_eq!(a.id(), b.id());
    }

    #[test]
    fn sets_differ_by_namespace_and_labels() {
        let web = LabelSet::new("default", &labels(&[("app", "web")]));
        let other_ns = LabelSet::new("prod", &labels(&[("app", "web")]));
        let other_app = LabelSet::new("default", &labels(&[("app", "db")]));
        assert_ne!(web, other_ns);
        assert_ne!(web, other_app);
        assert_ne!(web.cmp(&other_app), Ordering::Equal);
        assert_eq!(web.cmp(&other_app), other_app.cmp(&web).reverse());
    }

    /// Copies made apart (another thread, or carried from another process) are equal and
    /// ordered alike, since the order is the hash's and then the content's.
    #[test]
    fn copies_from_another_thread_compare_equal() {
        let here = LabelSet::new("default", &labels(&[("app", "web"), ("tier", "front")]));
        let there = std::thread::spawn(|| {
            LabelSet::new("default", &labels(&[("app", "web"), ("tier", "front")]))
        })
        .join()
        .expect("the other thread makes its set");
        assert!(!Arc::ptr_eq(&here.0, &there.0));
        assert_eq!(here, there);
        assert_eq!(here.cmp(&there), Ordering::Equal);
        let json = serde_json::to_string(&here).map_err(|e| e.to_string());
        let back: Result<LabelSet, String> =
            json.and_then(|j| serde_json::from_str(&j).map_err(|e| e.to_string()));
        assert_eq!(back, Ok(here));
    }
}
