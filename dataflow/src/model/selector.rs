//! Label selectors (`matchLabels` + `matchExpressions`), as used by topology spread constraints,
//! pod (anti-)affinity and PodDisruptionBudgets. They share the set semantics of node
//! requirements, so they are kept as [`Requirements`] and matched against a pod's labels.

use super::requirements::Requirements;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LabelSelector {
    pub requirements: Requirements,
}

impl LabelSelector {
    /// True when a pod labelled `labels` is selected. An empty selector selects every pod (as a
    /// topology spread constraint's does).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.matches_labels(labels)
    }
}
