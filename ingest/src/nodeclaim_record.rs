//! A `karpenter.sh/v1` NodeClaim read back as the record actuation keeps of a launch — what a
//! restarted controller or a new leader finds on the API server. Unlike the engine's reading of
//! a NodeClaim (an in-flight node, skipped while it has no capacity), every NodeClaim is read,
//! with or without status: one with no status is a launch whose CreateFleet may not have
//! happened, which recovery finishes under the same client token instead of launching again.

use crate::error::{FieldError, ManifestError};
use crate::fields::At;
use crate::meta::meta;
use crate::node::nodeclaim;
use crate::selectors::requirement_list;
use crate::taints::taints;
use dovetail_dataflow::backend::NodeClaim;
use dovetail_dataflow::decisions::Launch;
use dovetail_dataflow::model::labels::{CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL, ZONE};
use dovetail_dataflow::model::{Operator, Price, Requirements};
use serde_json::Value;

/// The annotation holding the creation time (ms) actuation gave a NodeClaim: part of its
/// launch's client token, so a read-back must not take the API server's creationTimestamp.
pub const CREATED_MS_ANNOTATION: &str = "dovetail.sh/created-ms";

/// Reads one NodeClaim object (`source` names where it came from in errors).
pub fn read_nodeclaim(source: &str, object: &Value) -> Result<NodeClaim, ManifestError> {
    let root = At::root(object, "");
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string();
    record(&root).map_err(|e| ManifestError::Field {
        file: source.to_string(),
        document: 1,
        kind: "NodeClaim",
        object: name,
        field: e.field,
        reason: e.reason,
    })
}

fn record(root: &At) -> Result<NodeClaim, FieldError> {
    let m = meta(root)?;
    let spec = root.req_obj("spec")?;
    let requirements: Requirements = requirement_list(&spec, "requirements", true)?;
    let values = |key: &str| -> Vec<String> {
        requirements
            .get(key)
            .filter(|r| r.operator() == Operator::In)
            .map(|r| r.values.iter().cloned().collect())
            .unwrap_or_default()
    };
    let nodepool =
        m.labels.get(NODEPOOL).cloned().ok_or_else(|| {
            FieldError::new("metadata.labels", format!("has no {NODEPOOL} label"))
        })?;
    let launch = Launch {
        name: m.name.clone(),
        nodepool: nodepool.clone(),
        instance_types: values(INSTANCE_TYPE),
        zones: values(ZONE),
        capacity_types: values(CAPACITY_TYPE),
        // What the offering cost is the cloud's to say; nothing is priced from a read-back.
        price: Price(0),
        requirements: requirements.clone(),
        pods_by_class: Vec::new(),
    };
    let registered = condition_true(root, "Registered")?;
    let status = nodeclaim(root)?.node.map(|mut n| {
        n.in_flight = !registered;
        n
    });
    Ok(NodeClaim {
        name: m.name,
        nodepool,
        launch,
        created_ms: m
            .annotations
            .get(CREATED_MS_ANNOTATION)
            .and_then(|v| v.parse().ok())
            .or(m.created_ms)
            .unwrap_or(0),
        startup_taints: taints(&spec, "startupTaints")?,
        status,
        registered,
        annotations: m.annotations,
    })
}

/// Whether `status.conditions` has `kind` with status `True`.
pub(crate) fn condition_true(root: &At, kind: &str) -> Result<bool, FieldError> {
    let Some(status) = root.obj("status")? else {
        return Ok(false);
    };
    for c in status.list("conditions")? {
        if c.req_str("type")? == kind {
            return Ok(c.str("status")?.as_deref() == Some("True"));
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(status: Option<Value>) -> Value {
        let mut o = json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {
                "name": "default-abc12",
                "labels": {"karpenter.sh/nodepool": "default"},
                "annotations": {"dovetail.sh/nodepool-hash": "123"},
                "creationTimestamp": "2026-12-03T10:00:00Z",
            },
            "spec": {
                "requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge"]},
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                ],
                "startupTaints": [{"key": "cni", "effect": "NoSchedule"}],
            },
        });
        if let Some(s) = status {
            o["status"] = s;
        }
        o
    }

    #[test]
    fn a_claim_without_status_is_an_unlaunched_launch() {
        let c = read_nodeclaim("watch", &object(None)).expect("reads");
        assert_eq!(c.name, "default-abc12");
        assert_eq!(c.nodepool, "default");
        assert_eq!(c.launch.instance_types, ["m5.large", "m5.xlarge"]);
        assert_eq!(c.launch.zones, ["us-east-1a"]);
        assert_eq!(c.launch.capacity_types, ["on-demand"]);
        assert_eq!(c.startup_taints.len(), 1);
        assert!(c.status.is_none());
        assert!(!c.registered);
        assert_eq!(c.created_ms, 1_796_292_000_000);
        let mut o = object(None);
        o["metadata"]["annotations"][CREATED_MS_ANNOTATION] = json!("1796292000123");
        let c = read_nodeclaim("watch", &o).expect("reads");
        assert_eq!(
            c.created_ms, 1_796_292_000_123,
            "the exact time actuation chose"
        );
    }

    #[test]
    fn a_launched_claim_reads_back_its_node() {
        let c = read_nodeclaim(
            "watch",
            &object(Some(json!({
                "providerID": "aws:///us-east-1a/i-0123456789abcdef0",
                "nodeName": "i-0123456789abcdef0.ec2.internal",
                "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                "conditions": [{"type": "Launched", "status": "True"}, {"type": "Registered", "status": "True"}],
            }))),
        )
        .expect("reads");
        let n = c.status.as_ref().expect("a status");
        assert_eq!(c.instance_id(), Some("i-0123456789abcdef0"));
        assert_eq!(n.name, "i-0123456789abcdef0.ec2.internal");
        assert!(c.registered);
        assert!(!n.in_flight);
        assert_eq!(
            n.annotations
                .get("dovetail.sh/nodepool-hash")
                .map(String::as_str),
            Some("123")
        );
    }

    #[test]
    fn a_claim_without_its_nodepool_label_names_the_field() {
        let mut o = object(None);
        o["metadata"]["labels"] = json!({});
        let e = read_nodeclaim("watch", &o)
            .expect_err("refused")
            .to_string();
        assert!(
            e.contains("NodeClaim default-abc12") && e.contains("metadata.labels"),
            "{e}"
        );
    }
}
