//! The cluster side of the `dovetail run --cluster kube` tests: a Kubernetes API test peer with
//! a kubeconfig for it, typed handles on the objects the tests read and write, the steps a test
//! plays (kube-scheduler marking a pod unschedulable and binding it, the kubelet registering a
//! Node), and the check that the chart's RBAC allows every request the controller made.
#![allow(dead_code)]

use dovetail_kube::test_peer::KubePeer;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Command;

/// The objects validate against `deploy/crds/` (`deploy/check_crds.py --objects`), and every
/// status condition has what Karpenter's condition type requires (type, status, reason,
/// message, lastTransitionTime).
pub fn assert_valid_against_the_crds(file: &std::path::Path, objects: &[Value]) {
    for o in objects {
        for c in o["status"]["conditions"].as_array().into_iter().flatten() {
            for field in ["type", "status", "reason", "message", "lastTransitionTime"] {
                assert!(c[field].is_string(), "condition without {field}: {c}");
            }
        }
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    std::fs::write(file, list.to_string()).expect("write the objects");
    let python = std::env::var("DOVETAIL_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let out = Command::new(python)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/check_crds.py"))
        .arg("--objects")
        .arg(file)
        .output()
        .expect("run deploy/check_crds.py");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains(&format!("OK: {} objects", objects.len())),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The flags that turn the controller's metrics and probe servers off (tests run several at once).
pub const NO_HTTP: [&str; 4] = ["--metrics-port", "0", "--health-probe-port", "0"];
use std::time::{Duration, Instant};

pub fn object(v: Value) -> DynamicObject {
    serde_json::from_value(v).expect("a Kubernetes object")
}

fn resource(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Polls `check` until it gives a value (or fails after 60 s, naming what it waited for).
pub fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The status of condition `kind` in `status.conditions`.
pub fn condition(o: &Value, kind: &str) -> Option<String> {
    o["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .and_then(|c| c["status"].as_str())
        .map(str::to_string)
}

/// A port free on 127.0.0.1 now (for the controller's metrics and probes).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `GET path` on 127.0.0.1:port: the status line and the body; `None` while nothing listens.
pub fn http_get(port: u16, path: &str) -> Option<(String, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_string(), body.to_string()))
}

/// A NodeClaim whose instance exists.
pub struct Launched {
    pub name: String,
    pub provider_id: String,
    pub node: String,
}

/// A test peer, a kubeconfig for it in a temporary folder, and handles on its objects.
pub struct LiveCluster {
    pub peer: KubePeer,
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub rt: tokio::runtime::Runtime,
    pub nodepools: Api<DynamicObject>,
    pub nodeclasses: Api<DynamicObject>,
    pub claims: Api<DynamicObject>,
    pub nodes: Api<Node>,
    pub pods: Api<Pod>,
    pub events: Api<Event>,
}

impl LiveCluster {
    pub fn start(name: &str) -> LiveCluster {
        let peer = KubePeer::start();
        let dir = std::env::temp_dir().join(format!("dovetail-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temp dir");
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: peer\n  cluster:\n    server: {}\n\
                 users:\n- name: peer\n  user: {{}}\ncontexts:\n- name: peer\n  context:\n    cluster: peer\n    user: peer\n\
                 current-context: peer\n",
                peer.url()
            ),
        )
        .expect("write the kubeconfig");
        let rt = tokio::runtime::Runtime::new().expect("a runtime");
        let client = {
            let _in = rt.enter();
            peer.client()
        };
        LiveCluster {
            nodepools: Api::all_with(
                client.clone(),
                &resource("karpenter.sh", "NodePool", "nodepools"),
            ),
            nodeclasses: Api::all_with(
                client.clone(),
                &resource("karpenter.k8s.aws", "EC2NodeClass", "ec2nodeclasses"),
            ),
            claims: Api::all_with(
                client.clone(),
                &resource("karpenter.sh", "NodeClaim", "nodeclaims"),
            ),
            nodes: Api::all(client.clone()),
            events: Api::all(client.clone()),
            pods: Api::namespaced(client, "team"),
            peer,
            dir,
            kubeconfig,
            rt,
        }
    }

    /// `dovetail run --cluster kube --cloud CLOUD --for RUN_FOR` on this cluster (its
    /// kubeconfig, a 200 ms tick).
    pub fn dovetail(&self, cloud: &str, run_for: &str) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dovetail"));
        cmd.args([
            "run",
            "--cluster",
            "kube",
            "--cloud",
            cloud,
            "--for",
            run_for,
        ])
        .args(["--tick", "200ms"])
        .arg("--kubeconfig")
        .arg(&self.kubeconfig);
        cmd
    }

    /// The same against the EC2 test peer, for cluster `cluster`.
    pub fn dovetail_at_moto(
        &self,
        ec2: &dovetail_aws::test_peer::Peer,
        cluster: &str,
        run_for: &str,
    ) -> Command {
        let mut cmd = self.dovetail("aws", run_for);
        cmd.args(["--describe-interval", "500ms"])
            .env("AWS_ENDPOINT_URL", ec2.endpoint())
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("CLUSTER_NAME", cluster)
            .env_remove("AWS_PROFILE");
        cmd
    }

    /// Karpenter's controller holds its leader Lease in `kube-system` (written once: it stays
    /// held, as dovetail observes it, for the Lease's 15 s).
    pub fn karpenter_holds_its_lease(&self) {
        let leases: Api<Lease> = {
            let _in = self.rt.enter();
            Api::namespaced(self.peer.client(), "kube-system")
        };
        let lease = Lease {
            metadata: kube::api::ObjectMeta {
                name: Some(dovetail_kube::leader::KARPENTER_LEASE.into()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some("karpenter-7d9f8-abcde".into()),
                lease_duration_seconds: Some(15),
                ..Default::default()
            }),
        };
        self.rt
            .block_on(leases.create(&PostParams::default(), &lease))
            .expect("Karpenter's Lease");
    }

    /// A simulated cloud whose instances boot, register and initialise in 300 ms each.
    pub fn fast_sim(&self) -> PathBuf {
        let sim = self.dir.join("sim.json");
        std::fs::write(
            &sim,
            r#"{"launch_to_running_ms": 300, "running_to_registered_ms": 300,
                "registered_to_initialized_ms": 300, "spot_interruptions": false}"#,
        )
        .expect("write the sim config");
        sim
    }

    /// Creates an EC2NodeClass `default` with these selector terms' tag.
    pub fn create_nodeclass(&self, discovery: &str) {
        self.rt
            .block_on(self.nodeclasses.create(
                &PostParams::default(),
                &object(json!({
                    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                    "metadata": {"name": "default"},
                    "spec": {"role": format!("KarpenterNodeRole-{discovery}"),
                        "amiSelectorTerms": [{"tags": {"karpenter.sh/discovery": discovery}}],
                        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": discovery}}],
                        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": discovery}}]},
                })),
            ))
            .expect("create the EC2NodeClass");
    }

    /// Creates NodePool `general` (label `team: web`, m5.large / m5.xlarge on demand, a
    /// startup taint, consolidated when empty after 5 s).
    pub fn create_nodepool(&self) {
        self.rt
            .block_on(self.nodepools.create(
                &PostParams::default(),
                &object(json!({
                    "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                    "metadata": {"name": "general"},
                    "spec": {
                        "template": {
                            "metadata": {"labels": {"team": "web"}},
                            "spec": {
                                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                                "requirements": [
                                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge"]}],
                                "startupTaints": [{"key": "example.com/cni-not-ready", "effect": "NoSchedule"}]}},
                        "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "5s"}},
                })),
            ))
            .expect("create the NodePool");
    }

    /// Creates NodePool `broken`, whose `spec.weight` is a string: Karpenter's CRD would refuse
    /// it, the peer does not validate, and the controller skips it with a `FailedValidation`
    /// Event.
    pub fn create_broken_nodepool(&self) {
        self.rt
            .block_on(self.nodepools.create(
                &PostParams::default(),
                &object(json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                    "metadata": {"name": "broken"}, "spec": {"weight": "heavy", "template": {"spec": {
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                        "requirements": []}}}})),
            ))
            .expect("create the broken NodePool");
    }

    /// Creates pod `team/NAME` (1 CPU, 1 GiB) and marks it as kube-scheduler does when no node
    /// fits it: `PodScheduled=False, reason Unschedulable`.
    pub fn create_unschedulable_pod(&self, name: &str) {
        self.create_unschedulable_pod_requesting(name, "1");
    }

    /// The same, requesting `cpu`.
    pub fn create_unschedulable_pod_requesting(&self, name: &str, cpu: &str) {
        self.rt
            .block_on(
                self.pods.create(
                    &PostParams::default(),
                    &serde_json::from_value(json!({
                        "apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": name, "namespace": "team"},
                        "spec": {"containers": [{"name": "app", "image": "app",
                            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
                    }))
                    .expect("a Pod"),
                ),
            )
            .expect("create the pod");
        self.rt
            .block_on(self.pods.patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": "Pending", "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})),
            ))
            .expect("mark the pod unschedulable");
    }

    /// The first Event about `object` (`Pod/team/web-1`, `Node/NAME`) with `reason`: its
    /// message and type.
    pub fn event(&self, object: &str, reason: &str) -> (String, String) {
        let mut parts = object.split('/');
        let kind = parts.next().unwrap_or_default().to_string();
        let name = parts.next_back().unwrap_or_default().to_string();
        eventually(&format!("a {reason} Event about {object}"), || {
            let list = self
                .rt
                .block_on(self.events.list(&Default::default()))
                .ok()?;
            list.items.into_iter().find_map(|e| {
                let about = &e.involved_object;
                (about.kind.as_deref() == Some(kind.as_str())
                    && about.name.as_deref() == Some(name.as_str())
                    && e.reason.as_deref() == Some(reason))
                .then(|| (e.message.unwrap_or_default(), e.type_.unwrap_or_default()))
            })
        })
    }

    /// The first NodeClaim to appear.
    pub fn first_nodeclaim(&self) -> DynamicObject {
        eventually("a NodeClaim", || {
            let list = self
                .rt
                .block_on(self.claims.list(&Default::default()))
                .ok()?;
            list.items.into_iter().next()
        })
    }

    /// The NodeClaim once `check` holds of it.
    pub fn nodeclaim_when(&self, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        eventually(what, || {
            let o = serde_json::to_value(self.rt.block_on(self.claims.get(name)).ok()?).ok()?;
            check(&o).then_some(o)
        })
    }

    /// The first NodeClaim, once CreateFleet answered: its name, provider id and Node name.
    pub fn launched(&self) -> Launched {
        let name = self.first_nodeclaim().metadata.name.expect("a name");
        let o = self.nodeclaim_when(&name, "the NodeClaim Launched", |o| {
            o["status"]["providerID"].is_string()
        });
        let field = |f: &str| o["status"][f].as_str().expect(f).to_string();
        Launched {
            provider_id: field("providerID"),
            node: field("nodeName"),
            name,
        }
    }

    /// The NodeClaim `name` once `Initialized`.
    pub fn initialized(&self, name: &str) -> Value {
        self.nodeclaim_when(name, "the NodeClaim Initialized", |o| {
            condition(o, "Initialized").as_deref() == Some("True")
        })
    }

    pub fn node(&self, name: &str) -> Value {
        serde_json::to_value(self.rt.block_on(self.nodes.get(name)).expect("the Node"))
            .expect("JSON")
    }

    /// The kubelet registers Node `name` for `provider_id`: with the unregistered taint, Ready.
    pub fn kubelet_registers(&self, name: &str, provider_id: &str) {
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"providerID": provider_id, "taints": [
                {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]},
            "status": {"capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]},
        }))
        .expect("a Node");
        self.rt
            .block_on(self.nodes.create(&PostParams::default(), &node))
            .expect("register the Node");
    }

    /// kube-scheduler binds the pod to `node` and it runs.
    pub fn bind(&self, pod: &str, node: &str) {
        self.rt
            .block_on(self.pods.patch(
                pod,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"nodeName": node}})),
            ))
            .expect("bind the pod");
        self.rt
            .block_on(self.pods.patch_status(
                pod,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [
                    {"type": "PodScheduled", "status": "True"}]}})),
            ))
            .expect("the pod runs");
    }

    pub fn delete_pod(&self, pod: &str) {
        self.rt
            .block_on(self.pods.delete(pod, &DeleteParams::default()))
            .expect("delete the pod");
    }

    /// Waits until the NodeClaim and the Node are both gone.
    pub fn gone(&self, claim: &str, node: &str) {
        eventually("the NodeClaim gone", || {
            self.rt
                .block_on(self.claims.get_opt(claim))
                .ok()
                .and_then(|o| o.is_none().then_some(()))
        });
        eventually("the Node gone", || {
            self.rt
                .block_on(self.nodes.get_opt(node))
                .ok()
                .and_then(|o| o.is_none().then_some(()))
        });
    }

    /// The requests the controller (User-Agent `dovetail/…`) made, in order.
    pub fn requests_of_the_controller(&self) -> Vec<Value> {
        let log: Vec<Value> =
            serde_json::from_str(&self.peer.control("GET", "/_peer/requests", ""))
                .expect("the request log");
        log.into_iter()
            .filter(|r| {
                r["user_agent"]
                    .as_str()
                    .is_some_and(|a| a.starts_with("dovetail/"))
            })
            .collect()
    }

    /// Every request the controller made is allowed by the chart's RBAC; returns them.
    pub fn assert_rbac_covers_the_controller(&self) -> Vec<Value> {
        let made = self.requests_of_the_controller();
        assert!(
            made.iter()
                .any(|r| r["resource"] == "nodeclaims" && r["verb"] == "create"),
            "the log names the controller's requests: {made:?}"
        );
        let rules = rbac_rules();
        let uncovered: Vec<&Value> = made.iter().filter(|r| !rbac_covers(&rules, r)).collect();
        assert!(
            uncovered.is_empty(),
            "not allowed by deploy/rbac-rules.json: {uncovered:?}"
        );
        made
    }
}

impl Drop for LiveCluster {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The chart's ClusterRole and Role rules (`deploy/rbac-rules.json`, checked against the chart's
/// templates by `deploy/check_rbac_json.py`).
pub fn rbac_rules() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/rbac-rules.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("deploy/rbac-rules.json"))
        .expect("JSON")
}

/// Whether a request of the peer's log (`verb`, `group`, `resource`, `subresource`,
/// `namespace`) is allowed by one of the rules; a namespaced rule (a Role) allows only
/// requests inside a namespace.
pub fn rbac_covers(rules: &[Value], request: &Value) -> bool {
    rules.iter().any(|rule| {
        rule["apiGroup"] == request["group"]
            && rule["resource"] == request["resource"]
            && rule["subresource"] == request["subresource"]
            && rule["verbs"]
                .as_array()
                .is_some_and(|v| v.iter().any(|verb| *verb == request["verb"]))
            && (rule["namespaced"] == false || !request["namespace"].is_null())
    })
}
