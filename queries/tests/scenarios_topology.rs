//! Scenario tests of topology: zonal and hostname topology spread, pod anti-affinity on
//! hostname, and pod affinity to a zone. Counts are taken from the engine's bindings and checked
//! against the constraints themselves.

mod common;
use common::*;
use std::collections::BTreeMap;

fn spread(key: &str, app: &str) -> String {
    format!(
        r#"  topologySpreadConstraints:
    - maxSkew: 1
      topologyKey: {key}
      whenUnsatisfiable: DoNotSchedule
      labelSelector:
        matchLabels: {{app: {app}}}"#
    )
}

/// A Node in `zone` with the given allocatable, as a running cluster reports it.
fn node(name: &str, zone: &str, cpu: &str, memory: &str, pods: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels:
    topology.kubernetes.io/zone: {zone}
    kubernetes.io/hostname: {name}
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    node.kubernetes.io/instance-type: m5.large
    karpenter.sh/capacity-type: on-demand
    karpenter.sh/nodepool: default
status:
  allocatable: {{cpu: "{cpu}", memory: "{memory}", pods: "{pods}"}}
---
"#
    )
}

/// Pods per zone of the launches the pods matching `prefix` are bound to. Panics unless every
/// such pod is bound to a launch pinned to exactly one zone.
fn pods_per_zone(out: &Outcome, prefix: &str) -> BTreeMap<String, usize> {
    let mut per_zone = BTreeMap::new();
    for (pod, target) in &out.bindings {
        if !pod.starts_with(prefix) {
            continue;
        }
        let l = launch(out, target);
        assert_eq!(
            l.zones.len(),
            1,
            "launch {} holding {pod} is not pinned to one zone: {l:?}",
            l.name
        );
        *per_zone.entry(l.zones[0].clone()).or_insert(0) += 1;
    }
    per_zone
}

#[test]
fn zonal_spread_over_three_zones_with_max_skew_one() {
    let out = plan(
        &(default_pool()
            + &pods(
                7,
                "web",
                "1",
                "1Gi",
                "app: web",
                &spread("topology.kubernetes.io/zone", "web"),
            )),
    );
    assert!(out.unschedulable.is_empty(), "{out:?}");
    let per_zone = pods_per_zone(&out, "default/web-");
    assert_eq!(per_zone.values().sum::<usize>(), 7, "{per_zone:?}");
    let counts: Vec<usize> = ZONES
        .iter()
        .map(|z| per_zone.get(*z).copied().unwrap_or(0))
        .collect();
    assert!(counts.iter().all(|c| *c == 2 || *c == 3), "{per_zone:?}");
    assert_eq!(
        per_zone
            .keys()
            .filter(|z| !ZONES.contains(&z.as_str()))
            .count(),
        0,
        "{per_zone:?}"
    );
}

#[test]
fn zonal_spread_counts_pods_already_running() {
    // Two matching pods already run in us-east-1a, on a node that is full. Four new pods can
    // only even things out: two each to us-east-1b and us-east-1c.
    let bound = |name: &str| pod(name, "1", "1Gi", "app: web", "  nodeName: existing-a");
    let yaml = default_pool()
        + &node("existing-a", "us-east-1a", "2", "8Gi", "20")
        + &bound("running-0")
        + &bound("running-1")
        + &pods(
            4,
            "web",
            "1",
            "1Gi",
            "app: web",
            &spread("topology.kubernetes.io/zone", "web"),
        );
    let out = plan(&yaml);
    assert!(out.unschedulable.is_empty(), "{out:?}");
    let per_zone = pods_per_zone(&out, "default/web-");
    assert_eq!(per_zone.get("us-east-1a"), None, "{per_zone:?}");
    assert_eq!(per_zone.get("us-east-1b"), Some(&2), "{per_zone:?}");
    assert_eq!(per_zone.get("us-east-1c"), Some(&2), "{per_zone:?}");
}

#[test]
fn hostname_spread_puts_at_most_one_matching_pod_per_node() {
    let out = plan(
        &(default_pool()
            + &pods(5, "web", "250m", "256Mi", "app: web", &spread("kubernetes.io/hostname", "web"))
            // Pods the constraint does not select may share a node with them.
            + &pods(2, "other", "250m", "256Mi", "app: other", "")),
    );
    assert!(out.unschedulable.is_empty(), "{out:?}");
    let per_launch = pods_per_launch(&out);
    let web_bound = out
        .bindings
        .keys()
        .filter(|p| p.starts_with("default/web-"))
        .count();
    assert_eq!(web_bound, 5);
    for (name, pods) in &per_launch {
        let web = pods
            .iter()
            .filter(|p| p.starts_with("default/web-"))
            .count();
        assert!(web <= 1, "{name} holds {web} spread pods: {pods:?}");
    }
    assert!(out.launches.len() >= 5, "{:?}", out.launches);
}

