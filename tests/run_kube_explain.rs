//! `dovetail run --explain` answers `dovetail explain` over HTTP from the decisions it keeps
//! (issue 21), against the Kubernetes test peer with the simulated cloud: a pod the NodePool's
//! requirements rule out is explained with that NodePool's blocker and remedy (and its
//! FailedScheduling Event says the same), the node launched for another pod is explained
//! method by method, and an unknown object is a 404.

mod live_cluster;

use kube::api::{Patch, PatchParams, PostParams};
use live_cluster::{eventually, free_port, http_get, LiveCluster};
use serde_json::{json, Value};

/// Creates pod `team/NAME` that asks for spot capacity, marked unschedulable by kube-scheduler.
/// NodePool `general` (`create_nodepool`) allows on-demand only.
fn create_spot_pod(c: &LiveCluster, name: &str) {
    let pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"nodeSelector": {"karpenter.sh/capacity-type": "spot"},
            "containers": [{"name": "app", "image": "app",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
    }))
    .expect("a Pod");
    c.rt.block_on(c.pods.create(&PostParams::default(), &pod))
        .expect("create the pod");
    c.rt.block_on(c.pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})),
    ))
    .expect("mark the pod unschedulable");
}

/// `GET path` once it answers 200: the body.
fn ok(port: u16, path: &str) -> String {
    eventually(&format!("200 from {path}"), || {
        let (status, body) = http_get(port, path)?;
        status.contains(" 200 ").then_some(body)
    })
}

#[test]
fn run_explains_a_pending_pod_and_a_node_over_http() {
    let c = LiveCluster::start("run-kube-explain");
    let sim = c.fast_sim();
    c.create_nodeclass("test");
    c.create_nodepool();
    c.create_unschedulable_pod("web-1");
    create_spot_pod(&c, "wants-spot");
    let port = free_port();
    let mut controller = c
        .dovetail("sim", "30s")
        .arg("--no-leader-elect")
        .args(["--metrics-port", &port.to_string()])
        .args(["--health-probe-port", "0"])
        .arg("--sim-config")
        .arg(&sim)
        .spawn()
        .expect("start dovetail run");

    // The pod the NodePool rules out: its blocker is the requirement the manifests disagree on.
    let text = ok(port, "/explain/pod/team/wants-spot");
    assert!(text.starts_with("Pod team/wants-spot "), "{text}");
    assert!(text.contains("unschedulable: NodePool general: incompatible requirements: karpenter.sh/capacity-type"), "{text}");
    assert!(
        text.contains("would change with: adding spot to NodePool general's requirement on karpenter.sh/capacity-type"),
        "{text}"
    );
    let v: Value =
        serde_json::from_str(&ok(port, "/explain/pod/team/wants-spot?o=json")).expect("JSON");
    assert_eq!(v["outcome"], "unschedulable", "{v}");
    let pool = &v["nodepools"][0];
    assert_eq!(pool["nodepool"], "general", "{v}");
    assert_eq!(
        pool["blocker"]["requirement"]["key"], "karpenter.sh/capacity-type",
        "{v}"
    );
    let sides = pool["blocker"].to_string();
    assert!(
        sides.contains("spot") && sides.contains("on-demand"),
        "{sides}"
    );

    // Its Event says the same: the nearest NodePool's blocker and the remedy.
    let (message, _) = c.event("Pod/team/wants-spot", "FailedScheduling");
    assert!(
        message.contains("nearest NodePool general ruled out: incompatible requirements: karpenter.sh/capacity-type")
            && message.contains("would change with: adding spot to NodePool general's requirement on karpenter.sh/capacity-type"),
        "{message}"
    );

    // The node launched for web-1, method by method.
    let name = c.first_nodeclaim().metadata.name.expect("a name");
    let claim = c.initialized(&name);
    let node = claim["status"]["nodeName"].as_str().expect("nodeName");
    let text = ok(port, &format!("/explain/node/{node}"));
    assert!(
        text.starts_with(&format!("node {node} (NodePool general, on-demand m5.")),
        "{text}"
    );
    assert!(text.contains(&format!("NodeClaim {name}")), "{text}");
    for method in [
        "Interrupted",
        "Expired",
        "Empty",
        "Drifted",
        "Underutilized",
    ] {
        assert!(text.contains(&format!("\n{method} ")), "{method}: {text}");
    }
    let v: Value =
        serde_json::from_str(&ok(port, &format!("/explain/node/{node}?o=json"))).expect("JSON");
    assert_eq!(v["nodeclaim"], name.as_str(), "{v}");

    // What is not there is a 404 that says why.
    let (status, body) = http_get(port, "/explain/pod/team/nobody").expect("an answer");
    assert!(status.contains(" 404 "), "{status}");
    assert!(body.contains("team/nobody is not a pending pod"), "{body}");
    let (status, _) = http_get(port, "/explain/launch/general-nope").expect("an answer");
    assert!(status.contains(" 404 "), "{status}");

    let _ = controller.kill();
    let _ = controller.wait();
}

/// A dry run writes no NodeClaim, so the launch it plans for a pod stays planned: the pod's
/// answer names it, and the launch's answer holds the pod.
#[test]
fn a_dry_run_explains_the_launch_a_pod_waits_for() {
    let c = LiveCluster::start("run-kube-explain-launch");
    c.create_nodeclass("test");
    c.create_nodepool();
    c.create_unschedulable_pod("web-1");
    let port = free_port();
    let mut controller = c
        .dovetail("sim", "30s")
        .args(["--no-leader-elect", "--dry-run"])
        .args(["--metrics-port", &port.to_string()])
        .args(["--health-probe-port", "0"])
        .spawn()
        .expect("start dovetail run");
    let v: Value = serde_json::from_str(&ok(port, "/explain/pod/team/web-1?o=json")).expect("JSON");
    assert_eq!(v["outcome"], "launch", "{v}");
    assert_eq!(v["nodepool"], "general", "{v}");
    let launch = v["name"].as_str().expect("the launch's name").to_string();
    let text = ok(port, &format!("/explain/launch/{launch}"));
    let _ = controller.kill();
    let _ = controller.wait();
    assert!(
        text.starts_with(&format!("Launch {launch} of NodePool general: $")),
        "{text}"
    );
    assert!(text.contains("holds 1 pods: team/web-1"), "{text}");
    assert!(text.contains("m5.large"), "{text}");
}

#[test]
fn without_explain_the_endpoint_says_it_is_off() {
    let c = LiveCluster::start("run-kube-explain-off");
    c.create_nodeclass("test");
    c.create_nodepool();
    let port = free_port();
    let mut controller = c
        .dovetail("sim", "30s")
        .arg("--no-leader-elect")
        .arg("--explain=false")
        .args(["--metrics-port", &port.to_string()])
        .args(["--health-probe-port", "0"])
        .spawn()
        .expect("start dovetail run");
    let (status, body) = eventually("an answer", || http_get(port, "/explain/node/any"));
    let _ = controller.kill();
    let _ = controller.wait();
    assert!(status.contains(" 503 "), "{status}");
    assert!(body.contains("--explain"), "{body}");
}
