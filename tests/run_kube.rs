//! `dovetail run --cloud sim --cluster kube` through the binary against a real HTTP API server
//! speaking the Kubernetes protocol, watch included (kmock behind `dovetail_kube::test_peer`):
//! a NodePool, an EC2NodeClass and a pod kube-scheduler marked unschedulable → a NodeClaim as
//! Karpenter writes it → the simulated cloud's kubelet registers its Node with the provider id →
//! registration (labels, finalizer, unregistered taint removed) → Initialized; the pod bound
//! (the test plays kube-scheduler) and deleted → the node is empty → consolidated: drained,
//! instance terminated, Node and NodeClaim gone.

mod live_cluster;

use live_cluster::{
    assert_valid_against_the_crds, condition, eventually, free_port, http_get, rbac_covers,
    rbac_rules, LiveCluster, NO_HTTP,
};
use serde_json::{json, Value};
use std::process::{Child, Command};

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
    let c = LiveCluster::start("run-kube");
    let sim = c.fast_sim();
    c.create_nodeclass("test");
    c.create_nodepool();
    c.create_unschedulable_pod("web-1");
    // No instance type has this much CPU.
    c.create_unschedulable_pod_requesting("huge", "100000");
    c.create_broken_nodepool();

    let summary = c.dir.join("summary.json");
    let (metrics_port, probe_port) = (free_port(), free_port());
    let mut controller = c
        .dovetail("sim", "30s")
        .args(["--consolidation-validation", "1s"])
        .args(["--metrics-port", &metrics_port.to_string()])
        .args(["--health-probe-port", &probe_port.to_string()])
        .arg("--sim-config")
        .arg(&sim)
        .arg("--summary")
        .arg(&summary)
        .spawn()
        .expect("start dovetail run");

    // The NodeClaim, as Karpenter writes it, created before the launch.
    let claim = c.first_nodeclaim();
    let name = claim.metadata.name.clone().expect("a name");
    let v = serde_json::to_value(&claim).expect("JSON");
    assert_eq!(v["metadata"]["labels"]["karpenter.sh/nodepool"], "general");
    assert_eq!(
        v["metadata"]["finalizers"],
        json!(["karpenter.sh/termination"])
    );
    assert_eq!(v["spec"]["nodeClassRef"]["name"], "default");

    // The decisions as Events: the pod is nominated to the NodeClaim; the huge one fails.
    let (message, kind) = c.event("Pod/team/web-1", "Nominated");
    assert_eq!(message, format!("Pod should schedule on: nodeclaim/{name}"));
    assert_eq!(kind, "Normal");
    let (message, kind) = c.event("Pod/team/huge", "FailedScheduling");
    assert!(message.starts_with("Failed to schedule pod, "), "{message}");
    assert_eq!(kind, "Warning");
    let (message, kind) = c.event("NodePool/broken", "FailedValidation");
    assert!(message.contains("spec.weight"), "{message}");
    assert_eq!(kind, "Warning");

    // The simulated kubelet registers the Node; registration and initialisation follow.
    let claim = c.initialized(&name);
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
    let node = c.node(&node_name);
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

    // The probes and the metrics say so too.
    let (status, _) = eventually("/readyz", || http_get(probe_port, "/readyz"));
    assert!(status.contains(" 200 "), "{status}");
    let (status, _) = eventually("/healthz", || http_get(probe_port, "/healthz"));
    assert!(status.contains(" 200 "), "{status}");
    let metrics = eventually("the launch in the metrics", || {
        let (_, body) = http_get(metrics_port, "/metrics")?;
        body.contains("karpenter_nodeclaims_launched_total 1\n")
            .then_some(body)
    });
    assert!(metrics.contains("dovetail_leader 1\n"), "{metrics}");
    assert!(
        metrics.contains("dovetail_nodes_registered_total 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("# TYPE dovetail_epoch_duration_seconds summary"),
        "{metrics}"
    );

    // The NodePool's status counts the NodeClaim's capacity, as Karpenter's does.
    let pool = eventually("the NodePool's status", || {
        let o = serde_json::to_value(c.rt.block_on(c.nodepools.get("general")).ok()?).ok()?;
        (o["status"]["resources"]["nodes"] == "1").then_some(o)
    });
    assert_eq!(condition(&pool, "Ready").as_deref(), Some("True"), "{pool}");
    assert!(pool["status"]["resources"]["cpu"].is_string(), "{pool}");
    // What the controller wrote is what Karpenter's API takes.
    assert_valid_against_the_crds(&c.dir.join("written.json"), &[claim, pool]);

    // kube-scheduler binds the pod; its NodePool's consolidateAfter (5 s) later the NodeClaim
    // is Consolidatable, with the pod event's time; then the pod is deleted and the node is
    // empty.
    c.bind("web-1", &node_name);
    c.nodeclaim_when(&name, "Consolidatable after the pod event", |o| {
        condition(o, "Consolidatable").as_deref() == Some("True")
            && o["status"]["lastPodEventTime"].is_string()
    });
    c.delete_pod("web-1");
    c.gone(&name, &node_name);

    let status = controller.wait().expect("dovetail run ends");
    assert!(status.success(), "dovetail run: {status}");
    c.assert_rbac_covers_the_controller();
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).expect("the summary"))
        .expect("JSON");
    assert_eq!(s["instances"]["launched"], 1, "{s}");
    assert_eq!(s["instances"]["running"], 0, "{s}");
    assert_eq!(s["nodeclaims"], 0, "{s}");
    assert_eq!(s["kubernetes"]["nodes_registered"], 1, "{s}");
    assert_eq!(s["kubernetes"]["nodeclaims_initialized"], 1, "{s}");
}

