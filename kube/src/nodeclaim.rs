//! A NodeClaim as Karpenter's `karpenter.sh/v1` object: what the controller creates for a launch
//! decision before it calls CreateFleet (the durable record of the intent to launch, which a
//! restart or a new leader reads back instead of launching again), and the status it writes once
//! the instance exists. The spec says what the engine decided: the launch's requirements with
//! its instance types, zones and capacity types as `In` requirements (as Karpenter narrows a
//! NodeClaim to the options it launches with), the NodePool's taints and startup taints, the
//! EC2NodeClass it launches with; the finalizer `karpenter.sh/termination` holds it until its
//! instance is gone.

use dovetail_dataflow::backend::NodeClaim;
use dovetail_dataflow::model::labels::{
    CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL, UNREGISTERED_TAINT, ZONE,
};
use dovetail_dataflow::model::{
    Effect, Node, NodePool, Operator, Requirement, Requirements, Resources, Taint,
};
use serde_json::{json, Map, Value};

/// When actuation created the NodeClaim (ms), part of its launch's client token.
pub use dovetail_ingest::CREATED_MS_ANNOTATION;

/// Karpenter's finalizer on NodeClaims and Nodes: removed once the instance is terminated.
pub const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";

/// What a NodeClaim takes from its NodePool's template, as Karpenter copies it.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeClaimTemplate<'a> {
    /// The EC2NodeClass it launches with.
    pub node_class: Option<&'a str>,
    pub taints: &'a [Taint],
    pub expire_after: Option<&'a str>,
    pub termination_grace_period: Option<&'a str>,
}

impl<'a> NodeClaimTemplate<'a> {
    /// The template of `pool` (none: a NodePool not known, so nothing to copy).
    pub fn of(pool: Option<&'a NodePool>) -> NodeClaimTemplate<'a> {
        match pool {
            Some(p) => NodeClaimTemplate {
                node_class: p.node_class.as_deref(),
                taints: &p.taints,
                expire_after: p.expire_after.as_deref(),
                termination_grace_period: p.termination_grace_period.as_deref(),
            },
            None => NodeClaimTemplate::default(),
        }
    }
}

/// The object to create for `claim` from its NodePool's `template` (`startup_taints` are the
/// claim's own). `expireAfter` and `terminationGracePeriod` are copied as Karpenter copies them:
/// otherwise the CRD's default (720h) would stand in for what the NodePool says.
pub fn nodeclaim_object(claim: &NodeClaim, template: NodeClaimTemplate<'_>) -> Value {
    let launch = &claim.launch;
    let mut requirements = launch.requirements.clone();
    let mut narrow = |key: &str, values: &[String]| {
        if !values.is_empty() {
            let min_values = requirements.get(key).and_then(|r| r.min_values);
            requirements.add(
                key,
                Requirement::new(Operator::In, values.iter().cloned()).with_min_values(min_values),
            );
        }
    };
    narrow(INSTANCE_TYPE, &launch.instance_types);
    narrow(ZONE, &launch.zones);
    narrow(CAPACITY_TYPE, &launch.capacity_types);
    let mut labels = Map::new();
    labels.insert(NODEPOOL.into(), Value::from(claim.nodepool.clone()));
    let mut spec = Map::new();
    spec.insert(
        "requirements".into(),
        Value::from(requirements_json(&requirements)),
    );
    if let Some(class) = template.node_class {
        spec.insert(
            "nodeClassRef".into(),
            json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class}),
        );
    }
    if !template.taints.is_empty() {
        spec.insert("taints".into(), Value::from(taints_json(template.taints)));
    }
    if let Some(d) = template.expire_after {
        spec.insert("expireAfter".into(), Value::from(d));
    }
    if let Some(d) = template.termination_grace_period {
        spec.insert("terminationGracePeriod".into(), Value::from(d));
    }
    if !claim.startup_taints.is_empty() {
        spec.insert(
            "startupTaints".into(),
            Value::from(taints_json(&claim.startup_taints)),
        );
    }
    // The launch's client token hashes the creation time actuation chose; the API server's
    // creationTimestamp is its own clock in whole seconds, so the exact value is kept here.
    let mut annotations: Map<String, Value> = claim
        .annotations
        .iter()
        .map(|(k, v)| (k.clone(), Value::from(v.clone())))
        .collect();
    annotations.insert(
        CREATED_MS_ANNOTATION.into(),
        Value::from(claim.created_ms.to_string()),
    );
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": claim.name,
            "labels": labels,
            "annotations": annotations,
            "finalizers": [TERMINATION_FINALIZER],
        },
        "spec": spec,
    })
}

