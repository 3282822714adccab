//! Kubernetes kinds: pods, workloads, DaemonSets, PodDisruptionBudgets, volumes.

use dovetail_dataflow::model::quantity::{mib, units};
use dovetail_dataflow::model::{Effect, Operator, Pod, TolerationOperator, WhenUnsatisfiable};
use dovetail_ingest::{load_str, Manifests};
use std::collections::{BTreeMap, BTreeSet};

fn load(text: &str) -> Manifests {
    match load_str("test.yaml", text) {
        Ok(m) => m,
        Err(e) => panic!("load failed: {e}"),
    }
}

fn pod<'a>(m: &'a Manifests, name: &str) -> &'a Pod {
    m.pods.iter().find(|p| p.name == name).unwrap_or_else(|| {
        panic!(
            "no pod {name} in {:?}",
            m.pods.iter().map(|p| &p.name).collect::<Vec<_>>()
        )
    })
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn zones(z: &[&str]) -> Option<BTreeSet<String>> {
    Some(z.iter().map(|s| s.to_string()).collect())
}

const FULL_POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web, tier: front}
  annotations: {note: hi}
  ownerReferences:
  - {apiVersion: apps/v1, kind: ReplicaSet, name: web-5d9f, controller: true}
spec:
  priority: 100
  nodeSelector: {kubernetes.io/arch: arm64}
  containers:
  - name: app
    image: nginx
    resources:
      requests: {cpu: 250m, memory: 256Mi}
      limits: {nvidia.com/gpu: 1, hugepages-2Mi: 64Mi}
  tolerations:
  - {key: dedicated, value: web, effect: NoSchedule}
  - {key: spot, operator: Exists, tolerationSeconds: 30}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b]}
          - {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ["3"]}
        - matchExpressions:
          - {key: karpenter.sh/capacity-type, operator: NotIn, values: [spot]}
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 10
        preference:
          matchExpressions: [{key: a, operator: Exists}]
      - weight: 50
        preference:
          matchExpressions: [{key: b, operator: Exists}]
      - weight: 10
        preference:
          matchExpressions: [{key: c, operator: Exists}]
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector: {matchLabels: {app: web}}
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 5
        podAffinityTerm:
          topologyKey: topology.kubernetes.io/zone
          namespaces: [other]
          labelSelector:
            matchExpressions: [{key: app, operator: In, values: [db]}]
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: topology.kubernetes.io/zone
        labelSelector: {matchLabels: {app: cache}}
  topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
    minDomains: 3
    labelSelector: {matchLabels: {app: web}}
    matchLabelKeys: [tier]
  - maxSkew: 2
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchExpressions: [{key: app, operator: Exists}]
"#;

