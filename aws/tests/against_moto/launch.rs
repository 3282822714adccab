use crate::support::{network, nodeclass, settings, Network, Peer};
use aws_sdk_ec2::types::Filter;
use base64::Engine as _;
use dovetail_aws::calls::Calls;
use dovetail_aws::sdk::Clients;
use dovetail_aws::selectors::resolve;
use dovetail_aws::Ec2Cloud;
use dovetail_dataflow::backend::{
    Cloud, CloudEventKind, CloudReply, FleetOverride, FleetRequest, Instance, LaunchError,
    OfferingKey, TerminationCause,
};
use dovetail_dataflow::catalog::embedded;
use dovetail_dataflow::model::{Effect, Taint};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

struct Setup {
    peer: Peer,
    rt: Runtime,
    clients: Clients,
    net: Network,
    cloud: Ec2Cloud,
}

fn connect(rt: &Runtime, clients: &Clients) -> Ec2Cloud {
    let catalog = embedded("us-east-1").expect("the bundled catalogue");
    let calls = std::sync::Arc::new(Calls::new(&settings()));
    let mut cloud = Ec2Cloud::connect(
        rt.handle().clone(),
        clients.clone(),
        settings(),
        catalog,
        calls,
    )
    .expect("connect");
    let mut class = nodeclass("default");
    let spec: serde_json::Value = serde_json::from_str(&class.spec_json).expect("spec JSON");
    let calls = Calls::new(&settings());
    class.status = rt
        .block_on(resolve(clients, &calls, "default", &spec, None))
        .expect("resolved");
    cloud.set_nodeclass(class);
    cloud
}

fn setup() -> Setup {
    let peer = Peer::start();
    let rt = Runtime::new().expect("a runtime");
    let clients = rt.block_on(peer.clients());
    let net = rt.block_on(network(&clients));
    let cloud = connect(&rt, &clients);
    Setup {
        peer,
        rt,
        clients,
        net,
        cloud,
    }
}

fn request(nodeclaim: &str, offerings: &[(&str, &str)], capacity_type: &str) -> FleetRequest {
    let catalog = embedded("us-east-1").expect("the bundled catalogue");
    FleetRequest {
        nodeclaim: nodeclaim.to_string(),
        nodepool: "default".into(),
        node_class: Some("default".into()),
        client_token: format!("{nodeclaim}@1000"),
        labels: [
            ("karpenter.sh/nodepool".to_string(), "default".to_string()),
            ("team".to_string(), "payments".to_string()),
        ]
        .into(),
        taints: vec![Taint {
            key: "dedicated".into(),
            value: "payments".into(),
            effect: Effect::NoSchedule,
        }],
        capacity_type: capacity_type.into(),
        overrides: offerings
            .iter()
            .map(|(t, z)| FleetOverride {
                key: OfferingKey::new(*t, *z, capacity_type),
                zone_id: String::new(),
                price: dovetail_dataflow::model::Price::from_dollars(
                    catalog.offerings[*t].on_demand.unwrap_or(0.0),
                ),
            })
            .collect(),
    }
}