/// When each of a NodeClaim's conditions last became true (ms since the epoch); `None`: not
/// yet (a condition still false keeps the time the status was first written, its launch).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConditionTimes {
    pub launched_ms: Option<i64>,
    pub registered_ms: Option<i64>,
    pub initialized_ms: Option<i64>,
    /// Since when the engine holds it drifted (`None`: it is not).
    pub drifted_ms: Option<i64>,
    /// Since when it is consolidatable (`consolidateAfter` passed since its last pod event).
    pub consolidatable_ms: Option<i64>,
}

/// The status once CreateFleet answered: provider id, the node's name, capacity and
/// allocatable, and the conditions Karpenter sets: `Launched`, `Registered` once its Node
/// joined, `Initialized` once that Node is Ready with its startup taints gone, and `Ready`
/// with it; `Drifted` while the engine holds it drifted; `Consolidatable` once its NodePool's
/// `consolidateAfter` has passed since its last pod event. Each condition's `lastTransitionTime` is when it last changed, from `times`.
pub fn nodeclaim_status(
    claim: &NodeClaim,
    times: &ConditionTimes,
    now_rfc3339: &str,
) -> Option<Value> {
    let node = claim.status.as_ref()?;
    let at = |ms: Option<i64>| {
        ms.or(times.launched_ms)
            .map(dovetail_ingest::format_rfc3339_ms)
            .unwrap_or_else(|| now_rfc3339.to_string())
    };
    let condition = |kind: &str, status: bool, since: Option<i64>| {
        json!({"type": kind, "status": if status { "True" } else { "False" },
            "reason": kind, "message": "", "lastTransitionTime": at(since)})
    };
    let registered = claim.registered;
    let initialized = registered && times.initialized_ms.is_some();
    let mut conditions = vec![
        condition("Launched", true, times.launched_ms),
        condition(
            "Registered",
            registered,
            times.registered_ms.filter(|_| registered),
        ),
        condition(
            "Initialized",
            initialized,
            times.initialized_ms.filter(|_| initialized),
        ),
        condition(
            "Ready",
            initialized,
            times.initialized_ms.filter(|_| initialized),
        ),
    ];
    // Karpenter sets Drifted while the NodeClaim is drifted and removes it when it is not.
    if let Some(since) = times.drifted_ms {
        conditions.push(condition("Drifted", true, Some(since)));
    }
    if let Some(since) = times.consolidatable_ms {
        conditions.push(condition("Consolidatable", true, Some(since)));
    }
    let mut status = json!({
        "providerID": node.provider_id,
        "nodeName": node.name,
        "capacity": resources_json(&node.capacity),
        "allocatable": resources_json(&node.allocatable),
        "conditions": conditions,
    });
    if let Some(image) = &node.launched.image_id {
        status["imageID"] = Value::from(image.clone());
    }
    if let Some(ms) = node.last_pod_event_ms {
        status["lastPodEventTime"] = Value::from(dovetail_ingest::format_rfc3339_ms(ms));
    }
    Some(json!({ "status": status }))
}

/// The times of the conditions a NodeClaim object read back holds true (their
/// `lastTransitionTime`), so a restarted controller or a new leader keeps them instead of
/// stamping its own; `None` when the object has no conditions at all.
pub fn condition_times(object: &Value) -> Option<ConditionTimes> {
    let conditions = object["status"]["conditions"].as_array()?;
    let since = |kind: &str| {
        conditions
            .iter()
            .find(|c| c["type"] == kind && c["status"] == "True")
            .and_then(|c| c["lastTransitionTime"].as_str())
            .and_then(dovetail_ingest::parse_rfc3339_ms)
    };
    Some(ConditionTimes {
        launched_ms: since("Launched"),
        registered_ms: since("Registered"),
        initialized_ms: since("Initialized"),
        drifted_ms: since("Drifted"),
        consolidatable_ms: since("Consolidatable"),
    })
}

