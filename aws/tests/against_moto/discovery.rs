use crate::support::{network, nodeclass, settings, Peer};
use dovetail_aws::calls::Calls;
use dovetail_aws::discovery::discover_catalog;
use dovetail_aws::selectors::resolve;
use dovetail_dataflow::catalog::embedded;
use tokio::runtime::Runtime;

#[test]
fn discovery_from_ec2_equals_the_bundled_catalogue() {
    let peer = Peer::start();
    let rt = Runtime::new().expect("a runtime");
    let clients = rt.block_on(peer.clients());
    let calls = Calls::new(&settings());
    let found = rt
        .block_on(discover_catalog(&clients.ec2, &calls, "us-east-1"))
        .expect("discovery");
    let bundled = embedded("us-east-1").expect("the bundled catalogue");

    // Instance types: the bundle is moto's own DescribeInstanceTypes dump, so every column EC2
    // describes (and the ENI-limited max pods computed from them) must come out the same.
    assert_eq!(found.catalog.entries.len(), bundled.entries.len());
    for (f, b) in found.catalog.entries.iter().zip(&bundled.entries) {
        assert_eq!(f, b, "instance type {}", b.name);
    }

    // Zones per type, and prices (moto's spot prices are a placeholder: the bundled estimate).
    for (name, b) in &bundled.offerings {
        let f = found
            .catalog
            .offerings
            .get(name)
            .unwrap_or_else(|| panic!("{name} discovered"));
        let zones = |o: &dovetail_dataflow::catalog::TypeOfferings| {
            o.zones.iter().map(|z| z.name.clone()).collect::<Vec<_>>()
        };
        assert_eq!(zones(f), zones(b), "zones of {name}");
        assert_eq!(f.on_demand, b.on_demand, "on-demand price of {name}");
        assert_eq!(
            f.spot_savings_pct, b.spot_savings_pct,
            "spot saving of {name}"
        );
    }
    assert!(
        found
            .notes
            .iter()
            .any(|n| n.contains("bundled spot advisor estimate")),
        "the fallback to the bundled spot estimate is said: {:?}",
        found.notes
    );

    // Zone ids are this account's pairing, from DescribeAvailabilityZones.
    assert!(found.zone_ids.len() >= 6, "{:?}", found.zone_ids);
    for offering in found.catalog.offerings.values() {
        for z in &offering.zones {
            assert_eq!(Some(&z.id), found.zone_ids.get(&z.name), "zone {}", z.name);
        }
    }
}

