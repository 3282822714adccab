//! `dovetail plan` end to end, through the binary, on the manifests in `examples/`.

use serde_json::Value;
use std::process::Command;
mod cli;
use cli::dovetail;

fn plan_json(args: &[&str]) -> Value {
    let mut all = vec!["plan", "-o", "json"];
    all.extend_from_slice(args);
    let out = dovetail(&all);
    assert!(
        out.status.success(),
        "dovetail plan failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("plan prints JSON")
}

#[test]
fn plans_the_example_cluster() {
    let plan = plan_json(&["-f", "examples/cluster"]);
    let launches = plan["launches"].as_array().expect("launches");
    let bindings = plan["bindings"].as_array().expect("bindings");
    let unschedulable = plan["unschedulable"].as_array().expect("unschedulable");
    assert!(plan["disruptions"].as_array().is_some_and(|d| d.is_empty()));

    // 6 web + 3 cache + 2 train pods are placed; the s390x pod is not.
    assert_eq!(bindings.len(), 11, "{plan:#}");
    assert_eq!(unschedulable.len(), 1);
    assert_eq!(unschedulable[0]["pod"], "legacy/mainframe");
    let reason = unschedulable[0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("kubernetes.io/arch"), "{reason}");

    // Every launch's fields are there, types at most 60, price positive, pods listed.
    let mut pods_in_launches = 0;
    for l in launches {
        let types = l["instance_types"].as_array().expect("types");
        assert!(!types.is_empty() && types.len() <= 60);
        assert!(l["price_per_hour"].as_f64().unwrap_or(0.0) > 0.0);
        assert!(!l["zones"].as_array().expect("zones").is_empty());
        assert!(!l["capacity_types"]
            .as_array()
            .expect("capacity types")
            .is_empty());
        pods_in_launches += l["pods"].as_array().expect("pods").len();
    }
    assert_eq!(pods_in_launches, 11);

    // GPU pods land on the gpu NodePool, on-demand only.
    let gpu: Vec<&Value> = launches.iter().filter(|l| l["nodepool"] == "gpu").collect();
    assert!(!gpu.is_empty());
    for l in gpu {
        assert_eq!(l["capacity_types"], serde_json::json!(["on-demand"]));
    }

    // The web pods are spread over three zones, two per zone.
    let mut per_zone = std::collections::BTreeMap::new();
    for l in launches {
        let zones = l["zones"].as_array().expect("zones");
        let webs = l["pods"]
            .as_array()
            .expect("pods")
            .iter()
            .filter(|p| p.as_str().is_some_and(|p| p.starts_with("shop/web-")))
            .count();
        if webs > 0 {
            assert_eq!(
                zones.len(),
                1,
                "a launch holding spread pods is pinned to one zone"
            );
            *per_zone
                .entry(zones[0].as_str().unwrap_or_default().to_string())
                .or_insert(0) += webs;
        }
    }
    assert_eq!(per_zone.len(), 3, "{per_zone:?}");
    assert!(per_zone.values().all(|n| *n == 2), "{per_zone:?}");

    // The summary adds up.
    let sum: f64 = launches
        .iter()
        .map(|l| l["price_per_hour"].as_f64().unwrap_or(0.0))
        .sum();
    let cost = plan["summary"]["cost_per_hour"].as_f64().expect("cost");
    assert!((sum - cost).abs() < 1e-6);
    let bound = plan["summary"]["lower_bound_per_hour"]
        .as_f64()
        .expect("bound");
    assert!(
        bound > 0.0 && bound <= cost + 1e-9,
        "bound {bound} cost {cost}"
    );
    assert_eq!(plan["summary"]["pods_pending"], 12);
    assert_eq!(
        plan["summary"]["launches"].as_u64(),
        Some(launches.len() as u64)
    );
}

#[test]
fn same_input_same_plan() {
    let a = plan_json(&["-f", "examples/cluster"]);
    let b = plan_json(&[
        "-f",
        "examples/cluster/workloads.yaml",
        "examples/cluster/nodepools.yaml",
        "-w",
        "2",
    ]);
    assert_eq!(a["launches"], b["launches"]);
    assert_eq!(a["bindings"], b["bindings"]);
}

#[test]
fn malformed_manifest_is_a_clear_error() {
    let out = dovetail(&["plan", "-f", "tests/fixtures/bad-quantity.yaml"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for part in [
        "bad-quantity.yaml",
        "document 2",
        "default/broken",
        "spec.containers[0].resources.requests.cpu",
    ] {
        assert!(err.contains(part), "error should name {part}: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn unknown_region_is_a_clear_error() {
    let out = dovetail(&["plan", "-f", "examples/cluster", "--region", "mars-north-1"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("mars-north-1") && err.contains("us-east-1"),
        "{err}"
    );
}

#[test]
fn table_output_names_launches_and_reasons() {
    let out = dovetail(&["plan", "-f", "examples/cluster"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("LAUNCH")
            && text.contains("UNSCHEDULABLE")
            && text.contains("legacy/mainframe"),
        "{text}"
    );
}

// ---------------------------------------------------------------------------------------------
// Disruption: examples/disruption at fixed times. Its nodes are named for what the manifests
// make of them (see the comments in examples/disruption/nodes.yaml).

/// Monday 2026-11-30, noon UTC: inside the NodePool's business-hours budget window.
const MONDAY_NOON: &str = "2026-11-30T12:00:00Z";
/// The same Monday at 20:00 UTC: the window (09:00 for 8h) has closed.
const MONDAY_EVENING: &str = "2026-11-30T20:00:00Z";
/// Saturday 2026-12-05, noon UTC: the schedule is Monday to Friday only.
const SATURDAY_NOON: &str = "2026-12-05T12:00:00Z";

fn disruption_plan(now: &str, extra: &[&str]) -> Value {
    let mut args = vec!["-f", "examples/disruption", "--now", now];
    args.extend_from_slice(extra);
    plan_json(&args)
}

/// The disruption entries of one node.
fn entries<'a>(plan: &'a Value, node: &str) -> Vec<&'a Value> {
    plan["disruptions"]
        .as_array()
        .map(|ds| ds.iter().filter(|d| d["node"] == node).collect())
        .unwrap_or_default()
}

/// The single disruption entry of a node.
fn entry<'a>(plan: &'a Value, node: &str) -> &'a Value {
    let found = entries(plan, node);
    assert_eq!(found.len(), 1, "one entry for {node}: {plan:#}");
    found[0]
}

fn blocked_by(d: &Value) -> &str {
    d["blocked_by"].as_str().unwrap_or_default()
}

/// A node disrupted now: a command, no blocker.
fn assert_disrupted(plan: &Value, node: &str, reason: &str) {
    let d = entry(plan, node);
    assert_eq!(d["reason"], reason, "{d:#}");
    assert!(d["command"].is_string(), "{node} has a command: {d:#}");
    assert!(d["blocked_by"].is_null(), "{node} is not blocked: {d:#}");
    assert_eq!(d["nodepool"], "general");
}

/// A candidate held back: no command, a blocker naming `why`.
fn assert_blocked(plan: &Value, node: &str, why: &[&str]) {
    let d = entry(plan, node);
    assert!(d["command"].is_null(), "{node} has no command: {d:#}");
    let by = blocked_by(d);
    for part in why {
        assert!(by.contains(part), "{node} blocked by {part:?}: {d:#}");
    }
}

#[test]
fn plans_disruption_of_the_example_cluster() {
    let plan = disruption_plan(MONDAY_NOON, &[]);

    assert_disrupted(&plan, "empty", "Empty");
    assert_disrupted(&plan, "drifted", "Drifted");
    assert_disrupted(&plan, "expired", "Expired");
    assert_blocked(
        &plan,
        "pinned",
        &["karpenter.sh/do-not-disrupt", "ml/train-step-41-k9v3p"],
    );
    assert_blocked(&plan, "guarded", &["PodDisruptionBudget", "shop/checkout"]);
    // Noon on a Monday is inside the budget window that allows no Underutilized disruption.
    assert_blocked(&plan, "underused", &["budget", "Underutilized"]);
    assert_eq!(entry(&plan, "underused")["reason"], "Underutilized");

    let disruptions = plan["disruptions"].as_array().expect("disruptions");
    let nodes: Vec<&str> = disruptions
        .iter()
        .filter_map(|d| d["node"].as_str())
        .collect();
    let mut sorted = nodes.clone();
    sorted.sort();
    assert_eq!(nodes, sorted, "disruptions are sorted by node");

    // An empty node goes without replacement and saves its whole price; the drifted and expired
    // nodes' pods are too big for the room left elsewhere, so each gets a replacement, listed
    // among the launches as replacing it.
    let empty = entry(&plan, "empty");
    assert_eq!(empty["replacements"], serde_json::json!([]));
    assert!(empty["savings_per_hour"].as_f64().unwrap_or(0.0) > 0.0);
    assert_eq!(empty["nodeclaim"], "general-4kq7p");
    let launches = plan["launches"].as_array().expect("launches");
    for node in ["drifted", "expired"] {
        let names = entry(&plan, node)["replacements"]
            .as_array()
            .expect("replacements")
            .clone();
        assert_eq!(names.len(), 1, "{node}: {plan:#}");
        let launch = launches
            .iter()
            .find(|l| l["name"] == names[0])
            .unwrap_or_else(|| panic!("{node}'s replacement is a launch: {plan:#}"));
        assert_eq!(launch["replaces"], serde_json::json!([node]));
        assert_eq!(launch["capacity_types"], serde_json::json!(["on-demand"]));
    }

    // Distinct commands; the summary counts each command's savings once.
    let commands: std::collections::BTreeMap<&str, f64> = disruptions
        .iter()
        .filter_map(|d| Some((d["command"].as_str()?, d["savings_per_hour"].as_f64()?)))
        .collect();
    assert_eq!(commands.len(), 3, "{plan:#}");
    let summary = &plan["summary"];
    assert_eq!(summary["nodes_to_disrupt"], 3);
    assert_eq!(summary["replacement_launches"], 2);
    assert_eq!(
        summary["launches"], 0,
        "no pending pods, no launches for them"
    );
    let savings = summary["savings_per_hour"].as_f64().expect("savings");
    assert!((savings - commands.values().sum::<f64>()).abs() < 1e-6);

    // None of the NodeClaims carries dovetail's drift hashes yet: each is adopted once.
    let adopted: Vec<&str> = plan["adoptions"]
        .as_array()
        .expect("adoptions")
        .iter()
        .filter_map(|a| a["nodeclaim"].as_str())
        .collect();
    assert_eq!(
        adopted,
        [
            "general-2hv9w",
            "general-4kq7p",
            "general-5rb6k",
            "general-7tn3d",
            "general-8xm2c",
            "general-9cz4f"
        ]
    );
}

#[test]
fn the_budget_schedule_holds_consolidation_only_in_its_window() {
    for now in [MONDAY_EVENING, SATURDAY_NOON] {
        let plan = disruption_plan(now, &[]);
        assert_disrupted(&plan, "underused", "Underutilized");
        // Its one small pod fits in the room left on other nodes: deleted, not replaced.
        let d = entry(&plan, "underused");
        assert_eq!(d["replacements"], serde_json::json!([]), "{now}: {d:#}");
        // The blockers that do not depend on time still hold.
        assert_blocked(&plan, "pinned", &["karpenter.sh/do-not-disrupt"]);
        assert_blocked(&plan, "guarded", &["PodDisruptionBudget"]);
    }
}

#[test]
fn spot_to_spot_replacement_needs_its_feature_gate() {
    let fixture = "tests/fixtures/spot-to-spot.yaml";
    let plan = |gates: &[&str]| {
        let mut args = vec!["-f", fixture, "--now", MONDAY_NOON];
        args.extend_from_slice(gates);
        plan_json(&args)
    };
    for off in [
        &[][..],
        &["--feature-gates", "SpotToSpotConsolidation=false"],
    ] {
        let p = plan(off);
        assert!(
            entries(&p, "spot-big")
                .iter()
                .all(|d| d["command"].is_null()),
            "{off:?}: {p:#}"
        );
        assert!(p["launches"].as_array().is_some_and(|l| l.is_empty()));
    }

    let p = plan(&["--feature-gates", "SpotToSpotConsolidation=true"]);
    let d = entry(&p, "spot-big");
    assert_eq!(d["reason"], "Underutilized", "{d:#}");
    assert!(d["command"].is_string(), "{d:#}");
    let launches = p["launches"].as_array().expect("launches");
    assert_eq!(launches.len(), 1, "{p:#}");
    let l = &launches[0];
    assert_eq!(d["replacements"], serde_json::json!([l["name"].clone()]));
    assert_eq!(l["capacity_types"], serde_json::json!(["spot"]));
    // Karpenter's spot-to-spot rule: at least 15 cheaper types, and the list cut to 15.
    assert_eq!(l["instance_types"].as_array().map(Vec::len), Some(15));
    assert!(d["savings_per_hour"].as_f64().unwrap_or(0.0) > 0.0);
}

#[test]
fn table_output_lists_disruptions() {
    let out = dovetail(&["plan", "-f", "examples/disruption", "--now", MONDAY_NOON]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let row = |node: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{node} ")))
            .unwrap_or_default()
            .to_string()
    };
    assert!(text.contains("DISRUPT NODE"), "{text}");
    assert!(row("drifted").contains("Drifted"), "{text}");
    assert!(
        row("pinned").contains("karpenter.sh/do-not-disrupt"),
        "{text}"
    );
    assert!(text.contains("3 nodes to disrupt"), "{text}");
}

#[test]
fn bad_now_is_a_clear_error() {
    for bad in ["yesterday", "2026-11-30 12:00", "1970-01-01T00:00:00Z"] {
        let out = dovetail(&["plan", "-f", "examples/disruption", "--now", bad]);
        assert!(!out.status.success(), "{bad} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--now") && err.contains(bad), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn bad_feature_gates_are_clear_errors() {
    for (gates, names) in [
        (
            "NodeRepair=true",
            &["NodeRepair", "SpotToSpotConsolidation"][..],
        ),
        ("SpotToSpotConsolidation=maybe", &["\"maybe\""][..]),
        ("SpotToSpotConsolidation", &["no value"][..]),
    ] {
        let out = dovetail(&[
            "plan",
            "-f",
            "examples/disruption",
            "--feature-gates",
            gates,
        ]);
        assert!(!out.status.success(), "{gates} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--feature-gates"), "{err}");
        for name in names {
            assert!(err.contains(name), "error should name {name}: {err}");
        }
    }
}

#[test]
fn interruption_messages_disrupt_their_nodes_at_once() {
    // A spot interruption warning for `pinned`'s instance and a rebalance recommendation for
    // `guarded`'s, as the SQS queue would deliver them.
    let plan = disruption_plan(MONDAY_NOON, &["--interruptions", "examples/interruptions"]);
    // Interruption is forceful: the do-not-disrupt pod that held `pinned` does not.
    assert_disrupted(&plan, "pinned", "Interrupted");
    // A rebalance recommendation is recorded, not acted on: `guarded` stays as it was.
    assert_blocked(&plan, "guarded", &["PodDisruptionBudget"]);
    // The other decisions are those without messages.
    for (node, reason) in [
        ("empty", "Empty"),
        ("drifted", "Drifted"),
        ("expired", "Expired"),
    ] {
        assert_disrupted(&plan, node, reason);
    }
}

/// A temporary copy of `examples/disruption` with `guarded` launched into capacity block
/// `cr-0block`, which ends at `end`.
fn capacity_block_cluster(end: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "dovetail-block-{}-{}",
        std::process::id(),
        end.replace(':', "")
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/disruption");
    for file in ["nodepool.yaml", "nodes.yaml", "pods.yaml"] {
        let text = std::fs::read_to_string(example.join(file)).expect("example");
        let text = text
            .replace(
                "    kubernetes.io/hostname: guarded\n",
                "    kubernetes.io/hostname: guarded\n    karpenter.k8s.aws/capacity-reservation-id: cr-0block\n",
            )
            .replace(
                "status:\n  amis:\n",
                &format!(
                    "status:\n  capacityReservations:\n    - id: cr-0block\n      reservationType: capacity-block\n      endTime: \"{end}\"\n  amis:\n"
                ),
            );
        std::fs::write(dir.join(file), text).expect("write");
    }
    dir
}

#[test]
fn capacity_block_nodes_are_drained_forty_minutes_before_the_block_ends() {
    // Ends 30 minutes after noon: EC2 starts reclaiming at 11:30, dovetail drains from 11:20.
    let soon = capacity_block_cluster("2026-11-30T12:30:00Z");
    let plan = plan_json(&["-f", soon.to_str().expect("path"), "--now", MONDAY_NOON]);
    assert_disrupted(&plan, "guarded", "Interrupted");
    // Ends 41 minutes after noon: not yet.
    let later = capacity_block_cluster("2026-11-30T12:41:00Z");
    let plan = plan_json(&["-f", later.to_str().expect("path"), "--now", MONDAY_NOON]);
    assert_blocked(&plan, "guarded", &["PodDisruptionBudget"]);
    for dir in [soon, later] {
        std::fs::remove_dir_all(dir).ok();
    }
}

#[test]
fn a_broken_interruption_message_is_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("dovetail-bad-message-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("queue.json");
    let body = std::fs::read_to_string("data/events/spot_interruption_warning.json")
        .expect("sample")
        .replace("\"instance-id\": \"i-0123456789\",", "");
    std::fs::write(&file, body).expect("write");
    let out = dovetail(&[
        "plan",
        "-f",
        "examples/disruption",
        "--interruptions",
        file.to_str().expect("path"),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("queue.json: message 1 (id 1e5527d7-bb36-4607-3370-4164db56a40e): detail.instance-id: required field is missing"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    std::fs::remove_dir_all(dir).ok();
}

/// `dovetail plan … | head`: a reader that closes the pipe early ends the output quietly, with
/// success, not a panic (exit code 101).
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    for format in ["json", "table"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_dovetail"))
            .args(["plan", "-o", format, "-f", "examples/cluster"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("dovetail runs");
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("dovetail ends");
        assert!(
            out.status.success(),
            "{format}: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn worker_counts_outside_their_range_are_refused() {
    for w in ["0", "257", "1000", "many"] {
        let out = dovetail(&["plan", "-f", "examples/cluster", "-w", w]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "-w {w} accepted");
        assert!(err.contains("--workers") || err.contains("-w"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert!(dovetail(&["plan", "-f", "examples/cluster", "-w", "2"])
        .status
        .success());
}

/// Output to a full disk is an error naming what was being written, never a panic, in every
/// subcommand that prints to standard output.
#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_is_an_error_not_a_panic() {
    let cases: [(&[&str], &str); 3] = [
        (
            &["plan", "-o", "json", "-f", "examples/cluster"],
            "writing the plan",
        ),
        (
            &["plan", "-o", "table", "-f", "examples/cluster"],
            "writing the plan",
        ),
        (&["crds"], "writing the crds"),
    ];
    for (args, needle) in cases {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let out = Command::new(env!("CARGO_BIN_EXE_dovetail"))
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(full)
            .output()
            .expect("dovetail runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
/// `examples/cluster` with `edit` applied to its NodePools file, in a fresh folder.
fn edited_cluster(name: &str, edit: impl Fn(String) -> String) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("dovetail-bad-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster");
    for entry in std::fs::read_dir(&example).expect("examples/cluster") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("example");
        let file = path.file_name().expect("a file name");
        let text = if file == "nodepools.yaml" {
            edit(text)
        } else {
            text
        };
        std::fs::write(dir.join(file), text).expect("write");
    }
    dir
}

#[test]
fn what_karpenters_crd_refuses_is_refused_naming_the_field() {
    let dir = edited_cluster("weight", |t| t.replacen("weight: 10", "weight: 0", 1));
    let out = dovetail(&["plan", "-f", dir.to_str().expect("UTF-8")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "nodepools.yaml: document 1: NodePool general: spec.weight: 0 is not between 1 and 100"
        ),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_nodeclass_with_no_amis_launches_nothing_and_says_why() {
    let dir = edited_cluster("no-amis", |t| {
        t.replacen("status:\n", "status:\n  amis: []\n", 1)
    });
    let plan = plan_json(&["-f", dir.to_str().expect("UTF-8")]);
    assert_eq!(plan["launches"], serde_json::json!([]), "{plan:#}");
    let unschedulable = plan["unschedulable"].as_array().expect("unschedulable");
    assert!(!unschedulable.is_empty());
    for u in unschedulable {
        let reason = u["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains(
                "NodePool general: EC2NodeClass default is not ready: status.amis is empty"
            ),
            "{reason}"
        );
    }
}

#[test]
fn the_bundled_nodeclass_status_is_assumed_and_noted() {
    let plan = plan_json(&["-f", "examples/cluster"]);
    let notes: Vec<&str> = plan["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        notes.iter().any(|n| n.starts_with("EC2NodeClass default: ")
            && n.contains("status.amis is absent")),
        "{notes:?}"
    );
}

#[test]
fn yaml_nested_deep_is_refused_at_once() {
    let dir = std::env::temp_dir().join(format!("dovetail-deep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("deep.yaml");
    std::fs::write(
        &file,
        format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
    )
    .expect("write");
    let out = dovetail(&["plan", "-f", file.to_str().expect("UTF-8")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("deep.yaml: document 1: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
