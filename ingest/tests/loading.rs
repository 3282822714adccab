//! Documents, lists, files and folders, notes, and error messages.

use dovetail_ingest::{load_paths, load_str, ManifestError};
use std::path::PathBuf;

const POD: &str =
    "apiVersion: v1\nkind: Pod\nmetadata: {name: NAME}\nspec: {containers: [{name: a}]}\n";

fn pod(name: &str) -> String {
    POD.replace("NAME", name)
}

#[test]
fn multi_document_yaml_with_empty_documents() {
    let text = format!(
        "---\n{}---\n---\n# nothing\n---\nnull\n---\n{}",
        pod("a"),
        pod("b")
    );
    let m = load_str("multi.yaml", &text).unwrap();
    let names: Vec<&str> = m.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, vec!["a", "b"]);
    assert!(m.notes.is_empty(), "{:?}", m.notes);
}

#[test]
fn kind_list_items_of_any_kind() {
    let m = load_str(
        "list.yaml",
        r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: a, namespace: x}
  spec: {containers: [{name: a}]}
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
  status: {allocatable: {cpu: "2"}}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: cfg, namespace: x}
- apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {name: np}
  spec: {template: {spec: {nodeClassRef: {name: d}}}}
"#,
    )
    .unwrap();
    assert_eq!(m.pods.len(), 1);
    assert_eq!(m.pods[0].namespace, "x");
    assert_eq!(m.nodes.len(), 1);
    assert_eq!(m.nodepools.len(), 1);
    assert_eq!(
        m.notes,
        vec!["skipped ConfigMap x/cfg (kind not used by dovetail)".to_string()]
    );
}

#[test]
fn errors_inside_lists_name_the_item() {
    let err = load_str(
        "list.yaml",
        "kind: List\nitems:\n- kind: Pod\n  apiVersion: v1\n  metadata: {name: ok}\n  spec: {containers: [{name: a}]}\n- kind: Pod\n  apiVersion: v1\n  metadata: {name: bad}\n  spec: {}\n",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "list.yaml: document 1: Pod default/bad: items[1].spec.containers: required field is missing"
    );
}

#[test]
fn unknown_kinds_are_noted() {
    let m = load_str(
        "x.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: foo, namespace: default}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: svc}\n---\njust: data\n",
    )
    .unwrap();
    assert_eq!(
        m.notes,
        vec![
            "skipped ConfigMap default/foo (kind not used by dovetail)".to_string(),
            "skipped Service svc (kind not used by dovetail)".to_string(),
            "x.yaml: document 3: skipped (no kind; not a Kubernetes object)".to_string(),
        ]
    );
}

#[test]
fn malformed_quantity_error_names_everything() {
    let text = format!(
        "{}---\napiVersion: v1\nkind: Pod\nmetadata: {{name: web}}\nspec:\n  containers:\n  - name: a\n    resources: {{requests: {{cpu: abc}}}}\n",
        pod("fine")
    );
    let err = load_str("examples/bad.yaml", &text).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with(
            "examples/bad.yaml: document 2: Pod default/web: spec.containers[0].resources.requests.cpu: quantity \"abc\" is not"
        ),
        "{msg}"
    );
    match err {
        ManifestError::Field {
            file,
            document,
            kind,
            object,
            field,
            ..
        } => {
            assert_eq!(file, "examples/bad.yaml");
            assert_eq!(document, 2);
            assert_eq!(kind, "Pod");
            assert_eq!(object, "default/web");
            assert_eq!(field, "spec.containers[0].resources.requests.cpu");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn unknown_operator_is_an_error() {
    let err = load_str(
        "op.yaml",
        r#"
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns}
spec:
  containers: [{name: a}]
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: zone, operator: Near, values: [a]}
"#,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "op.yaml: document 1: Pod ns/p: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: unknown operator \"Near\" (expected In, NotIn, Exists, DoesNotExist, Gt or Lt)"
    );
}

#[test]
fn wrong_karpenter_api_version_is_an_error() {
    let err = load_str(
        "np.yaml",
        "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: old}\nspec: {}\n",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "np.yaml: document 1: NodePool old: apiVersion: karpenter.sh/v1beta1 is not supported (dovetail reads NodePool karpenter.sh/v1)"
    );
    let err = load_str(
        "o.yaml",
        "apiVersion: karpenter.sh/v1\nkind: NodeOverlay\nmetadata: {name: o}\nspec: {}\n",
    )
    .unwrap_err();
    assert!(err
        .to_string()
        .contains("dovetail reads NodeOverlay karpenter.sh/v1alpha1"));
    // A same-named kind of another API group is somebody else's kind: skipped, not an error.
    let m = load_str(
        "j.yaml",
        "apiVersion: example.com/v1\nkind: Job\nmetadata: {name: j}\n",
    )
    .unwrap();
    assert_eq!(m.notes.len(), 1);
    assert!(m.notes[0].starts_with("skipped Job default/j"));
}

