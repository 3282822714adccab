//! dovetail's sources. For now: manifest files, as `dovetail plan -f PATH...` reads them.
//!
//! [`load_paths`] and [`load_str`] read Kubernetes and Karpenter objects from YAML or JSON
//! (multi-document streams, `kind: List`, folders) into the domain model of
//! [`dovetail_dataflow::model`]. Workloads are expanded into the pods their controllers would
//! create, pods' volumes are resolved to zones, and NodeClaims are matched to their Nodes.
//! Anything read but not used is reported in [`Manifests::notes`]; anything malformed is a
//! [`ManifestError`] naming file, document, object and field.

mod capacity_blocks;
mod daemonset;
mod error;
pub mod facts;
mod fields;
pub mod live;
mod loader;
mod messages;
mod meta;
mod node;
mod nodeclaim_record;
mod nodeclass;
mod nodepool;
mod notes;
mod overlay;
mod pdb;
mod pod;
mod priority;
mod resources;
mod rules;
mod selectors;
mod taints;
mod time;
pub mod trace;
mod volumes;
mod workloads;
mod yaml;

pub use capacity_blocks::RESERVATION_ID_LABEL;
pub use error::ManifestError;
pub use messages::{load_messages, parse_message, MessageError, Messages, Reading};
pub use nodeclaim_record::{read_nodeclaim, CREATED_MS_ANNOTATION};
pub use rules::markdown_table as validation_rules_table;
pub use time::{format_rfc3339_ms, parse_rfc3339_ms};
pub use yaml::{yaml_stream, yaml_value, MAX_DEPTH};

use dovetail_dataflow::facts::Interruption;
use dovetail_dataflow::model::{
    DaemonSet, EC2NodeClass, Node, NodeOverlay, NodePool, Pod, PodDisruptionBudget,
};
use std::path::PathBuf;

/// Everything dovetail read from a set of manifests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifests {
    /// Pending pods (no `node_name`) and bound pods, in input order, followed by the pods that
    /// Deployments, ReplicaSets, StatefulSets and Jobs still have to create. Finished pods
    /// (`Succeeded` / `Failed`) are left out.
    pub pods: Vec<Pod>,
    /// Nodes, then NodeClaims that have no Node yet (`in_flight`).
    pub nodes: Vec<Node>,
    /// `karpenter.sh/v1` NodePools, with Karpenter's defaults filled in.
    pub nodepools: Vec<NodePool>,
    /// `karpenter.k8s.aws/v1` EC2NodeClasses.
    pub nodeclasses: Vec<EC2NodeClass>,
    /// `karpenter.sh/v1alpha1` NodeOverlays.
    pub overlays: Vec<NodeOverlay>,
    /// DaemonSets, each with its pod template's scheduling spec.
    pub daemonsets: Vec<DaemonSet>,
    /// `policy/v1` PodDisruptionBudgets that have a selector.
    pub pdbs: Vec<PodDisruptionBudget>,
    /// What the manifests say EC2 will take away: the nodes of capacity blocks (by an
    /// EC2NodeClass's `status.capacityReservations` and the nodes' reservation-id label), timed
    /// at the block's end.
    pub interruptions: Vec<Interruption>,
    /// What was skipped, assumed or could not be resolved, one sentence each, naming the object
    /// (`skipped ConfigMap default/foo (kind not used by dovetail)`).
    pub notes: Vec<String>,
}

/// Loads manifests from files and folders. Folders are walked recursively for `*.yaml`, `*.yml`
/// and `*.json` files in sorted order (hidden entries skipped), so that the result does not
/// depend on the file system; `-` reads standard input. All files are resolved together: a pod
/// in one file may use a claim defined in another.
pub fn load_paths(paths: &[PathBuf]) -> Result<Manifests, ManifestError> {
    let mut docs = Vec::new();
    for path in yaml::expand_paths(paths, yaml::is_manifest_name)? {
        let text = yaml::read(&path)?;
        let name = if path.as_os_str() == "-" {
            "<stdin>".to_string()
        } else {
            path.display().to_string()
        };
        docs.extend(yaml::documents(&name, &text)?);
    }
    loader::assemble(&docs)
}

/// Reads objects already parsed as JSON values (what a watch delivers), each as one document of
/// `source_name`, with the same readers and cross-object resolution as [`load_str`].
pub fn load_values(
    source_name: &str,
    values: Vec<serde_json::Value>,
) -> Result<Manifests, ManifestError> {
    let docs: Vec<yaml::Document> = values
        .into_iter()
        .enumerate()
        .map(|(i, value)| yaml::Document {
            file: source_name.to_string(),
            index: i + 1,
            value,
        })
        .collect();
    loader::assemble(&docs)
}

/// Loads manifests from a string. `source_name` names it in errors and notes; a name ending in
/// `.json` selects JSON, anything else YAML.
pub fn load_str(source_name: &str, text: &str) -> Result<Manifests, ManifestError> {
    loader::assemble(&yaml::documents(source_name, text)?)
}
