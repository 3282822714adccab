//! The controller's writes against a real HTTP API server speaking the Kubernetes protocol
//! (kmock behind `tests/peer/kube_peer.py`): a NodeClaim created with Karpenter's spec and
//! finalizer and its status written, Node taints / cordon / annotations, evictions refused with
//! 429 while a PodDisruptionBudget allows none, and a deleted NodeClaim held by its finalizer.

use dovetail_dataflow::backend::{ClusterReply, NodeClaim};
use dovetail_dataflow::decisions::Launch;
use dovetail_dataflow::model::{Effect, Node, Price, Requirements, Resources, Taint};
use dovetail_kube::kinds::NODECLAIM;
use dovetail_kube::nodeclaim::{NodeClaimTemplate, TERMINATION_FINALIZER};
use dovetail_kube::test_peer::KubePeer;
use dovetail_kube::ClusterWriter;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;
use std::time::{Duration, Instant};

/// Polls until `check` gives a value (the writes are asynchronous), or fails after 30 s.
fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what} did not happen in 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn claim() -> NodeClaim {
    NodeClaim {
        name: "general-x7k2p".into(),
        nodepool: "general".into(),
        launch: Launch {
            name: "general-x7k2p".into(),
            nodepool: "general".into(),
            instance_types: vec!["m5.large".into()],
            zones: vec!["us-east-1a".into()],
            capacity_types: vec!["on-demand".into()],
            price: Price::from_dollars(0.096),
            requirements: Requirements::new(),
            pods_by_class: Vec::new(),
        },
        created_ms: 0,
        startup_taints: Vec::new(),
        status: None,
        registered: false,
        annotations: Default::default(),
    }
}

#[test]
fn nodeclaims_nodes_and_evictions_are_written_as_karpenter_writes_them() {
    let peer = KubePeer::start();
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let client = rt.block_on(async { peer.client() });
    let writer = ClusterWriter::new(peer.config(), rt.handle().clone()).expect("a writer");
    let claims: Api<DynamicObject> = Api::all_with(client.clone(), &NODECLAIM.api_resource());

    // Created with its spec and finalizer, then its status once the instance exists.
    let mut c = claim();
    writer.create_nodeclaim(
        &c,
        NodeClaimTemplate {
            node_class: Some("default"),
            ..NodeClaimTemplate::default()
        },
    );
    let created = eventually("the NodeClaim", || {
        rt.block_on(claims.get_opt("general-x7k2p")).ok().flatten()
    });
    let v = serde_json::to_value(&created).expect("JSON");
    assert_eq!(v["metadata"]["finalizers"], json!([TERMINATION_FINALIZER]));
    assert_eq!(v["metadata"]["labels"]["karpenter.sh/nodepool"], "general");
    assert_eq!(v["spec"]["nodeClassRef"]["name"], "default");
    c.status = Some(Node {
        name: "ip-10-0-0-1.ec2.internal".into(),
        provider_id: Some("aws:///us-east-1a/i-0123456789abcdef0".into()),
        capacity: Resources {
            cpu: 2_000,
            ..Resources::default()
        },
        allocatable: Resources {
            cpu: 1_930,
            ..Resources::default()
        },
        ..Node::default()
    });
    writer.update_nodeclaim(&c, &Default::default());
    let status = eventually("the NodeClaim's status", || {
        let o = rt.block_on(claims.get("general-x7k2p")).ok()?;
        let v = serde_json::to_value(&o).ok()?;
        (v["status"]["providerID"] == "aws:///us-east-1a/i-0123456789abcdef0").then_some(v)
    });
    assert_eq!(status["status"]["allocatable"]["cpu"], "1930m");
    assert_eq!(status["status"]["conditions"][0]["type"], "Launched");

    // A Node tainted (once, whatever else wrote meanwhile), cordoned, annotated, untainted.
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    rt.block_on(
        nodes.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "ip-10-0-0-1.ec2.internal"},
            "spec": {"taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]}}))
            .expect("a Node"),
        ),
    )
    .expect("create Node");
    let disrupted = Taint {
        key: "karpenter.sh/disrupted".into(),
        value: String::new(),
        effect: Effect::NoSchedule,
    };
    writer.taint_node("ip-10-0-0-1.ec2.internal", disrupted.clone());
    writer.taint_node("ip-10-0-0-1.ec2.internal", disrupted);
    writer.cordon("ip-10-0-0-1.ec2.internal");
    writer.annotate_node("ip-10-0-0-1.ec2.internal", "dovetail.sh/why", "empty");
    writer.untaint_node("ip-10-0-0-1.ec2.internal", "karpenter.sh/unregistered");
    let node = eventually("the Node's writes", || {
        let n = rt.block_on(nodes.get("ip-10-0-0-1.ec2.internal")).ok()?;
        let spec = n.spec.clone()?;
        let keys: Vec<String> = spec
            .taints
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|t| t.key)
            .collect();
        let annotated = n
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.get("dovetail.sh/why").map(String::as_str) == Some("empty"));
        (spec.unschedulable == Some(true)
            && annotated
            && keys == vec!["karpenter.sh/disrupted".to_string()])
        .then_some(n)
    });
    assert_eq!(node.spec.and_then(|s| s.taints).map(|t| t.len()), Some(1));

    // Evictions: refused (429) while the budget allows none, done otherwise.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "team");
    for name in ["guarded", "free"] {
        rt.block_on(
            pods.create(
                &PostParams::default(),
                &serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "team", "labels": {"app": name}},
                "spec": {"nodeName": "ip-10-0-0-1.ec2.internal",
                    "containers": [{"name": "app", "image": "app"}]},
                "status": {"phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True"}]}}))
                .expect("a Pod"),
            ),
        )
        .expect("create Pod");
    }
    let pdbs: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::namespaced(client.clone(), "team");
    rt.block_on(
        pdbs.create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "guarded", "namespace": "team"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}}),
            )
            .expect("a PDB"),
        ),
    )
    .expect("create PDB");
    writer.evict("team/guarded");
    writer.evict("team/free");
    let refused = eventually("the refusal", || writer.poll_replies().into_iter().next());
    match refused {
        ClusterReply::EvictionRefused { pod, reason } => {
            assert_eq!(pod, "team/guarded");
            assert!(reason.contains("disruption budget"), "{reason}");
        }
        other => panic!("expected a refused eviction, got {other:?}"),
    }
    eventually("the free pod evicted", || {
        rt.block_on(pods.get_opt("free"))
            .ok()
            .and_then(|p| p.is_none().then_some(()))
    });
    assert!(rt.block_on(pods.get_opt("guarded")).expect("get").is_some());

    // Read back as a restarted controller would: the launch and its instance.
    let listed = writer.list_nodeclaims().expect("list NodeClaims");
    assert_eq!(listed.len(), 1);
    let back = dovetail_ingest::read_nodeclaim("list", &listed[0]).expect("a record");
    assert_eq!(back.launch.instance_types, c.launch.instance_types);
    assert_eq!(back.instance_id(), Some("i-0123456789abcdef0"));

    // Deleted once its instance is gone: the finalizer comes off and it goes.
    writer.delete_nodeclaim("general-x7k2p");
    eventually("the NodeClaim gone", || {
        rt.block_on(claims.get_opt("general-x7k2p"))
            .ok()
            .and_then(|o| o.is_none().then_some(()))
    });
    assert!(writer.poll_replies().is_empty());
}
