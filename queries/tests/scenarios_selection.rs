//! Scenario tests of instance-type selection: the cheapest type, label selectors (node selector
//! and node affinity, including NotIn / Gt / Lt and preferences), taints, NodePool weights, and
//! NodeOverlay prices. Expectations are computed from the catalogue, not from the engine.

mod common;
use common::*;
use dovetail_dataflow::model::labels::{
    ARCH, CAPACITY_TYPE, INSTANCE_CPU, INSTANCE_FAMILY, INSTANCE_MEMORY, OS, ZONE,
};

/// A NodePool "default" allowing both capacity types.
fn spot_and_od_pool() -> String {
    nodepool(
        "default",
        0,
        "        - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}",
        "",
        "",
    ) + NODECLASS
}

#[test]
fn cheapest_type_with_room_is_launched_and_types_are_listed_cheapest_first() {
    let out = plan(&(default_pool() + &pod("p", "3", "6Gi", "", "")));
    assert!(out.unschedulable.is_empty(), "{out:?}");
    assert_eq!(out.launches.len(), 1, "{out:?}");
    let l = &out.launches[0];
    let expected = cheapest_od(|it| has_room(it, 3000, 6 * 1024, 1));
    assert_eq!(l.price.0, expected, "{l:?}");
    let types = launch_types(l);
    assert!(
        types.iter().all(|it| has_room(it, 3000, 6 * 1024, 1)),
        "{:?}",
        l.instance_types
    );
    let prices: Vec<i64> = types
        .iter()
        .map(|it| od_price(it).expect("on-demand offering"))
        .collect();
    assert_eq!(prices[0], expected);
    assert!(
        prices.windows(2).all(|w| w[0] <= w[1]),
        "not cheapest first: {prices:?}"
    );
    assert_eq!(l.capacity_types, vec!["on-demand".to_string()]);
    assert_eq!(out.bindings.get("default/p"), Some(&l.name));
}

#[test]
fn arch_and_os_node_selectors() {
    let out = plan(
        &(default_pool()
            + &pod(
                "arm",
                "1",
                "2Gi",
                "",
                "  nodeSelector: {kubernetes.io/arch: arm64}",
            )
            + &pod(
                "amd",
                "1",
                "3Gi",
                "",
                "  nodeSelector: {kubernetes.io/arch: amd64, kubernetes.io/os: linux}",
            )),
    );
    assert!(out.unschedulable.is_empty(), "{out:?}");
    let arm = out.launch_of("default/arm").expect("arm pod launched");
    assert!(
        launch_types(arm)
            .iter()
            .all(|it| label(it, ARCH) == Some("arm64")),
        "{:?}",
        arm.instance_types
    );
    assert_eq!(
        arm.price.0,
        cheapest_od(|it| label(it, ARCH) == Some("arm64") && has_room(it, 1000, 2048, 1))
    );
    let amd = out.launch_of("default/amd").expect("amd pod launched");
    assert!(
        launch_types(amd)
            .iter()
            .all(|it| label(it, ARCH) == Some("amd64") && label(it, OS) == Some("linux")),
        "{:?}",
        amd.instance_types
    );
    assert_eq!(
        amd.price.0,
        cheapest_od(|it| label(it, ARCH) == Some("amd64") && has_room(it, 1000, 3072, 1))
    );
}

#[test]
fn instance_family_by_required_node_affinity() {
    let affinity = r#"  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions:
              - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c6i]}"#;
    let out = plan(&(default_pool() + &pod("p", "2", "2Gi", "", affinity)));
    let l = out
        .launch_of("default/p")
        .unwrap_or_else(|| panic!("{out:?}"));
    assert!(
        launch_types(l)
            .iter()
            .all(|it| label(it, INSTANCE_FAMILY) == Some("c6i")),
        "{:?}",
        l.instance_types
    );
    assert_eq!(
        l.price.0,
        cheapest_od(|it| label(it, INSTANCE_FAMILY) == Some("c6i") && has_room(it, 2000, 2048, 1))
    );
}