#[test]
fn a_dry_run_beside_karpenter_decides_and_writes_nothing() {
    let c = LiveCluster::start("run-kube-dry");
    c.karpenter_holds_its_lease();
    c.create_nodeclass("test");
    c.create_nodepool();
    c.create_unschedulable_pod("web-1");
    let summary = c.dir.join("summary.json");
    let out = c
        .dovetail("sim", "4s")
        .arg("--dry-run")
        .args(NO_HTTP)
        .arg("--summary")
        .arg(&summary)
        .output()
        .expect("dovetail run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).expect("the summary"))
        .expect("JSON");
    // Karpenter's Lease did not stop a dry run deciding …
    assert_eq!(s["kubernetes"]["decided_beside_karpenter"], true, "{s}");
    // … it decided to launch for the pod …
    assert!(
        s["kubernetes"]["writes_withheld"].as_u64() >= Some(1),
        "{s}"
    );
    assert!(
        s["kubernetes"]["cloud_calls_withheld"].as_u64() >= Some(1),
        "{s}"
    );
    // … and the API server saw nothing but reads (and its leader Lease).
    let list =
        c.rt.block_on(c.claims.list(&Default::default()))
            .expect("list NodeClaims");
    assert!(list.items.is_empty());
    let made = c.requests_of_the_controller();
    let writes: Vec<&Value> = made
        .iter()
        .filter(|r| !matches!(r["verb"].as_str(), Some("get" | "list" | "watch")))
        .filter(|r| r["resource"] != "leases")
        .collect();
    assert!(writes.is_empty(), "a dry run wrote: {writes:?}");
}

/// A cluster with a NodePool, an EC2NodeClass and the unschedulable pod `web-1`, and the
/// controller (simulated cloud, one replica, no HTTP) run for `run_for` until the pod's
/// NodeClaim is initialised: the cluster, the controller, the NodeClaim's name and object.
fn one_node_for_web_1(test: &str, run_for: &str) -> (LiveCluster, Child, String, Value) {
    let c = LiveCluster::start(test);
    let sim = c.fast_sim();
    c.create_nodeclass("test");
    c.create_nodepool();
    c.create_unschedulable_pod("web-1");
    let controller = c
        .dovetail("sim", run_for)
        .arg("--no-leader-elect")
        .args(NO_HTTP)
        .arg("--sim-config")
        .arg(&sim)
        .spawn()
        .expect("start dovetail run");
    let name = c.first_nodeclaim().metadata.name.expect("a name");
    let claim = c.initialized(&name);
    (c, controller, name, claim)
}

#[test]
fn a_nodeclaim_deleted_by_hand_is_drained_and_terminated() {
    let (c, mut controller, name, claim) = one_node_for_web_1("run-kube-delete", "20s");
    let node = claim["status"]["nodeName"]
        .as_str()
        .expect("nodeName")
        .to_string();
    c.bind("web-1", &node);
    // An SRE deletes the NodeClaim: the finalizer holds it while the node is drained (the pod
    // evicted through the Eviction API) and its instance terminated; then both go.
    c.rt.block_on(c.claims.delete(&name, &Default::default()))
        .expect("delete the NodeClaim");
    eventually("the pod evicted", || {
        c.rt.block_on(c.pods.get_opt("web-1"))
            .ok()
            .and_then(|p| p.is_none().then_some(()))
    });
    c.gone(&name, &node);
    let _ = controller.kill();
    let _ = controller.wait();
    let evictions = c
        .requests_of_the_controller()
        .into_iter()
        .filter(|r| r["subresource"] == "eviction")
        .count();
    assert!(evictions >= 1, "drained through the Eviction API");
}

/// A NodePool's template changed under a running node: the engine holds the NodeClaim
/// drifted, and its status gets Karpenter's `Drifted` condition (`kube/src/drifted.rs`).
#[test]
fn a_changed_nodepool_marks_its_nodeclaim_drifted() {
    let (c, mut controller, name, claim) = one_node_for_web_1("run-kube-drift", "30s");
    assert_eq!(condition(&claim, "Drifted"), None, "not drifted at launch");
    let node = claim["status"]["nodeName"]
        .as_str()
        .expect("nodeName")
        .to_string();
    c.bind("web-1", &node);
    c.rt.block_on(c.nodepools.patch(
        "general",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(
            json!({"spec": {"template": {"metadata": {"labels": {"team": "api"}}}}}),
        ),
    ))
    .expect("change the NodePool's template");
    let drifted = c.nodeclaim_when(&name, "Drifted", |o| {
        condition(o, "Drifted").as_deref() == Some("True")
    });
    let _ = controller.kill();
    let _ = controller.wait();
    assert_valid_against_the_crds(&c.dir.join("written.json"), &[drifted]);
}
