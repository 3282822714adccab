//! Scenario tests of capacity: DaemonSet overhead, extended resources, minValues, max pods (from
//! the catalogue and from the EC2NodeClass's kubelet), existing and in-flight capacity, zonal
//! volumes, init containers and sidecars, NodePool limits, unschedulable reasons and
//! deterministic launch names.

mod common;
use common::*;
use dovetail_dataflow::model::labels::INSTANCE_FAMILY;
use std::collections::BTreeSet;

fn on_demand_pool(name: &str, extra_requirements: &str, limits: &str) -> String {
    let mut reqs = "        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}"
        .to_string();
    if !extra_requirements.is_empty() {
        reqs.push('\n');
        reqs.push_str(extra_requirements);
    }
    nodepool(name, 0, &reqs, "", limits)
}

#[test]
fn daemonset_overhead_makes_a_type_too_small() {
    let by_name = catalogue_by_name();
    let large = &by_name["m5.large"];
    let xlarge = &by_name["m5.xlarge"];
    // A pod asking for exactly m5.large's allocatable CPU.
    let cpu = large.allocatable().cpu;
    let pool = on_demand_pool(
        "default",
        "        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}",
        "",
    ) + NODECLASS;
    let p = pod("p", &format!("{cpu}m"), "1Gi", "", "");
    let without = plan(&(pool.clone() + &p));
    assert_eq!(without.launches.len(), 1, "{without:?}");
    assert_eq!(
        without.launches[0]
            .instance_types
            .first()
            .map(String::as_str),
        Some("m5.large")
    );
    assert_eq!(
        without.launches[0].price.0,
        od_price(large).expect("priced")
    );

    let with = plan(&(pool.clone() + &daemonset("agent", "100m", "128Mi") + &p));
    assert!(with.unschedulable.is_empty(), "{with:?}");
    assert_eq!(with.launches.len(), 1, "{with:?}");
    let l = &with.launches[0];
    assert_eq!(l.instance_types, vec!["m5.xlarge".to_string()]);
    assert_eq!(l.price.0, od_price(xlarge).expect("priced"));
    for it in launch_types(l) {
        assert!(
            has_room(&it, cpu + 100, 1024 + 128, 2),
            "{} has no room for pod + daemonset",
            it.name
        );
    }

    // A DaemonSet that does not tolerate the NodePool's taint never runs on its nodes, so it
    // costs nothing there.
    let tainted = nodepool(
        "default",
        0,
        "        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}",
        "      taints:\n        - {key: dedicated, value: x, effect: NoSchedule}",
        "",
    ) + NODECLASS;
    let tolerant = pod(
        "p",
        &format!("{cpu}m"),
        "1Gi",
        "",
        "  tolerations:\n    - {key: dedicated, operator: Exists}",
    );
    let out = plan(&(tainted + &daemonset("agent", "100m", "128Mi") + &tolerant));
    assert_eq!(out.launches.len(), 1, "{out:?}");
    assert_eq!(
        out.launches[0].instance_types.first().map(String::as_str),
        Some("m5.large")
    );
}

fn gpu_pod(name: &str) -> String {
    pod_with(
        name,
        "",
        "",
        r#"  containers:
    - name: app
      image: app
      resources:
        requests: {cpu: "1", memory: 2Gi}
        limits: {nvidia.com/gpu: "1"}"#,
    )
}

#[test]
fn gpu_pod_needs_a_gpu_type() {
    let gpus = |it: &dovetail_dataflow::model::InstanceType| it.allocatable().get("nvidia.com/gpu");
    let out = plan(&(default_pool() + &gpu_pod("gpu")));
    assert!(out.unschedulable.is_empty(), "{out:?}");
    let l = out.launch_of("default/gpu").expect("launched");
    assert!(
        launch_types(l).iter().all(|it| gpus(it) >= 1000),
        "{:?}",
        l.instance_types
    );
    assert_eq!(
        l.price.0,
        cheapest_od(|it| gpus(it) >= 1000 && has_room(it, 1000, 2048, 1))
    );

    // Without a NodePool offering GPU types the pod cannot schedule, and the reason says why.
    let cpu_only = on_demand_pool(
        "general",
        "        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}",
        "",
    ) + NODECLASS;
    let out = plan(&(cpu_only + &gpu_pod("gpu")));
    assert!(out.launches.is_empty(), "{out:?}");
    let reason = out.unschedulable.get("default/gpu").expect("unschedulable");
    assert!(
        reason.contains("general") && reason.contains("nvidia.com/gpu"),
        "{reason}"
    );
}

