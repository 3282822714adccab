//! Capacity reservations (`capacityReservationSelectorTerms`) and the accelerated AMI variants
//! of aliases, against the test peer: selected reservations become the EC2NodeClass's status,
//! free `reserved` offerings, and launches into the reservation through its own launch template;
//! a GPU type boots the alias's NVIDIA image, a type whose variant has no image is not offered.

use crate::support::{network, nodeclass, settings, Peer};
use dovetail_aws::calls::Calls;
use dovetail_aws::selectors::resolve;
use dovetail_aws::Ec2Cloud;
use dovetail_dataflow::backend::{
    Cloud, CloudReply, FleetOverride, FleetRequest, Instance, LaunchError, OfferingKey,
};
use dovetail_dataflow::catalog::{embedded, ResolveOptions};
use dovetail_dataflow::model::{EC2NodeClass, Price};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

fn connect(rt: &Runtime, clients: &dovetail_aws::sdk::Clients, class: EC2NodeClass) -> Ec2Cloud {
    let mut cloud = Ec2Cloud::connect(
        rt.handle().clone(),
        clients.clone(),
        settings(),
        embedded("us-east-1").expect("the bundled catalogue"),
        Arc::new(Calls::new(&settings())),
    )
    .expect("connect");
    cloud.set_nodeclass(class);
    cloud
}

fn request(nodeclaim: &str, offerings: &[(&str, &str)], capacity_type: &str) -> FleetRequest {
    FleetRequest {
        nodeclaim: nodeclaim.to_string(),
        nodepool: "default".into(),
        node_class: Some("default".into()),
        client_token: format!("{nodeclaim}@1000"),
        labels: Default::default(),
        taints: Vec::new(),
        capacity_type: capacity_type.into(),
        overrides: offerings
            .iter()
            .map(|(t, z)| FleetOverride {
                key: OfferingKey::new(*t, *z, capacity_type),
                zone_id: String::new(),
                price: Price::from_dollars(0.0),
            })
            .collect(),
    }
}

fn answer(cloud: &mut Ec2Cloud) -> Result<Instance, LaunchError> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(CloudReply::Launched { result, .. }) = cloud.poll_replies(0).into_iter().next()
        {
            return result.map(|i| *i);
        }
        assert!(Instant::now() < deadline, "no answer in 60 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn resolved(
    rt: &Runtime,
    clients: &dovetail_aws::sdk::Clients,
    spec: serde_json::Value,
) -> EC2NodeClass {
    let calls = Calls::new(&settings());
    let mut class = nodeclass("default");
    class.spec_json = spec.to_string();
    class.status = rt
        .block_on(resolve(clients, &calls, "default", &spec, Some("1.33")))
        .expect("resolved");
    class
}

