//! The kinds the controller watches, and the fact keys they become. Deployments, StatefulSets,
//! Jobs and ReplicaSets are **not** watched: the manifest loader expands them into the pods
//! their controllers would make, which on a live cluster would double-count the real ones.

use dovetail_dataflow::facts::Fact;
use kube::discovery::ApiResource;

/// One watched kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchedKind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
}

/// Every kind read into facts today.
pub const WATCHED: &[WatchedKind] = &[
    kind("", "v1", "Pod", "pods", true),
    kind("", "v1", "Node", "nodes", false),
    NODEPOOL,
    EC2NODECLASS,
    kind(
        "karpenter.sh",
        "v1alpha1",
        "NodeOverlay",
        "nodeoverlays",
        false,
    ),
    kind("apps", "v1", "DaemonSet", "daemonsets", true),
    kind(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
    // What pods' volume zones and priority are resolved against (`dovetail_ingest::live`).
    kind(
        "",
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        true,
    ),
    kind("", "v1", "PersistentVolume", "persistentvolumes", false),
    kind(
        "storage.k8s.io",
        "v1",
        "StorageClass",
        "storageclasses",
        false,
    ),
    kind(
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        false,
    ),
];

/// NodePools: watched, and their status written.
pub const NODEPOOL: WatchedKind = kind("karpenter.sh", "v1", "NodePool", "nodepools", false);

/// EC2NodeClasses: watched, and their status written (with `--cloud aws`).
pub const EC2NODECLASS: WatchedKind = kind(
    "karpenter.k8s.aws",
    "v1",
    "EC2NodeClass",
    "ec2nodeclasses",
    false,
);

/// NodeClaims: what the controller writes, read back at start (`ingest::read_nodeclaim`) and
/// watched for deletions.
pub const NODECLAIM: WatchedKind = kind("karpenter.sh", "v1", "NodeClaim", "nodeclaims", false);

const fn kind(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> WatchedKind {
    WatchedKind {
        group,
        version,
        kind,
        plural,
        namespaced,
    }
}

impl WatchedKind {
    /// `v1`, `karpenter.sh/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn api_resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.to_string(),
            version: self.version.to_string(),
            api_version: self.api_version(),
            kind: self.kind.to_string(),
            plural: self.plural.to_string(),
        }
    }

    /// The key of the fact an object of this kind becomes (as [`Fact::describe`] names it):
    /// `Pod ns/name`, `NodePool name`.
    pub fn fact_key(&self, namespace: Option<&str>, name: &str) -> String {
        let name = match (self.namespaced, namespace) {
            (true, Some(ns)) => format!("{ns}/{name}"),
            (true, None) => format!("default/{name}"),
            (false, _) => name.to_string(),
        };
        format!("{} {name}", self.kind)
    }

    /// Whether a fact is one this kind's objects become (for a relist replacing them all).
    pub fn owns(&self, fact: &Fact) -> bool {
        matches!(
            (self.kind, fact),
            ("Pod", Fact::Pod(_))
                | ("Node", Fact::Node(_))
                | ("NodePool", Fact::NodePool(_))
                | ("EC2NodeClass", Fact::NodeClass(_))
                | ("NodeOverlay", Fact::Overlay(_))
                | ("DaemonSet", Fact::DaemonSet(_))
                | ("PodDisruptionBudget", Fact::Pdb(_))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fact_keys_are_what_the_facts_describe_themselves_as() {
        let pod = dovetail_dataflow::model::Pod {
            namespace: "team".into(),
            name: "web-1".into(),
            ..Default::default()
        };
        assert_eq!(
            WATCHED[0].fact_key(Some("team"), "web-1"),
            Fact::Pod(pod.into()).describe()
        );
        let pool = dovetail_dataflow::model::NodePool {
            name: "general".into(),
            ..Default::default()
        };
        assert_eq!(
            WATCHED[2].fact_key(None, "general"),
            Fact::NodePool(pool).describe()
        );
        let pdb = dovetail_dataflow::model::PodDisruptionBudget {
            namespace: "team".into(),
            name: "web".into(),
            ..Default::default()
        };
        let pdb_kind = WATCHED
            .iter()
            .find(|k| k.kind == "PodDisruptionBudget")
            .expect("watched");
        assert_eq!(
            pdb_kind.fact_key(Some("team"), "web"),
            Fact::Pdb(pdb).describe()
        );
    }
}
