//! The EC2/SQS API server tests talk to: moto's server mode (PyPI `moto[server]`, pinned in
//! `tests/peer/requirements.txt`) behind `tests/peer/moto_peer.py`, which adds what moto lacks
//! (capacity errors, throttling, ClientToken idempotency, a call log). Each test starts its own
//! on an ephemeral port of 127.0.0.1, so parallel tests share no state; it stops when the test
//! drops it (the peer exits when its stdin closes, also if the test process dies). Used by this
//! crate's tests and by the binary's `dovetail run` tests; nothing in the product calls it.

use crate::sdk::{load, ClientOptions, Clients};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

pub struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    pub port: u16,
}

fn peer_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peer/moto_peer.py")
}

impl Peer {
    /// Starts a peer and waits until it listens.
    pub fn start() -> Peer {
        Peer::start_with(&[])
    }

    /// Starts a peer with `moto_peer.py`'s options (`--seed-network CLUSTER`).
    pub fn start_with(args: &[&str]) -> Peer {
        let python = std::env::var("DOVETAIL_PYTHON").unwrap_or_else(|_| "python3".to_string());
        let mut child = Command::new(&python)
            .arg(peer_script())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {python} {}: {e}", peer_script().display()));
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("reading the peer's PORT line");
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| {
                panic!(
                    "the EC2 test peer did not start (got {line:?}); install it with \
                     `pip install -r aws/tests/peer/requirements.txt` (the README's test command does)"
                )
            });
        Peer {
            stdin: child.stdin.take(),
            child,
            port,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A plain HTTP request to the peer's control endpoints; the body of a 200 answer.
    pub fn control(&self, method: &str, path: &str, body: &str) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to the peer");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("set a read timeout");
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .expect("write to the peer");
        let mut answer = String::new();
        stream
            .read_to_string(&mut answer)
            .expect("read the peer's answer");
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        assert!(
            head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200"),
            "{method} {path}: {head}"
        );
        body.to_string()
    }

    /// Marks offerings (`type/zone/capacity-type`) as out of capacity.
    pub fn set_unavailable(&self, offerings: &[(&str, &str, &str)]) {
        let list: Vec<serde_json::Value> = offerings
            .iter()
            .map(|(t, z, c)| serde_json::json!({"instance_type": t, "zone": z, "capacity_type": c}))
            .collect();
        self.control(
            "POST",
            "/_peer/capacity",
            &serde_json::json!({ "unavailable": list }).to_string(),
        );
    }

    /// Public SSM parameters (moto refuses names under `/aws/`), as (name, value).
    pub fn set_ssm_parameters(&self, parameters: &[(&str, &str)]) {
        let map: serde_json::Map<String, serde_json::Value> = parameters
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
            .collect();
        self.control(
            "POST",
            "/_peer/ssm",
            &serde_json::json!({ "parameters": map }).to_string(),
        );
    }

    /// Capacity reservations the peer serves (DescribeCapacityReservations) and honours in
    /// CreateFleet, each a JSON object: `id`, `instance_type`, `zone`, `total`, `available`,
    /// `reservation_type` (`default` / `capacity-block`), `state`, optional `end_time`, `tags`.
    pub fn set_capacity_reservations(&self, reservations: &[serde_json::Value]) {
        self.control(
            "POST",
            "/_peer/capacity-reservations",
            &serde_json::json!({ "reservations": reservations }).to_string(),
        );
    }

    /// Spot prices DescribeSpotPriceHistory answers with, as (type, zone, price).
    pub fn set_spot_prices(&self, prices: &[(&str, &str, f64)]) {
        let list: Vec<serde_json::Value> = prices
            .iter()
            .map(|(t, z, p)| {
                serde_json::json!({"instance_type": t, "zone": z, "price": format!("{p}")})
            })
            .collect();
        self.control(
            "POST",
            "/_peer/spot-prices",
            &serde_json::json!({ "prices": list }).to_string(),
        );
    }

    /// The next `count` calls of `action` answer 503 RequestLimitExceeded.
    pub fn throttle(&self, action: &str, count: u32) {
        self.control(
            "POST",
            "/_peer/throttle",
            &serde_json::json!({"action": action, "count": count}).to_string(),
        );
    }

