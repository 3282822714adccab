//! What disruption reads from Nodes, NodeClaims and Pods: readiness, deletion, what an instance
//! was launched with, the last pod event and creation times.

use dovetail_dataflow::model::Node;
use dovetail_ingest::{load_str, Manifests};

fn load(text: &str) -> Manifests {
    match load_str("test.yaml", text) {
        Ok(m) => m,
        Err(e) => panic!("load failed: {e}"),
    }
}

fn load_err(text: &str) -> String {
    match load_str("test.yaml", text) {
        Ok(m) => panic!("expected an error, loaded {m:#?}"),
        Err(e) => e.to_string(),
    }
}

fn node_named<'a>(m: &'a Manifests, name: &str) -> &'a Node {
    match m.nodes.iter().find(|n| n.name == name) {
        Some(n) => n,
        None => panic!("no node {name} in {:#?}", m.nodes),
    }
}

/// A registered Node with the given `status.conditions` (a YAML flow list, or empty for none)
/// and extra metadata lines.
fn node(name: &str, conditions: &str, extra_meta: &str) -> String {
    let conditions = if conditions.is_empty() {
        String::new()
    } else {
        format!("  conditions: {conditions}\n")
    };
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n{extra_meta}spec:\n  providerID: aws:///us-east-1a/i-{name}\nstatus:\n  allocatable: {{cpu: '2', memory: 8Gi, pods: '29'}}\n{conditions}---\n"
    )
}

/// A NodeClaim for the node `node` (matched by `status.nodeName`), with extra metadata lines
/// and extra status lines.
fn claim(name: &str, node: &str, extra_meta: &str, extra_status: &str) -> String {
    format!(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata:\n  name: {name}\n{extra_meta}spec:\n  nodeClassRef: {{name: default}}\n  requirements: []\nstatus:\n  nodeName: {node}\n  capacity: {{cpu: '2', memory: 8Gi, pods: '29'}}\n{extra_status}---\n"
    )
}

const LAUNCH_ANNOTATIONS: &str = "  annotations:\n    dovetail.sh/subnet-id: subnet-0abc\n    dovetail.sh/security-group-ids: \"sg-1, sg-2,sg-3\"\n    dovetail.sh/enclaves: \"true\"\n";

#[test]
fn ready_condition_sets_not_ready() {
    let text = [
        node("ready", "[{type: Ready, status: \"True\"}]", ""),
        node(
            "down",
            "[{type: MemoryPressure, status: \"False\"}, {type: Ready, status: \"False\"}]",
            "",
        ),
        node("unknown", "[{type: Ready, status: Unknown}]", ""),
        node("silent", "", ""),
        node("no-ready", "[{type: DiskPressure, status: \"False\"}]", ""),
    ]
    .concat();
    let m = load(&text);
    assert!(!node_named(&m, "ready").not_ready);
    assert!(node_named(&m, "down").not_ready);
    assert!(node_named(&m, "unknown").not_ready);
    assert!(
        !node_named(&m, "silent").not_ready,
        "no conditions at all is ready"
    );
    assert!(
        node_named(&m, "no-ready").not_ready,
        "conditions without Ready is not ready"
    );
}

#[test]
fn condition_without_type_is_an_error_naming_the_field() {
    let err = load_err(&node("n", "[{status: \"True\"}]", ""));
    for part in [
        "test.yaml",
        "document 1",
        "Node n",
        "status.conditions[0].type",
    ] {
        assert!(err.contains(part), "error should name {part}: {err}");
    }
}

#[test]
fn deletion_timestamp_of_node_or_its_claim_marks_it_deleting() {
    let deleted = "  deletionTimestamp: \"2026-11-30T00:00:00Z\"\n";
    let text = [
        node("gone", "", deleted),
        node("claim-gone", "", ""),
        claim("claim-gone", "claim-gone", deleted, ""),
        node("staying", "", ""),
        claim("staying", "staying", "", ""),
    ]
    .concat();
    let m = load(&text);
    for name in ["gone", "claim-gone"] {
        let n = node_named(&m, name);
        assert!(n.deleting && n.unschedulable, "{n:#?}");
    }
    let n = node_named(&m, "staying");
    assert!(!n.deleting && !n.unschedulable, "{n:#?}");
}

