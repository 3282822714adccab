//! The watches against a real HTTP API server speaking the Kubernetes protocol, watch included
//! (kmock behind `tests/peer/kube_peer.py`): objects become facts as they are created, changed
//! and deleted; pods only when kube-scheduler marked them unschedulable (or bound); a malformed
//! object is skipped and its last good fact stays; a watch that cannot resume (410 Gone after
//! the history was compacted) relists without losing or duplicating a fact.

use dovetail_dataflow::facts::Fact;
use dovetail_kube::test_peer::KubePeer;
use dovetail_kube::{watch_all, FactUpdate, WatchStats, WATCHED};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The facts as the engine would hold them after the updates so far.
#[derive(Default)]
struct Facts(BTreeMap<String, Fact>);

impl Facts {
    fn apply(&mut self, u: FactUpdate) {
        match u {
            FactUpdate::Set(f) => {
                self.0.insert(f.describe(), *f);
            }
            FactUpdate::Remove(k) => {
                self.0.remove(&k);
            }
            FactUpdate::Replace { kind, facts } => {
                self.0.retain(|_, f| !kind.owns(f));
                for f in facts {
                    let previous = self.0.insert(f.describe(), f);
                    assert!(previous.is_none(), "a relist names each fact once");
                }
            }
        }
    }

    fn keys(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }
}

/// Applies updates until `done` holds (or fails after 30 s).
fn until(
    updates: &crossbeam_channel::Receiver<FactUpdate>,
    facts: &mut Facts,
    what: &str,
    done: impl Fn(&Facts) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done(facts) {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "{what}: facts are {:?}", facts.keys());
        if let Ok(u) = updates.recv_timeout(left) {
            facts.apply(u);
        }
    }
}

fn api(client: &kube::Client, kind: &str, namespace: Option<&str>) -> Api<DynamicObject> {
    let k = WATCHED
        .iter()
        .find(|k| k.kind == kind)
        .expect("a watched kind");
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &k.api_resource()),
        None => Api::all_with(client.clone(), &k.api_resource()),
    }
}

fn object(value: serde_json::Value) -> DynamicObject {
    serde_json::from_value(value).expect("an object")
}

fn nodepool(weight: i64) -> DynamicObject {
    object(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "general"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}},
            "weight": weight},
    }))
}

fn pod(name: &str, unschedulable: bool, node: Option<&str>) -> DynamicObject {
    let mut v = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"containers": [{"name": "app", "image": "app",
            "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]},
    });
    if let Some(node) = node {
        v["spec"]["nodeName"] = json!(node);
    }
    if unschedulable {
        v["status"] = json!({"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]});
    }
    object(v)
}

#[test]
fn objects_become_facts_and_a_broken_watch_relists_without_losing_or_duplicating() {
    let peer = KubePeer::start();
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let client = rt.block_on(async { peer.client() });
    let pools = api(&client, "NodePool", None);
    let classes = api(&client, "EC2NodeClass", None);
    let pods = api(&client, "Pod", Some("team"));
    let pp = PostParams::default();
    rt.block_on(async {
        pools
            .create(&pp, &nodepool(10))
            .await
            .expect("create NodePool");
        classes
            .create(
                &pp,
                &object(json!({
                    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                    "metadata": {"name": "default"},
                    "spec": {"role": "KarpenterNodeRole",
                        "amiSelectorTerms": [{"alias": "al2023@latest"}],
                        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
                        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}]},
                })),
            )
            .await
            .expect("create EC2NodeClass");
        pods.create(&pp, &pod("waiting", true, None))
            .await
            .expect("create pod");
        pods.create(&pp, &pod("running", false, Some("node-1")))
            .await
            .expect("create pod");
        // Not yet looked at by kube-scheduler: not provisionable.
        pods.create(&pp, &pod("fresh", false, None))
            .await
            .expect("create pod");
    });

    let (updates, stats) = watch_all(rt.handle(), client.clone(), WATCHED);
    let mut facts = Facts::default();
    let expected = |extra: &[&str]| {
        let mut k: Vec<String> = [
            "EC2NodeClass default",
            "NodePool general",
            "Pod team/running",
            "Pod team/waiting",
        ]
        .iter()
        .chain(extra)
        .map(|s| s.to_string())
        .collect();
        k.sort();
        k
    };
    until(&updates, &mut facts, "the first lists", |f| {
        f.keys() == expected(&[]) && stats.relists.load(Ordering::Relaxed) >= WATCHED.len() as u64
    });
    match &facts.0["NodePool general"] {
        Fact::NodePool(p) => assert_eq!(p.weight, 10),
        other => panic!("{other:?}"),
    }
    match &facts.0["Pod team/waiting"] {
        Fact::Pod(p) => assert!(p.node_name.is_none()),
        other => panic!("{other:?}"),
    }

    // kube-scheduler marks the fresh pod unschedulable: now the engine sees it.
    rt.block_on(pods.patch_status(
        "fresh",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})),
    ))
    .expect("patch status");
    until(&updates, &mut facts, "the marked pod", |f| {
        f.keys() == expected(&["Pod team/fresh"])
    });

    // A change that fails validation is skipped; the last good fact stays and the watch goes on.
    rt.block_on(pools.patch(
        "general",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"weight": "heavy"}})),
    ))
    .expect("patch NodePool");
    rt.block_on(pods.delete("running", &DeleteParams::default()))
        .expect("delete pod");
    until(&updates, &mut facts, "the deleted pod", |f| {
        !f.0.contains_key("Pod team/running")
    });
    assert_eq!(stats.objects_skipped.load(Ordering::Relaxed), 1);
    // … and is reported for an Event about it, naming the field.
    let skipped = stats.take_skipped();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].object, "NodePool/general");
    assert!(skipped[0].message.contains("weight"), "{skipped:?}");
    assert!(stats.take_skipped().is_empty(), "taken once");
    match &facts.0["NodePool general"] {
        Fact::NodePool(p) => assert_eq!(p.weight, 10, "the last good NodePool stays"),
        other => panic!("{other:?}"),
    }

    // The server loses its watch history and cuts every watch (as after an etcd compaction and
    // an API server restart): resuming from a resourceVersion gets 410 Gone, so each kind
    // relists. Objects deleted meanwhile ("waiting", "fresh") get no DELETED event; only the
    // relist can retract them, and nothing may be duplicated.
    let relists_before = stats.relists.load(Ordering::Relaxed);
    peer.control("POST", "/_peer/reset", "");
    rt.block_on(async {
        pools
            .create(&pp, &nodepool(20))
            .await
            .expect("create NodePool");
        pods.create(&pp, &pod("late", true, None))
            .await
            .expect("create pod");
    });
    until(&updates, &mut facts, "the relist", |f| {
        stats.relists.load(Ordering::Relaxed) > relists_before
            && f.keys() == ["NodePool general", "Pod team/late"]
            && matches!(&f.0["NodePool general"], Fact::NodePool(p) if p.weight == 20)
    });
    let _: &WatchStats = &stats;
}