#[test]
fn pod_fields_are_read() {
    let m = load(FULL_POD);
    let p = pod(&m, "web");
    assert_eq!(p.namespace, "default");
    assert_eq!(p.labels, labels(&[("app", "web"), ("tier", "front")]));
    assert_eq!(p.annotations, labels(&[("note", "hi")]));
    assert_eq!(p.owner, Some(("ReplicaSet".into(), "web-5d9f".into())));
    assert!(!p.is_daemon);
    assert_eq!(p.node_name, None);
    let s = &p.scheduling;
    assert_eq!(s.priority, 100);
    assert_eq!(s.requests.cpu, 250);
    assert_eq!(s.requests.memory, mib(256));
    assert_eq!(s.requests.pods, units(1));
    // Limits without requests become requests; extended resources go to `extended`.
    assert_eq!(s.requests.extended.get("nvidia.com/gpu"), Some(&units(1)));
    assert_eq!(s.requests.extended.get("hugepages-2Mi"), Some(&mib(64)));
    assert!(s.node_selector.allows("kubernetes.io/arch", "arm64"));
    assert!(!s.node_selector.allows("kubernetes.io/arch", "amd64"));

    assert_eq!(s.tolerations.len(), 2);
    assert_eq!(s.tolerations[0].operator, TolerationOperator::Equal);
    assert_eq!(s.tolerations[0].effect, Some(Effect::NoSchedule));
    assert_eq!(s.tolerations[1].operator, TolerationOperator::Exists);
    assert_eq!(s.tolerations[1].effect, None);

    assert_eq!(s.required_node_affinity.len(), 2);
    let t0 = &s.required_node_affinity[0];
    assert!(t0.allows("topology.kubernetes.io/zone", "us-east-1b"));
    assert!(!t0.allows("topology.kubernetes.io/zone", "us-east-1c"));
    assert!(t0.allows("karpenter.k8s.aws/instance-cpu", "4"));
    assert!(!t0.allows("karpenter.k8s.aws/instance-cpu", "3"));
    assert_eq!(
        s.required_node_affinity[1]
            .get("karpenter.sh/capacity-type")
            .map(|r| r.operator()),
        Some(Operator::NotIn)
    );
    // Heaviest first, ties in written order.
    let order: Vec<(i32, Vec<&str>)> = s
        .preferred_node_affinity
        .iter()
        .map(|(w, r)| (*w, r.keys().collect()))
        .collect();
    assert_eq!(
        order,
        vec![(50, vec!["b"]), (10, vec!["a"]), (10, vec!["c"])]
    );

    assert_eq!(s.pod_anti_affinity.len(), 1);
    assert_eq!(
        s.pod_anti_affinity[0].topology_key,
        "kubernetes.io/hostname"
    );
    assert!(s.pod_anti_affinity[0]
        .selector
        .matches(&labels(&[("app", "web")])));
    assert!(s.pod_anti_affinity[0].namespaces.is_empty());
    assert_eq!(s.preferred_pod_anti_affinity.len(), 1);
    let (w, t) = &s.preferred_pod_anti_affinity[0];
    assert_eq!(*w, 5);
    assert_eq!(t.namespaces, BTreeSet::from(["other".to_string()]));
    assert!(t.selector.matches(&labels(&[("app", "db")])));
    assert_eq!(s.pod_affinity.len(), 1);
    assert!(s.pod_affinity[0]
        .selector
        .matches(&labels(&[("app", "cache")])));

    assert_eq!(s.topology_spread.len(), 2);
    let z = &s.topology_spread[0];
    assert_eq!(z.max_skew, 1);
    assert_eq!(z.min_domains, Some(3));
    assert_eq!(z.when_unsatisfiable, WhenUnsatisfiable::DoNotSchedule);
    // matchLabelKeys adds the pod's own value of `tier`.
    assert!(z
        .selector
        .matches(&labels(&[("app", "web"), ("tier", "front")])));
    assert!(!z
        .selector
        .matches(&labels(&[("app", "web"), ("tier", "back")])));
    let h = &s.topology_spread[1];
    assert_eq!(h.when_unsatisfiable, WhenUnsatisfiable::ScheduleAnyway);
    assert!(h.selector.matches(&labels(&[("app", "x")])));
    assert!(!h.selector.matches(&labels(&[])));
    assert_eq!(s.volume_zones, None);
}

#[test]
fn bound_daemon_and_finished_pods() {
    let m = load(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: agent-x
  namespace: kube-system
  ownerReferences: [{kind: DaemonSet, name: agent, controller: true}]
spec:
  nodeName: node-1
  containers: [{name: a}]
---
apiVersion: v1
kind: Pod
metadata:
  name: kube-proxy-node-1
  namespace: kube-system
  annotations: {kubernetes.io/config.mirror: abc}
spec:
  nodeName: node-1
  containers: [{name: a}]
---
apiVersion: v1
kind: Pod
metadata: {name: done}
spec: {containers: [{name: a}]}
status: {phase: Succeeded}
"#,
    );
    assert_eq!(m.pods.len(), 2);
    let a = pod(&m, "agent-x");
    assert!(a.is_daemon);
    assert_eq!(a.node_name.as_deref(), Some("node-1"));
    assert_eq!(a.namespace, "kube-system");
    assert!(pod(&m, "kube-proxy-node-1").is_daemon);
    assert!(m
        .notes
        .contains(&"Pod default/done: skipped (phase Succeeded)".to_string()));
}

