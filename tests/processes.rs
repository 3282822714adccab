//! Two processes on 127.0.0.1 running one engine (`--processes 2`) decide what one process
//! decides, through the binary.

use serde_json::Value;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Far above what either command takes here: only a hang reaches it.
const RUN_LIMIT: Duration = Duration::from_secs(300);

/// A child process killed and reaped when dropped, so a failing test leaves none behind.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Reaped {
    /// Waits for the process to exit, killing it at `deadline`.
    fn finish(&mut self, what: &str, deadline: Instant) -> ExitStatus {
        loop {
            match self.0.try_wait() {
                Ok(Some(status)) => return status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Ok(None) => {
                    let _ = self.0.kill();
                    panic!("{what} did not finish within {RUN_LIMIT:?}");
                }
                Err(e) => panic!("waiting for {what}: {e}"),
            }
        }
    }
}

/// A scratch directory removed at the end of the test.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("dovetail-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn spawn(args: &[&str], out: &Path, err: &Path) -> Reaped {
    let child = Command::new(env!("CARGO_BIN_EXE_dovetail"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(out).expect("stdout file"))
        .stderr(std::fs::File::create(err).expect("stderr file"))
        .spawn()
        .expect("dovetail starts");
    Reaped(child)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Runs `args` in one process; its stdout.
fn one_process(scratch: &Scratch, args: &[&str]) -> String {
    let (out, err) = (scratch.0.join("one.out"), scratch.0.join("one.err"));
    let status = spawn(args, &out, &err).finish("the single process", Instant::now() + RUN_LIMIT);
    assert!(status.success(), "one process failed: {}", read(&err));
    read(&out)
}

/// Runs `args` as two processes on loopback; the driver's stdout, after checking that the
/// follower printed nothing and exited cleanly once the driver was done.
fn two_processes(scratch: &Scratch, args: &[&str]) -> String {
    let hostfile = scratch.0.join("hosts");
    std::fs::write(
        &hostfile,
        format!("127.0.0.1:{}\n127.0.0.1:{}\n", free_port(), free_port()),
    )
    .expect("hostfile");
    let hostfile = hostfile.display().to_string();
    let with = |index: &'static str| {
        let mut all = args.to_vec();
        all.extend(["--processes", "2", "--process-index", index, "--hostfile"]);
        all.push(&hostfile);
        all.into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    let (f_out, f_err) = (
        scratch.0.join("follower.out"),
        scratch.0.join("follower.err"),
    );
    let (d_out, d_err) = (scratch.0.join("driver.out"), scratch.0.join("driver.err"));
    let follower_args = with("1");
    let driver_args = with("0");
    // The follower first: it dials the driver until the driver listens.
    let mut follower = spawn(
        &follower_args.iter().map(String::as_str).collect::<Vec<_>>(),
        &f_out,
        &f_err,
    );
    let mut driver = spawn(
        &driver_args.iter().map(String::as_str).collect::<Vec<_>>(),
        &d_out,
        &d_err,
    );
    let deadline = Instant::now() + RUN_LIMIT;
    let status = driver.finish("the driver", deadline);
    // Dropping `follower` kills it if the driver failed.
    assert!(
        status.success(),
        "the driver failed: {}\nfollower: {}",
        read(&d_err),
        read(&f_err)
    );
    let status = follower.finish("the follower", deadline);
    assert!(status.success(), "the follower failed: {}", read(&f_err));
    assert_eq!(read(&f_out), "", "a follower prints nothing on stdout");
    read(&d_out)
}

const PLAN: &[&str] = &[
    "plan",
    "-f",
    "examples/cluster",
    "-o",
    "json",
    "--now",
    "2026-11-30T09:00:00Z",
];

#[test]
fn two_processes_plan_what_one_plans() {
    let scratch = Scratch::new("processes-plan");
    let one: Value = serde_json::from_str(&one_process(&scratch, PLAN)).expect("one: JSON");
    let two: Value = serde_json::from_str(&two_processes(&scratch, PLAN)).expect("two: JSON");
    // Not vacuous: the example cluster has pods to place and launches to make.
    assert!(
        one["bindings"].as_array().is_some_and(|b| !b.is_empty()),
        "{one:#}"
    );
    assert!(
        one["launches"].as_array().is_some_and(|l| !l.is_empty()),
        "{one:#}"
    );
    assert_eq!(one, two);
}

/// What a replay summary says about timing and this process, not about the decisions. On
/// several processes the replay polls through idle gaps (the driver does not see the
/// followers' timers, see `Engine::next_timer`), so it closes more epochs and skips no poll.
const TIMING: &[&str] = &[
    "wall_seconds",
    "engine_update_micros",
    "engine_decision_diffs",
    "peak_rss_bytes",
    "engine_epochs",
    "disruption_polls_skipped",
];

/// Sums over epochs: more epochs add the same terms in another order.
const SUMS: &[&str] = &["lower_bound_usd", "cost_over_lower_bound"];

/// The summary without its timing fields, and its sums, which are compared apart.
fn without_timing(mut summary: Value) -> (Value, Vec<f64>) {
    let mut sums = Vec::new();
    if let Some(fields) = summary.as_object_mut() {
        for field in TIMING {
            assert!(fields.remove(*field).is_some(), "summary has no {field}");
        }
        for field in SUMS {
            let v = fields.remove(*field).and_then(|v| v.as_f64());
            sums.push(v.unwrap_or_else(|| panic!("summary has no number {field}")));
        }
        // The cost breakdown is summed over epochs too.
        let breakdown = fields
            .remove("cost_breakdown")
            .expect("summary has a cost breakdown");
        for (part, v) in breakdown.as_object().into_iter().flatten() {
            sums.push(
                v.as_f64()
                    .unwrap_or_else(|| panic!("{part} is not a number")),
            );
        }
    }
    (summary, sums)
}

#[test]
fn two_processes_replay_what_one_replays() {
    let scratch = Scratch::new("processes-replay");
    // The bundled sample's first 120 events (of 823): launches and consolidation in seconds.
    let sample = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/data/traces/dlrm-sample.jsonl"
    ))
    .expect("the bundled sample");
    let mut head: String = sample.lines().take(121).map(|l| format!("{l}\n")).collect();
    // A replay ends once the world has settled after its last event; a deletion of no pod 10
    // minutes later keeps it going long enough for consolidation (as the old fixed settle did).
    let last_t = sample
        .lines()
        .nth(120)
        .and_then(|l| serde_json::from_str::<Value>(l).ok())
        .and_then(|v| v["t"].as_i64())
        .expect("the 120th event's time");
    head.push_str(&format!(
        "{{\"t\":{},\"event\":\"pod_deleted\",\"namespace\":\"none\",\"name\":\"none\"}}\n",
        last_t + 600_000
    ));
    let trace = scratch.0.join("head.jsonl");
    std::fs::write(&trace, head).expect("trace");
    let trace = trace.display().to_string();
    let replay = &[
        "replay",
        trace.as_str(),
        "--nodepools",
        "data/traces/nodepools.yaml",
        "--json",
    ];
    let one: Value = serde_json::from_str(&one_process(&scratch, replay)).expect("one: JSON");
    let two: Value = serde_json::from_str(&two_processes(&scratch, replay)).expect("two: JSON");
    assert!(one["nodes_launched"].as_u64().unwrap_or(0) > 0, "{one:#}");
    assert!(
        one["disruption_commands"].as_u64().unwrap_or(0) > 0,
        "{one:#}"
    );
    let ((one, one_sums), (two, two_sums)) = (without_timing(one), without_timing(two));
    assert_eq!(one, two);
    for (a, b) in one_sums.iter().zip(&two_sums) {
        assert!(
            (a - b).abs() <= 1e-9 * a.abs().max(1.0),
            "{one_sums:?} vs {two_sums:?}"
        );
    }
}