/// The zones a pod fact's volumes allow, if the pod is a fact.
fn volume_zones(facts: &Facts, key: &str) -> Option<Option<Vec<String>>> {
    match facts.0.get(key) {
        Some(Fact::Pod(p)) => Some(
            p.scheduling
                .volume_zones
                .as_ref()
                .map(|z| z.iter().cloned().collect()),
        ),
        _ => None,
    }
}

/// A pod's volume zones follow its claim and volume as they are created, bound, changed and
/// deleted on the API server, in whatever order; a pod not using the claim is never sent again.
#[test]
fn a_pods_volume_zone_follows_its_claim_and_volume() {
    let peer = KubePeer::start();
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let client = rt.block_on(async { peer.client() });
    let pods = api(&client, "Pod", Some("team"));
    let claims = api(&client, "PersistentVolumeClaim", Some("team"));
    let volumes = api(&client, "PersistentVolume", None);
    let pp = PostParams::default();
    let mut db = pod("db", true, None);
    db.data["spec"]["volumes"] =
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data-db"}}]);
    let volume = |zone: &str| {
        object(json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": "pv-db"},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": [zone]}]}]}}}}))
    };
    rt.block_on(async {
        pods.create(&pp, &db).await.expect("create pod");
        pods.create(&pp, &pod("web", true, None))
            .await
            .expect("create pod");
        volumes
            .create(&pp, &volume("us-east-1b"))
            .await
            .expect("create volume");
    });
    let (updates, stats) = watch_all(rt.handle(), client.clone(), WATCHED);
    let mut facts = Facts::default();
    until(&updates, &mut facts, "the first lists", |f| {
        f.0.contains_key("Pod team/web")
            && stats.relists.load(Ordering::Relaxed) >= WATCHED.len() as u64
    });
    assert_eq!(
        volume_zones(&facts, "Pod team/db"),
        Some(None),
        "its claim is not there yet"
    );

    // Counts the updates for pod web from here on: none of the volume changes may touch it.
    let mut web_sent = 0;
    let mut take = |facts: &mut Facts, what: &str, done: &dyn Fn(&Facts) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done(facts) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "{what}: db has {:?}",
                volume_zones(facts, "Pod team/db")
            );
            if let Ok(u) = updates.recv_timeout(left) {
                if matches!(&u, FactUpdate::Set(f) if f.describe() == "Pod team/web") {
                    web_sent += 1;
                }
                facts.apply(u);
            }
        }
    };

    // The claim is created bound to the volume: the pod is pinned to the volume's zone.
    rt.block_on(claims.create(
        &pp,
        &object(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data-db", "namespace": "team"},
            "spec": {"storageClassName": "gp3", "volumeName": "pv-db", "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "10Gi"}}}})),
    ))
    .expect("create claim");
    let zone_is = |zone: &'static str| {
        move |f: &Facts| volume_zones(f, "Pod team/db") == Some(Some(vec![zone.to_string()]))
    };
    take(&mut facts, "the bound claim", &zone_is("us-east-1b"));

    // The volume is replaced in another zone (a restore from a snapshot): the pod follows.
    rt.block_on(async {
        volumes
            .delete("pv-db", &DeleteParams::default())
            .await
            .expect("delete volume");
        volumes
            .create(&pp, &volume("us-east-1c"))
            .await
            .expect("create volume");
    });
    take(&mut facts, "the moved volume", &zone_is("us-east-1c"));

    // The claim is deleted: the pod is unconstrained again (its zone is not known).
    rt.block_on(claims.delete("data-db", &DeleteParams::default()))
        .expect("delete claim");
    take(&mut facts, "the deleted claim", &|f: &Facts| {
        volume_zones(f, "Pod team/db") == Some(None)
    });
    assert_eq!(web_sent, 0, "pod web uses no claim: never sent again");
}