#[test]
fn required_anti_affinity_on_hostname_gives_each_pod_its_own_node() {
    let anti = r#"  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels: {app: solo}"#;
    let out = plan(&(default_pool() + &pods(4, "solo", "500m", "512Mi", "app: solo", anti)));
    assert!(out.unschedulable.is_empty(), "{out:?}");
    assert_eq!(out.launches.len(), 4, "{:?}", out.launches);
    for l in &out.launches {
        assert_eq!(out.pods_on(&l.name).len(), 1, "{l:?}");
    }
    // Each is the cheapest node for one such pod.
    let cheapest = cheapest_od(|it| has_room(it, 500, 512, 1));
    assert!(
        out.launches.iter().all(|l| l.price.0 == cheapest),
        "{:?}",
        out.launches
    );
}

#[test]
fn required_anti_affinity_on_zone_allows_one_pod_per_zone() {
    let anti = r#"  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - topologyKey: topology.kubernetes.io/zone
          labelSelector:
            matchLabels: {app: zonal}"#;
    let out = plan(&(default_pool() + &pods(4, "zonal", "500m", "512Mi", "app: zonal", anti)));
    // Three subnet zones: three pods, one per zone; the fourth has nowhere to go.
    let per_zone = pods_per_zone(&out, "default/zonal-");
    assert_eq!(per_zone.len(), 3, "{out:?}");
    assert!(per_zone.values().all(|c| *c == 1), "{per_zone:?}");
    assert!(
        per_zone.keys().all(|z| ZONES.contains(&z.as_str())),
        "{per_zone:?}"
    );
    assert_eq!(out.unschedulable.len(), 1, "{out:?}");
}

#[test]
fn pod_affinity_to_a_zone_follows_the_selected_pods() {
    let to_db = r#"  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - topologyKey: topology.kubernetes.io/zone
          labelSelector:
            matchLabels: {app: db}"#;
    let to_self = r#"  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - topologyKey: topology.kubernetes.io/zone
          labelSelector:
            matchLabels: {app: cache}"#;
    // The db pod fills the only node, in us-east-1b.
    let yaml = default_pool()
        + &node("existing-b", "us-east-1b", "1", "4Gi", "10")
        + &pod("db", "1", "1Gi", "app: db", "  nodeName: existing-b")
        + &pods(3, "client", "1", "1Gi", "app: client", to_db)
        + &pods(6, "cache", "2", "4Gi", "app: cache", to_self)
        // Affinity to pods that run nowhere (and that it does not match itself) cannot be met.
        + &pod("orphan", "1", "1Gi", "app: orphan", &to_db.replace("app: db", "app: nothing"));
    let out = plan(&yaml);
    assert_eq!(
        out.unschedulable.keys().collect::<Vec<_>>(),
        vec!["default/orphan"],
        "{out:?}"
    );
    let reason = &out.unschedulable["default/orphan"];
    assert!(reason.contains("affinity"), "{reason}");
    let clients = pods_per_zone(&out, "default/client-");
    assert_eq!(
        clients,
        BTreeMap::from([("us-east-1b".to_string(), 3)]),
        "{out:?}"
    );
    // The self-affine group has no peer yet: it picks one zone and all its pods go there.
    let caches = pods_per_zone(&out, "default/cache-");
    assert_eq!(caches.len(), 1, "{caches:?}");
    assert_eq!(caches.values().sum::<usize>(), 6);
}

#[test]
fn spreads_over_zone_and_capacity_type_hold_together() {
    // Karpenter's documented pattern: spread over zones and over capacity types at once. Both
    // constraints must hold: 6 pods -> 2 per zone and 3 per capacity type.
    let pool = nodepool(
        "default",
        0,
        "        - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}",
        "",
        "",
    ) + NODECLASS;
    let both = format!(
        "{}\n{}",
        spread("topology.kubernetes.io/zone", "web"),
        spread("karpenter.sh/capacity-type", "web").replace("  topologySpreadConstraints:\n", "")
    );
    let out = plan(&(pool + &pods(6, "web", "1", "1Gi", "app: web", &both)));
    assert!(out.unschedulable.is_empty(), "{out:?}");
    let per_zone = pods_per_zone(&out, "default/web-");
    assert_eq!(
        ZONES.map(|z| per_zone.get(z).copied().unwrap_or(0)),
        [2, 2, 2],
        "{per_zone:?}"
    );
    let mut per_capacity_type: BTreeMap<String, usize> = BTreeMap::new();
    for target in out.bindings.values() {
        let l = launch(&out, target);
        assert_eq!(l.capacity_types.len(), 1, "{l:?}");
        *per_capacity_type
            .entry(l.capacity_types[0].clone())
            .or_insert(0) += 1;
    }
    assert_eq!(
        per_capacity_type,
        BTreeMap::from([("on-demand".to_string(), 3), ("spot".to_string(), 3)]),
        "{out:?}"
    );
}

