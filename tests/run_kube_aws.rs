//! The controller end to end with both real parts: `dovetail run --cloud aws --cluster kube`
//! through the binary against moto (EC2, `dovetail_aws::test_peer`) and kmock (the Kubernetes
//! API, `dovetail_kube::test_peer`). A NodePool, an EC2NodeClass selecting the seeded network and
//! an unschedulable pod → a NodeClaim → one CreateFleet at moto → the test plays kubelet and
//! registers a Node with the instance's provider id → registration → Initialized; the pod bound
//! and deleted → the empty node consolidated: instance terminated at moto, Node and NodeClaim
//! gone. Every request the controller made is allowed by the chart's RBAC.

mod live_cluster;

use dovetail_aws::test_peer::Peer;
use live_cluster::{
    assert_valid_against_the_crds, condition, eventually, Launched, LiveCluster, NO_HTTP,
};
use serde_json::Value;
use std::process::Command;

#[test]
fn a_pending_pod_gets_an_ec2_instance_that_registers_and_is_terminated_when_empty() {
    let (ec2, c) = cluster_with_web_1("run-kube-aws");

    let mut controller = run_at_moto(&c, &ec2, "summary", "30s")
        .args(["--consolidation-validation", "1s"])
        .spawn()
        .expect("start dovetail run");

    // CreateFleet answered: the instance is recorded on the NodeClaim.
    let Launched {
        name,
        provider_id,
        node: node_name,
    } = c.launched();
    let instance_id = provider_id.rsplit('/').next().expect("an id").to_string();
    assert!(instance_id.starts_with("i-"), "{provider_id}");

    // The EC2NodeClass's status says what its selector terms resolved to at moto, in the
    // shape Karpenter's API takes.
    let class = eventually("the EC2NodeClass's status", || {
        let o = serde_json::to_value(c.rt.block_on(c.nodeclasses.get("default")).ok()?).ok()?;
        (condition(&o, "Ready").as_deref() == Some("True")).then_some(o)
    });
    for field in ["subnets", "securityGroups", "amis"] {
        let list = class["status"][field].as_array().expect(field);
        assert!(!list.is_empty(), "{field}: {class}");
    }
    assert!(class["status"]["subnets"][0]["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("subnet-")));
    // The profile made for `spec.role`, under the cluster's name.
    assert!(
        class["status"]["instanceProfile"]
            .as_str()
            .is_some_and(|p| p.starts_with("my-cluster_")),
        "{class}"
    );
    assert_valid_against_the_crds(&c.dir.join("written.json"), &[class]);

    // The kubelet joins; registration and initialisation follow.
    c.kubelet_registers(&node_name, &provider_id);
    c.initialized(&name);
    let node = c.node(&node_name);
    assert_eq!(
        node["metadata"]["labels"]["karpenter.sh/nodepool"],
        "general"
    );
    assert_eq!(
        node["metadata"]["finalizers"],
        serde_json::json!(["karpenter.sh/termination"])
    );

    c.bind("web-1", &node_name);
    c.delete_pod("web-1");
    c.gone(&name, &node_name);

    let status = controller.wait().expect("dovetail run ends");
    assert!(status.success(), "dovetail run: {status}");
    c.assert_rbac_covers_the_controller();
    assert_eq!(ec2.count_calls("CreateFleet"), 1, "nothing launched twice");
    assert!(ec2.count_calls("TerminateInstances") >= 1);
    let s = summary(&c, "summary");
    assert_eq!(s["instances"]["launched"], 1, "{s}");
    assert_eq!(s["instances"]["running"], 0, "{s}");
    assert_eq!(s["cluster_name"], "my-cluster", "{s}");
    assert_eq!(s["kubernetes"]["nodes_registered"], 1, "{s}");
}

#[test]
fn a_standby_takes_over_a_launch_without_launching_again() {
    let (ec2, c) = cluster_with_web_1("run-kube-handover");
    let replica = |name: &str, seconds: &str| {
        run_at_moto(&c, &ec2, name, seconds)
            .args(["--leader-lease-duration", "3s"])
            .env("POD_NAME", name)
            .spawn()
            .expect("start dovetail run")
    };
    let mut first = replica("first", "60s");
    let launched = c.launched();
    // The leader dies (no chance to release its Lease); a second replica starts.
    first.kill().expect("kill the leader");
    let _ = first.wait();
    // Only the second replica sees this one, and first while it waits for the dead leader's
    // Lease to run out: it tells once it leads.
    c.create_broken_nodepool();
    let mut second = replica("second", "12s");
    c.kubelet_registers(&launched.node, &launched.provider_id);
    // The new leader registers the Node the old one launched, and initialises it.
    c.initialized(&launched.name);
    let (message, _) = c.event("NodePool/broken", "FailedValidation");
    assert!(message.contains("spec.weight"), "{message}");
    let status = second.wait().expect("the second replica ends");
    assert!(status.success(), "{status}");
    assert_eq!(ec2.count_calls("CreateFleet"), 1, "nothing launched twice");
    let s = summary(&c, "second");
    assert_eq!(s["kubernetes"]["nodeclaims_read_back"], 1, "{s}");
    assert_eq!(s["instances"]["launched"], 0, "{s}");
    assert_eq!(s["instances"]["running"], 1, "{s}");
}

#[test]
fn a_node_that_never_registers_is_given_up() {
    let (ec2, c) = cluster_with_web_1("run-kube-ttl");
    let mut controller = c
        .dovetail_at_moto(&ec2, "my-cluster", "20s")
        .args(["--registration-ttl", "3s", "--no-leader-elect"])
        .args(NO_HTTP)
        .spawn()
        .expect("start dovetail run");
    let Launched {
        name, provider_id, ..
    } = c.launched();
    let instance_id = provider_id.rsplit('/').next().expect("an id").to_string();
    // No kubelet ever joins: after the TTL the NodeClaim goes and its instance is terminated
    // (the pod still waits, so a launch of the same name may follow, with another instance).
    live_cluster::eventually("the NodeClaim given up", || {
        let o = c.rt.block_on(c.claims.get_opt(&name)).ok()?;
        let same = o
            .and_then(|o| serde_json::to_value(o).ok())
            .is_some_and(|v| v["status"]["providerID"] == provider_id);
        (!same).then_some(())
    });
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let clients = rt.block_on(ec2.clients());
    live_cluster::eventually("the instance terminated", || {
        let d = rt
            .block_on(
                clients
                    .ec2
                    .describe_instances()
                    .instance_ids(&instance_id)
                    .send(),
            )
            .ok()?;
        let state = d
            .reservations()
            .first()?
            .instances()
            .first()?
            .state()?
            .name()?
            .clone();
        matches!(
            state,
            aws_sdk_ec2::types::InstanceStateName::ShuttingDown
                | aws_sdk_ec2::types::InstanceStateName::Terminated
        )
        .then_some(())
    });
    let _ = controller.kill();
    let _ = controller.wait();
}

/// A restarted controller reads its NodeClaim's conditions back with their times, and the
/// bound pods it lists at start are no pod events: a consolidatable node stays so, from the
/// same time, and nothing about the NodeClaim is written again.
#[test]
fn a_restarted_controller_keeps_its_nodeclaims_condition_times() {
    let (ec2, c) = cluster_with_web_1("run-kube-restart");
    let run = |name: &str, seconds: &str| {
        run_at_moto(&c, &ec2, name, seconds)
            .arg("--no-leader-elect")
            .spawn()
            .expect("start dovetail run")
    };
    let mut first = run("first", "60s");
    let launched = c.launched();
    c.kubelet_registers(&launched.node, &launched.provider_id);
    c.initialized(&launched.name);
    c.bind("web-1", &launched.node);
    // `consolidateAfter: 5s` after the pod's binding.
    let before = c.nodeclaim_when(&launched.name, "Consolidatable", |o| {
        condition(o, "Consolidatable").as_deref() == Some("True")
    });
    first.kill().expect("kill the controller");
    let _ = first.wait();

    let status = run("second", "8s").wait().expect("the second run ends");
    assert!(status.success(), "{status}");
    let s = summary(&c, "second");
    assert_eq!(s["kubernetes"]["nodeclaims_read_back"], 1, "{s}");
    let after = serde_json::to_value(
        c.rt.block_on(c.claims.get(&launched.name))
            .expect("the NodeClaim"),
    )
    .expect("JSON");
    let times = |o: &Value| -> Vec<(String, String, String)> {
        o["status"]["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .map(|c| {
                let field = |f: &str| c[f].as_str().unwrap_or_default().to_string();
                (field("type"), field("status"), field("lastTransitionTime"))
            })
            .collect()
    };
    assert_eq!(times(&after), times(&before));
    assert_eq!(
        after["status"]["lastPodEventTime"],
        before["status"]["lastPodEventTime"]
    );
    assert_eq!(ec2.count_calls("CreateFleet"), 1, "nothing launched twice");
}

/// moto with `my-cluster`'s network, and a cluster with NodePool `general`, an EC2NodeClass
/// selecting that network, and the unschedulable pod `web-1`.
fn cluster_with_web_1(test: &str) -> (Peer, LiveCluster) {
    let ec2 = Peer::start_with(&["--seed-network", "my-cluster"]);
    let c = LiveCluster::start(test);
    c.create_nodeclass("my-cluster");
    c.create_nodepool();
    c.create_unschedulable_pod("web-1");
    (ec2, c)
}

/// `dovetail run` at moto for `my-cluster` until `run_for`, without HTTP, writing its summary
/// to `NAME.json` in the test's folder ([`summary`] reads it).
fn run_at_moto(c: &LiveCluster, ec2: &Peer, name: &str, run_for: &str) -> Command {
    let mut cmd = c.dovetail_at_moto(ec2, "my-cluster", run_for);
    cmd.args(NO_HTTP)
        .arg("--summary")
        .arg(c.dir.join(format!("{name}.json")));
    cmd
}

/// The summary the controller `name` wrote.
fn summary(c: &LiveCluster, name: &str) -> Value {
    let text = std::fs::read_to_string(c.dir.join(format!("{name}.json"))).expect("the summary");
    serde_json::from_str(&text).expect("JSON")
}