#[test]
fn min_values_keeps_enough_families_in_every_launch() {
    // Sizes up to 4 vCPU of three families. A 3Gi pod fits 9 to an r6i.xlarge but 1 to a
    // c6i.large: the cheapest per pod is a NodeClaim of r6i types only, which minValues 3
    // forbids.
    let families = ["c6i", "m6i", "r6i"];
    let pool = |min_values: &str| {
        on_demand_pool(
            "default",
            &format!(
                "        - {{key: karpenter.k8s.aws/instance-family, operator: In, values: [c6i, m6i, r6i]{min_values}}}\n        - {{key: karpenter.k8s.aws/instance-cpu, operator: Lt, values: [\"5\"]}}"
            ),
            "",
        ) + NODECLASS
    };
    let family_count = |l: &dovetail_dataflow::decisions::Launch| {
        launch_types(l)
            .iter()
            .filter_map(|it| label(it, INSTANCE_FAMILY).map(str::to_string))
            .collect::<BTreeSet<String>>()
    };
    let workload = pods(6, "p", "250m", "3Gi", "", "");
    let out = plan(&(pool(", minValues: 3") + &workload));
    assert!(out.unschedulable.is_empty(), "{out:?}");
    assert!(!out.launches.is_empty());
    for l in &out.launches {
        let fams = family_count(l);
        assert!(fams.len() >= 3, "{} lists families {fams:?}", l.name);
        assert!(
            fams.iter().all(|f| families.contains(&f.as_str())),
            "{fams:?}"
        );
        for it in launch_types(l) {
            let n = out.pods_on(&l.name).len() as i64;
            assert!(
                has_room(&it, 250 * n, 3072 * n, n),
                "{} cannot hold {n} pods",
                it.name
            );
        }
    }
    // Without minValues the cheapest packing does use fewer families: the constraint mattered.
    let out = plan(&(pool("") + &workload));
    assert!(
        out.launches.iter().any(|l| family_count(l).len() < 3),
        "{:?}",
        out.launches
    );
}

#[test]
fn no_launch_holds_more_pods_than_its_types_allow() {
    // More pods than the cheap types' pod slots (at most a few dozen), so several NodeClaims.
    let out = plan(&(default_pool() + &pods(120, "tiny", "10m", "16Mi", "", "")));
    assert!(out.unschedulable.is_empty(), "{out:?}");
    assert_eq!(out.bindings.len(), 120);
    for (name, pods) in pods_per_launch(&out) {
        let l = launch(&out, &name);
        let types = launch_types(l);
        let cheapest = types.first().expect("a type");
        assert!(
            pods.len() as i64 * 1000 <= cheapest.allocatable().pods,
            "{name} holds {} pods but its cheapest type {} allows {}",
            pods.len(),
            cheapest.name,
            cheapest.allocatable().pods / 1000
        );
        for it in &types {
            assert!(
                has_room(
                    it,
                    10 * pods.len() as i64,
                    16 * pods.len() as i64,
                    pods.len() as i64
                ),
                "{}",
                it.name
            );
        }
    }
}

#[test]
fn kubelet_max_pods_lowers_pod_capacity() {
    let nodeclass = NODECLASS.replace(
        "spec:\n  amiSelectorTerms:",
        "spec:\n  kubelet:\n    maxPods: 3\n  amiSelectorTerms:",
    );
    assert_ne!(nodeclass, NODECLASS);
    let pool = on_demand_pool(
        "default",
        "        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m6i]}",
        "",
    ) + &nodeclass;
    // Without the kubelet setting one m6i.large (29 pods) would hold them all.
    assert!(has_room(&catalogue_by_name()["m6i.large"], 100, 640, 10));
    let out = plan(&(pool + &pods(10, "tiny", "10m", "64Mi", "", "")));
    assert!(out.unschedulable.is_empty(), "{out:?}");
    assert_eq!(out.bindings.len(), 10);
    assert!(out.launches.len() >= 4, "{:?}", out.launches);
    for (name, pods) in pods_per_launch(&out) {
        assert!(pods.len() <= 3, "{name} holds {pods:?}");
    }
}

