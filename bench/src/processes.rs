//! The bench's engines on several processes: for each engine, the bench starts itself again as
//! followers on loopback (`--serve-as I --peers HOSTS`), which serve their share of it and
//! exit when the engine is dropped.

use anyhow::{bail, Context, Result};
use dovetail_dataflow::cluster::Cluster;
use dovetail_dataflow::engine::{self, Engine, Placement};
use dovetail_queries::provisioning;
use std::net::TcpListener;
use std::ops::{Deref, DerefMut};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a follower may take to exit after its engine was dropped.
const FOLLOWER_EXIT_WAIT: Duration = Duration::from_secs(30);

/// Where an engine runs: `workers` threads in each of `processes` processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub processes: usize,
    pub workers: usize,
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.processes > 1 {
            write!(
                f,
                "{} processes x {} worker(s)",
                self.processes, self.workers
            )
        } else {
            write!(f, "{} worker(s)", self.workers)
        }
    }
}

/// An engine and the follower processes serving it. The engine is dropped first (fields drop
/// in order), which tells the followers to exit; then they are reaped.
pub struct Started {
    engine: Engine,
    // Held for their `Drop`: reaped after the engine is gone.
    _followers: Vec<Follower>,
}

impl Deref for Started {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        &self.engine
    }
}

impl DerefMut for Started {
    fn deref_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }
}

/// A follower process, waited for (and killed past the wait) when dropped.
struct Follower(Child);

impl Drop for Follower {
    fn drop(&mut self) {
        let deadline = Instant::now() + FOLLOWER_EXIT_WAIT;
        loop {
            match self.0.try_wait() {
                Ok(Some(status)) if status.success() => return,
                Ok(Some(status)) => {
                    eprintln!("a follower of the bench's engine exited with {status}");
                    return;
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    eprintln!("a follower of the bench's engine did not exit: killed");
                    let _ = self.0.kill();
                    let _ = self.0.wait();
                    return;
                }
            }
        }
    }
}

/// Starts the provisioning queries on `layout`: with several processes, this process is the
/// driver and each other one a child of this binary.
pub fn start(layout: Layout) -> Result<Started> {
    if layout.processes <= 1 {
        let engine = Engine::start(layout.workers, provisioning).context("starting the engine")?;
        return Ok(Started {
            engine,
            _followers: Vec::new(),
        });
    }
    let hosts = (0..layout.processes)
        .map(|_| {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .context("finding a free port on 127.0.0.1")?
                .port();
            Ok(format!("127.0.0.1:{port}"))
        })
        .collect::<Result<Vec<String>>>()?;
    let exe = std::env::current_exe().context("finding the bench's own binary")?;
    let mut followers = Vec::new();
    for index in 1..layout.processes {
        let child = Command::new(&exe)
            .args([
                "--serve-as",
                &index.to_string(),
                "--peers",
                &hosts.join(","),
            ])
            .args(["--workers", &layout.workers.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .with_context(|| format!("starting follower {index} ({})", exe.display()))?;
        followers.push(Follower(child));
    }
    let placement = Placement {
        threads: layout.workers,
        cluster: Some(Cluster::new(hosts, 0)?),
    };
    let engine = Engine::start_on(&placement, provisioning).context("starting the engine")?;
    Ok(Started {
        engine,
        _followers: followers,
    })
}

/// A follower's life: serve one engine of the provisioning queries, then return.
pub fn serve(index: usize, peers: &[String], workers: usize) -> Result<()> {
    if index == 0 {
        bail!("--serve-as is for followers: 1 or more");
    }
    let placement = Placement {
        threads: workers,
        cluster: Some(Cluster::new(peers.to_vec(), index)?),
    };
    engine::serve(&placement, provisioning)
        .with_context(|| format!("follower {index} serving the engine"))
}

/// The several-process rows as markdown (empty when there are none): cold solves and the
/// change scenario beside the single-process rows of the same sizes.
pub fn table(results: &crate::measure::Results) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    if results.multi_process_cold.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "## Several processes (127.0.0.1; cold solve and one change)\n"
    );
    let _ = writeln!(
        s,
        "| layout | pods | cold seconds | pods/s | launches | bound | unaccounted |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|");
    for c in results.cold.iter().chain(&results.multi_process_cold) {
        let layout = Layout {
            processes: c.processes,
            workers: c.workers,
        };
        let _ = writeln!(
            s,
            "| {layout} | {} | {:.3} | {:.0} | {} | {} | {} |",
            c.pods, c.seconds, c.pods_per_sec, c.tally.launches, c.tally.bound, c.tally.unaccounted
        );
    }
    let changes: Vec<_> = results
        .changes
        .iter()
        .chain(&results.multi_process_changes)
        .collect();
    if !changes.is_empty() {
        let _ = writeln!(
            s,
            "\n| layout | pods | changes | incremental p50 ms | p99 ms | from scratch p50 ms | samples sound | decision diffs per change |"
        );
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|");
        for c in changes {
            let layout = Layout {
                processes: c.processes,
                workers: c.workers,
            };
            let _ = writeln!(
                s,
                "| {layout} | {} | {} | {:.1} | {:.1} | {:.1} | {}/{} | {:.1} |",
                c.pods,
                c.changes,
                c.incremental.p50_us as f64 / 1e3,
                c.incremental.p99_us as f64 / 1e3,
                c.from_scratch.p50_us as f64 / 1e3,
                c.sound,
                c.checks,
                c.mean_decision_diffs
            );
        }
    }
    s
}

/// Prints the several-process rows and appends them to `out`/report.md.
pub fn append_report(out: &std::path::Path, results: &crate::measure::Results) -> Result<()> {
    use std::io::Write;
    let text = table(results);
    if text.is_empty() {
        return Ok(());
    }
    println!("{text}");
    let path = out.join("report.md");
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    write!(file, "\n{text}").with_context(|| format!("writing {}", path.display()))
}