#[test]
fn init_containers_sidecars_and_overhead_size_the_pod() {
    let m = load(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  overhead: {cpu: 100m, memory: 10Mi}
  initContainers:
  - name: mesh
    restartPolicy: Always
    resources: {requests: {cpu: 300m, memory: 100Mi}}
  - name: migrate
    resources: {requests: {cpu: 700m, memory: 50Mi}}
  - name: big-memory
    resources: {limits: {memory: 1Gi}}
  containers:
  - name: app
    resources: {requests: {cpu: 500m, memory: 256Mi}}
"#,
    );
    let r = &pod(&m, "p").scheduling.requests;
    // running: 500 + 300 sidecar = 800; init peak: 700 + 300 = 1000; + 100 overhead.
    assert_eq!(r.cpu, 1100);
    // memory: the init container's limit (1Gi) defaults its request: 1024 + 100 sidecar.
    assert_eq!(r.memory, mib(1024 + 100 + 10));
}

#[test]
fn limits_default_requests_per_resource() {
    let m = load(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: a
    resources:
      requests: {cpu: 100m}
      limits: {cpu: "2", memory: 512Mi, ephemeral-storage: 1Gi}
"#,
    );
    let r = &pod(&m, "p").scheduling.requests;
    assert_eq!(r.cpu, 100, "an explicit request wins over the limit");
    assert_eq!(r.memory, mib(512));
    assert_eq!(r.ephemeral_storage, mib(1024));
}

const WEB_DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}, annotations: {a: b}}
    spec:
      priorityClassName: high
      containers: [{name: a, resources: {requests: {cpu: "1"}}}]
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
"#;

#[test]
fn deployment_expands_minus_pods_it_already_has() {
    let text = format!(
        r#"{WEB_DEPLOYMENT}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web-abc
  namespace: shop
  ownerReferences: [{{kind: Deployment, name: web, controller: true}}]
spec:
  replicas: 4
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec: {{containers: [{{name: a}}]}}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-abc-1
  namespace: shop
  labels: {{app: web}}
  ownerReferences: [{{kind: ReplicaSet, name: web-abc, controller: true}}]
spec: {{nodeName: n1, containers: [{{name: a}}]}}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-old-2
  namespace: shop
  labels: {{app: web}}
  ownerReferences: [{{kind: ReplicaSet, name: web-old, controller: true}}]
spec: {{containers: [{{name: a}}]}}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-other-3
  namespace: shop
  labels: {{app: not-web}}
  ownerReferences: [{{kind: ReplicaSet, name: web-other, controller: true}}]
spec: {{containers: [{{name: a}}]}}
"#
    );
    let m = load(&text);
    let expanded: Vec<&Pod> = m
        .pods
        .iter()
        .filter(|p| p.owner == Some(("Deployment".into(), "web".into())))
        .collect();
    // 4 replicas - web-abc-1 (via the ReplicaSet in the input) - web-old-2 (name prefix and
    // selector); web-other-3 does not match the selector. The ReplicaSet is not expanded.
    let names: Vec<&str> = expanded.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, vec!["web-dovetail-0", "web-dovetail-1"]);
    assert_eq!(m.pods.len(), 3 + 2);
    let p = expanded[0];
    assert_eq!(p.namespace, "shop");
    assert_eq!(p.labels, labels(&[("app", "web")]));
    assert_eq!(p.annotations, labels(&[("a", "b")]));
    assert_eq!(p.node_name, None);
    assert_eq!(p.scheduling.requests.cpu, 1000);
    assert_eq!(p.scheduling.priority, 1000, "from the PriorityClass");
}

