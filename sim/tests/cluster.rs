//! Simulated kube-scheduler and kubelet: binding constraints, node loss, drains and budgets,
//! pending times.

use dovetail_dataflow::model::labels::{HOSTNAME, ZONE};
use dovetail_dataflow::model::quantity::{mib, units};
use dovetail_dataflow::model::{
    Effect, LabelSelector, Node, Pod, PodAffinityTerm, PodDisruptionBudget, Requirement,
    Requirements, Resources, Taint, Toleration, TolerationOperator, TopologySpread,
    WhenUnsatisfiable,
};
use dovetail_sim::pdb::EvictionRefused;
use dovetail_sim::{percentile, ClusterError, SimCluster, Unfit};
use std::collections::{BTreeMap, BTreeSet};

fn node(name: &str, zone: &str, cpus: i64) -> Node {
    Node {
        name: name.into(),
        labels: [
            (HOSTNAME.to_string(), name.to_string()),
            (ZONE.to_string(), zone.to_string()),
        ]
        .into(),
        allocatable: Resources {
            cpu: units(cpus),
            memory: mib(16_384),
            pods: units(110),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn pod(name: &str, cpus: i64) -> Pod {
    let mut p = Pod {
        namespace: "default".into(),
        name: name.into(),
        ..Default::default()
    };
    p.scheduling.requests = Resources {
        cpu: units(cpus),
        memory: mib(256),
        pods: units(1),
        ..Default::default()
    };
    p
}

fn labelled(mut p: Pod, k: &str, v: &str) -> Pod {
    p.labels.insert(k.into(), v.into());
    p
}

fn selector(k: &str, v: &str) -> LabelSelector {
    let mut r = Requirements::new();
    r.add(k, Requirement::single(v.to_string()));
    LabelSelector { requirements: r }
}

fn ready_cluster(nodes: &[Node]) -> SimCluster {
    let mut c = SimCluster::new();
    for n in nodes {
        c.add_node(n.clone(), vec![]).unwrap();
        c.mark_ready(&n.name).unwrap();
    }
    c
}

fn node_of(c: &SimCluster, key: &str) -> Option<String> {
    c.pod(key).and_then(|p| p.node_name.clone())
}

#[test]
fn binds_within_allocatable() {
    let mut c = ready_cluster(&[node("n1", "a", 2)]);
    for n in ["p1", "p2", "p3"] {
        c.add_pod(0, pod(n, 1)).unwrap();
    }
    let b = c.schedule(10);
    assert_eq!(
        b,
        vec![
            ("default/p1".to_string(), "n1".to_string()),
            ("default/p2".to_string(), "n1".to_string())
        ]
    );
    assert_eq!(node_of(&c, "default/p3"), None);
    assert_eq!(
        c.why_not("default/p3", "n1").unwrap(),
        Some(Unfit::Resources("cpu".into()))
    );
    assert_eq!(c.requested_on("n1").map(|r| r.cpu), Some(units(2)));
    c.delete_pod("default/p1").unwrap();
    assert_eq!(c.schedule(20), vec![("default/p3".into(), "n1".into())]);
    assert_eq!(c.pending_durations(), &[10, 10, 20]);
}

#[test]
fn higher_priority_binds_first() {
    let mut c = ready_cluster(&[node("n1", "a", 1)]);
    c.add_pod(0, pod("low", 1)).unwrap();
    let mut high = pod("high", 1);
    high.scheduling.priority = 1000;
    c.add_pod(5, high).unwrap();
    assert_eq!(c.schedule(10), vec![("default/high".into(), "n1".into())]);
}

#[test]
fn nodes_take_pods_only_once_ready_and_startup_taints_go() {
    let startup = Taint {
        key: "node.cilium.io/agent-not-ready".into(),
        value: "true".into(),
        effect: Effect::NoExecute,
    };
    let mut n = node("n1", "a", 4);
    n.taints.push(startup.clone());
    let mut c = SimCluster::new();
    c.add_node(n, vec![startup.clone()]).unwrap();
    c.add_pod(0, pod("p", 1)).unwrap();
    assert!(c.schedule(1).is_empty());
    assert_eq!(c.why_not("default/p", "n1").unwrap(), Some(Unfit::NotReady));
    c.mark_ready("n1").unwrap();
    assert!(c.node("n1").unwrap().taints.is_empty());
    assert_eq!(c.schedule(100).len(), 1);
    assert_eq!(c.pending_durations(), &[100]);
    assert_eq!(
        c.add_node(node("n1", "a", 1), vec![]),
        Err(ClusterError::DuplicateNode("n1".into()))
    );
}

#[test]
fn taints_and_tolerations() {
    let mut gpu = node("a-gpu", "a", 8);
    gpu.taints.push(Taint {
        key: "nvidia.com/gpu".into(),
        value: "true".into(),
        effect: Effect::NoSchedule,
    });
    let mut c = ready_cluster(&[gpu, node("b-plain", "a", 8)]);
    c.add_pod(0, pod("plain", 1)).unwrap();
    let mut tolerant = pod("tolerant", 1);
    tolerant.scheduling.tolerations.push(Toleration {
        key: "nvidia.com/gpu".into(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: None,
    });
    c.add_pod(0, tolerant).unwrap();
    c.schedule(1);
    assert_eq!(node_of(&c, "default/plain").as_deref(), Some("b-plain"));
    assert_eq!(node_of(&c, "default/tolerant").as_deref(), Some("a-gpu"));
}

#[test]
fn node_selector_and_required_affinity() {
    let mut c = ready_cluster(&[node("n1", "a", 8), node("n2", "b", 8), node("n3", "c", 8)]);
    let mut sel = pod("sel", 1);
    sel.scheduling
        .node_selector
        .add(ZONE, Requirement::single("b".to_string()));
    c.add_pod(0, sel).unwrap();
    let mut aff = pod("aff", 1);
    let term = |z: &str| {
        let mut r = Requirements::new();
        r.add(ZONE, Requirement::single(z.to_string()));
        r
    };
    aff.scheduling.required_node_affinity = vec![term("x"), term("c")];
    c.add_pod(0, aff).unwrap();
    let mut nowhere = pod("nowhere", 1);
    nowhere.scheduling.required_node_affinity = vec![term("x")];
    c.add_pod(0, nowhere).unwrap();
    c.schedule(1);
    assert_eq!(node_of(&c, "default/sel").as_deref(), Some("n2"));
    assert_eq!(node_of(&c, "default/aff").as_deref(), Some("n3"));
    assert_eq!(node_of(&c, "default/nowhere"), None);
    assert_eq!(
        c.why_not("default/nowhere", "n1").unwrap(),
        Some(Unfit::NodeAffinity)
    );
}

fn anti_on(p: Pod, key: &str) -> Pod {
    let mut p = labelled(p, "app", "web");
    p.scheduling.pod_anti_affinity.push(PodAffinityTerm {
        topology_key: key.into(),
        selector: selector("app", "web"),
        namespaces: BTreeSet::new(),
    });
    p
}

#[test]
fn hostname_anti_affinity_spreads_one_per_node() {
    let mut c = ready_cluster(&[node("n1", "a", 8), node("n2", "a", 8)]);
    for n in ["w1", "w2", "w3"] {
        c.add_pod(0, anti_on(pod(n, 1), HOSTNAME)).unwrap();
    }
    let b = c.schedule(1);
    assert_eq!(b.len(), 2);
    assert_ne!(node_of(&c, "default/w1"), node_of(&c, "default/w2"));
    assert_eq!(node_of(&c, "default/w3"), None);
    assert_eq!(
        c.why_not("default/w3", "n1").unwrap(),
        Some(Unfit::PodAntiAffinity(HOSTNAME.into()))
    );
    // Symmetry: a pod without terms that a bound pod's anti-affinity selects stays away too.
    c.add_pod(0, labelled(pod("plain-web", 1), "app", "web"))
        .unwrap();
    assert!(c.schedule(2).is_empty());
    c.add_node(node("n3", "a", 8), vec![]).unwrap();
    c.mark_ready("n3").unwrap();
    c.schedule(3);
    // w3 (older) takes n3; the plain one has nowhere left.
    assert_eq!(node_of(&c, "default/w3").as_deref(), Some("n3"));
    assert_eq!(node_of(&c, "default/plain-web"), None);
}

#[test]
fn zone_spread_respects_max_skew() {
    let mut c = ready_cluster(&[node("a1", "a", 8), node("a2", "a", 8), node("b1", "b", 8)]);
    for n in 0..5 {
        let mut p = labelled(pod(&format!("s{n}"), 1), "app", "spread");
        p.scheduling.topology_spread.push(TopologySpread {
            topology_key: ZONE.into(),
            max_skew: 1,
            when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
            selector: selector("app", "spread"),
            min_domains: None,
        });
        c.add_pod(n, p).unwrap();
    }
    c.schedule(10);
    let mut per_zone: BTreeMap<String, i64> = BTreeMap::new();
    for p in c.pods().filter(|p| p.node_name.is_some()) {
        let z = c.node(p.node_name.as_deref().unwrap()).unwrap().labels[ZONE].clone();
        *per_zone.entry(z).or_default() += 1;
    }
    assert_eq!(
        per_zone,
        [("a".to_string(), 3), ("b".to_string(), 2)].into()
    );
    assert_eq!(node_of(&c, "default/s0").as_deref(), Some("a1"));
    assert_eq!(node_of(&c, "default/s1").as_deref(), Some("b1"));
}

#[test]
fn zone_spread_blocks_when_a_zone_is_full() {
    // Zone b has room for one pod only: a, b, a, then the fourth cannot go to zone a (skew 2).
    let mut c = ready_cluster(&[node("a1", "a", 8), node("b1", "b", 1)]);
    for n in 0..4 {
        let mut p = labelled(pod(&format!("s{n}"), 1), "app", "spread");
        p.scheduling.topology_spread.push(TopologySpread {
            topology_key: ZONE.into(),
            max_skew: 1,
            when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
            selector: selector("app", "spread"),
            min_domains: None,
        });
        c.add_pod(n, p).unwrap();
    }
    assert_eq!(c.schedule(10).len(), 3);
    assert_eq!(node_of(&c, "default/s3"), None);
    assert_eq!(
        c.why_not("default/s3", "a1").unwrap(),
        Some(Unfit::TopologySpread(ZONE.into()))
    );
}

#[test]
fn required_pod_affinity_follows_its_target() {
    let mut c = ready_cluster(&[node("n1", "a", 8), node("n2", "b", 8)]);
    let mut db = labelled(pod("db", 1), "app", "db");
    db.scheduling
        .node_selector
        .add(ZONE, Requirement::single("b".to_string()));
    c.add_pod(0, db).unwrap();
    let mut near = pod("near", 1);
    near.scheduling.pod_affinity.push(PodAffinityTerm {
        topology_key: ZONE.into(),
        selector: selector("app", "db"),
        namespaces: BTreeSet::new(),
    });
    c.add_pod(1, near).unwrap();
    c.schedule(5);
    assert_eq!(node_of(&c, "default/near").as_deref(), Some("n2"));
}

#[test]
fn removing_a_node_makes_its_pods_pending_again() {
    let mut c = ready_cluster(&[node("n1", "a", 8)]);
    c.add_pod(0, pod("p1", 1)).unwrap();
    let mut ds = pod("ds", 0);
    ds.is_daemon = true;
    ds.node_name = Some("n1".into());
    c.add_pod(0, ds).unwrap();
    assert_eq!(node_of(&c, "default/ds").as_deref(), Some("n1"));
    c.schedule(1_000);
    let back = c.remove_node(50_000, "n1").unwrap();
    assert_eq!(
        back.iter().map(Pod::key).collect::<Vec<_>>(),
        vec!["default/p1"]
    );
    assert!(
        c.pod("default/ds").is_none(),
        "daemon pods go with their node"
    );
    assert_eq!(node_of(&c, "default/p1"), None);
    assert_eq!(
        c.pending()
            .iter()
            .map(|(p, t)| (p.key(), *t))
            .collect::<Vec<_>>(),
        vec![("default/p1".to_string(), 50_000)]
    );
    c.add_node(node("n2", "a", 8), vec![]).unwrap();
    c.mark_ready("n2").unwrap();
    c.schedule(140_000);
    assert_eq!(c.pending_durations(), &[1_000, 90_000]);
    assert_eq!(percentile(c.pending_durations(), 50.0), Some(1_000));
    assert_eq!(percentile(c.pending_durations(), 99.0), Some(90_000));
    assert!(c.remove_node(0, "n1").is_err());
}

fn pdb(min: Option<&str>, max: Option<&str>) -> PodDisruptionBudget {
    PodDisruptionBudget {
        namespace: "default".into(),
        name: "web".into(),
        selector: selector("app", "web"),
        min_available: min.map(Into::into),
        max_unavailable: max.map(Into::into),
    }
}

#[test]
fn pdb_blocks_eviction() {
    let mut c = ready_cluster(&[node("n1", "a", 8), node("n2", "a", 8)]);
    for n in ["w1", "w2", "w3"] {
        let mut p = labelled(pod(n, 1), "app", "web");
        p.scheduling
            .node_selector
            .add(HOSTNAME, Requirement::single("n1".to_string()));
        c.add_pod(0, p).unwrap();
    }
    // Pinned too: the scheduler's scores would put it on the empty n2.
    let mut other = pod("other", 1);
    other
        .scheduling
        .node_selector
        .add(HOSTNAME, Requirement::single("n1".to_string()));
    c.add_pod(0, other).unwrap();
    c.schedule(1);
    assert_eq!(c.pods_on("n1").len(), 4);

    // minAvailable 3 of 3: nothing of the app may go; the unrelated pod may.
    let out = c
        .evict_for_drain(10, "n1", &[pdb(Some("3"), None)])
        .unwrap();
    assert_eq!(
        out.evicted.iter().map(Pod::key).collect::<Vec<_>>(),
        vec!["default/other"]
    );
    assert_eq!(out.blocked.len(), 3);
    assert!(
        matches!(
            out.blocked[0].reason,
            EvictionRefused::NoDisruptionAllowed {
                healthy: 3,
                expected: 3,
                ..
            }
        ),
        "{:?}",
        out.blocked[0]
    );
    assert!(c.node("n1").unwrap().unschedulable);
    assert_eq!(node_of(&c, "default/other"), None);

    // maxUnavailable 1: one goes, then the budget is spent.
    let out = c
        .evict_for_drain(20, "n1", &[pdb(None, Some("1"))])
        .unwrap();
    assert_eq!(
        out.evicted.iter().map(Pod::key).collect::<Vec<_>>(),
        vec!["default/w1"]
    );
    assert_eq!(
        out.blocked
            .iter()
            .map(|b| b.pod.as_str())
            .collect::<Vec<_>>(),
        vec!["default/w2", "default/w3"]
    );

    // Two budgets on one pod: the eviction API refuses.
    let out = c
        .evict_for_drain(30, "n1", &[pdb(None, Some("3")), pdb(None, Some("3"))])
        .unwrap();
    assert!(out.evicted.is_empty());
    assert_eq!(
        out.blocked[0].reason,
        EvictionRefused::SeveralBudgets { count: 2 }
    );
}