/// Polls until the cloud answers (the calls run on the runtime's threads).
fn answer(cloud: &mut Ec2Cloud) -> CloudReply {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(r) = cloud.poll_replies(0).into_iter().next() {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "no answer from the cloud in 60 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn launched(reply: CloudReply) -> Instance {
    match reply {
        CloudReply::Launched {
            result: Ok(instance),
            ..
        } => *instance,
        other => panic!("expected a launch, got {other:?}"),
    }
}

#[test]
fn a_launch_goes_through_a_launch_template_and_createfleet_with_karpenters_tags() {
    let mut s = setup();
    let req = request(
        "default-a1b2c",
        &[("m5.large", "us-east-1a"), ("m5.xlarge", "us-east-1b")],
        "on-demand",
    );
    s.cloud.create_fleet(0, req);
    let instance = launched(answer(&mut s.cloud));
    assert_eq!(instance.instance_type, "m5.large");
    assert_eq!(instance.zone, "us-east-1a");
    assert_eq!(instance.capacity_type, "on-demand");
    assert!(instance.fleet_errors.is_empty());
    assert_eq!(
        s.cloud
            .instance_for_nodeclaim("default-a1b2c")
            .map(|i| i.id.clone()),
        Some(instance.id.clone())
    );

    // What EC2 has: the instance, tagged, from the AMI and subnet the EC2NodeClass resolved.
    let described =
        s.rt.block_on(
            s.clients
                .ec2
                .describe_instances()
                .instance_ids(&instance.id)
                .send(),
        )
        .expect("DescribeInstances");
    let i = described.reservations()[0].instances()[0].clone();
    let tag = |k: &str| {
        i.tags()
            .iter()
            .find(|t| t.key() == Some(k))
            .and_then(|t| t.value())
            .map(str::to_string)
    };
    assert_eq!(
        tag("karpenter.sh/nodeclaim").as_deref(),
        Some("default-a1b2c")
    );
    assert_eq!(tag("karpenter.sh/nodepool").as_deref(), Some("default"));
    assert_eq!(
        tag("karpenter.k8s.aws/ec2nodeclass").as_deref(),
        Some("default")
    );
    assert_eq!(
        tag("kubernetes.io/cluster/test-cluster").as_deref(),
        Some("owned")
    );
    assert_eq!(tag("team").as_deref(), Some("autoscaling"));
    assert_eq!(i.image_id(), Some(s.net.ami_amd64.as_str()));
    assert_eq!(i.subnet_id(), Some(s.net.subnets["us-east-1a"].as_str()));

    // The launch template carries the bootstrap user data.
    let templates =
        s.rt.block_on(
            s.clients
                .ec2
                .describe_launch_templates()
                .filters(
                    Filter::builder()
                        .name("tag:kubernetes.io/cluster/test-cluster")
                        .values("owned")
                        .build(),
                )
                .send(),
        )
        .expect("DescribeLaunchTemplates");
    assert_eq!(templates.launch_templates().len(), 1);
    let name = templates.launch_templates()[0]
        .launch_template_name()
        .expect("a name")
        .to_string();
    let versions =
        s.rt.block_on(
            s.clients
                .ec2
                .describe_launch_template_versions()
                .launch_template_name(&name)
                .send(),
        )
        .expect("DescribeLaunchTemplateVersions");
    let data = versions.launch_template_versions()[0]
        .launch_template_data()
        .expect("data");
    let user_data = base64::engine::general_purpose::STANDARD
        .decode(data.user_data().expect("user data"))
        .expect("base64");
    let user_data = String::from_utf8(user_data).expect("UTF-8");
    assert!(user_data.contains("name: \"test-cluster\""), "{user_data}");
    assert!(
        user_data.contains("karpenter.sh/unregistered:NoExecute"),
        "{user_data}"
    );
    assert!(
        user_data.contains("--node-labels=karpenter.sh/nodepool=default,team=payments"),
        "the NodeClaim's labels reach the kubelet: {user_data}"
    );
    assert!(
        user_data.contains("dedicated=payments:NoSchedule"),
        "the NodePool's taints reach the kubelet: {user_data}"
    );

    // The instance profile made for the EC2NodeClass's role.
    let profile = data
        .iam_instance_profile()
        .and_then(|p| p.name())
        .expect("an instance profile")
        .to_string();
    assert!(profile.starts_with("test-cluster_"), "{profile}");
    let roles: Vec<String> =
        s.rt.block_on(
            s.clients
                .iam
                .get_instance_profile()
                .instance_profile_name(&profile)
                .send(),
        )
        .expect("GetInstanceProfile")
        .instance_profile()
        .map(|p| {
            p.roles()
                .iter()
                .map(|r| r.role_name().to_string())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(roles, vec!["KarpenterNodeRole-test-cluster".to_string()]);

    // A second launch reuses the template, without looking it up again.
    let lookups = s.peer.count_calls("DescribeLaunchTemplates");
    s.cloud.create_fleet(
        0,
        request("default-d3e4f", &[("m5.large", "us-east-1b")], "on-demand"),
    );
    let second = launched(answer(&mut s.cloud));
    assert_eq!(second.zone, "us-east-1b");
    assert_eq!(s.peer.count_calls("CreateLaunchTemplate"), 1);
    assert_eq!(s.peer.count_calls("DescribeLaunchTemplates"), lookups);
    assert_eq!(s.peer.count_calls("CreateFleet"), 2);

    // An arm64 type gets the arm64 AMI's template.
    s.cloud.create_fleet(
        0,
        request("default-g5h6i", &[("m6g.large", "us-east-1a")], "on-demand"),
    );
    let arm = launched(answer(&mut s.cloud));
    let described =
        s.rt.block_on(
            s.clients
                .ec2
                .describe_instances()
                .instance_ids(&arm.id)
                .send(),
        )
        .expect("DescribeInstances");
    assert_eq!(
        described.reservations()[0].instances()[0].image_id(),
        Some(s.net.ami_arm64.as_str())
    );
}

#[test]
fn terminate_ends_only_this_clusters_instances_and_the_listing_reports_it() {
    let mut s = setup();
    s.cloud.create_fleet(
        0,
        request("default-t1", &[("m5.large", "us-east-1a")], "spot"),
    );
    let instance = launched(answer(&mut s.cloud));
    assert_eq!(instance.capacity_type, "spot");

    s.cloud.terminate(0, &instance.id);
    s.cloud.terminate(0, &instance.id); // asked twice, called once
    assert!(s.cloud.poll_replies(0).is_empty());
    s.cloud.settle(Duration::from_secs(60));
    assert_eq!(
        s.peer.count_calls("TerminateInstances"),
        1,
        "{:?}",
        s.peer.calls()
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut ended = None;
    while ended.is_none() {
        assert!(Instant::now() < deadline, "no Terminated event in 60 s");
        s.cloud.refresh().expect("DescribeInstances");
        ended = s
            .cloud
            .poll_events(0)
            .into_iter()
            .find_map(|e| match e.kind {
                CloudEventKind::Terminated { cause } if e.instance_id == instance.id => Some(cause),
                _ => None,
            });
    }
    assert_eq!(ended, Some(TerminationCause::Requested));
    assert!(s.cloud.instance_for_nodeclaim("default-t1").is_none());

    // An instance without this cluster's tag is never terminated.
    let other =
        s.rt.block_on(
            s.clients
                .ec2
                .run_instances()
                .image_id(&s.net.ami_amd64)
                .instance_type(aws_sdk_ec2::types::InstanceType::M5Large)
                .min_count(1)
                .max_count(1)
                .send(),
        )
        .expect("RunInstances");
    let other_id = other.instances()[0]
        .instance_id()
        .expect("an id")
        .to_string();
    s.cloud.refresh().expect("DescribeInstances");
    s.cloud.terminate(0, &other_id);
    match s.cloud.poll_replies(0).as_slice() {
        [CloudReply::TerminateFailed { instance_id, error }] => {
            assert_eq!(instance_id, &other_id);
            assert!(
                error.contains("kubernetes.io/cluster/test-cluster"),
                "{error}"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(s.peer.count_calls("TerminateInstances"), 1);
}

#[test]
fn a_launch_repeated_after_a_restart_launches_nothing_new() {
    let Setup {
        peer,
        rt,
        clients,
        net: _net,
        mut cloud,
    } = setup();
    let req = request(
        "default-r1",
        &[("c5.large", "us-east-1a"), ("c5.xlarge", "us-east-1a")],
        "on-demand",
    );
    cloud.create_fleet(0, req.clone());
    let first = launched(answer(&mut cloud));
    drop(cloud);

    // A new process finds the instance tagged for the NodeClaim before relaunching it ...
    let mut restarted = connect(&rt, &clients);
    assert_eq!(
        restarted
            .instance_for_nodeclaim("default-r1")
            .map(|i| i.id.clone()),
        Some(first.id.clone())
    );
    // ... and the same call again (the answer was lost) returns the same instance.
    restarted.create_fleet(0, req.clone());
    let again = launched(answer(&mut restarted));
    assert_eq!(again.id, first.id);
    let tagged = rt
        .block_on(
            clients
                .ec2
                .describe_instances()
                .filters(
                    Filter::builder()
                        .name("tag:karpenter.sh/nodeclaim")
                        .values("default-r1")
                        .build(),
                )
                .send(),
        )
        .expect("DescribeInstances");
    let count: usize = tagged
        .reservations()
        .iter()
        .map(|r| r.instances().len())
        .sum();
    assert_eq!(count, 1, "one instance for the NodeClaim");

    // The same NodeClaim with other overrides (after a capacity error) gets a new token.
    let mut retried = req;
    retried.overrides.remove(0);
    restarted.create_fleet(0, retried);
    let other = launched(answer(&mut restarted));
    assert_ne!(other.id, first.id);
    assert_eq!(other.instance_type, "c5.xlarge");
    drop(peer);
}

#[test]
fn capacity_errors_in_the_answer_name_the_offerings_to_avoid() {
    let mut s = setup();
    s.peer
        .set_unavailable(&[("m5.large", "us-east-1a", "on-demand")]);
    s.cloud.create_fleet(
        0,
        request(
            "default-i1",
            &[("m5.large", "us-east-1a"), ("m5.xlarge", "us-east-1b")],
            "on-demand",
        ),
    );
    let instance = launched(answer(&mut s.cloud));
    assert_eq!(instance.instance_type, "m5.xlarge");
    assert_eq!(
        instance.fleet_errors,
        vec![OfferingKey::new("m5.large", "us-east-1a", "on-demand")]
    );

    s.peer.set_unavailable(&[
        ("m5.large", "us-east-1a", "on-demand"),
        ("m5.xlarge", "us-east-1b", "on-demand"),
    ]);
    s.cloud.create_fleet(
        0,
        request(
            "default-i2",
            &[("m5.large", "us-east-1a"), ("m5.xlarge", "us-east-1b")],
            "on-demand",
        ),
    );
    match answer(&mut s.cloud) {
        CloudReply::Launched {
            nodeclaim,
            result: Err(LaunchError::InsufficientCapacity { tried }),
        } => {
            assert_eq!(nodeclaim, "default-i2");
            assert_eq!(
                tried,
                vec![
                    OfferingKey::new("m5.large", "us-east-1a", "on-demand"),
                    OfferingKey::new("m5.xlarge", "us-east-1b", "on-demand"),
                ]
            );
        }
        other => panic!("expected capacity errors, got {other:?}"),
    }
}

#[test]
fn throttled_calls_are_retried_and_no_launch_is_lost() {
    let mut s = setup();
    s.peer.throttle("CreateFleet", 3);
    s.cloud.create_fleet(
        0,
        request("default-th", &[("m5.large", "us-east-1a")], "on-demand"),
    );
    let instance = launched(answer(&mut s.cloud));
    assert_eq!(instance.instance_type, "m5.large");
    assert_eq!(
        s.cloud.calls().count("CreateFleet", "RequestLimitExceeded"),
        3
    );
    assert_eq!(s.cloud.calls().count("CreateFleet", "OK"), 1);
    let statuses: Vec<u16> = s
        .peer
        .calls()
        .into_iter()
        .filter(|(a, _)| a == "CreateFleet")
        .map(|(_, st)| st)
        .collect();
    assert_eq!(statuses, vec![503, 503, 503, 200]);

    // Each throttled attempt is counted as one followed by a retry.
    let counts = s.cloud.calls().counts();
    assert!(
        counts
            .iter()
            .any(|c| c.action == "CreateFleet" && c.retried == 3),
        "{counts:?}"
    );
}

#[test]
fn launch_templates_no_launch_would_use_are_deleted() {
    let mut s = setup();
    s.cloud.create_fleet(
        0,
        request("default-lt1", &[("m5.large", "us-east-1a")], "on-demand"),
    );
    launched(answer(&mut s.cloud));
    let deleted = s.cloud.delete_unused_launch_templates().expect("listed");
    assert!(deleted.is_empty(), "the template in use stays: {deleted:?}");

    // The EC2NodeClass now resolves only the arm64 AMI: the amd64 template goes.
    let mut class = nodeclass("default");
    let spec: serde_json::Value = serde_json::from_str(&class.spec_json).expect("spec JSON");
    let calls = Calls::new(&settings());
    class.status =
        s.rt.block_on(resolve(&s.clients, &calls, "default", &spec, None))
            .expect("resolved");
    class.status.ami_by_arch.remove("amd64");
    class.status.ami_ids.remove(&s.net.ami_amd64);
    s.cloud.set_nodeclass(class);
    let deleted = s.cloud.delete_unused_launch_templates().expect("listed");
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    assert_eq!(s.peer.count_calls("DeleteLaunchTemplate"), 1);
    let left =
        s.rt.block_on(
            s.clients
                .ec2
                .describe_launch_templates()
                .filters(
                    Filter::builder()
                        .name("tag-key")
                        .values("kubernetes.io/cluster/test-cluster")
                        .build(),
                )
                .send(),
        )
        .expect("DescribeLaunchTemplates");
    assert!(left.launch_templates().is_empty());

    // The next launch makes the template it needs again.
    s.cloud.create_fleet(
        0,
        request("default-lt2", &[("m6g.large", "us-east-1a")], "on-demand"),
    );
    launched(answer(&mut s.cloud));
    assert_eq!(s.peer.count_calls("CreateLaunchTemplate"), 2);
}

#[test]
fn instance_profiles_no_node_class_uses_are_deleted_once_no_instance_runs_with_them() {
    let mut s = setup();
    s.cloud.create_fleet(
        0,
        request("default-ip", &[("m5.large", "us-east-1a")], "on-demand"),
    );
    let instance = launched(answer(&mut s.cloud));
    let profiles = |s: &Setup| -> Vec<String> {
        s.rt.block_on(
            s.clients
                .iam
                .list_instance_profiles()
                .path_prefix("/dovetail/test-cluster/")
                .send(),
        )
        .expect("ListInstanceProfiles")
        .instance_profiles()
        .iter()
        .map(|p| p.instance_profile_name().to_string())
        .collect()
    };
    let made = profiles(&s);
    assert_eq!(made.len(), 1, "one profile made for spec.role: {made:?}");

    // In use by the EC2NodeClass: kept.
    assert!(s
        .cloud
        .delete_unused_instance_profiles()
        .expect("profile GC")
        .is_empty());
    // The EC2NodeClass is gone but its instance still runs with the profile: kept. (moto does
    // not give a fleet's instances their launch template's profile, as EC2 does: the test
    // associates it.)
    s.cloud.remove_nodeclass("default");
    s.rt.block_on(
        s.clients
            .ec2
            .associate_iam_instance_profile()
            .instance_id(&instance.id)
            .iam_instance_profile(
                aws_sdk_ec2::types::IamInstanceProfileSpecification::builder()
                    .name(&made[0])
                    .build(),
            )
            .send(),
    )
    .expect("AssociateIamInstanceProfile");
    let attached =
        s.rt.block_on(
            s.clients
                .ec2
                .describe_instances()
                .instance_ids(&instance.id)
                .send(),
        )
        .expect("DescribeInstances")
        .reservations()[0]
            .instances()[0]
            .iam_instance_profile()
            .and_then(|p| p.arn())
            .map(str::to_string);
    assert!(
        attached.as_deref().is_some_and(|a| a.ends_with(&made[0])),
        "the instance runs with the profile: {attached:?}"
    );
    // The cloud learns what its instances run with from its listing.
    s.cloud.refresh().expect("listing");
    assert!(s
        .cloud
        .delete_unused_instance_profiles()
        .expect("profile GC")
        .is_empty());
    assert_eq!(profiles(&s), made);
    // Once the instance is terminated, it goes (its role taken out first).
    s.cloud.terminate(0, &instance.id);
    s.cloud.settle(Duration::from_secs(30));
    s.cloud.refresh().expect("listing");
    assert_eq!(
        s.cloud
            .delete_unused_instance_profiles()
            .expect("profile GC"),
        made
    );
    assert!(profiles(&s).is_empty());
    assert!(
        s.rt.block_on(
            s.clients
                .iam
                .get_role()
                .role_name("KarpenterNodeRole-test-cluster")
                .send()
        )
        .is_ok(),
        "the role itself stays"
    );
}