#[test]
fn replicaset_without_its_deployment_is_expanded() {
    let m = load(
        r#"
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: api-123
  ownerReferences: [{kind: Deployment, name: api, controller: true}]
spec:
  replicas: 2
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec: {containers: [{name: a}]}
"#,
    );
    let names: Vec<&str> = m.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, vec!["api-123-dovetail-0", "api-123-dovetail-1"]);
}

#[test]
fn statefulset_creates_missing_ordinals_with_their_claims() {
    let m = load(
        r#"
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 3
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: a}]}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {storageClassName: gp3-zonal}
---
apiVersion: v1
kind: Pod
metadata:
  name: db-1
  labels: {app: db}
  ownerReferences: [{kind: StatefulSet, name: db, controller: true}]
spec: {nodeName: n1, containers: [{name: a}]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data-db-0}
spec: {storageClassName: gp3-zonal, volumeName: pv-0}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-0}
spec:
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: topology.ebs.csi.aws.com/zone, operator: In, values: [us-west-2c]}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3-zonal}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions:
  - {key: topology.kubernetes.io/zone, values: [us-west-2a, us-west-2b]}
"#,
    );
    let names: Vec<&str> = m.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, vec!["db-1", "db-0", "db-2"]);
    let db0 = pod(&m, "db-0");
    assert_eq!(db0.owner, Some(("StatefulSet".into(), "db".into())));
    assert_eq!(
        db0.labels
            .get("statefulset.kubernetes.io/pod-name")
            .map(String::as_str),
        Some("db-0")
    );
    // db-0's claim exists and is bound: pinned to its volume's zone.
    assert_eq!(db0.scheduling.volume_zones, zones(&["us-west-2c"]));
    // db-2's claim will be created from the template: the class's allowed zones.
    assert_eq!(
        pod(&m, "db-2").scheduling.volume_zones,
        zones(&["us-west-2a", "us-west-2b"])
    );
}

#[test]
fn job_parallelism_is_capped_by_remaining_completions() {
    let m = load(
        r#"
apiVersion: batch/v1
kind: Job
metadata: {name: batch}
spec:
  parallelism: 5
  completions: 10
  template:
    spec: {restartPolicy: Never, containers: [{name: a}]}
status: {succeeded: 7}
---
apiVersion: v1
kind: Pod
metadata:
  name: batch-xyz
  ownerReferences: [{kind: Job, name: batch, controller: true}]
spec: {containers: [{name: a}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: one}
spec:
  template:
    spec: {containers: [{name: a}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: wide}
spec:
  parallelism: 3
  template:
    spec: {containers: [{name: a}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: finished}
spec:
  parallelism: 3
  template:
    spec: {containers: [{name: a}]}
status:
  conditions: [{type: Complete, status: "True"}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: suspended}
spec:
  suspend: true
  template:
    spec: {containers: [{name: a}]}
"#,
    );
    let of = |job: &str| -> Vec<&str> {
        m.pods
            .iter()
            .filter(|p| p.owner == Some(("Job".into(), job.into())) && p.name != "batch-xyz")
            .map(|p| p.name.as_str())
            .collect()
    };
    // min(5, 10 - 7) = 3, minus the one running pod.
    assert_eq!(of("batch"), vec!["batch-dovetail-0", "batch-dovetail-1"]);
    assert_eq!(of("one"), vec!["one-dovetail-0"]);
    assert_eq!(of("wide").len(), 3);
    assert!(of("finished").is_empty());
    assert!(of("suspended").is_empty());
    assert_eq!(
        pod(&m, "one-dovetail-0")
            .labels
            .get("job-name")
            .map(String::as_str),
        Some("one")
    );
}

#[test]
fn daemonsets_and_pdbs() {
    let m = load(
        r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      priorityClassName: system-node-critical
      tolerations: [{operator: Exists}]
      containers: [{name: a, resources: {requests: {cpu: 50m, memory: 64Mi}}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: web}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: api, namespace: shop}
spec:
  maxUnavailable: 25%
  selector: {matchExpressions: [{key: app, operator: In, values: [api]}]}
"#,
    );
    assert!(m.pods.is_empty());
    assert_eq!(m.daemonsets.len(), 1);
    let ds = &m.daemonsets[0];
    assert_eq!(
        (ds.namespace.as_str(), ds.name.as_str()),
        ("kube-system", "agent")
    );
    assert_eq!(ds.scheduling.requests.cpu, 50);
    assert_eq!(ds.scheduling.requests.memory, mib(64));
    assert_eq!(ds.scheduling.priority, 2_000_001_000);
    assert_eq!(
        ds.scheduling.tolerations[0].operator,
        TolerationOperator::Exists
    );

    assert_eq!(m.pdbs.len(), 2);
    assert_eq!(m.pdbs[0].namespace, "default");
    assert_eq!(m.pdbs[0].min_available.as_deref(), Some("2"));
    assert_eq!(m.pdbs[0].max_unavailable, None);
    assert!(m.pdbs[0].selector.matches(&labels(&[("app", "web")])));
    assert_eq!(m.pdbs[1].max_unavailable.as_deref(), Some("25%"));
    assert!(m.pdbs[1].selector.matches(&labels(&[("app", "api")])));
    assert!(!m.pdbs[1].selector.matches(&labels(&[("app", "web")])));
}

const STORAGE: &str = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: bound}
spec: {storageClassName: gp3, volumeName: pv-bound}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-bound}
spec:
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: unbound}
spec: {storageClassName: gp3}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: default-class}
spec: {}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: immediate}
spec: {storageClassName: fast}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: gp3
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions:
  - {key: topology.kubernetes.io/zone, values: [us-east-1a, us-east-1b]}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: fast}