#[test]
fn selected_reservations_are_offered_free_and_launched_into_until_full() {
    let peer = Peer::start();
    let rt = Runtime::new().expect("a runtime");
    let clients = rt.block_on(peer.clients());
    let net = rt.block_on(network(&clients));
    peer.set_capacity_reservations(&[
        serde_json::json!({"id": "cr-0000000000000000a", "instance_type": "m5.large",
            "zone": "us-east-1a", "total": 1, "available": 1, "reservation_type": "default",
            "state": "active", "tags": {"team": "ml"}}),
        serde_json::json!({"id": "cr-0000000000000000b", "instance_type": "m5.xlarge",
            "zone": "us-east-1b", "total": 2, "available": 2,
            "reservation_type": "capacity-block", "state": "active",
            "end_time": "2030-01-01T00:00:00Z"}),
        // Not selected: Karpenter does no open matching.
        serde_json::json!({"id": "cr-0000000000000000c", "instance_type": "c5.large",
            "zone": "us-east-1a", "total": 4, "available": 4, "reservation_type": "default",
            "state": "active", "tags": {"team": "web"}}),
    ]);
    let class = resolved(
        &rt,
        &clients,
        serde_json::json!({
            "amiSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test-cluster"}}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test-cluster"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "*"}}],
            "capacityReservationSelectorTerms": [
                {"tags": {"team": "ml"}},
                {"id": "cr-0000000000000000b"},
            ],
        }),
    );
    let reservations = &class.status.capacity_reservations;
    let ids: Vec<&str> = reservations.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, vec!["cr-0000000000000000a", "cr-0000000000000000b"]);
    assert_eq!(reservations[0].instance_type, "m5.large");
    assert_eq!(reservations[0].zone, "us-east-1a");
    assert_eq!(reservations[0].available, Some(1));
    assert_eq!(reservations[1].reservation_type, "capacity-block");
    assert_eq!(reservations[1].end_ms, Some(1_893_456_000_000));

    // The catalogue offers each as a free `reserved` offering of its type in its zone.
    let types = embedded("us-east-1")
        .expect("catalogue")
        .instance_types(&ResolveOptions::for_node_class(&class));
    let offering = |t: &str, zone: &str, ct: &str| {
        types
            .iter()
            .find(|it| it.name == t)
            .and_then(|it| {
                it.offerings
                    .iter()
                    .find(|o| o.zone == zone && o.capacity_type == ct)
            })
            .cloned()
    };
    let reserved = offering("m5.large", "us-east-1a", "reserved").expect("a reserved offering");
    assert_eq!(reserved.price, Price::from_dollars(0.0));
    assert!(reserved.available);
    assert!(offering("m5.large", "us-east-1b", "reserved").is_none());
    assert!(offering("c5.large", "us-east-1a", "reserved").is_none());
    assert!(offering("m5.xlarge", "us-east-1b", "reserved").is_some());

    // A reserved launch goes into the reservation, through a template that targets it.
    let mut cloud = connect(&rt, &clients, class);
    cloud.create_fleet(
        0,
        request("default-r1", &[("m5.large", "us-east-1a")], "reserved"),
    );
    let instance = answer(&mut cloud).expect("launched into the reservation");
    assert_eq!(instance.capacity_type, "reserved");
    assert_eq!(
        instance.capacity_reservation_id.as_deref(),
        Some("cr-0000000000000000a")
    );
    assert_eq!(
        instance.capacity_reservation_type.as_deref(),
        Some("default")
    );
    assert_eq!(instance.price, Price::from_dollars(0.0));
    let described = rt
        .block_on(
            clients
                .ec2
                .describe_instances()
                .instance_ids(&instance.id)
                .send(),
        )
        .expect("DescribeInstances");
    let i = &described.reservations()[0].instances()[0];
    assert_eq!(i.capacity_reservation_id(), Some("cr-0000000000000000a"));
    assert_eq!(i.subnet_id(), Some(net.subnets["us-east-1a"].as_str()));
    // The listing reads the reservation back (what a restarted process sees).
    cloud.refresh().expect("listing");
    let listed = cloud.instance(&instance.id).expect("listed").clone();
    assert_eq!(listed.capacity_type, "reserved");
    assert_eq!(
        listed.capacity_reservation_id.as_deref(),
        Some("cr-0000000000000000a")
    );

    // Full: the next launch into it is a capacity error for the reserved offering.
    cloud.create_fleet(
        0,
        request("default-r2", &[("m5.large", "us-east-1a")], "reserved"),
    );
    match answer(&mut cloud) {
        Err(LaunchError::InsufficientCapacity { tried }) => assert_eq!(
            tried,
            vec![OfferingKey::new("m5.large", "us-east-1a", "reserved")]
        ),
        other => panic!("expected ReservationCapacityExceeded, got {other:?}"),
    }

    // A capacity block is bought as one: its own template, market type capacity-block.
    cloud.create_fleet(
        0,
        request("default-r3", &[("m5.xlarge", "us-east-1b")], "reserved"),
    );
    let block = answer(&mut cloud).expect("launched into the capacity block");
    assert_eq!(
        block.capacity_reservation_id.as_deref(),
        Some("cr-0000000000000000b")
    );
    assert_eq!(
        block.capacity_reservation_type.as_deref(),
        Some("capacity-block")
    );
    let templates = rt
        .block_on(
            clients
                .ec2
                .describe_launch_templates()
                .filters(
                    aws_sdk_ec2::types::Filter::builder()
                        .name("tag:dovetail/capacity-reservation-id")
                        .values("cr-0000000000000000b")
                        .build(),
                )
                .send(),
        )
        .expect("DescribeLaunchTemplates");
    assert_eq!(templates.launch_templates().len(), 1);
    let versions = rt
        .block_on(
            clients
                .ec2
                .describe_launch_template_versions()
                .launch_template_name(
                    templates.launch_templates()[0]
                        .launch_template_name()
                        .expect("a name"),
                )
                .send(),
        )
        .expect("DescribeLaunchTemplateVersions");
    let data = versions.launch_template_versions()[0]
        .launch_template_data()
        .expect("template data");
    assert_eq!(
        data.capacity_reservation_specification()
            .and_then(|c| c.capacity_reservation_target())
            .and_then(|t| t.capacity_reservation_id()),
        Some("cr-0000000000000000b")
    );
    assert_eq!(
        data.instance_market_options()
            .and_then(|m| m.market_type())
            .map(|m| m.as_str()),
        Some("capacity-block")
    );
}

