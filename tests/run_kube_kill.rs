//! The controller killed at points of a launch never launches twice and never leaks an
//! instance: for each of 20 seeds, `dovetail run --cloud aws --cluster kube` (moto, kmock) is
//! killed (SIGKILL: no clean stop) a seed-chosen moment after its NodeClaim appears — before,
//! during or after its CreateFleet and the status write — and a second process takes over. In the
//! end exactly one instance was ever launched for the cluster, and the one NodeClaim names it.

mod live_cluster;

use dovetail_aws::test_peer::Peer;
use live_cluster::{LiveCluster, NO_HTTP};
use std::process::Child;
use std::time::Duration;

const SEEDS: u64 = 20;

fn controller(ec2: &Peer, c: &LiveCluster, cluster: &str, seconds: &str) -> Child {
    c.dovetail_at_moto(ec2, cluster, seconds)
        .args([
            "--gc-interval",
            "500ms",
            "--gc-grace",
            "2s",
            "--no-leader-elect",
        ])
        .args(NO_HTTP)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start dovetail run")
}

#[test]
fn killed_during_a_launch_the_controller_never_launches_twice_nor_leaks() {
    let ec2 = Peer::start_with(&["--seed-network", "my-cluster"]);
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let clients = rt.block_on(ec2.clients());
    for seed in 0..SEEDS {
        let cluster = format!("kill-{seed}");
        let c = LiveCluster::start(&cluster);
        c.create_nodeclass("my-cluster");
        c.create_nodepool();
        c.create_unschedulable_pod("web-1");
        let mut first = controller(&ec2, &c, &cluster, "60s");
        c.first_nodeclaim();
        // Seeds spread the kill over the launch's window: 0 to ~600 ms after the NodeClaim.
        std::thread::sleep(Duration::from_millis(seed * 31));
        first.kill().expect("kill the controller");
        let _ = first.wait();
        let mut second = controller(&ec2, &c, &cluster, "3s");
        assert!(second.wait().expect("the second run ends").success());

        let described = rt
            .block_on(
                clients
                    .ec2
                    .describe_instances()
                    .filters(
                        aws_sdk_ec2::types::Filter::builder()
                            .name(format!("tag:kubernetes.io/cluster/{cluster}"))
                            .values("owned")
                            .build(),
                    )
                    .send(),
            )
            .expect("DescribeInstances");
        let instances: Vec<&aws_sdk_ec2::types::Instance> = described
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .collect();
        assert_eq!(
            instances.len(),
            1,
            "seed {seed}: instances ever launched: {instances:?}"
        );
        let instance = instances[0];
        let state = instance
            .state()
            .and_then(|s| s.name())
            .map(|n| n.as_str().to_string());
        assert!(
            matches!(state.as_deref(), Some("pending" | "running")),
            "seed {seed}: {state:?}"
        );
        let claims =
            c.rt.block_on(c.claims.list(&Default::default()))
                .expect("list NodeClaims");
        assert_eq!(claims.items.len(), 1, "seed {seed}");
        let claim = serde_json::to_value(&claims.items[0]).expect("JSON");
        let id = instance.instance_id().expect("an id");
        assert!(
            claim["status"]["providerID"]
                .as_str()
                .is_some_and(|p| p.ends_with(id)),
            "seed {seed}: the NodeClaim names the instance: {claim}"
        );
    }
}
