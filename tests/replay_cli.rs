//! `dovetail replay` and `dovetail trace convert` end to end, through the binary.

use serde_json::Value;
use std::process::Command;

fn dovetail(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_dovetail"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("dovetail runs")
}

#[test]
fn replays_the_bundled_sample_and_writes_a_report() {
    let dir = std::env::temp_dir().join(format!("dovetail-report-{}", std::process::id()));
    let dir_s = dir.display().to_string();
    let out = dovetail(&[
        "replay",
        "data/traces/dlrm-sample.jsonl",
        "--nodepools",
        "data/traces/nodepools.yaml",
        "--report",
        &dir_s,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("cost") && text.contains("pending p50"),
        "{text}"
    );
    for f in [
        "summary.json",
        "timeline.csv",
        "nodes.svg",
        "pending.svg",
        "cost.svg",
        "index.html",
    ] {
        assert!(dir.join(f).exists(), "{f} missing");
    }
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).expect("summary"))
            .expect("json");
    // The sample's 715 pods are all created and scheduled; something was launched and paid for.
    assert_eq!(summary["pods_created"], 715);
    assert_eq!(summary["pods_never_scheduled"], 0);
    assert!(summary["nodes_launched"].as_u64().unwrap_or(0) > 0);
    let cost = summary["total_cost_usd"].as_f64().unwrap_or(0.0);
    let bound = summary["lower_bound_usd"].as_f64().unwrap_or(0.0);
    assert!(bound > 0.0 && cost >= bound, "cost {cost} bound {bound}");
    let csv = std::fs::read_to_string(dir.join("timeline.csv")).expect("csv");
    let rows = csv.lines().count() - 1;
    let hours = summary["simulated_hours"].as_f64().unwrap_or(0.0);
    assert_eq!(
        rows as f64,
        (hours * 60.0).ceil(),
        "one timeline row per simulated minute"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_trace_line_is_an_error_with_its_line_number() {
    let out = dovetail(&["replay", "tests/fixtures/bad-trace.jsonl"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 3") && err.contains("cpu"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn skip_bad_counts_and_continues() {
    let out = dovetail(&[
        "replay",
        "tests/fixtures/bad-trace.jsonl",
        "--skip-bad",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).expect("json summary");
    assert_eq!(summary["pods_created"], 2);
    let notes = summary["notes"].to_string();
    assert!(
        notes.contains("1 malformed trace lines were skipped"),
        "{notes}"
    );
}

#[test]
fn converts_a_slice_of_the_real_dlrm_trace() {
    let out = dovetail(&[
        "trace",
        "convert",
        "dlrm",
        "data/traces/fixtures/dlrm_pod_events.head.csv",
        "--time-compress",
        "60",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap_or_default()).expect("header");
    assert_eq!(header["dovetail_trace"], 1);
    let events: Vec<Value> = lines
        .map(|l| serde_json::from_str(l).expect("event line"))
        .collect();
    assert!(!events.is_empty());
    let stats: Value = serde_json::from_slice(&out.stderr).expect("stats on stderr");
    assert_eq!(stats["events"].as_u64(), Some(events.len() as u64));
    let times: Vec<u64> = events
        .iter()
        .map(|e| e["t"].as_u64().unwrap_or(u64::MAX))
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "time never goes back"
    );
}
