//! `dovetail replay` and `dovetail trace convert` end to end, through the binary.

use serde_json::Value;
use std::process::Command;
mod cli;
use cli::{dovetail, refused};

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

/// A trace file in the temp folder, removed on drop.
struct TempTrace(std::path::PathBuf);

impl TempTrace {
    fn new(name: &str, lines: &[String]) -> TempTrace {
        let path = std::env::temp_dir().join(format!("dovetail-{}-{name}", std::process::id()));
        let mut text =
            String::from("{\"dovetail_trace\":1,\"source\":\"test\",\"time_unit\":\"ms\"}\n");
        for l in lines {
            text.push_str(l);
            text.push('\n');
        }
        std::fs::write(&path, text).expect("trace written");
        TempTrace(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temp path")
    }
}

impl Drop for TempTrace {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn pod_created(t: u64, name: &str) -> String {
    format!(
        "{{\"t\":{t},\"event\":\"pod_created\",\"pod\":{{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{{\"name\":\"{name}\",\"namespace\":\"default\"}},\"spec\":{{\"containers\":[{{\"name\":\"c\",\"resources\":{{\"requests\":{{\"cpu\":\"1\",\"memory\":\"1Gi\"}}}}}}]}}}}}}"
    )
}

#[test]
fn worker_counts_and_speeds_outside_their_ranges_are_refused() {
    let trace = "tests/fixtures/bad-trace.jsonl";
    for w in ["0", "257", "1000"] {
        refused(
            &dovetail(&["replay", trace, "-w", w]),
            "must be between 1 and 256",
        );
    }
    for speed in ["0", "-2", "NaN", "inf"] {
        refused(
            &dovetail(&["replay", trace, &format!("--speed={speed}")]),
            "finite number above 0",
        );
    }
}

#[test]
fn trace_times_past_the_horizon_are_refused_not_wrapped() {
    // 10^15 ms (31,700 years) ticked for ever; i64::MAX wrapped the clock to negative hours.
    for far in ["1000000000000000", "9223372036854775807"] {
        let trace = TempTrace::new(
            &format!("far-{far}.jsonl"),
            &[
                pod_created(0, "a"),
                pod_created(far.parse().expect("a number"), "b"),
            ],
        );
        refused(&dovetail(&["replay", trace.path()]), "line 3: t=");
        let out = dovetail(&["replay", trace.path()]);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("past the trace horizon"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn an_idle_simulated_day_costs_a_few_epochs() {
    // One pod at 0 keeps one node busy; the next event is a day later. Polling every 10 s
    // would close more than 8,640 epochs; an idle world skips to the engine's next timer.
    let day: u64 = 24 * 3_600_000;
    let trace = TempTrace::new(
        "idle-day.jsonl",
        &[pod_created(0, "a"), pod_created(day, "b")],
    );
    let out = dovetail(&[
        "replay",
        trace.path(),
        "--nodepools",
        "data/traces/nodepools.yaml",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).expect("summary JSON");
    assert_eq!(summary["pods_created"], 2);
    assert_eq!(summary["pods_never_scheduled"], 0);
    let epochs = summary["engine_epochs"].as_u64().expect("epochs");
    let skipped = summary["disruption_polls_skipped"]
        .as_u64()
        .expect("skipped");
    assert!(
        epochs < 1_000,
        "{epochs} epochs for an idle day: {summary:#}"
    );
    assert!(skipped > 8_000, "{skipped} polls skipped: {summary:#}");
}

#[test]
fn simulator_settings_that_would_spin_or_are_mistyped_name_the_field() {
    let dir = std::env::temp_dir().join(format!("dovetail-simcfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let cases = [
        (
            "zero-ttl.yaml",
            "capacity_per_offering: 0\nice_ttl_ms: 0\n",
            "ice_ttl_ms: 0 is below the minimum of 1000 ms",
        ),
        ("typed.yaml", "ice_ttl_ms: 3m\n", "ice_ttl_ms: invalid type"),
        (
            "typo.json",
            "{\"launch_to_runing_ms\": 5}",
            "launch_to_runing_ms",
        ),
    ];
    for (name, text, needle) in cases {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("config written");
        let out = dovetail(&[
            "replay",
            "tests/fixtures/bad-trace.jsonl",
            "--skip-bad",
            "--sim-config",
            path.to_str().expect("UTF-8 path"),
        ]);
        refused(&out, needle);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_capacity_anywhere_ends_with_pods_pending() {
    // Every offering is out of capacity: the engine tries the offerings, cheapest first, and
    // again at each capacity error's expiry, so launches never stop being attempted: the replay
    // runs to its cap (2 hours after the last event), says so, and reports the pod never
    // scheduled (no node is on its way for it).
    let dir = std::env::temp_dir().join(format!("dovetail-nocap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let config = dir.join("none.yaml");
    std::fs::write(&config, "capacity_per_offering: 0\n").expect("config");
    let trace = TempTrace::new("nocap.jsonl", &[pod_created(0, "a")]);
    let out = dovetail(&[
        "replay",
        trace.path(),
        "--nodepools",
        "data/traces/nodepools.yaml",
        "--sim-config",
        config.to_str().expect("UTF-8 path"),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).expect("summary JSON");
    assert_eq!(summary["nodes_launched"], 0);
    assert_eq!(summary["pods_never_scheduled"], 1);
    assert_eq!(summary["pods_waiting_for_node"], 0);
    assert_eq!(summary["settle_cap_hit"], true, "{summary:#}");
    assert!(
        summary["capacity_errors"].as_u64().unwrap_or(0) > 0,
        "{summary:#}"
    );
    let epochs = summary["engine_epochs"].as_u64().expect("epochs");
    // A few epochs per 3-minute capacity-error period over the 2 hours.
    assert!(epochs < 1_000, "{epochs} epochs");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `dovetail replay … | head` and a full disk: a closed pipe ends quietly, a full disk is an
/// error naming what was written; neither panics.
#[test]
fn a_closed_pipe_or_a_full_disk_does_not_panic() {
    let args = ["replay", "tests/fixtures/bad-trace.jsonl", "--skip-bad"];
    for json in [false, true] {
        let mut all = args.to_vec();
        if json {
            all.push("--json");
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_dovetail"))
            .args(&all)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("dovetail runs");
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("dovetail ends");
        assert!(
            out.status.success(),
            "{:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        if cfg!(target_os = "linux") {
            let full = std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .expect("/dev/full");
            let out = Command::new(env!("CARGO_BIN_EXE_dovetail"))
                .args(&all)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .stdout(full)
                .output()
                .expect("dovetail runs");
            refused(&out, "writing the summary to standard output");
        }
    }
}