/// The annotations a NodeClaim carries once launched: its own, and what the actuator recorded at
/// launch (the drift hashes, subnet, security groups), which a restarted controller reads back.
pub fn nodeclaim_annotations(claim: &NodeClaim) -> Map<String, Value> {
    let mut out: Map<String, Value> = claim
        .annotations
        .iter()
        .map(|(k, v)| (k.clone(), Value::from(v.clone())))
        .collect();
    if let Some(node) = &claim.status {
        for (k, v) in &node.annotations {
            out.entry(k.clone())
                .or_insert_with(|| Value::from(v.clone()));
        }
    }
    out
}

/// The Node a kubelet registers for a launched NodeClaim (the simulated cloud's kubelet in
/// `dovetail run --cloud sim`): the NodeClaim's labels and taints, passed to the kubelet in
/// user data, plus `karpenter.sh/unregistered:NoExecute` (`--register-with-taints`), the
/// provider id, capacity and allocatable, and `Ready=False` until it is initialised.
pub fn kubelet_node(node: &Node, startup_taints: &[Taint], now_rfc3339: &str) -> Value {
    let mut taints = node.taints.clone();
    for t in startup_taints {
        if !taints.contains(t) {
            taints.push(t.clone());
        }
    }
    taints.push(Taint {
        key: UNREGISTERED_TAINT.to_string(),
        value: String::new(),
        effect: Effect::NoExecute,
    });
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": node.labels},
        "spec": {"providerID": node.provider_id, "taints": taints_json(&taints)},
        "status": {
            "capacity": resources_json(&node.capacity),
            "allocatable": resources_json(&node.allocatable),
            "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                "message": "", "lastTransitionTime": now_rfc3339}],
        },
    })
}

/// A NodePool's status as Karpenter keeps it: the capacity of its NodeClaims summed
/// (`status.resources`, with `nodes` their count; NodePool limits are checked against it) and
/// its `Ready` condition (its EC2NodeClass exists).
pub fn nodepool_status(
    resources: &Resources,
    nodes: usize,
    class_ready: bool,
    now_rfc3339: &str,
) -> Value {
    let mut totals = resources_json(resources);
    totals.insert("nodes".into(), Value::from(nodes.to_string()));
    let status = if class_ready { "True" } else { "False" };
    let reason = if class_ready {
        "Ready"
    } else {
        "NodeClassNotFound"
    };
    // Karpenter's CRD requires a message on every condition (empty when there is nothing to
    // say).
    let message = if class_ready {
        ""
    } else {
        "the NodePool's EC2NodeClass is not found"
    };
    json!({"status": {
        "resources": totals,
        "nodes": nodes,
        "conditions": [
            {"type": "NodeClassReady", "status": status, "reason": reason, "message": message,
                "lastTransitionTime": now_rfc3339},
            {"type": "Ready", "status": status, "reason": reason, "message": message,
                "lastTransitionTime": now_rfc3339},
        ],
    }})
}

/// A taint as the API writes it.
pub fn taint_json(t: &Taint) -> Value {
    let mut v = json!({"key": t.key, "effect": format!("{:?}", t.effect)});
    if !t.value.is_empty() {
        v["value"] = Value::from(t.value.clone());
    }
    v
}

/// Requirements as a NodeSelectorRequirement list (with `minValues`); a bounded requirement
/// also gets its `Gt` / `Lt` entries, as Karpenter writes them.
pub fn requirements_json(requirements: &Requirements) -> Vec<Value> {
    let mut out = Vec::new();
    for (key, r) in &requirements.0 {
        let op = r.operator();
        let bounded = r.greater_than.is_some() || r.less_than.is_some();
        // `Exists` with a bound says nothing the bound does not.
        if !(bounded && op == Operator::Exists) {
            let mut entry = json!({"key": key, "operator": format!("{op:?}")});
            if matches!(op, Operator::In | Operator::NotIn) {
                entry["values"] = Value::from(r.values.iter().cloned().collect::<Vec<_>>());
            }
            if let Some(m) = r.min_values {
                entry["minValues"] = Value::from(m);
            }
            out.push(entry);
        }
        if let Some(gt) = r.greater_than {
            out.push(json!({"key": key, "operator": "Gt", "values": [gt.to_string()]}));
        }
        if let Some(lt) = r.less_than {
            out.push(json!({"key": key, "operator": "Lt", "values": [lt.to_string()]}));
        }
    }
    out
}

fn taints_json(taints: &[Taint]) -> Vec<Value> {
    taints.iter().map(taint_json).collect()
}

