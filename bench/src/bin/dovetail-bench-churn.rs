//! `dovetail-bench-churn`: the churn rows of issue 20. For each size, writes the churn trace
//! (`dovetail_bench::churn`) and its NodePool, replays it with `dovetail replay --json` (the
//! binary beside this one unless `--dovetail` says otherwise), and reports the engine's update
//! time per epoch (hdrhistogram percentiles), the wall time and the replay's peak RSS, with a
//! chart (`chart.svg`). `--render FILE...` draws committed results side by side instead,
//! measuring nothing.

use anyhow::{bail, Context, Result};
use clap::Parser;
use dovetail_bench::churn::{write_trace, Churn, NODEPOOLS_YAML};
use dovetail_bench::churn_chart::{self, ChurnRun};
use serde_json::{json, Value};
use std::io::BufWriter;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

#[derive(Debug, Parser)]
#[command(name = "dovetail-bench-churn", version)]
struct Args {
    /// Pods created at the start, one replay each.
    #[arg(long, value_delimiter = ',', default_value = "20000")]
    sizes: Vec<usize>,
    #[arg(long, default_value_t = 50)]
    apps: usize,
    /// Minutes of one change a second after the start.
    #[arg(long, default_value_t = 20)]
    minutes: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The `dovetail` binary (default: the one beside this binary).
    #[arg(long)]
    dovetail: Option<PathBuf>,
    #[arg(long, default_value = "target/bench-churn")]
    out: PathBuf,
    /// Results to draw side by side into `OUT/chart.svg` (the bench's `results.json` or a
    /// replay's `--json`), without running anything.
    #[arg(long, num_args = 1..)]
    render: Vec<PathBuf>,
    /// With `--render`: one label per file (default: the file's name).
    #[arg(long, value_delimiter = ',')]
    labels: Vec<String>,
    /// With `--render`: the chart's title.
    #[arg(
        long,
        default_value = "Churn replays: engine update per epoch (log scale)"
    )]
    title: String,
}

/// Draws `files` side by side into `out/chart.svg`.
fn render(files: &[PathBuf], labels: &[String], title: &str, out: &std::path::Path) -> Result<()> {
    if !labels.is_empty() && labels.len() != files.len() {
        bail!(
            "--labels gives {} labels for {} files",
            labels.len(),
            files.len()
        );
    }
    let mut runs: Vec<ChurnRun> = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let label = match labels.get(i) {
            Some(l) => l.clone(),
            None => file
                .file_stem()
                .map(|s| {
                    s.to_string_lossy()
                        .trim_start_matches("results-")
                        .to_string()
                })
                .unwrap_or_default(),
        };
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        runs.extend(
            churn_chart::read_runs(&text, &label).with_context(|| file.display().to_string())?,
        );
    }
    write_chart(out, title, &runs)
}

fn write_chart(out: &std::path::Path, title: &str, runs: &[ChurnRun]) -> Result<()> {
    std::fs::create_dir_all(out)?;
    let path = out.join("chart.svg");
    std::fs::write(&path, churn_chart::chart(title, runs)?)
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("chart: {}", path.display());
    Ok(())
}

fn main() -> Result<()> {
    let args = Args::parse();
    if !args.render.is_empty() {
        return render(&args.render, &args.labels, &args.title, &args.out);
    }
    let dovetail = dovetail_bench::dovetail_binary(args.dovetail.as_deref())?;
    std::fs::create_dir_all(&args.out)?;
    let nodepools = args.out.join("nodepools.yaml");
    std::fs::write(&nodepools, NODEPOOLS_YAML)?;
    let mut rows = Vec::new();
    for &pods in &args.sizes {
        let churn = Churn {
            pods,
            apps: args.apps,
            minutes: args.minutes,
            seed: args.seed,
        };
        let trace = args.out.join(format!("churn-{pods}.jsonl"));
        let stats = {
            let mut w = BufWriter::new(std::fs::File::create(&trace)?);
            write_trace(&churn, &mut w)?
        };
        eprintln!(
            "[churn {pods}] trace written: {} pods at the start, {} created and {} deleted later; replaying …",
            stats.created_at_start, stats.created_later, stats.deleted
        );
        let started = Instant::now();
        // The replay's own progress lines go to the terminal.
        let out = Command::new(&dovetail)
            .arg("replay")
            .arg(&trace)
            .arg("--nodepools")
            .arg(&nodepools)
            .arg("--json")
            .stderr(Stdio::inherit())
            .output()
            .with_context(|| format!("running {}", dovetail.display()))?;
        if !out.status.success() {
            bail!("dovetail replay of {}: {}", trace.display(), out.status);
        }
        let s: Value = serde_json::from_slice(&out.stdout).context("the replay's JSON")?;
        let u = &s["engine_update_micros"];
        let d = &s["engine_decision_diffs"];
        let ms = |v: &Value| v.as_f64().unwrap_or(f64::NAN) / 1000.0;
        let row = json!({
            "pods": pods,
            "changes": stats.created_later + stats.deleted,
            "epochs": s["engine_epochs"],
            "update_ms": {"p50": ms(&u["p50"]), "p99": ms(&u["p99"]), "max": ms(&u["max"])},
            "decision_diffs": {"p50": d["p50"], "p99": d["p99"], "max": d["max"]},
            "wall_s": started.elapsed().as_secs_f64(),
            "peak_rss_gib": s["peak_rss_bytes"].as_f64().map(|b| b / (1u64 << 30) as f64),
            "peak_nodes": s["peak_nodes"],
            "cost_usd": s["total_cost_usd"],
            "cost_over_lower_bound": s["cost_over_lower_bound"],
        });
        eprintln!("[churn {pods}] {row}");
        rows.push(row);
    }
    let results = args.out.join("results.json");
    let json = serde_json::to_string_pretty(&rows)?;
    std::fs::write(&results, &json)?;
    write_chart(
        &args.out,
        "Churn replay: engine update per epoch (log scale)",
        &churn_chart::read_runs(&json, "")?,
    )?;
    println!("| pods at start | changes | epochs | update p50 | p99 | max | decision diffs p99 | max | wall | peak RSS | peak nodes |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {:.1} ms | {:.1} ms | {:.0} ms | {} | {} | {:.0} s | {} | {} |",
            r["pods"],
            r["changes"],
            r["epochs"],
            r["update_ms"]["p50"].as_f64().unwrap_or(f64::NAN),
            r["update_ms"]["p99"].as_f64().unwrap_or(f64::NAN),
            r["update_ms"]["max"].as_f64().unwrap_or(f64::NAN),
            r["decision_diffs"]["p99"],
            r["decision_diffs"]["max"],
            r["wall_s"].as_f64().unwrap_or(f64::NAN),
            r["peak_rss_gib"]
                .as_f64()
                .map_or("—".to_string(), |g| format!("{g:.2} GiB")),
            r["peak_nodes"],
        );
    }
    eprintln!("results: {}", results.display());
    Ok(())
}