/// Pod (anti-)affinity YAML under `spec:` for one term on `key` selecting `app`, with `kind`
/// `podAffinity` or `podAntiAffinity`, preferred with `weight`.
fn preferred(kind: &str, key: &str, app: &str, weight: i32) -> String {
    format!(
        r#"  affinity:
    {kind}:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: {weight}
          podAffinityTerm:
            topologyKey: {key}
            labelSelector:
              matchLabels: {{app: {app}}}"#
    )
}

#[test]
fn preferred_hostname_anti_affinity_is_held_while_new_nodes_can_meet_it() {
    // Karpenter treats a preference as required until a pod fails to schedule: six pods that
    // prefer not to share a node get six NodeClaims, although one node would hold them all.
    let spec = preferred("podAntiAffinity", "kubernetes.io/hostname", "solo", 100);
    let out = plan(&(default_pool() + &pods(6, "solo", "250m", "512Mi", "app: solo", &spec)));
    assert!(out.unschedulable.is_empty(), "{out:?}");
    let held: Vec<usize> = pods_per_launch(&out).values().map(Vec::len).collect();
    assert_eq!(held, vec![1; 6], "{:?}", out.launches);
}

#[test]
fn preferred_zone_anti_affinity_is_relaxed_for_the_pods_that_cannot_meet_it() {
    // Five pods that prefer a zone of their own: three zones satisfy three of them; the other
    // two fail, their preference is dropped, and they are scheduled anyway.
    let spec = preferred(
        "podAntiAffinity",
        "topology.kubernetes.io/zone",
        "apart",
        100,
    );
    let out = plan(&(default_pool() + &pods(5, "apart", "250m", "512Mi", "app: apart", &spec)));
    assert!(out.unschedulable.is_empty(), "{out:?}");
    let per_zone = pods_per_zone(&out, "default/apart-");
    assert_eq!(per_zone.values().sum::<usize>(), 5, "{per_zone:?}");
    assert_eq!(per_zone.len(), 3, "{per_zone:?}");
}

#[test]
fn unsatisfiable_preferred_affinity_is_dropped_before_a_schedule_anyway_spread() {
    // Karpenter's order: preferred pod affinity goes first, ScheduleAnyway spreads last. The
    // affinity selects no pod, so it is dropped; the zone spread is still held, and three pods
    // land in three zones (dropping both would pack them into one node).
    let spec = format!(
        "{}\n{}",
        spread("topology.kubernetes.io/zone", "even").replace("DoNotSchedule", "ScheduleAnyway"),
        preferred("podAffinity", "topology.kubernetes.io/zone", "absent", 50)
    );
    let out = plan(&(default_pool() + &pods(3, "even", "250m", "512Mi", "app: even", &spec)));
    assert!(out.unschedulable.is_empty(), "{out:?}");
    let per_zone = pods_per_zone(&out, "default/even-");
    assert_eq!(
        per_zone.values().copied().collect::<Vec<_>>(),
        vec![1, 1, 1],
        "{per_zone:?}"
    );
}

#[test]
fn a_schedule_anyway_spread_is_dropped_when_it_cannot_be_met() {
    // No new node can be launched (the NodePool's CPU limit is used up) and the only node with
    // room is in us-east-1a. Held as a constraint, the zone spread would send copies to 1b and
    // 1c, where they cannot go; those copies are retried without it and join the others.
    let pool = nodepool(
        "default",
        0,
        "        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}",
        "",
        "  limits:\n    cpu: \"4\"",
    ) + NODECLASS;
    let spec =
        spread("topology.kubernetes.io/zone", "lop").replace("DoNotSchedule", "ScheduleAnyway");
    let out = plan(
        &(pool
            + &node("node-a", "us-east-1a", "4", "16Gi", "110")
            + &pods(4, "lop", "250m", "512Mi", "app: lop", &spec)),
    );
    assert!(out.unschedulable.is_empty(), "{out:?}");
    assert!(out.launches.is_empty(), "{:?}", out.launches);
    for i in 0..4 {
        assert_eq!(
            out.bindings
                .get(&format!("default/lop-{i}"))
                .map(String::as_str),
            Some("node-a"),
            "{out:?}"
        );
    }
}

/// A running `app: web` pod of 1 CPU bound to `node`.
fn running(name: &str, node: &str) -> String {
    pod(name, "1", "1Gi", "app: web", &format!("  nodeName: {node}"))
}

/// `node_yaml` with extra lines under a new `spec:` (cordon, taints).
fn with_spec(node_yaml: &str, spec: &str) -> String {
    node_yaml.replacen("status:", &format!("spec:\n{spec}\nstatus:"), 1)
}

