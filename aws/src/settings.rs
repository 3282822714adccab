//! The backend's settings, by flag or environment, with Karpenter's names where it has one
//! (`CLUSTER_NAME`, `CLUSTER_ENDPOINT`, `INTERRUPTION_QUEUE`) and Karpenter's intervals as
//! defaults. Every interval is a setting so tests can use short ones.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct AwsSettings {
    /// `CLUSTER_NAME`: instances are tagged `kubernetes.io/cluster/NAME=owned`, and only those
    /// are listed, terminated or collected.
    pub cluster_name: String,
    /// `CLUSTER_ENDPOINT`: the API server URL nodes join (written into user data).
    pub cluster_endpoint: Option<String>,
    /// The cluster's CA bundle, base64 (`CLUSTER_CA_BUNDLE`), written into user data.
    pub cluster_ca_bundle: Option<String>,
    /// The cluster DNS service IP (`CLUSTER_DNS_IP`), written into user data.
    pub cluster_dns_ip: Option<String>,
    /// `INTERRUPTION_QUEUE`: the SQS queue's name or URL; no interruption handling without it.
    pub interruption_queue: Option<String>,
    /// This cluster's instances are listed (DescribeInstances) this often.
    pub describe_interval: Duration,
    /// Calls per second per mutating action (CreateFleet, TerminateInstances, CreateTags, ...).
    pub mutating_calls_per_second: f64,
    /// Calls per second per describing action.
    pub describe_calls_per_second: f64,
    /// Calls one action may make at once before the rate applies (the token bucket's size).
    pub burst: f64,
    /// Attempts per call on throttling and transient failures (the first included).
    pub max_attempts: u32,
    /// Backoff before the second attempt; doubled each time, with jitter, up to `retry_max`.
    pub retry_base: Duration,
    pub retry_max: Duration,
}

impl Default for AwsSettings {
    fn default() -> Self {
        AwsSettings {
            cluster_name: String::new(),
            cluster_endpoint: None,
            cluster_ca_bundle: None,
            cluster_dns_ip: None,
            interruption_queue: None,
            describe_interval: Duration::from_secs(10),
            // EC2's default token buckets refill 5 mutating and 20 describing calls a second
            // for an account; staying under them leaves room for everything else in it.
            mutating_calls_per_second: 5.0,
            describe_calls_per_second: 20.0,
            // A burst well inside EC2's own buckets (200 mutating, 100 describing): a scale-up
            // of dozens of NodeClaims goes out at once, a thousand at the rate.
            burst: 50.0,
            max_attempts: 8,
            retry_base: Duration::from_millis(200),
            retry_max: Duration::from_secs(20),
        }
    }
}

impl AwsSettings {
    /// The defaults, with what the environment sets: `CLUSTER_NAME`, `CLUSTER_ENDPOINT`,
    /// `CLUSTER_CA_BUNDLE`, `CLUSTER_DNS_IP`, `INTERRUPTION_QUEUE`.
    pub fn from_env() -> AwsSettings {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        AwsSettings {
            cluster_name: var("CLUSTER_NAME").unwrap_or_default(),
            cluster_endpoint: var("CLUSTER_ENDPOINT"),
            cluster_ca_bundle: var("CLUSTER_CA_BUNDLE"),
            cluster_dns_ip: var("CLUSTER_DNS_IP"),
            interruption_queue: var("INTERRUPTION_QUEUE"),
            ..AwsSettings::default()
        }
    }

    /// The tag every instance, launch template and fleet of this cluster carries.
    pub fn cluster_tag_key(&self) -> String {
        format!("kubernetes.io/cluster/{}", self.cluster_name)
    }
}
