//! `dovetail run --cloud sim --cluster kube` through the binary against a real HTTP API server
//! speaking the Kubernetes protocol, watch included (kmock behind `dovetail_kube::test_peer`):
//! a NodePool, an EC2NodeClass and a pod kube-scheduler marked unschedulable → a NodeClaim as
//! Karpenter writes it → the simulated cloud's kubelet registers its Node with the provider id →
//! registration (labels, finalizer, unregistered taint removed) → Initialized; the pod bound
//! (the test plays kube-scheduler) and deleted → the node is empty → consolidated: drained,
//! instance terminated, Node and NodeClaim gone.

use dovetail_kube::test_peer::KubePeer;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};

fn object(v: Value) -> DynamicObject {
    serde_json::from_value(v).expect("a Kubernetes object")
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Polls `check` until it gives a value (or fails after 60 s, naming what it waited for).
fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn condition(o: &Value, kind: &str) -> Option<String> {
    o["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .and_then(|c| c["status"].as_str())
        .map(str::to_string)
}

/// The chart's ClusterRole and Role rules (`deploy/rbac-rules.json`, checked against the chart's
/// templates by `deploy/check_rbac_json.py`).
fn rbac_rules() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/rbac-rules.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("deploy/rbac-rules.json"))
        .expect("JSON")
}

/// Whether a request of the peer's log (`verb`, `group`, `resource`, `subresource`,
/// `namespace`) is allowed by one of the rules; a namespaced rule (a Role) allows only
/// requests inside a namespace.
fn rbac_covers(rules: &[Value], request: &Value) -> bool {
    rules.iter().any(|rule| {
        rule["apiGroup"] == request["group"]
            && rule["resource"] == request["resource"]
            && rule["subresource"] == request["subresource"]
            && rule["verbs"]
                .as_array()
                .is_some_and(|v| v.iter().any(|verb| *verb == request["verb"]))
            && (rule["namespaced"] == false || !request["namespace"].is_null())
    })
}

#[test]
fn the_rbac_rules_file_says_what_the_chart_grants() {
    let python = std::env::var("DOVETAIL_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let out = Command::new(python)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/deploy/check_rbac_json.py"
        ))
        .output()
        .expect("run deploy/check_rbac_json.py");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_rbac_check_refuses_what_no_rule_allows() {
    let rules = rbac_rules();
    let request = |verb: &str, group: &str, resource: &str, sub: Value, ns: Value| json!({"verb": verb, "group": group, "resource": resource, "subresource": sub, "namespace": ns});
    assert!(rbac_covers(
        &rules,
        &request(
            "create",
            "karpenter.sh",
            "nodeclaims",
            Value::Null,
            Value::Null
        )
    ));
    assert!(rbac_covers(
        &rules,
        &request("create", "", "pods", json!("eviction"), json!("team"))
    ));
    // The controller never deletes pods (it evicts them), nor writes NodePools' specs.
    assert!(!rbac_covers(
        &rules,
        &request("delete", "", "pods", Value::Null, json!("team"))
    ));
    assert!(!rbac_covers(
        &rules,
        &request(
            "update",
            "karpenter.sh",
            "nodepools",
            Value::Null,
            Value::Null
        )
    ));
    // Leases are written only in the controller's own namespace (a Role).
    assert!(!rbac_covers(
        &rules,
        &request(
            "update",
            "coordination.k8s.io",
            "leases",
            Value::Null,
            Value::Null
        )
    ));
    assert!(rbac_covers(
        &rules,
        &request(
            "update",
            "coordination.k8s.io",
            "leases",
            Value::Null,
            json!("kube-system")
        )
    ));
}