#[test]
fn existing_node_and_in_flight_nodeclaim_are_used_before_launching() {
    let yaml = default_pool()
        + r#"
apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels:
    topology.kubernetes.io/zone: us-east-1a
    kubernetes.io/hostname: node-a
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    node.kubernetes.io/instance-type: m5.large
    karpenter.sh/capacity-type: on-demand
    karpenter.sh/nodepool: default
status:
  allocatable: {cpu: "2", memory: 8Gi, pods: "29"}
---
"# + &in_flight_nodeclaim("default-inflight", "us-east-1b")
        + &pods(5, "p", "1", "1Gi", "", "");
    let out = plan(&yaml);
    assert!(out.launches.is_empty(), "{:?}", out.launches);
    assert!(out.unschedulable.is_empty(), "{out:?}");
    assert_eq!(out.pods_on("node-a").len(), 2, "{out:?}");
    assert_eq!(out.pods_on("default-inflight").len(), 3, "{out:?}");
    // One more pod than fits: exactly one launch, for exactly that pod.
    let out = plan(&(yaml + &pod("extra", "1", "1Gi", "", "")));
    assert_eq!(out.launches.len(), 1, "{:?}", out.launches);
    assert_eq!(out.pods_on(&out.launches[0].name).len(), 1);
}

#[test]
fn unschedulable_reasons_name_the_constraint_and_the_nodepool() {
    let out = plan(
        &(default_pool()
            + &pod(
                "windows",
                "1",
                "1Gi",
                "",
                "  nodeSelector: {kubernetes.io/os: windows}",
            )
            + &pod(
                "team",
                "1",
                "1Gi",
                "",
                "  nodeSelector: {example.com/team: a}",
            )
            + &pod("huge", "1000", "1Gi", "", "")),
    );
    assert!(out.launches.is_empty(), "{:?}", out.launches);
    let reason = |p: &str| {
        out.unschedulable
            .get(p)
            .cloned()
            .unwrap_or_else(|| panic!("{p} not unschedulable: {out:?}"))
    };
    let r = reason("default/windows");
    assert!(
        r.contains("NodePool default") && r.contains("kubernetes.io/os"),
        "{r}"
    );
    let r = reason("default/team");
    assert!(
        r.contains("NodePool default") && r.contains("example.com/team"),
        "{r}"
    );
    let r = reason("default/huge");
    assert!(r.contains("NodePool default") && r.contains("cpu"), "{r}");
}

#[test]
fn bound_zonal_volume_pins_the_zone() {
    let volumes = r#"
apiVersion: v1
kind: PersistentVolume
metadata:
  name: pv-c
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-0123}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions:
            - {key: topology.ebs.csi.aws.com/zone, operator: In, values: [us-east-1c]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
  namespace: default
spec:
  accessModes: [ReadWriteOnce]
  volumeName: pv-c
  resources: {requests: {storage: 10Gi}}
---
"#;
    let spec = "  volumes:\n    - name: data\n      persistentVolumeClaim: {claimName: data}";
    let out = plan(&(default_pool() + volumes + &pod("db", "1", "1Gi", "", spec)));
    let l = out
        .launch_of("default/db")
        .unwrap_or_else(|| panic!("{out:?}"));
    assert_eq!(l.zones, vec!["us-east-1c".to_string()]);
    let cheapest_c = cat()
        .iter()
        .filter(|it| has_room(it, 1000, 1024, 1))
        .filter_map(|it| price_in(it, "on-demand", &["us-east-1c"]))
        .min();
    assert_eq!(Some(l.price.0), cheapest_c);
}