#[test]
fn capacity_type_spot_and_on_demand() {
    // Each pod is pinned to its own zone, so that first-fit does not pack them together.
    let out = plan(
        &(spot_and_od_pool()
            + &pod("any", "1", "1Gi", "", "  nodeSelector: {topology.kubernetes.io/zone: us-east-1a}")
            + &pod(
                "spot",
                "2",
                "2Gi",
                "",
                "  nodeSelector: {karpenter.sh/capacity-type: spot, topology.kubernetes.io/zone: us-east-1b}",
            )
            + &pod(
                "od",
                "4",
                "4Gi",
                "",
                "  nodeSelector: {karpenter.sh/capacity-type: on-demand, topology.kubernetes.io/zone: us-east-1c}",
            )),
    );
    assert!(out.unschedulable.is_empty(), "{out:?}");
    let spot = out.launch_of("default/spot").expect("spot pod launched");
    assert_eq!(spot.capacity_types, vec!["spot".to_string()]);
    let cheapest_spot = cat()
        .iter()
        .filter(|it| has_room(it, 2000, 2048, 1))
        .filter_map(|it| price_in(it, "spot", &["us-east-1b"]))
        .min()
        .expect("a spot type");
    assert_eq!(spot.price.0, cheapest_spot);
    let od = out.launch_of("default/od").expect("on-demand pod launched");
    assert_eq!(od.capacity_types, vec!["on-demand".to_string()]);
    let cheapest_od_c = cat()
        .iter()
        .filter(|it| has_room(it, 4000, 4096, 1))
        .filter_map(|it| price_in(it, "on-demand", &["us-east-1c"]))
        .min()
        .expect("an on-demand type");
    assert_eq!(od.price.0, cheapest_od_c);
    // With both allowed, the cheaper capacity type (spot, for every type that has it) is chosen.
    let any = out.launch_of("default/any").expect("pod launched");
    let cheapest_any = cat()
        .iter()
        .filter(|it| has_room(it, 1000, 1024, 1))
        .filter_map(|it| {
            let zone = ["us-east-1a"];
            [
                price_in(it, "spot", &zone),
                price_in(it, "on-demand", &zone),
            ]
            .into_iter()
            .flatten()
            .min()
        })
        .min()
        .expect("a type");
    assert_eq!(any.price.0, cheapest_any);
    assert!(any
        .requirements
        .get(CAPACITY_TYPE)
        .is_some_and(|r| r.has("spot")));
    assert!(any.capacity_types.contains(&"spot".to_string()), "{any:?}");
}

#[test]
fn a_nodepool_without_a_capacity_type_requirement_may_launch_spot() {
    // Karpenter v1 sets no default: its AWS provider launches spot when the requirements allow
    // it and a spot offering exists (the on-demand default was a pre-v1 webhook).
    let pool = nodepool(
        "open",
        0,
        "        - {key: kubernetes.io/arch, operator: In, values: [amd64]}",
        "",
        "",
    ) + NODECLASS;
    let out = plan(&(pool + &pod("p", "1", "1Gi", "", "")));
    let l = out.launch_of("default/p").expect("launched");
    assert!(l.capacity_types.contains(&"spot".to_string()), "{l:?}");
    let cheapest_spot = cat()
        .iter()
        .filter(|it| {
            label(it, "kubernetes.io/arch") == Some("amd64") && has_room(it, 1000, 1024, 1)
        })
        .filter_map(|it| price_in(it, "spot", &ZONES))
        .min()
        .expect("a spot type");
    assert_eq!(l.price.0, cheapest_spot, "{l:?}");
}