#[test]
fn selector_terms_and_aliases_resolve_into_the_status_createfleet_needs() {
    let peer = Peer::start();
    let rt = Runtime::new().expect("a runtime");
    let clients = rt.block_on(peer.clients());
    let net = rt.block_on(network(&clients));
    let calls = Calls::new(&settings());
    let class = nodeclass("default");
    let spec: serde_json::Value = serde_json::from_str(&class.spec_json).expect("spec JSON");
    let status = rt
        .block_on(resolve(&clients, &calls, "default", &spec, None))
        .expect("resolved");
    assert_eq!(status.subnet_by_zone, net.subnets);
    assert_eq!(
        status.security_group_ids.iter().collect::<Vec<_>>(),
        vec![&net.security_group]
    );
    assert_eq!(status.ami_by_arch.get("amd64"), Some(&net.ami_amd64));
    assert_eq!(status.ami_by_arch.get("arm64"), Some(&net.ami_arm64));

    // By id and by name; an alias is refused with the field named.
    let spec = serde_json::json!({
        "subnetSelectorTerms": [{"id": net.subnets["us-east-1b"]}],
        "securityGroupSelectorTerms": [{"name": "test-cluster-nodes"}],
        "amiSelectorTerms": [{"id": net.ami_amd64}],
    });
    let status = rt
        .block_on(resolve(&clients, &calls, "by-id", &spec, None))
        .expect("resolved by id");
    assert_eq!(status.subnet_by_zone.len(), 1);
    assert_eq!(status.security_group_ids.len(), 1);
    assert_eq!(status.ami_by_arch.len(), 1);

    // An alias is read from the SSM public parameters for the Kubernetes version, one per
    // architecture (moto lacks them: the peer injects them).
    peer.set_ssm_parameters(&[
        (
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id",
            &net.ami_amd64,
        ),
        (
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id",
            &net.ami_arm64,
        ),
    ]);
    let spec = serde_json::json!({
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test-cluster"}}],
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
    });
    let status = rt
        .block_on(resolve(&clients, &calls, "aliased", &spec, Some("1.33")))
        .expect("the alias resolves");
    assert_eq!(status.ami_by_arch.get("amd64"), Some(&net.ami_amd64));
    assert_eq!(status.ami_by_arch.get("arm64"), Some(&net.ami_arm64));
    let err = rt
        .block_on(resolve(&clients, &calls, "aliased", &spec, None))
        .expect_err("an alias needs the Kubernetes version");
    let text = err.to_string();
    assert!(
        text.contains("EC2NodeClass aliased") && text.contains("amiSelectorTerms[0].alias"),
        "{text}"
    );
    let err = rt
        .block_on(resolve(&clients, &calls, "aliased", &spec, Some("1.20")))
        .expect_err("no parameters for 1.20");
    assert!(err.to_string().contains("no SSM parameter"), "{err}");
    // An ssmParameter term reads the parameter it names.
    let spec = serde_json::json!({
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test-cluster"}}],
        "amiSelectorTerms": [{"ssmParameter": "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id"}],
    });
    let status = rt
        .block_on(resolve(&clients, &calls, "by-parameter", &spec, None))
        .expect("the parameter resolves");
    assert_eq!(status.ami_by_arch.len(), 1);
    assert_eq!(status.ami_by_arch.get("arm64"), Some(&net.ami_arm64));

    let spec = serde_json::json!({
        "subnetSelectorTerms": [{"tags": {"no-such": "tag"}}],
        "amiSelectorTerms": [{"id": net.ami_amd64}],
    });
    let err = rt
        .block_on(resolve(&clients, &calls, "empty", &spec, None))
        .expect_err("no subnet");
    assert!(err.to_string().contains("subnetSelectorTerms"), "{err}");
}

#[test]
fn spot_prices_are_each_zones_own_when_ec2_gives_them() {
    let peer = Peer::start();
    let rt = Runtime::new().expect("a runtime");
    let clients = rt.block_on(peer.clients());
    peer.set_spot_prices(&[
        ("m5.large", "us-east-1a", 0.031),
        ("m5.large", "us-east-1b", 0.042),
        ("c5.large", "us-east-1a", 0.025),
    ]);
    let calls = Calls::new(&settings());
    let found = rt
        .block_on(discover_catalog(&clients.ec2, &calls, "us-east-1"))
        .expect("discovery");
    assert!(
        !found.notes.iter().any(|n| n.contains("spot advisor")),
        "real prices need no fallback: {:?}",
        found.notes
    );
    let m5 = &found.catalog.offerings["m5.large"];
    assert_eq!(m5.spot_price("us-east-1a"), Some(0.031));
    assert_eq!(m5.spot_price("us-east-1b"), Some(0.042));
    // A zone EC2 gave no price for keeps the estimate.
    assert_eq!(m5.spot_price("us-east-1c"), m5.spot_estimate());
    let types = found
        .catalog
        .instance_types(&dovetail_dataflow::catalog::ResolveOptions::default());
    let m5_offerings = &types
        .iter()
        .find(|t| t.name == "m5.large")
        .expect("m5.large offered")
        .offerings;
    let spot = |zone: &str| {
        m5_offerings
            .iter()
            .find(|o| o.zone == zone && o.capacity_type == "spot")
            .map(|o| o.price)
    };
    assert_eq!(
        spot("us-east-1a"),
        Some(dovetail_dataflow::model::Price::from_dollars(0.031))
    );
    assert_eq!(
        spot("us-east-1b"),
        Some(dovetail_dataflow::model::Price::from_dollars(0.042))
    );
}