#[test]
fn a_follower_of_another_shape_is_refused() {
    let scratch = Scratch::new("processes-shape");
    let hostfile = scratch.0.join("hosts");
    std::fs::write(
        &hostfile,
        format!("127.0.0.1:{}\n127.0.0.1:{}\n", free_port(), free_port()),
    )
    .expect("hostfile");
    let hostfile = hostfile.display().to_string();
    let run = |index: &str, workers: &str, name: &str| {
        let mut args = PLAN.to_vec();
        args.extend(["-w", workers, "--processes", "2", "--process-index", index]);
        args.extend(["--hostfile", hostfile.as_str()]);
        let (out, err) = (
            scratch.0.join(format!("{name}.out")),
            scratch.0.join(format!("{name}.err")),
        );
        (spawn(&args, &out, &err), err)
    };
    let (mut follower, f_err) = run("1", "2", "follower");
    let (mut driver, d_err) = run("0", "1", "driver");
    let deadline = Instant::now() + RUN_LIMIT;
    assert!(!driver.finish("the driver", deadline).success());
    assert!(!follower.finish("the follower", deadline).success());
    let text = read(&d_err);
    assert!(text.contains("same --processes and -w"), "{text}");
    assert!(read(&f_err).contains("handshake"), "{}", read(&f_err));
}