#[test]
fn a_zone_the_nodepool_no_longer_offers_still_counts_toward_the_skew() {
    // Karpenter topology.go (countDomains) and topologygroup.go (domainMinCount): the pods on
    // existing nodes count in their domain even where the NodePool cannot add capacity, here a
    // cordoned node in us-east-1c that a NodePool limited to 1a and 1b will never replace.
    // Counts are 1 / 1 / 1, so with maxSkew 1 only one more pod may go to each of 1a and 1b.
    let pool = pool_in_1a_and_1b();
    let yaml = pool
        + &node("full-a", "us-east-1a", "1", "8Gi", "20")
        + &node("full-b", "us-east-1b", "1", "8Gi", "20")
        + &with_spec(
            &node("drained-c", "us-east-1c", "4", "16Gi", "20"),
            "  unschedulable: true",
        )
        + &running("running-a", "full-a")
        + &running("running-b", "full-b")
        + &running("running-c", "drained-c")
        + &pods(
            4,
            "web",
            "1",
            "1Gi",
            "app: web",
            &spread("topology.kubernetes.io/zone", "web"),
        );
    let out = plan(&yaml);
    let per_zone = pods_per_zone(&out, "default/web-");
    assert_eq!(
        per_zone,
        BTreeMap::from([("us-east-1a".to_string(), 1), ("us-east-1b".to_string(), 1)]),
        "{out:?}"
    );
    assert_eq!(out.unschedulable.len(), 2, "{out:?}");
}

#[test]
fn a_capacity_type_the_nodepool_no_longer_offers_still_counts_toward_the_skew() {
    // The same rule for capacity types (Karpenter topologygroup.go): the NodePool is on-demand
    // only now, and one matching pod still runs on a spot node whose taint the new pods do not
    // tolerate (taints do not hide a domain: nodeTaintsPolicy defaults to Ignore). With one pod
    // in each capacity type, one more may go on-demand, not three.
    let spot = with_spec(
        &node("spot-a", "us-east-1a", "4", "16Gi", "20")
            .replace("capacity-type: on-demand", "capacity-type: spot"),
        "  taints: [{key: example.com/spot-only, value: \"true\", effect: NoSchedule}]",
    );
    let yaml = default_pool()
        + &node("full-a", "us-east-1a", "1", "8Gi", "20")
        + &spot
        + &running("running-od", "full-a")
        + &running("running-spot", "spot-a")
        + &pods(
            3,
            "web",
            "1",
            "1Gi",
            "app: web",
            &spread("karpenter.sh/capacity-type", "web"),
        );
    let out = plan(&yaml);
    let placed: Vec<&String> = out
        .bindings
        .keys()
        .filter(|p| p.starts_with("default/web-"))
        .collect();
    assert_eq!(placed.len(), 1, "{out:?}");
    assert_eq!(out.unschedulable.len(), 2, "{out:?}");
    for target in out.bindings.values() {
        let l = launch(&out, target);
        assert_eq!(l.capacity_types, vec!["on-demand".to_string()], "{l:?}");
    }
}

#[test]
fn an_empty_cordoned_node_outside_the_group_still_adds_its_zone() {
    // Karpenter topology.go (countDomains: "capture new domain values from existing nodes that
    // may not have any pods selected by the topology group") registers the zone of every node
    // the pod's node affinity accepts, with a count of zero. Here the only node in us-east-1c is
    // empty, cordoned and from a NodePool that no longer exists, so it shares no packing group
    // with the pods; its zone still holds the global minimum at zero, and with maxSkew 1 only
    // one pod may go to each of 1a and 1b.
    let pool = pool_in_1a_and_1b();
    let retired = with_spec(
        &node("retired-c", "us-east-1c", "4", "16Gi", "20").replace(
            "karpenter.sh/nodepool: default",
            "karpenter.sh/nodepool: retired",
        ),
        "  unschedulable: true",
    );
    let yaml = pool
        + &retired
        + &pods(
            4,
            "web",
            "1",
            "1Gi",
            "app: web",
            &spread("topology.kubernetes.io/zone", "web"),
        );
    let out = plan(&yaml);
    let per_zone = pods_per_zone(&out, "default/web-");
    assert_eq!(
        per_zone,
        BTreeMap::from([("us-east-1a".to_string(), 1), ("us-east-1b".to_string(), 1)]),
        "{out:?}"
    );
    assert_eq!(out.unschedulable.len(), 2, "{out:?}");
}

/// An on-demand NodePool "default" limited to us-east-1a and 1b, with its EC2NodeClass.
fn pool_in_1a_and_1b() -> String {
    nodepool(
        "default",
        0,
        "        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b]}",
        "",
        "",
    ) + NODECLASS
}
