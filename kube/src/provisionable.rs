//! Which pods of a live cluster the engine sees. Bound pods are capacity in use. A pod not yet
//! bound is one the engine may provision for only as Karpenter's `IsProvisionable` decides:
//! kube-scheduler has marked it `PodScheduled=False` with reason `Unschedulable`, it is not
//! terminating, and no DaemonSet owns it (DaemonSet pods are accounted for by their DaemonSet,
//! bound or not). `plan` and `replay` do not use this: their pods carry no status.

use serde_json::Value;

/// Why a pod is left out, or `None` when the engine sees it.
pub fn left_out(pod: &Value) -> Option<&'static str> {
    let metadata = pod.get("metadata");
    let owned_by_daemonset = metadata
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .is_some_and(|owners| {
            owners
                .iter()
                .any(|o| o.get("kind").and_then(Value::as_str) == Some("DaemonSet"))
        });
    if owned_by_daemonset {
        return Some("owned by a DaemonSet");
    }
    let bound = pod
        .get("spec")
        .and_then(|s| s.get("nodeName"))
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    if bound {
        return None;
    }
    if metadata
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|t| !t.is_null())
    {
        return Some("terminating");
    }
    let unschedulable = pod
        .get("status")
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("PodScheduled")
                    && c.get("status").and_then(Value::as_str) == Some("False")
                    && c.get("reason").and_then(Value::as_str) == Some("Unschedulable")
            })
        });
    if unschedulable {
        None
    } else {
        Some("not marked unschedulable by kube-scheduler yet")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn unschedulable() -> Value {
        json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable"})
    }

    #[test]
    fn only_unschedulable_or_bound_pods_are_seen() {
        let pending = json!({"metadata": {"name": "a"}, "spec": {}});
        assert!(
            left_out(&pending).is_some(),
            "kube-scheduler has not looked yet"
        );
        let marked = json!({"metadata": {"name": "a"}, "spec": {},
            "status": {"conditions": [unschedulable()]}});
        assert_eq!(left_out(&marked), None);
        let bound = json!({"metadata": {"name": "a"}, "spec": {"nodeName": "n1"}});
        assert_eq!(left_out(&bound), None);
        let terminating = json!({"metadata": {"name": "a", "deletionTimestamp": "2026-12-03T00:00:00Z"},
            "spec": {}, "status": {"conditions": [unschedulable()]}});
        assert_eq!(left_out(&terminating), Some("terminating"));
        let daemon = json!({"metadata": {"name": "a", "ownerReferences": [{"kind": "DaemonSet", "name": "ds"}]},
            "spec": {"nodeName": "n1"}});
        assert_eq!(left_out(&daemon), Some("owned by a DaemonSet"));
        let other_reason = json!({"metadata": {"name": "a"}, "spec": {},
            "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}});
        assert!(left_out(&other_reason).is_some());
    }
}
