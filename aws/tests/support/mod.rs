//! What the AWS backend's tests share: the test peer (`dovetail_aws::test_peer`), settings with
//! short intervals, and a network (VPC, subnets, security group, AMIs) made in the peer.

#![allow(dead_code)]

pub use dovetail_aws::test_peer::{network, Network, Peer};
use dovetail_aws::AwsSettings;
use std::time::Duration;

/// Settings for tests: a cluster name, short intervals, quick retries.
pub fn settings() -> AwsSettings {
    AwsSettings {
        cluster_name: "test-cluster".into(),
        cluster_endpoint: Some("https://test-cluster.example".into()),
        cluster_ca_bundle: Some("Q0E=".into()),
        describe_interval: Duration::from_millis(0),
        retry_base: Duration::from_millis(10),
        retry_max: Duration::from_millis(50),
        mutating_calls_per_second: 1000.0,
        describe_calls_per_second: 1000.0,
        ..AwsSettings::default()
    }
}

/// An EC2NodeClass selecting the network by the discovery tag (its status not yet resolved).
pub fn nodeclass(name: &str) -> dovetail_dataflow::model::EC2NodeClass {
    let spec = serde_json::json!({
        "amiSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test-cluster"}}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test-cluster"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "*"}}],
        "role": "KarpenterNodeRole-test-cluster",
        "tags": {"team": "autoscaling"},
    });
    dovetail_dataflow::model::EC2NodeClass {
        name: name.to_string(),
        spec_json: spec.to_string(),
        ..Default::default()
    }
}