#[test]
fn claim_launch_details_and_last_pod_event_reach_its_node() {
    let text = [
        node("ip-1", "", ""),
        claim(
            "general-abc",
            "ip-1",
            LAUNCH_ANNOTATIONS,
            "  imageID: ami-0123\n  lastPodEventTime: \"2026-11-30T01:00:00Z\"\n",
        ),
        node("bare", "", ""),
    ]
    .concat();
    let m = load(&text);
    let n = node_named(&m, "ip-1");
    assert_eq!(n.nodeclaim.as_deref(), Some("general-abc"));
    assert_eq!(n.launched.image_id.as_deref(), Some("ami-0123"));
    assert_eq!(n.launched.subnet_id.as_deref(), Some("subnet-0abc"));
    assert_eq!(n.launched.security_group_ids, ["sg-1", "sg-2", "sg-3"]);
    assert_eq!(n.launched.enclaves, Some(true));
    // 2026-11-30T00:00:00Z is 1_795_996_800_000 ms; one hour later.
    assert_eq!(n.last_pod_event_ms, Some(1_795_996_800_000 + 3_600_000));

    let bare = node_named(&m, "bare");
    assert_eq!(bare.launched, Default::default());
    assert_eq!(bare.last_pod_event_ms, None);
}

#[test]
fn in_flight_claim_carries_its_launch_details() {
    let text = claim(
        "general-xyz",
        "not-registered-yet",
        "  annotations: {dovetail.sh/enclaves: \"false\", dovetail.sh/security-group-ids: \"\"}\n",
        "  imageID: ami-0456\n  lastPodEventTime: \"2026-11-30T00:00:30.5Z\"\n",
    );
    let m = load(&text);
    let n = node_named(&m, "not-registered-yet");
    assert!(n.in_flight);
    assert_eq!(n.launched.image_id.as_deref(), Some("ami-0456"));
    assert_eq!(n.launched.enclaves, Some(false));
    assert_eq!(n.launched.subnet_id, None);
    assert!(n.launched.security_group_ids.is_empty());
    assert_eq!(n.last_pod_event_ms, Some(1_795_996_830_500));
}

#[test]
fn enclaves_other_than_true_or_false_is_an_error_naming_the_field() {
    let text = claim(
        "general-abc",
        "ip-1",
        "  annotations: {dovetail.sh/enclaves: \"yes\"}\n",
        "",
    );
    let err = load_err(&text);
    for part in [
        "test.yaml",
        "document 1",
        "NodeClaim general-abc",
        "metadata.annotations[\"dovetail.sh/enclaves\"]",
        "\"yes\"",
    ] {
        assert!(err.contains(part), "error should name {part}: {err}");
    }
}

#[test]
fn malformed_last_pod_event_time_is_an_error_naming_the_field() {
    let text = [
        node("ip-1", "", ""),
        claim(
            "general-abc",
            "ip-1",
            "",
            "  lastPodEventTime: \"last tuesday\"\n",
        ),
    ]
    .concat();
    let err = load_err(&text);
    for part in [
        "test.yaml",
        "document 2",
        "NodeClaim general-abc",
        "status.lastPodEventTime",
        "RFC 3339",
    ] {
        assert!(err.contains(part), "error should name {part}: {err}");
    }
}

#[test]
fn pod_creation_time_is_read() {
    let m = load(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  creationTimestamp: \"2026-11-30T00:00:01Z\"\nspec:\n  containers: [{name: app, image: app}]\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: undated}\nspec:\n  containers: [{name: app, image: app}]\n",
    );
    let created: Vec<(&str, Option<i64>)> = m
        .pods
        .iter()
        .map(|p| (p.name.as_str(), p.created_ms))
        .collect();
    assert_eq!(
        created,
        [("web", Some(1_795_996_801_000)), ("undated", None)]
    );
}

#[test]
fn claim_expire_after_reaches_its_node_and_a_malformed_one_is_an_error_naming_the_field() {
    let with_spec = |v: &str| {
        claim("general-abc", "ip-1", "", "").replace(
            "  requirements: []\n",
            &format!("  requirements: []\n  expireAfter: {v}\n"),
        )
    };
    let m = load(&[node("ip-1", "", ""), with_spec("36h"), node("bare", "", "")].concat());
    assert_eq!(node_named(&m, "ip-1").expire_after.as_deref(), Some("36h"));
    assert_eq!(node_named(&m, "bare").expire_after, None);
    let m = load(&[node("ip-1", "", ""), with_spec("Never")].concat());
    assert_eq!(
        node_named(&m, "ip-1").expire_after.as_deref(),
        Some("Never")
    );

    let err = load_err(&[node("ip-1", "", ""), with_spec("soon")].concat());
    for part in [
        "test.yaml",
        "document 2",
        "NodeClaim general-abc",
        "spec.expireAfter",
        "`soon` is not a duration",
    ] {
        assert!(err.contains(part), "error should name {part}: {err}");
    }
}
