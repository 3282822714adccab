//! `dovetail run --cloud aws --cluster sim` through the binary against a real EC2/SQS API server
//! (the moto test peer of `dovetail_aws::test_peer`): discovery, selector terms, launches through
//! CreateFleet until every pod is bound, a capacity error the launch falls back from, garbage
//! collection of an instance leaked before the run, the catalogue discovered again, and the
//! summary.

use dovetail_aws::test_peer::Peer;
use std::process::Command;

#[test]
fn a_run_launches_real_instances_for_pending_pods_and_collects_a_leaked_one() {
    // The README's "Run against AWS": the peer seeded with the network examples/aws selects.
    let peer = Peer::start_with(&["--seed-network", "my-cluster"]);
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let clients = rt.block_on(peer.clients());
    let ami = rt
        .block_on(
            clients
                .ec2
                .describe_images()
                .filters(
                    aws_sdk_ec2::types::Filter::builder()
                        .name("tag:karpenter.sh/discovery")
                        .values("my-cluster")
                        .build(),
                )
                .send(),
        )
        .expect("DescribeImages")
        .images()[0]
        .image_id()
        .expect("an AMI id")
        .to_string();
    // The type the engine packs the three pods onto is out of capacity in both zones: the
    // launch falls back from it.
    peer.set_unavailable(&[
        ("m5.xlarge", "us-east-1a", "on-demand"),
        ("m5.xlarge", "us-east-1b", "on-demand"),
    ]);
    // An instance tagged as this cluster's that no NodeClaim owns (a previous process's leak).
    let leaked = rt
        .block_on(
            clients
                .ec2
                .run_instances()
                .image_id(&ami)
                .instance_type(aws_sdk_ec2::types::InstanceType::M5Large)
                .min_count(1)
                .max_count(1)
                .tag_specifications(
                    aws_sdk_ec2::types::TagSpecification::builder()
                        .resource_type(aws_sdk_ec2::types::ResourceType::Instance)
                        .tags(
                            aws_sdk_ec2::types::Tag::builder()
                                .key("kubernetes.io/cluster/my-cluster")
                                .value("owned")
                                .build(),
                        )
                        .build(),
                )
                .send(),
        )
        .expect("RunInstances")
        .instances()[0]
        .instance_id()
        .expect("an id")
        .to_string();

    let dir = std::env::temp_dir().join(format!("dovetail-run-aws-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let manifests = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/aws");
    let summary_path = dir.join("summary.json");
    let out = Command::new(env!("CARGO_BIN_EXE_dovetail"))
        .args(["run", "--cloud", "aws", "--cluster", "sim", "-f"])
        .arg(manifests)
        .args([
            "--for",
            "20s",
            "--tick",
            "200ms",
            "--describe-interval",
            "500ms",
        ])
        .args(["--gc-interval", "1s", "--gc-grace", "1s"])
        .args(["--catalog-refresh", "4s"])
        .arg("--summary")
        .arg(&summary_path)
        .env("AWS_ENDPOINT_URL", peer.endpoint())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("CLUSTER_NAME", "my-cluster")
        .env_remove("AWS_PROFILE")
        .output()
        .expect("dovetail runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "dovetail run failed: {stderr}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary_path).expect("a summary"))
            .expect("the summary is JSON");

    assert_eq!(
        summary["pods"]["pending"], 0,
        "{summary:#}\ndovetail's log:\n{stderr}"
    );
    assert_eq!(summary["pods"]["bound"], 3, "{summary:#}");
    let launched = summary["instances"]["launched"].as_u64().unwrap_or(0);
    assert!(launched >= 1, "{summary:#}");
    let calls = summary["ec2_calls"].as_array().cloned().unwrap_or_default();
    let ok = |action: &str| {
        calls
            .iter()
            .filter(|c| c["action"] == action && c["code"] == "OK")
            .map(|c| c["calls"].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    assert_eq!(
        ok("CreateFleet"),
        launched,
        "one CreateFleet per NodeClaim: {summary:#}"
    );
    assert!(ok("DescribeSubnets") >= 1, "{summary:#}");
    // The catalogue is discovered at start and again every --catalog-refresh (Karpenter: 12 h).
    assert!(
        ok("DescribeAvailabilityZones") >= 2,
        "discovered again: {summary:#}"
    );
    assert_eq!(
        peer.count_calls("CreateFleet") as u64,
        launched,
        "{summary:#}"
    );

    // The launch fell back from the offering without capacity.
    let described = rt
        .block_on(
            clients
                .ec2
                .describe_instances()
                .filters(
                    aws_sdk_ec2::types::Filter::builder()
                        .name("tag-key")
                        .values("karpenter.sh/nodeclaim")
                        .build(),
                )
                .send(),
        )
        .expect("DescribeInstances");
    let types: Vec<String> = described
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter_map(|i| i.instance_type().map(|t| t.as_str().to_string()))
        .collect();
    assert!(
        !types.is_empty() && types.iter().all(|t| t != "m5.xlarge"),
        "{types:?}"
    );
    assert!(
        summary["capacity_errors"].as_u64().unwrap_or(0) >= 1,
        "{summary:#}"
    );

    // The leaked instance was collected.
    assert_eq!(summary["garbage_collected"]["instances"], 1, "{summary:#}");
    let state = rt
        .block_on(
            clients
                .ec2
                .describe_instances()
                .instance_ids(&leaked)
                .send(),
        )
        .expect("DescribeInstances")
        .reservations()[0]
        .instances()[0]
        .state()
        .and_then(|s| s.name())
        .map(|n| n.as_str().to_string());
    assert!(
        matches!(state.as_deref(), Some("shutting-down") | Some("terminated")),
        "{state:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