#[test]
fn zone_by_node_selector_and_by_node_affinity() {
    let affinity = r#"  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions:
              - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1c, us-east-1d]}"#;
    let out = plan(
        &(default_pool()
            + &pod(
                "b",
                "1",
                "1Gi",
                "",
                "  nodeSelector: {topology.kubernetes.io/zone: us-east-1b}",
            )
            + &pod("c", "2", "1Gi", "", affinity)),
    );
    assert!(out.unschedulable.is_empty(), "{out:?}");
    let b = out.launch_of("default/b").expect("launched");
    assert_eq!(b.zones, vec!["us-east-1b".to_string()]);
    // us-east-1d has no subnet in the EC2NodeClass, so only us-east-1c remains.
    let c = out.launch_of("default/c").expect("launched");
    assert_eq!(c.zones, vec!["us-east-1c".to_string()]);
    assert_eq!(c.price.0, {
        cat()
            .iter()
            .filter(|it| has_room(it, 2000, 1024, 1))
            .filter_map(|it| price_in(it, "on-demand", &["us-east-1c"]))
            .min()
            .expect("a type in us-east-1c")
    });
    assert!(b
        .requirements
        .get(ZONE)
        .is_some_and(|r| r.has("us-east-1b") && !r.has("us-east-1a")));
}

#[test]
fn not_in_excludes_families() {
    let burstable = ["t1", "t2", "t3", "t3a", "t4g"];
    let affinity = r#"  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions:
              - {key: karpenter.k8s.aws/instance-family, operator: NotIn, values: [t1, t2, t3, t3a, t4g]}"#;
    let out = plan(&(default_pool() + &pod("p", "500m", "512Mi", "", affinity)));
    let l = out
        .launch_of("default/p")
        .unwrap_or_else(|| panic!("{out:?}"));
    let types = launch_types(l);
    assert!(
        types
            .iter()
            .all(|it| !burstable.contains(&label(it, INSTANCE_FAMILY).unwrap_or(""))),
        "{:?}",
        l.instance_types
    );
    let expected = cheapest_od(|it| {
        !burstable.contains(&label(it, INSTANCE_FAMILY).unwrap_or("")) && has_room(it, 500, 512, 1)
    });
    assert_eq!(l.price.0, expected);
    // The unconstrained cheapest type is burstable: the NotIn really changed the choice.
    assert!(cheapest_od(|it| has_room(it, 500, 512, 1)) < expected);
}

#[test]
fn gt_and_lt_bound_numeric_labels() {
    let gt = r#"  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions:
              - {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ["15"]}"#;
    let lt = r#"  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions:
              - {key: karpenter.k8s.aws/instance-memory, operator: Lt, values: ["4096"]}
              - {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ["1"]}"#;
    let out = plan(
        &(default_pool()
            + &pod("big", "1", "1Gi", "", gt)
            + &pod("small", "500m", "256Mi", "", lt)),
    );
    assert!(out.unschedulable.is_empty(), "{out:?}");
    let num = |it: &dovetail_dataflow::model::InstanceType, key| {
        label(it, key)
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or_else(|| panic!("{} has no {key}", it.name))
    };
    let big = out.launch_of("default/big").expect("launched");
    assert!(
        launch_types(big)
            .iter()
            .all(|it| num(it, INSTANCE_CPU) > 15),
        "{:?}",
        big.instance_types
    );
    assert_eq!(
        big.price.0,
        cheapest_od(|it| num(it, INSTANCE_CPU) > 15 && has_room(it, 1000, 1024, 1))
    );
    let small = out.launch_of("default/small").expect("launched");
    assert!(
        launch_types(small)
            .iter()
            .all(|it| num(it, INSTANCE_MEMORY) < 4096 && num(it, INSTANCE_CPU) > 1),
        "{:?}",
        small.instance_types
    );
    assert_eq!(
        small.price.0,
        cheapest_od(|it| num(it, INSTANCE_MEMORY) < 4096
            && num(it, INSTANCE_CPU) > 1
            && has_room(it, 500, 256, 1))
    );
}