#[test]
fn an_alias_gives_gpu_types_the_nvidia_image_and_leaves_out_types_without_one() {
    let peer = Peer::start();
    let rt = Runtime::new().expect("a runtime");
    let clients = rt.block_on(peer.clients());
    let net = rt.block_on(network(&clients));
    // A second x86_64 image stands for the NVIDIA variant.
    let images = rt
        .block_on(
            clients
                .ec2
                .describe_images()
                .owners("amazon")
                .filters(
                    aws_sdk_ec2::types::Filter::builder()
                        .name("architecture")
                        .values("x86_64")
                        .build(),
                )
                .send(),
        )
        .expect("DescribeImages");
    let gpu_ami = images
        .images()
        .iter()
        .filter_map(|i| i.image_id())
        .find(|id| *id != net.ami_amd64)
        .expect("moto seeds several x86_64 images")
        .to_string();
    let base = "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023";
    peer.set_ssm_parameters(&[
        (
            &format!("{base}/x86_64/standard/recommended/image_id"),
            &net.ami_amd64,
        ),
        (
            &format!("{base}/arm64/standard/recommended/image_id"),
            &net.ami_arm64,
        ),
        (
            &format!("{base}/x86_64/nvidia/recommended/image_id"),
            &gpu_ami,
        ),
    ]);
    let class = resolved(
        &rt,
        &clients,
        serde_json::json!({
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test-cluster"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "*"}}],
        }),
    );
    let status = &class.status;
    assert_eq!(
        status.ami_for("amd64", "standard"),
        Some(net.ami_amd64.as_str())
    );
    assert_eq!(status.ami_for("amd64", "nvidia"), Some(gpu_ami.as_str()));
    assert_eq!(status.ami_for("amd64", "neuron"), None, "{status:?}");
    assert_eq!(status.ami_for("arm64", "nvidia"), None, "{status:?}");
    assert!(status.ami_variants_missing.contains("amd64/neuron"));

    // The catalogue offers GPU types (their image exists), not Neuron ones (none does).
    let types = embedded("us-east-1")
        .expect("catalogue")
        .instance_types(&ResolveOptions::for_node_class(&class));
    let has = |t: &str| types.iter().any(|it| it.name == t);
    assert!(has("m5.large") && has("g4dn.xlarge") && has("m6g.large"));
    assert!(!has("inf1.xlarge"), "no Neuron image: inf1 is not offered");
    assert!(
        !has("g5g.xlarge"),
        "no arm64 NVIDIA image: g5g is not offered"
    );

    // A GPU type boots the NVIDIA image, a plain one the standard image.
    let mut cloud = connect(&rt, &clients, class);
    cloud.create_fleet(
        0,
        request("default-g1", &[("g4dn.xlarge", "us-east-1a")], "on-demand"),
    );
    let gpu = answer(&mut cloud).expect("a GPU instance");
    cloud.create_fleet(
        0,
        request("default-g2", &[("m5.large", "us-east-1a")], "on-demand"),
    );
    let plain = answer(&mut cloud).expect("a plain instance");
    let image = |id: &str| {
        rt.block_on(clients.ec2.describe_instances().instance_ids(id).send())
            .expect("DescribeInstances")
            .reservations()[0]
            .instances()[0]
            .image_id()
            .map(str::to_string)
    };
    assert_eq!(image(&gpu.id), Some(gpu_ami.clone()));
    assert_eq!(image(&plain.id), Some(net.ami_amd64.clone()));
}