#[test]
fn init_containers_and_sidecars_size_the_node() {
    // An init container of 3 CPUs next to a 500m container; and a 2-CPU sidecar (an init
    // container with restartPolicy Always) that keeps running next to a 1500m container.
    let init = pod_with(
        "init",
        "",
        "  nodeSelector: {topology.kubernetes.io/zone: us-east-1a}",
        r#"  initContainers:
    - name: setup
      image: setup
      resources: {requests: {cpu: "3", memory: 1Gi}}
  containers:
    - name: app
      image: app
      resources: {requests: {cpu: 500m, memory: 1Gi}}"#,
    );
    let sidecar = pod_with(
        "sidecar",
        "",
        "  nodeSelector: {topology.kubernetes.io/zone: us-east-1b}",
        r#"  initContainers:
    - name: proxy
      image: proxy
      restartPolicy: Always
      resources: {requests: {cpu: "2", memory: 512Mi}}
  containers:
    - name: app
      image: app
      resources: {requests: {cpu: 1500m, memory: 1Gi}}"#,
    );
    let out = plan(&(default_pool() + &init + &sidecar));
    assert!(out.unschedulable.is_empty(), "{out:?}");
    let cheapest_in = |zone: &str, cpu: i64, mem: i64| {
        cat()
            .iter()
            .filter(|it| has_room(it, cpu, mem, 1))
            .filter_map(|it| price_in(it, "on-demand", &[zone]))
            .min()
    };
    let l = out.launch_of("default/init").expect("launched");
    assert!(
        launch_types(l).iter().all(|it| has_room(it, 3000, 1024, 1)),
        "{:?}",
        l.instance_types
    );
    assert_eq!(Some(l.price.0), cheapest_in("us-east-1a", 3000, 1024));
    let l = out.launch_of("default/sidecar").expect("launched");
    assert!(
        launch_types(l).iter().all(|it| has_room(it, 3500, 1536, 1)),
        "{:?}",
        l.instance_types
    );
    assert_eq!(Some(l.price.0), cheapest_in("us-east-1b", 3500, 1536));
    // The main containers alone would have fitted something cheaper.
    assert!(cheapest_in("us-east-1a", 500, 1024) < cheapest_in("us-east-1a", 3000, 1024));
}

#[test]
fn nodepool_limits_make_pods_unschedulable() {
    // 4 vCPU of limit: one 3-CPU pod takes a 4-vCPU node, which uses it all.
    let pool = on_demand_pool("capped", "", "  limits:\n    cpu: \"4\"") + NODECLASS;
    let out = plan(&(pool + &pods(3, "p", "3", "1Gi", "", "")));
    assert_eq!(out.launches.len(), 1, "{:?}", out.launches);
    assert!(launch_types(&out.launches[0])
        .iter()
        .all(|it| it.capacity.cpu <= 4000));
    assert_eq!(out.bindings.len(), 1, "{out:?}");
    assert_eq!(out.unschedulable.len(), 2, "{out:?}");
    for r in out.unschedulable.values() {
        assert!(r.contains("capped") && r.contains("limits"), "{r}");
    }

    // 3 vCPU left is more than a 2500m pod asks for, but every type with room for it has at
    // least 4 vCPU: the limits are still what stops it.
    assert!(cat()
        .iter()
        .filter(|it| has_room(it, 2500, 1024, 1))
        .all(|it| it.capacity.cpu > 3000));
    let pool = on_demand_pool("capped", "", "  limits:\n    cpu: \"3\"") + NODECLASS;
    let out = plan(&(pool + &pod("p", "2500m", "1Gi", "", "")));
    assert!(out.launches.is_empty(), "{:?}", out.launches);
    let r = out.unschedulable.get("default/p").expect("unschedulable");
    assert!(r.contains("capped") && r.contains("limits"), "{r}");
}

#[test]
fn nodepool_limits_count_existing_nodes_by_capacity() {
    // Karpenter sums node capacity (not allocatable) into a NodePool's usage. A node of
    // capacity 4 CPU (allocatable 3) leaves 1 CPU of a 5-CPU limit: too little for any type
    // with room for a 1500m pod, although 2 CPU (what allocatable would leave) buys one.
    assert!(cat()
        .iter()
        .filter(|it| has_room(it, 1500, 512, 1))
        .all(|it| it.capacity.cpu > 1000));
    assert!(cat()
        .iter()
        .any(|it| has_room(it, 1500, 512, 1) && it.capacity.cpu <= 2000));
    let pool = on_demand_pool("capped", "", "  limits:\n    cpu: \"5\"") + NODECLASS;
    let full = r#"
apiVersion: v1
kind: Node
metadata:
  name: busy
  labels:
    karpenter.sh/nodepool: capped
    topology.kubernetes.io/zone: us-east-1a
    kubernetes.io/hostname: busy
spec:
  taints:
    - {key: dedicated, value: other, effect: NoSchedule}
status:
  capacity: {cpu: "4", memory: 16Gi, pods: "58"}
  allocatable: {cpu: "3", memory: 14Gi, pods: "58"}
---
"#;
    let out = plan(&(pool.clone() + full + &pod("p", "1500m", "512Mi", "", "")));
    assert!(out.launches.is_empty(), "{:?}", out.launches);
    let r = out.unschedulable.get("default/p").expect("unschedulable");
    assert!(r.contains("capped") && r.contains("limits"), "{r}");

    // Without a reported capacity, allocatable is what counts.
    let no_capacity = full.replace("  capacity: {cpu: \"4\", memory: 16Gi, pods: \"58\"}\n", "");
    let out = plan(&(pool + &no_capacity + &pod("p", "1500m", "512Mi", "", "")));
    assert_eq!(out.launches.len(), 1, "{out:?}");
}

