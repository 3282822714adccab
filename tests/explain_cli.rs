//! `dovetail explain node` end to end, through the binary, on examples/disruption (whose nodes
//! are named for what the manifests make of them; see examples/disruption/nodes.yaml). Each
//! verdict is compared with what the manifests make true.

use serde_json::Value;
mod cli;
use cli::dovetail;

/// Monday 2026-11-30, noon UTC: inside the budget window that allows no Underutilized
/// disruption (examples/disruption/nodepool.yaml).
const MONDAY_NOON: &str = "2026-11-30T12:00:00Z";
/// The same Monday at 20:00 UTC: the window has closed.
const MONDAY_EVENING: &str = "2026-11-30T20:00:00Z";

fn explain_with(node: &str, now: &str, files: &[&str]) -> Value {
    let mut args = vec!["explain", "node", node, "--now", now, "-o", "json", "-f"];
    args.extend_from_slice(files);
    let out = dovetail(&args);
    assert!(
        out.status.success(),
        "dovetail explain failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("explain prints JSON")
}

fn explain(node: &str, now: &str) -> Value {
    explain_with(node, now, &["examples/disruption"])
}

/// The verdict of one method (Karpenter's reason name).
fn method<'a>(e: &'a Value, name: &str) -> &'a Value {
    e["methods"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["method"] == name))
        .unwrap_or_else(|| panic!("no {name} verdict: {e:#}"))
}

#[test]
fn a_node_with_a_do_not_disrupt_pod_names_that_pod() {
    let e = explain("pinned", MONDAY_EVENING);
    let m = method(&e, "Underutilized");
    assert_eq!(m["verdict"], "blocked", "{e:#}");
    let b = &m["blocker"]["PodDoNotDisrupt"];
    assert_eq!(b["pod"], "ml/train-step-41-k9v3p", "{e:#}");
    assert!(e["disrupted_by"].is_null(), "{e:#}");
    assert!(
        m["text"]
            .as_str()
            .is_some_and(|t| t.contains("ml/train-step-41-k9v3p")),
        "{m:#}"
    );
}

#[test]
fn a_node_under_a_pdb_names_the_budget() {
    let e = explain("guarded", MONDAY_EVENING);
    let m = method(&e, "Underutilized");
    assert_eq!(m["verdict"], "blocked", "{e:#}");
    assert_eq!(m["blocker"]["Pdb"]["pdb"], "shop/checkout", "{e:#}");
}

#[test]
fn a_node_held_by_a_zero_budget_names_the_nodepool_and_the_window() {
    let e = explain("underused", MONDAY_NOON);
    let m = method(&e, "Underutilized");
    assert_eq!(m["verdict"], "blocked", "{e:#}");
    let b = &m["blocker"]["Budget"];
    assert_eq!(b["nodepool"], "general", "{e:#}");
    assert_eq!(b["reason"], "Underutilized", "{e:#}");
    assert_eq!(b["budget"]["nodes"], "0", "{e:#}");
    assert_eq!(b["budget"]["schedule"], "0 9 * * mon-fri", "{e:#}");
    // Once the window closes, the same node is consolidated: deleted, its pod fits elsewhere.
    let e = explain("underused", MONDAY_EVENING);
    let m = method(&e, "Underutilized");
    assert_eq!(m["verdict"], "disrupted", "{e:#}");
    assert_eq!(m["replacements"], serde_json::json!([]), "{e:#}");
    assert!(m["savings_per_hour"].as_f64().unwrap_or(0.0) > 0.0, "{e:#}");
    assert_eq!(e["disrupted_by"], "Underutilized");
}

#[test]
fn an_empty_node_is_empty_once_consolidate_after_has_passed() {
    // Its last pod event was 07:30 and consolidateAfter is 10m.
    let e = explain("empty", "2026-11-30T07:35:00Z");
    let m = method(&e, "Empty");
    assert_eq!(m["verdict"], "blocked", "{e:#}");
    let until = m["blocker"]["ConsolidateAfter"]["until_ms"].as_i64();
    assert_eq!(until, Some(1_796_024_400_000), "07:40 UTC: {e:#}");
    assert!(e["disrupted_by"].is_null(), "{e:#}");

    let e = explain("empty", MONDAY_NOON);
    let m = method(&e, "Empty");
    assert_eq!(m["verdict"], "disrupted", "{e:#}");
    assert_eq!(e["disrupted_by"], "Empty");
    assert_eq!(method(&e, "Underutilized")["verdict"], "no_pods", "{e:#}");
}

#[test]
fn a_drifted_node_names_the_field_that_drifted() {
    let e = explain("drifted", MONDAY_NOON);
    let m = method(&e, "Drifted");
    assert_eq!(m["verdict"], "disrupted", "{e:#}");
    assert_eq!(m["found"]["drift"]["field"], "AMI", "{e:#}");
    assert_eq!(
        m["found"]["drift"]["reason"]["Ami"]["ami"], "ami-0old2025",
        "{e:#}"
    );
    assert_eq!(m["replacements"].as_array().map(Vec::len), Some(1), "{e:#}");
    // The others did not drift.
    let e = explain("underused", MONDAY_NOON);
    assert_eq!(method(&e, "Drifted")["verdict"], "not_drifted", "{e:#}");
}

/// A NodeClaim whose `dovetail.sh/nodepool-hash` differs from the NodePool's drifts by the
/// template hash (tests/fixtures/explain-stale-hash.yaml).
#[test]
fn a_nodeclaim_with_a_stale_hash_is_drifted_by_the_nodepool_hash() {
    let e = explain_with(
        "stale",
        MONDAY_NOON,
        &[
            "examples/disruption",
            "tests/fixtures/explain-stale-hash.yaml",
        ],
    );
    let m = method(&e, "Drifted");
    assert_eq!(m["found"]["drift"]["field"], "NodePoolHash", "{e:#}");
    assert_eq!(
        m["found"]["drift"]["reason"]["NodePoolHash"]["was"], "stale",
        "{e:#}"
    );
}

#[test]
fn an_expired_node_says_when_it_expired_and_others_when_they_will() {
    let e = explain("expired", MONDAY_NOON);
    let m = method(&e, "Expired");
    assert_eq!(m["verdict"], "disrupted", "{e:#}");
    // Its NodeClaim was created 2026-10-20T10:00Z; expireAfter is 720h.
    assert_eq!(m["found"]["expired_at"], 1_795_082_400_000_i64, "{e:#}");
    let e = explain("underused", MONDAY_NOON);
    let m = method(&e, "Expired");
    assert_eq!(m["verdict"], "not_expired", "{e:#}");
    // Created 2026-11-28T10:00Z, + 720h.
    assert_eq!(m["at_ms"], 1_798_452_000_000_i64, "{e:#}");
}

#[test]
fn text_output_lists_every_method_and_an_unknown_node_is_an_error() {
    let out = dovetail(&[
        "explain",
        "node",
        "pinned",
        "-f",
        "examples/disruption",
        "--now",
        MONDAY_EVENING,
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for m in [
        "Interrupted",
        "Expired",
        "Empty",
        "Drifted",
        "Underutilized",
    ] {
        assert!(text.contains(m), "{m}: {text}");
    }
    assert!(text.contains("not disrupted now"), "{text}");

    let out = dovetail(&[
        "explain",
        "node",
        "nowhere",
        "-f",
        "examples/disruption",
        "--now",
        MONDAY_NOON,
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nowhere"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