#[test]
fn a_pending_pod_gets_a_nodeclaim_a_registered_node_and_an_empty_node_goes() {
    let peer = KubePeer::start();
    let dir = std::env::temp_dir().join(format!("dovetail-run-kube-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: peer\n  cluster:\n    server: {}\n\
             users:\n- name: peer\n  user: {{}}\ncontexts:\n- name: peer\n  context:\n    cluster: peer\n    user: peer\n\
             current-context: peer\n",
            peer.url()
        ),
    )
    .expect("write the kubeconfig");
    let sim = dir.join("sim.json");
    std::fs::write(
        &sim,
        r#"{"launch_to_running_ms": 300, "running_to_registered_ms": 300,
            "registered_to_initialized_ms": 300, "spot_interruptions": false}"#,
    )
    .expect("write the sim config");

    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let client = {
        let _in = rt.enter();
        peer.client()
    };
    let nodepools: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource("karpenter.sh", "v1", "NodePool", "nodepools"),
    );
    let nodeclasses: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource("karpenter.k8s.aws", "v1", "EC2NodeClass", "ec2nodeclasses"),
    );
    let claims: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource("karpenter.sh", "v1", "NodeClaim", "nodeclaims"),
    );
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "team");
    let pp = PostParams::default();
    rt.block_on(nodeclasses.create(
        &pp,
        &object(json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "KarpenterNodeRole",
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}]},
        })),
    ))
    .expect("create the EC2NodeClass");
    rt.block_on(nodepools.create(
        &pp,
        &object(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "general"},
            "spec": {
                "template": {
                    "metadata": {"labels": {"team": "web"}},
                    "spec": {
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                        "requirements": [
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge"]}],
                        "startupTaints": [{"key": "example.com/cni-not-ready", "effect": "NoSchedule"}]}},
                "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "5s"}},
        })),
    ))
    .expect("create the NodePool");
    rt.block_on(
        pods.create(
            &pp,
            &serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web-1", "namespace": "team"},
                "spec": {"containers": [{"name": "app", "image": "app",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
            }))
            .expect("a Pod"),
        ),
    )
    .expect("create the pod");
    // kube-scheduler found no node for it.
    rt.block_on(pods.patch_status(
        "web-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})),
    ))
    .expect("mark the pod unschedulable");

    let summary = dir.join("summary.json");
    let mut controller = Command::new(env!("CARGO_BIN_EXE_dovetail"))
        .args(["run", "--cloud", "sim", "--cluster", "kube", "--for", "30s"])
        .args(["--tick", "200ms", "--consolidation-validation", "1s"])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--sim-config")
        .arg(&sim)
        .arg("--summary")
        .arg(&summary)
        .spawn()
        .expect("start dovetail run");

    // The NodeClaim, as Karpenter writes it, created before the launch.
    let claim = eventually("a NodeClaim", || {
        let list = rt.block_on(claims.list(&Default::default())).ok()?;
        list.items.into_iter().next()
    });
    let name = claim.metadata.name.clone().expect("a name");
    let v = serde_json::to_value(&claim).expect("JSON");
    assert_eq!(v["metadata"]["labels"]["karpenter.sh/nodepool"], "general");
    assert_eq!(
        v["metadata"]["finalizers"],
        json!(["karpenter.sh/termination"])
    );
    assert_eq!(v["spec"]["nodeClassRef"]["name"], "default");

    // The simulated kubelet registers the Node; registration and initialisation follow.
    let claim = eventually("the NodeClaim Initialized", || {
        let o = serde_json::to_value(rt.block_on(claims.get(&name)).ok()?).ok()?;
        (condition(&o, "Initialized").as_deref() == Some("True")).then_some(o)
    });
    assert_eq!(condition(&claim, "Launched").as_deref(), Some("True"));
    assert_eq!(condition(&claim, "Registered").as_deref(), Some("True"));
    let node_name = claim["status"]["nodeName"]
        .as_str()
        .expect("status.nodeName")
        .to_string();
    let provider_id = claim["status"]["providerID"]
        .as_str()
        .expect("status.providerID")
        .to_string();
    assert!(provider_id.starts_with("aws:///us-east-1"), "{provider_id}");
    let node =
        serde_json::to_value(rt.block_on(nodes.get(&node_name)).expect("the Node")).expect("JSON");
    assert_eq!(node["spec"]["providerID"], provider_id.as_str());
    assert_eq!(
        node["metadata"]["labels"]["karpenter.sh/nodepool"],
        "general"
    );
    assert_eq!(node["metadata"]["labels"]["team"], "web");
    assert_eq!(
        node["metadata"]["finalizers"],
        json!(["karpenter.sh/termination"])
    );
    let taints: Vec<String> = node["spec"]["taints"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .filter_map(|t| t["key"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        !taints
            .iter()
            .any(|t| t == "karpenter.sh/unregistered" || t == "example.com/cni-not-ready"),
        "{taints:?}"
    );

    // kube-scheduler binds the pod; then it is deleted and the node is empty.
    rt.block_on(pods.patch(
        "web-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"nodeName": node_name}})),
    ))
    .expect("bind the pod");
    rt.block_on(pods.patch_status(
        "web-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True"}]}})),
    ))
    .expect("the pod runs");
    rt.block_on(pods.delete("web-1", &DeleteParams::default()))
        .expect("delete the pod");
    eventually("the NodeClaim gone", || {
        rt.block_on(claims.get_opt(&name))
            .ok()
            .and_then(|o| o.is_none().then_some(()))
    });
    eventually("the Node gone", || {
        rt.block_on(nodes.get_opt(&node_name))
            .ok()
            .and_then(|o| o.is_none().then_some(()))
    });

    let status = controller.wait().expect("dovetail run ends");
    assert!(status.success(), "dovetail run: {status}");

    // The chart's RBAC covers every request the controller made.
    let log: Vec<Value> =
        serde_json::from_str(&peer.control("GET", "/_peer/requests", "")).expect("the request log");
    let made: Vec<&Value> = log
        .iter()
        .filter(|r| {
            r["user_agent"]
                .as_str()
                .is_some_and(|a| a.starts_with("dovetail/"))
        })
        .collect();
    assert!(
        made.iter()
            .any(|r| r["resource"] == "nodeclaims" && r["verb"] == "create"),
        "the log names the controller's requests: {made:?}"
    );
    let uncovered: Vec<&&Value> = made
        .iter()
        .filter(|r| !rbac_covers(&rbac_rules(), r))
        .collect();
    assert!(
        uncovered.is_empty(),
        "not allowed by deploy/rbac-rules.json: {uncovered:?}"
    );
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).expect("the summary"))
        .expect("JSON");
    assert_eq!(s["instances"]["launched"], 1, "{s}");
    assert_eq!(s["instances"]["running"], 0, "{s}");
    assert_eq!(s["nodeclaims"], 0, "{s}");
    assert_eq!(s["kubernetes"]["nodes_registered"], 1, "{s}");
    assert_eq!(s["kubernetes"]["nodeclaims_initialized"], 1, "{s}");
    let _ = std::fs::remove_dir_all(&dir);
}
