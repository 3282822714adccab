//! `dovetail-bench-plan`: issue 20's `dovetail plan` row. Writes the manifests of
//! `dovetail_bench::plan_cluster` (10,000 nodes with their NodeClaims, their bound pods and 200
//! pending ones by default), plans them with `dovetail plan -o json` (the binary beside this one
//! unless `--dovetail` says otherwise) and reports the wall time and the plan process's peak RSS,
//! read from its `VmHWM` every 20 ms while it runs.

use anyhow::{bail, Context, Result};
use clap::Parser;
use dovetail_bench::plan_cluster::{PlanCluster, NODEPOOL_YAML};
use serde_json::{json, Value};
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Parser)]
#[command(name = "dovetail-bench-plan", version)]
struct Args {
    #[arg(long, default_value_t = 10_000)]
    nodes: usize,
    /// Pods no node holds yet.
    #[arg(long, default_value_t = 200)]
    pending: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The `dovetail` binary (default: the one beside this binary).
    #[arg(long)]
    dovetail: Option<PathBuf>,
    #[arg(long, default_value = "target/bench-plan")]
    out: PathBuf,
}

/// The peak resident set of process `pid` so far, in bytes.
fn peak_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn main() -> Result<()> {
    let args = Args::parse();
    let dovetail = dovetail_bench::dovetail_binary(args.dovetail.as_deref())?;
    let manifests = args.out.join("manifests");
    std::fs::create_dir_all(&manifests)?;
    std::fs::write(manifests.join("nodepool.yaml"), NODEPOOL_YAML)?;
    let mut nodes = BufWriter::new(std::fs::File::create(manifests.join("nodes.yaml"))?);
    let mut pods = BufWriter::new(std::fs::File::create(manifests.join("pods.yaml"))?);
    let written = PlanCluster {
        nodes: args.nodes,
        pending: args.pending,
        seed: args.seed,
    }
    .write(&mut nodes, &mut pods)?;
    nodes.flush()?;
    pods.flush()?;
    drop((nodes, pods));
    eprintln!(
        "[plan] {} nodes, {} bound pods, {} pending written to {}; planning …",
        written.nodes,
        written.bound,
        written.pending,
        manifests.display()
    );
    let started = Instant::now();
    let output = args.out.join("plan.json");
    let mut child = Command::new(&dovetail)
        .arg("plan")
        .arg("-f")
        .arg(&manifests)
        .arg("-o")
        .arg("json")
        .arg("--now")
        .arg("2026-12-01T12:00:00Z")
        .stdout(std::fs::File::create(&output)?)
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("running {}", dovetail.display()))?;
    let mut peak = 0u64;
    let mut last_line = Instant::now();
    let status = loop {
        if let Some(rss) = peak_rss(child.id()) {
            peak = peak.max(rss);
        }
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if last_line.elapsed() >= Duration::from_secs(5) {
            eprintln!(
                "[plan] {:.0} s, peak RSS so far {:.2} GiB",
                started.elapsed().as_secs_f64(),
                peak as f64 / (1u64 << 30) as f64
            );
            last_line = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let wall = started.elapsed().as_secs_f64();
    if !status.success() {
        bail!("dovetail plan of {}: {status}", manifests.display());
    }
    let plan: Value =
        serde_json::from_reader(std::fs::File::open(&output)?).context("the plan's JSON")?;
    let s = &plan["summary"];
    let row = json!({
        "nodes": written.nodes,
        "bound_pods": written.bound,
        "pending_pods": written.pending,
        "wall_s": wall,
        "peak_rss_gib": peak as f64 / (1u64 << 30) as f64,
        "launches": s["launches"],
        "nodes_to_disrupt": s["nodes_to_disrupt"],
        "bindings": plan["bindings"].as_array().map_or(0, Vec::len),
    });
    std::fs::write(
        args.out.join("results.json"),
        serde_json::to_string_pretty(&row)?,
    )?;
    println!("| nodes | bound pods | pending | wall | peak RSS | launches | bindings | nodes to disrupt |");
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {} | {:.1} s | {:.2} GiB | {} | {} | {} |",
        written.nodes,
        written.bound,
        written.pending,
        wall,
        peak as f64 / (1u64 << 30) as f64,
        row["launches"],
        row["bindings"],
        row["nodes_to_disrupt"],
    );
    Ok(())
}
