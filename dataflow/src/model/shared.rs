//! One copy of a record shared by the operators that read it.
//!
//! Timely gives each reader of a stream its own copy of every record: a pod or node stream
//! read by a dozen operators copied every label map a dozen times per change (replaying 100,000
//! pods at once, whole pods copied for the six readers of the pod stream were most of the peak
//! heap; a batch of node changes at 1,200 nodes spent most of its time copying nodes).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::Arc;

/// A record shared between its readers, compared, hashed and carried as the record itself.
/// Two holders of one copy compare equal without reading it (`Arc`'s equality already does):
/// differential sorts and merges by `Ord`, mostly copies of the same record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shared<T>(Arc<T>);

impl<T: Ord> Ord for Shared<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if Arc::ptr_eq(&self.0, &other.0) {
            return std::cmp::Ordering::Equal;
        }
        self.0.cmp(&other.0)
    }
}

impl<T: Ord> PartialOrd for Shared<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<T: Clone> Shared<T> {
    pub fn new(value: T) -> Shared<T> {
        Shared(Arc::new(value))
    }

    /// The record, copied only if another holder shares it.
    pub fn into_inner(self) -> T {
        Arc::unwrap_or_clone(self.0)
    }

    /// The record to change, copied first if another holder shares it.
    pub fn make_mut(&mut self) -> &mut T {
        Arc::make_mut(&mut self.0)
    }
}

impl<T: Clone> From<T> for Shared<T> {
    fn from(value: T) -> Shared<T> {
        Shared::new(value)
    }
}

impl<T> std::ops::Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Carried between processes as the record itself.
impl<T: Serialize> Serialize for Shared<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.as_ref().serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Shared<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(|v| Shared(Arc::new(v)))
    }
}