    /// EC2 calls seen, as (action, HTTP status).
    pub fn calls(&self) -> Vec<(String, u16)> {
        let body = self.control("GET", "/_peer/calls", "");
        let v: serde_json::Value = serde_json::from_str(&body).expect("the call log is JSON");
        v.as_array()
            .expect("the call log is a list")
            .iter()
            .map(|c| {
                (
                    c["action"].as_str().unwrap_or_default().to_string(),
                    c["status"].as_u64().unwrap_or(0) as u16,
                )
            })
            .collect()
    }

    pub fn count_calls(&self, action: &str) -> usize {
        self.calls().iter().filter(|(a, _)| a == action).count()
    }

    /// SDK clients pointed at this peer, region us-east-1, test credentials.
    pub async fn clients(&self) -> Clients {
        load(&ClientOptions {
            region: Some("us-east-1".into()),
            endpoint_url: Some(self.endpoint()),
            static_credentials: Some(("testing".into(), "testing".into())),
        })
        .await
        .expect("clients for the test peer")
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        drop(self.stdin.take());
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const ASSUME_ROLE_POLICY: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;

/// A VPC with a subnet in each of two zones, a security group and two AMIs (one per
/// architecture, tagged for selection), and the IAM role `KarpenterNodeRole-test-cluster`, made
/// in the peer.
pub struct Network {
    pub subnets: std::collections::BTreeMap<String, String>,
    pub security_group: String,
    pub ami_amd64: String,
    pub ami_arm64: String,
}

pub async fn network(clients: &Clients) -> Network {
    use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};
    let ec2 = &clients.ec2;
    let tagged = |r: ResourceType| {
        TagSpecification::builder()
            .resource_type(r)
            .tags(
                Tag::builder()
                    .key("karpenter.sh/discovery")
                    .value("test-cluster")
                    .build(),
            )
            .build()
    };
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.0.0.0/16")
        .send()
        .await
        .expect("CreateVpc");
    let vpc_id = vpc
        .vpc()
        .and_then(|v| v.vpc_id())
        .expect("a VPC id")
        .to_string();
    let mut subnets = std::collections::BTreeMap::new();
    for (i, zone) in ["us-east-1a", "us-east-1b"].into_iter().enumerate() {
        let s = ec2
            .create_subnet()
            .vpc_id(&vpc_id)
            .cidr_block(format!("10.0.{i}.0/24"))
            .availability_zone(zone)
            .tag_specifications(tagged(ResourceType::Subnet))
            .send()
            .await
            .expect("CreateSubnet");
        subnets.insert(
            zone.to_string(),
            s.subnet()
                .and_then(|s| s.subnet_id())
                .expect("a subnet id")
                .to_string(),
        );
    }
    let sg = ec2
        .create_security_group()
        .group_name("test-cluster-nodes")
        .description("nodes")
        .vpc_id(&vpc_id)
        .tag_specifications(tagged(ResourceType::SecurityGroup))
        .send()
        .await
        .expect("CreateSecurityGroup");
    let security_group = sg.group_id().expect("a group id").to_string();
    let mut amis = Vec::new();
    for arch in ["x86_64", "arm64"] {
        let images = ec2
            .describe_images()
            .owners("amazon")
            .filters(Filter::builder().name("architecture").values(arch).build())
            .send()
            .await
            .expect("DescribeImages");
        let id = images
            .images()
            .iter()
            .find_map(|i| i.image_id())
            .unwrap_or_else(|| panic!("moto seeds an {arch} AMI"))
            .to_string();
        ec2.create_tags()
            .resources(&id)
            .tags(
                Tag::builder()
                    .key("karpenter.sh/discovery")
                    .value("test-cluster")
                    .build(),
            )
            .send()
            .await
            .expect("CreateTags");
        amis.push(id);
    }
    // The node role an EC2NodeClass's `role` names (its instance profile is made for it).
    clients
        .iam
        .create_role()
        .role_name("KarpenterNodeRole-test-cluster")
        .assume_role_policy_document(ASSUME_ROLE_POLICY)
        .send()
        .await
        .expect("CreateRole");
    Network {
        subnets,
        security_group,
        ami_amd64: amis[0].clone(),
        ami_arm64: amis[1].clone(),
    }
}