#[test]
fn missing_and_mistyped_fields_are_errors() {
    for (text, expected) in [
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {namespace: x}\nspec: {containers: []}\n",
            "e.yaml: document 1: Pod x/<unnamed>: metadata.name: required field is missing",
        ),
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: many, template: {spec: {containers: []}}}\n",
            "e.yaml: document 1: Deployment default/d: spec.replicas: expected an integer, found the string \"many\"",
        ),
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: n, creationTimestamp: yesterday}\n",
            "e.yaml: document 1: Node n: metadata.creationTimestamp: \"yesterday\" is not an RFC 3339 timestamp (e.g. 2024-05-01T12:00:00Z)",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: a}]\n  tolerations: [{key: k, effect: Sometimes}]\n",
            "e.yaml: document 1: Pod default/p: spec.tolerations[0].effect: unknown effect \"Sometimes\" (expected NoSchedule, PreferNoSchedule or NoExecute)",
        ),
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {nvidia.com/gpu: -1}}\n",
            "e.yaml: document 1: Node n: status.allocatable[\"nvidia.com/gpu\"]: quantity \"-1\" must not be negative",
        ),
    ] {
        let err = load_str("e.yaml", text).unwrap_err();
        assert_eq!(err.to_string(), expected);
    }
}

#[test]
fn yaml_errors_name_the_document() {
    let text = format!("{}---\nkind: Pod\nmetadata: {{name: [oops}}\n", pod("a"));
    let err = load_str("broken.yaml", &text).unwrap_err();
    assert!(
        matches!(err, ManifestError::Yaml { document: 2, .. }),
        "{err:?}"
    );
    assert!(err.to_string().starts_with("broken.yaml: document 2: "));
}

#[test]
fn garbage_never_panics() {
    for text in [
        "",
        "---",
        "[1, 2, 3]",
        "kind: 5",
        "kind: Pod",
        "kind: Pod\nmetadata: 3",
        "kind: Pod\napiVersion: v1\nmetadata: {name: p}\nspec: {containers: 7}",
        "kind: Pod\napiVersion: v1\nmetadata: {name: p}\nspec: {containers: [3]}",
        "kind: Pod\napiVersion: v1\nmetadata: {name: p}\nspec: {containers: [{resources: []}]}",
        "kind: List\nitems: [null, 1, {kind: List, items: {}}]",
        "kind: NodePool\napiVersion: karpenter.sh/v1\nmetadata: {name: x}\nspec: {template: {spec: {requirements: [{key: a, operator: Gt}]}}}",
        "kind: Deployment\napiVersion: apps/v1\nmetadata: {name: d}\nspec: {replicas: 1e300, template: {spec: {containers: []}}}",
        "kind: EC2NodeClass\napiVersion: karpenter.k8s.aws/v1\nmetadata: {name: x}\nspec: {blockDeviceMappings: [{ebs: {volumeSize: 9Ei}}]}",
        "&a [*a]",
        "{{{{",
    ] {
        // Only the absence of a panic matters here; errors and notes are both fine.
        let _ = load_str("g.yaml", text);
    }
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dovetail-ingest-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn folders_are_walked_in_sorted_order_and_resolved_together() {
    let dir = scratch_dir("walk");
    std::fs::create_dir_all(dir.join("b/nested")).unwrap();
    std::fs::create_dir_all(dir.join(".hidden")).unwrap();
    std::fs::write(dir.join("b/nested/z.yml"), pod("z")).unwrap();
    std::fs::write(dir.join("a.yaml"), pod("a")).unwrap();
    std::fs::write(
        dir.join("c.json"),
        r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "c"},
            "spec": {"containers": [{"name": "a"}],
                     "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}}"#,
    )
    .unwrap();
    std::fs::write(dir.join("README.md"), "not yaml: [").unwrap();
    std::fs::write(dir.join(".hidden/x.yaml"), pod("hidden")).unwrap();
    let extra = scratch_dir("walk-extra");
    let pv = extra.join("storage.txt");
    std::fs::write(
        &pv,
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\nspec: {volumeName: pv1}\n---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv1, labels: {topology.kubernetes.io/zone: eu-west-1c}}\n",
    )
    .unwrap();

    let m = load_paths(&[dir.clone(), pv]).unwrap();
    let names: Vec<&str> = m.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, vec!["a", "z", "c"]);
    let c = &m.pods[2];
    assert_eq!(
        c.scheduling.volume_zones,
        Some(["eu-west-1c".to_string()].into_iter().collect())
    );

    let err = load_paths(&[dir.join("missing.yaml")]).unwrap_err();
    assert!(matches!(err, ManifestError::Io { .. }));
    assert!(err.to_string().contains("missing.yaml"));

    std::fs::write(dir.join("b/bad.yaml"), "kind: Pod\napiVersion: v1\nmetadata: {name: q}\nspec: {containers: [{name: a, resources: {limits: {memory: 1Zi}}}]}\n").unwrap();
    let err = load_paths(std::slice::from_ref(&dir))
        .unwrap_err()
        .to_string();
    let expected_file = dir.join("b/bad.yaml").display().to_string();
    assert!(
        err.starts_with(&format!("{expected_file}: document 1: Pod default/q: spec.containers[0].resources.limits.memory: ")),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&extra);
}

#[test]
fn the_example_cluster_loads() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster");
    if !dir.exists() {
        return;
    }
    let m = load_paths(&[dir]).unwrap_or_else(|e| panic!("{e}"));
    assert!(!m.pods.is_empty());
    assert!(!m.nodepools.is_empty());
    assert!(
        m.pods.iter().any(|p| p.owner.is_some()),
        "workloads are expanded"
    );
}