#[test]
fn preferred_node_affinity_is_honoured_when_possible_and_relaxed_when_not() {
    let prefer = |family: &str| {
        format!(
            r#"  affinity:
    nodeAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 10
          preference:
            matchExpressions:
              - {{key: karpenter.k8s.aws/instance-family, operator: In, values: [{family}]}}"#
        )
    };
    // Different zones, so that first-fit does not pack the two pods together.
    let out = plan(
        &(default_pool()
            + &pod(
                "nowhere",
                "1",
                "1Gi",
                "",
                &(prefer("nosuchfamily9")
                    + "\n  nodeSelector: {topology.kubernetes.io/zone: us-east-1a}"),
            )
            + &pod(
                "m6i",
                "1",
                "2Gi",
                "",
                &(prefer("m6i") + "\n  nodeSelector: {topology.kubernetes.io/zone: us-east-1b}"),
            )),
    );
    assert!(out.unschedulable.is_empty(), "{out:?}");
    let relaxed = out
        .launch_of("default/nowhere")
        .expect("the unsatisfiable preference is relaxed");
    let in_a =
        |it: &dovetail_dataflow::model::InstanceType| price_in(it, "on-demand", &["us-east-1a"]);
    let cheapest_a = cat()
        .iter()
        .filter(|it| has_room(it, 1000, 1024, 1))
        .filter_map(in_a)
        .min();
    assert_eq!(Some(relaxed.price.0), cheapest_a);
    let honoured = out.launch_of("default/m6i").expect("launched");
    assert!(
        launch_types(honoured)
            .iter()
            .all(|it| label(it, INSTANCE_FAMILY) == Some("m6i")),
        "{:?}",
        honoured.instance_types
    );
    let cheapest_m6i = cat()
        .iter()
        .filter(|it| label(it, INSTANCE_FAMILY) == Some("m6i") && has_room(it, 1000, 2048, 1))
        .filter_map(|it| price_in(it, "on-demand", &["us-east-1b"]))
        .min();
    assert_eq!(Some(honoured.price.0), cheapest_m6i);
}

#[test]
fn second_required_node_affinity_term_is_used_when_the_first_cannot_be_met() {
    let affinity = r#"  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions:
              - {key: karpenter.k8s.aws/instance-family, operator: In, values: [nosuchfamily9]}
          - matchExpressions:
              - {key: karpenter.k8s.aws/instance-family, operator: In, values: [r6i]}"#;
    let out = plan(&(default_pool() + &pod("p", "1", "1Gi", "", affinity)));
    let l = out
        .launch_of("default/p")
        .unwrap_or_else(|| panic!("{out:?}"));
    assert!(
        launch_types(l)
            .iter()
            .all(|it| label(it, INSTANCE_FAMILY) == Some("r6i")),
        "{:?}",
        l.instance_types
    );
}

#[test]
fn taints_need_tolerations() {
    // A heavy tainted pool of m6i and a light untainted pool of c6i.
    let yaml = nodepool(
        "tainted",
        100,
        "        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m6i]}",
        "      taints:\n        - {key: dedicated, value: team-a, effect: NoSchedule}",
        "",
    ) + &nodepool(
        "plain",
        1,
        "        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c6i]}",
        "",
        "",
    ) + NODECLASS;
    let toleration = "  tolerations:\n    - {key: dedicated, operator: Equal, value: team-a, effect: NoSchedule}";
    let wrong = "  tolerations:\n    - {key: dedicated, operator: Equal, value: team-b, effect: NoSchedule}";
    let out = plan(
        &(yaml.clone()
            // Largest first: it opens the first NodeClaim, from the heavier pool it tolerates
            // (a smaller tolerant pod would join an open NodeClaim of the other pool first).
            + &pod("tolerant", "4", "1Gi", "", toleration)
            + &pod("intolerant", "2", "1Gi", "", "")
            + &pod("wrong-value", "3", "1Gi", "", wrong)),
    );
    assert!(out.unschedulable.is_empty(), "{out:?}");
    assert_eq!(
        out.launch_of("default/tolerant")
            .expect("launched")
            .nodepool,
        "tainted"
    );
    assert_eq!(
        out.launch_of("default/intolerant")
            .expect("launched")
            .nodepool,
        "plain"
    );
    assert_eq!(
        out.launch_of("default/wrong-value")
            .expect("launched")
            .nodepool,
        "plain"
    );

    // With only the tainted pool, a pod without the toleration cannot schedule.
    let only_tainted = nodepool(
        "tainted",
        0,
        "        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}",
        "      taints:\n        - {key: dedicated, value: team-a, effect: NoSchedule}",
        "",
    ) + NODECLASS;
    let out = plan(&(only_tainted + &pod("intolerant", "1", "1Gi", "", "")));
    assert!(out.launches.is_empty(), "{out:?}");
    let reason = out
        .unschedulable
        .get("default/intolerant")
        .expect("unschedulable");
    assert!(
        reason.contains("tainted") && reason.contains("dedicated"),
        "{reason}"
    );
}