volumeBindingMode: Immediate
"#;

fn pod_with_claims(name: &str, claims: &[&str]) -> String {
    let volumes: Vec<String> = claims
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{{name: v{i}, persistentVolumeClaim: {{claimName: {c}}}}}"))
        .collect();
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec: {{containers: [{{name: a}}], volumes: [{}]}}\n",
        volumes.join(", ")
    )
}

#[test]
fn volume_zones_from_pvs_and_storage_classes() {
    let mut text = STORAGE.to_string();
    for (name, claims) in [
        ("pinned", vec!["bound"]),
        ("class", vec!["unbound"]),
        ("both", vec!["bound", "unbound"]),
        ("defaulted", vec!["default-class"]),
        ("immediate", vec!["immediate"]),
        ("missing", vec!["nope"]),
    ] {
        text.push_str(&pod_with_claims(name, &claims));
    }
    text.push_str(
        r#"---
apiVersion: v1
kind: Pod
metadata: {name: scratch}
spec:
  containers: [{name: a}]
  volumes:
  - name: tmp
    ephemeral:
      volumeClaimTemplate:
        spec: {storageClassName: gp3}
"#,
    );
    let m = load(&text);
    let z = |n: &str| pod(&m, n).scheduling.volume_zones.clone();
    assert_eq!(z("pinned"), zones(&["us-east-1a"]));
    assert_eq!(z("class"), zones(&["us-east-1a", "us-east-1b"]));
    assert_eq!(
        z("both"),
        zones(&["us-east-1a"]),
        "intersection over volumes"
    );
    assert_eq!(z("defaulted"), zones(&["us-east-1a", "us-east-1b"]));
    assert_eq!(z("immediate"), None);
    assert_eq!(z("missing"), None);
    assert_eq!(z("scratch"), zones(&["us-east-1a", "us-east-1b"]));
    assert!(m.notes.iter().any(|n| n.starts_with(
        "Pod default/missing: PersistentVolumeClaim default/nope is not in the input"
    )));
    assert!(m
        .notes
        .iter()
        .any(|n| n.starts_with("Pod default/immediate:") && n.contains("Immediate")));
}