#[test]
fn launch_names_are_deterministic() {
    let yaml = default_pool()
        + &pods(
            5,
            "web",
            "1",
            "1Gi",
            "app: web",
            "  topologySpreadConstraints:\n    - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}",
        )
        + &pods(3, "batch", "2", "4Gi", "app: batch", "");
    let first = plan(&yaml);
    let second = plan(&yaml);
    assert!(first.launches.len() >= 3, "{:?}", first.launches);
    let names = |o: &Outcome| {
        o.launches
            .iter()
            .map(|l| l.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&first), names(&second));
    assert_eq!(first.bindings, second.bindings);
    let unique: BTreeSet<String> = names(&first).into_iter().collect();
    assert_eq!(
        unique.len(),
        first.launches.len(),
        "names must be distinct: {:?}",
        names(&first)
    );
}

#[test]
fn daemonsets_not_yet_running_on_existing_capacity_are_reserved() {
    // Karpenter reserves, on every existing node and in-flight NodeClaim, the requests of the
    // DaemonSets that will run there but have no pod there yet. node-a already runs the agent
    // (2500m - 500m leaves room for two 1-CPU pods); the in-flight NodeClaim does not yet
    // (2000m - 500m leaves room for one).
    let yaml = default_pool()
        + &daemonset("agent", "500m", "128Mi")
        + r#"
apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels:
    topology.kubernetes.io/zone: us-east-1a
    kubernetes.io/hostname: node-a
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    karpenter.sh/capacity-type: on-demand
    karpenter.sh/nodepool: default
status:
  allocatable: {cpu: 2500m, memory: 8Gi, pods: "29"}
---
apiVersion: v1
kind: Pod
metadata:
  name: agent-node-a
  namespace: kube-system
  labels: {app: agent}
  ownerReferences:
    - {apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: u-1, controller: true}
spec:
  nodeName: node-a
  containers:
    - name: d
      image: d
      resources:
        requests: {cpu: 500m, memory: 128Mi}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-inflight
  labels:
    karpenter.sh/nodepool: default
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements:
    - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1b]}
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
    - {key: kubernetes.io/arch, operator: In, values: [amd64]}
    - {key: kubernetes.io/os, operator: In, values: [linux]}
status:
  allocatable: {cpu: "2", memory: 8Gi, pods: "29"}
---
"# + &pods(5, "p", "1", "1Gi", "", "");
    let out = plan(&yaml);
    assert!(out.unschedulable.is_empty(), "{out:?}");
    assert_eq!(out.pods_on("node-a").len(), 2, "{out:?}");
    assert_eq!(out.pods_on("default-inflight").len(), 1, "{out:?}");
    let launched: usize = pods_per_launch(&out).values().map(Vec::len).sum();
    assert_eq!(launched, 2, "{out:?}");
}

#[test]
fn new_nodeclaims_take_the_copies_with_the_lowest_price_per_pod() {
    // dovetail's documented choice, which differs from Karpenter: a new NodeClaim takes the
    // number of copies whose cheapest holder costs least per pod, not as many as the largest
    // type holds. `lowest_price_per_pod_split` recomputes that choice from the catalogue.
    let expected = lowest_price_per_pod_split(10, 250, 512);
    // Several pods per NodeClaim, and not all NodeClaims alike.
    assert!(
        expected.len() > 1 && expected.iter().any(|k| *k > 1),
        "{expected:?}"
    );
    let out = plan(&(default_pool() + &pods(10, "p", "250m", "512Mi", "", "")));
    assert!(out.unschedulable.is_empty(), "{out:?}");
    let mut held: Vec<usize> = pods_per_launch(&out).values().map(Vec::len).collect();
    held.sort_unstable();
    assert_eq!(held, expected, "{:?}", out.launches);
}