#[test]
fn heavier_nodepool_is_used_first() {
    let yaml = nodepool(
        "heavy",
        50,
        "        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m6i]}",
        "",
        "",
    ) + &nodepool(
        "light",
        10,
        "        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c6i, t3]}",
        "",
        "",
    ) + NODECLASS;
    let out = plan(&(yaml + &pods(3, "p", "1", "1Gi", "", "")));
    assert!(out.unschedulable.is_empty(), "{out:?}");
    // The light pool is cheaper, but weight wins.
    assert!(
        cheapest_od(|it| label(it, INSTANCE_FAMILY) == Some("t3") && has_room(it, 1000, 1024, 1))
            < cheapest_od(
                |it| label(it, INSTANCE_FAMILY) == Some("m6i") && has_room(it, 1000, 1024, 1)
            )
    );
    assert!(!out.launches.is_empty());
    assert!(
        out.launches.iter().all(|l| l.nodepool == "heavy"),
        "{:?}",
        out.launches
    );
}

#[test]
fn full_heavier_nodepool_falls_back_to_the_next_one() {
    // The heavy pool may add 4 vCPU. A 3-CPU pod needs at least an m6i.xlarge (m6i.large has
    // 2 vCPU), which uses the whole limit, so only one pod goes to the heavy pool.
    let yaml = nodepool(
        "heavy",
        50,
        "        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m6i]}",
        "",
        "  limits:\n    cpu: \"4\"",
    ) + &nodepool(
        "light",
        10,
        "        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c6i]}",
        "",
        "",
    ) + NODECLASS;
    let m6i_within_limit: Vec<String> = cat()
        .iter()
        .filter(|it| label(it, INSTANCE_FAMILY) == Some("m6i"))
        .filter(|it| it.capacity.cpu <= 4000 && has_room(it, 3000, 1024, 1))
        .map(|it| it.name.clone())
        .collect();
    assert_eq!(m6i_within_limit, vec!["m6i.xlarge".to_string()]);
    let out = plan(&(yaml + &pods(3, "p", "3", "1Gi", "", "")));
    assert!(out.unschedulable.is_empty(), "{out:?}");
    let heavy: Vec<&_> = out
        .launches
        .iter()
        .filter(|l| l.nodepool == "heavy")
        .collect();
    assert_eq!(heavy.len(), 1, "{:?}", out.launches);
    assert_eq!(heavy[0].instance_types, m6i_within_limit);
    assert_eq!(out.pods_on(&heavy[0].name).len(), 1);
    let light_pods: usize = out
        .launches
        .iter()
        .filter(|l| l.nodepool == "light")
        .map(|l| out.pods_on(&l.name).len())
        .sum();
    assert_eq!(light_pods, 2, "{out:?}");
}

#[test]
fn node_overlay_price_steers_the_choice() {
    let pod_yaml = pod("p", "1", "2Gi", "", "");
    let before = plan(&(default_pool() + &pod_yaml));
    let cheapest = cheapest_od(|it| has_room(it, 1000, 2048, 1));
    assert_eq!(before.launches.len(), 1);
    assert_eq!(before.launches[0].price.0, cheapest);
    // Make m6i.large (not the cheapest) cost almost nothing.
    let by_name = catalogue_by_name();
    assert!(od_price(&by_name["m6i.large"]).expect("priced") > cheapest);
    let overlay = r#"
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: cheap-m6i
spec:
  requirements:
    - {key: node.kubernetes.io/instance-type, operator: In, values: [m6i.large]}
  price: "0.0001"
---
"#;
    let after = plan(&(default_pool() + overlay + &pod_yaml));
    assert_eq!(after.launches.len(), 1, "{after:?}");
    let l = &after.launches[0];
    assert_eq!(
        l.instance_types.first().map(String::as_str),
        Some("m6i.large"),
        "{l:?}"
    );
    assert_eq!(l.price.0, 100);
}
