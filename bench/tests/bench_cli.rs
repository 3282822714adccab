//! The scheduling bench end to end at a tiny size: it runs its changes, checks them against
//! fresh engines, and writes a summary whose tallies say every pod was decided exactly once.

use serde_json::Value;
use std::process::Command;

#[test]
fn a_tiny_run_accounts_for_every_pod_and_writes_its_report() {
    let out = std::env::temp_dir().join(format!("dovetail-bench-cli-{}", std::process::id()));
    let status = Command::new(env!("CARGO_BIN_EXE_dovetail-bench"))
        .args(["--sizes", "60", "--changes", "6", "--workers", "1"])
        .args(["--sample-every", "2", "--out"])
        .arg(&out)
        .status()
        .expect("the bench starts");
    assert!(status.success(), "{status}");
    let text = std::fs::read_to_string(out.join("summary.json")).expect("summary.json written");
    let summary: Value = serde_json::from_str(&text).expect("summary.json is JSON");
    let changes = &summary["results"]["changes"][0];
    assert_eq!(changes["changes"], 6, "{changes}");
    let checks = changes["checks"].as_u64().expect("checks");
    assert!(checks > 0, "no from-scratch sample: {changes}");
    assert_eq!(changes["sound"].as_u64(), Some(checks), "{changes}");
    let tally = &changes["final_tally"];
    assert_eq!(tally["unaccounted"], 0, "{tally}");
    assert_eq!(tally["duplicated"], 0, "{tally}");
    // The mix alternately adds and removes a pod, so 60 pods are decided at the end.
    let decided =
        tally["bound"].as_u64().unwrap_or(0) + tally["unschedulable"].as_u64().unwrap_or(0);
    assert_eq!(decided, 60, "{tally}");
    for file in ["report.md", "chart.svg"] {
        assert!(out.join(file).exists(), "{file} missing");
    }
    let _ = std::fs::remove_dir_all(&out);
}