fn resources_json(resources: &Resources) -> Map<String, Value> {
    resources
        .iter()
        .map(|(name, milli)| (name.to_string(), Value::from(quantity_text(milli))))
        .collect()
}

/// A quantity as Kubernetes writes it: whole units plainly, else in milli-units (`250m`).
fn quantity_text(milli: i64) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_dataflow::decisions::Launch;
    use dovetail_dataflow::model::{Effect, Node};

    fn claim() -> NodeClaim {
        let mut requirements = Requirements::new();
        requirements.add(
            "karpenter.k8s.aws/instance-category",
            Requirement::new(Operator::In, ["c", "m"]),
        );
        requirements.add(
            "kubernetes.io/arch",
            Requirement::new(Operator::NotIn, ["arm64"]),
        );
        requirements.add(
            "karpenter.k8s.aws/instance-generation",
            Requirement::new(Operator::Gt, ["4"]),
        );
        requirements.add(
            INSTANCE_TYPE,
            Requirement::new(Operator::Exists, Vec::<String>::new()).with_min_values(Some(2)),
        );
        NodeClaim {
            name: "general-x7k2p".into(),
            nodepool: "general".into(),
            launch: Launch {
                name: "general-x7k2p".into(),
                nodepool: "general".into(),
                instance_types: vec!["c5.large".into(), "m5.large".into()],
                zones: vec!["us-east-1a".into()],
                capacity_types: vec!["on-demand".into()],
                requirements,
                price: dovetail_dataflow::model::Price::from_dollars(0.085),
                pods_by_class: Vec::new(),
            },
            created_ms: 1_796_292_000_123,
            startup_taints: vec![Taint {
                key: "example.com/warming".into(),
                value: String::new(),
                effect: Effect::NoSchedule,
            }],
            status: None,
            registered: false,
            annotations: [("dovetail.sh/nodepool-hash".to_string(), "abc".to_string())].into(),
        }
    }

    #[test]
    fn the_object_narrows_requirements_to_the_launch_and_reads_back() {
        let mut c = claim();
        let taints = [Taint {
            key: "dedicated".into(),
            value: "ml".into(),
            effect: Effect::NoSchedule,
        }];
        let pool = NodePool {
            name: "general".into(),
            node_class: Some("default".into()),
            taints: taints.to_vec(),
            expire_after: Some("Never".into()),
            termination_grace_period: Some("48h".into()),
            ..NodePool::default()
        };
        let mut object = nodeclaim_object(&c, NodeClaimTemplate::of(Some(&pool)));
        assert_eq!(object["spec"]["expireAfter"], "Never");
        assert_eq!(object["spec"]["terminationGracePeriod"], "48h");
        let reqs = object["spec"]["requirements"]
            .as_array()
            .expect("a list")
            .clone();
        let find = |key: &str, op: &str| {
            reqs.iter()
                .find(|r| r["key"] == key && r["operator"] == op)
                .cloned()
                .unwrap_or_else(|| panic!("{key} {op} in {reqs:?}"))
        };
        assert_eq!(
            find(INSTANCE_TYPE, "In")["values"],
            json!(["c5.large", "m5.large"])
        );
        assert_eq!(find(INSTANCE_TYPE, "In")["minValues"], json!(2));
        assert_eq!(find(ZONE, "In")["values"], json!(["us-east-1a"]));
        assert_eq!(
            find("kubernetes.io/arch", "NotIn")["values"],
            json!(["arm64"])
        );
        assert_eq!(
            find("karpenter.k8s.aws/instance-generation", "Gt")["values"],
            json!(["4"])
        );
        assert!(
            !reqs
                .iter()
                .any(|r| r["key"] == "karpenter.k8s.aws/instance-generation"
                    && r["operator"] == "Exists"),
            "a bound needs no Exists: {reqs:?}"
        );
        assert_eq!(
            object["metadata"]["finalizers"],
            json!([TERMINATION_FINALIZER])
        );
        assert_eq!(object["spec"]["nodeClassRef"]["name"], "default");
        assert_eq!(
            object["spec"]["startupTaints"],
            json!([{"key": "example.com/warming", "effect": "NoSchedule"}])
        );

        // With its status, the manifest reader sees it as the in-flight node it is.
        c.status = Some(Node {
            name: "ip-10-0-0-1.ec2.internal".into(),
            provider_id: Some("aws:///us-east-1a/i-0123456789abcdef0".into()),
            capacity: Resources {
                cpu: 2_000,
                memory: 4_294_967_296_000,
                ..Resources::default()
            },
            allocatable: Resources {
                cpu: 1_930,
                memory: 3_500_000_000_000,
                ..Resources::default()
            },
            ..Node::default()
        });
        let launched = ConditionTimes {
            launched_ms: Some(1_796_292_001_000),
            ..ConditionTimes::default()
        };
        let status = nodeclaim_status(&c, &launched, "2026-12-03T00:00:09Z").expect("a status");
        // A condition's time is when it changed, not when the status was written again.
        let mut later = c.clone();
        later.registered = true;
        let registered = ConditionTimes {
            registered_ms: Some(1_796_292_005_000),
            ..launched
        };
        let again =
            nodeclaim_status(&later, &registered, "2026-12-03T00:00:09Z").expect("a status");
        let times: Vec<(&str, &str)> = again["status"]["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .map(|c| {
                (
                    c["type"].as_str().unwrap_or(""),
                    c["lastTransitionTime"].as_str().unwrap_or(""),
                )
            })
            .collect();
        assert_eq!(
            times,
            [
                ("Launched", "2026-12-03T10:00:01.000Z"),
                ("Registered", "2026-12-03T10:00:05.000Z"),
                ("Initialized", "2026-12-03T10:00:01.000Z"),
                ("Ready", "2026-12-03T10:00:01.000Z"),
            ]
        );
        // Drifted from when the engine held it so; without that, no Drifted condition at all.
        let drifted = ConditionTimes {
            drifted_ms: Some(1_796_292_009_000),
            ..registered
        };
        let with = nodeclaim_status(&later, &drifted, "2026-12-03T00:00:09Z").expect("a status");
        let drift: Vec<&Value> = with["status"]["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .filter(|c| c["type"] == "Drifted")
            .collect();
        assert_eq!(drift.len(), 1);
        assert_eq!(drift[0]["status"], "True");
        assert_eq!(drift[0]["lastTransitionTime"], "2026-12-03T10:00:09.000Z");
        // Read back, the conditions that hold keep their times; Initialized does not hold.
        assert_eq!(
            condition_times(&with),
            Some(ConditionTimes {
                initialized_ms: None,
                ..drifted
            })
        );
        assert_eq!(condition_times(&json!({"status": {}})), None);
        object["status"] = status["status"].clone();
        // A restarted controller reads the same launch back (with what it asked CreateFleet for).
        let back = dovetail_ingest::read_nodeclaim("claims", &object).expect("a record");
        assert_eq!(back.name, c.name);
        assert_eq!(back.launch.instance_types, c.launch.instance_types);
        assert_eq!(back.launch.zones, c.launch.zones);
        assert_eq!(back.launch.capacity_types, c.launch.capacity_types);
        assert_eq!(back.startup_taints, c.startup_taints);
        assert_eq!(back.instance_id(), c.instance_id());
        assert_eq!(
            back.created_ms, c.created_ms,
            "the client token's creation time"
        );
        assert!(!back.registered);
        let m = dovetail_ingest::load_values("claims", vec![object]).expect("reads back");
        assert_eq!(m.nodes.len(), 1, "{:?}", m.notes);
        let n = &m.nodes[0];
        assert!(n.in_flight);
        assert_eq!(n.nodeclaim.as_deref(), Some("general-x7k2p"));
        assert_eq!(
            n.provider_id,
            c.status.as_ref().and_then(|s| s.provider_id.clone())
        );
        assert_eq!(n.labels.get(NODEPOOL).map(String::as_str), Some("general"));
        assert_eq!(n.labels.get(ZONE).map(String::as_str), Some("us-east-1a"));
        assert_eq!(n.allocatable.get("cpu"), 1_930);
        assert_eq!(n.taints, taints.to_vec());
        assert_eq!(
            n.annotations
                .get("dovetail.sh/nodepool-hash")
                .map(String::as_str),
            Some("abc")
        );
    }

    #[test]
    fn quantities_are_written_as_kubernetes_writes_them() {
        assert_eq!(quantity_text(2_000), "2");
        assert_eq!(quantity_text(1_930), "1930m");
        assert_eq!(quantity_text(4_294_967_296_000), "4294967296");
    }
}
