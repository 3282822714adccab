//! `dovetail-bench-disruption`: every node's disruption status at scale, cold and after single
//! changes, against a from-scratch evaluation in the same run.

use anyhow::{Context, Result};
use clap::Parser;
use dovetail_bench::disruption::measure::{run, Settings};
use dovetail_bench::disruption::report::{markdown, write_all, Summary};
use std::path::PathBuf;

// The engine allocates and frees many small records per change; glibc's allocator spent a fifth
// of a disruption evaluation at 10,000 nodes consolidating freed chunks.
#[cfg(not(feature = "heap-profile"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(name = "dovetail-bench-disruption", version)]
struct Args {
    /// Managed nodes in the cluster (about ten pods each).
    #[arg(long, default_value_t = 10_000)]
    nodes: usize,
    /// Changes of each kind (delete a pod, add a node, change a price).
    #[arg(long, default_value_t = 20)]
    changes: usize,
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// From-scratch evaluations to time.
    #[arg(long, default_value_t = 3)]
    scratch_samples: usize,
    #[arg(long, default_value_t = 7)]
    seed: u64,
    #[arg(long, default_value = "target/bench-disruption")]
    out: PathBuf,
    /// Measure nothing: re-render report.md and chart.svg (and summary.json) into --out from
    /// this summary.json.
    #[arg(long)]
    render: Option<PathBuf>,
}

fn main() -> Result<()> {
    // `DOVETAIL_LOG=dovetail_queries=debug` shows where each evaluation's time goes.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DOVETAIL_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let a = Args::parse();
    if let Some(path) = &a.render {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let summary: Summary =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        write_all(&a.out, &summary)?;
        println!(
            "wrote {}/{{summary.json,report.md,chart.svg}}",
            a.out.display()
        );
        return Ok(());
    }
    let settings = Settings {
        nodes: a.nodes,
        changes: a.changes,
        workers: a.workers,
        scratch_samples: a.scratch_samples,
        seed: a.seed,
    };
    let results = run(&settings)?;
    let summary = Summary {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        settings,
        results,
    };
    println!("{}", markdown(&summary));
    write_all(&a.out, &summary)?;
    println!(
        "wrote {}/{{summary.json,report.md,chart.svg}}",
        a.out.display()
    );
    Ok(())
}
