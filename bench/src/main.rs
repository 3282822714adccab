//! `dovetail-bench`: rebuilds Karpenter's scheduling benchmark and measures dovetail on it.

use anyhow::{bail, Result};
use clap::Parser;
use dovetail_bench::measure::{run, scratch_child, Settings};
use dovetail_bench::processes;
use dovetail_bench::report::{read_summary, tables, write_all};
use std::path::PathBuf;

// The engine allocates and frees many small records per change; glibc's allocator spent a fifth
// of a disruption evaluation at 10,000 nodes consolidating freed chunks.
#[cfg(not(feature = "heap-profile"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Karpenter's scheduling benchmark mix: cold solves, then single-pod changes applied
/// incrementally and recomputed from scratch.
#[derive(Debug, Parser)]
#[command(name = "dovetail-bench", version)]
struct Args {
    /// Pod counts of the cold solves; changes run at the largest.
    #[arg(long, value_delimiter = ',', default_value = "1000,5000,20000")]
    sizes: Vec<usize>,
    /// Single-pod changes at the largest size (alternately add and remove).
    #[arg(long, default_value_t = 200)]
    changes: usize,
    /// Timely worker counts to run everything with.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    workers: Vec<usize>,
    /// Process counts to run everything with, each process with each worker count: 2 runs the
    /// engine as a timely cluster of this bench and a follower copy of it on 127.0.0.1.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    processes: Vec<usize>,
    /// Serve one engine as follower I of the processes at --peers (the bench starts these).
    #[arg(long, hide = true, requires = "peers")]
    serve_as: Option<usize>,
    /// host:port of every process, in order (with --serve-as).
    #[arg(long, hide = true, value_delimiter = ',')]
    peers: Vec<String>,
    /// Compute the state from scratch after every this many changes (at least five samples; 0:
    /// none, to profile the changes alone).
    #[arg(long, default_value_t = 20)]
    sample_every: usize,
    /// Split the pods over this many NodePools, one team each (1: Karpenter's benchmark), to
    /// measure how a change's cost falls when it re-plans only its packing group.
    #[arg(long, default_value_t = 1)]
    nodepools: usize,
    /// Seed of the pod generator.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Where to write summary.json, report.md and chart.svg.
    #[arg(long, default_value = "target/bench-report")]
    out: PathBuf,
    /// A note to add to the report (repeatable), e.g. why --changes was reduced.
    #[arg(long)]
    note: Vec<String>,
    /// Be a sample's from-scratch baseline (the bench starts these): the state after this many
    /// changes at the first of --sizes, computed from nothing; prints its report as JSON.
    #[arg(long, hide = true)]
    scratch_after: Option<usize>,
    /// Measure nothing: re-render report.md and chart.svg (and summary.json) into --out from
    /// this summary.json, adding any --note.
    #[arg(long)]
    render: Option<PathBuf>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(index) = args.serve_as {
        let workers = args.workers.first().copied().unwrap_or(1);
        return processes::serve(index, &args.peers, workers);
    }
    if let Some(path) = &args.render {
        let saved = read_summary(path)?;
        let mut notes = saved.notes;
        notes.extend(args.note.iter().cloned());
        println!("{}", tables(&saved.settings, &saved.results, &notes));
        write_all(
            &args.out,
            &saved.command,
            &saved.settings,
            &saved.results,
            &notes,
        )?;
        processes::append_report(&args.out, &saved.results)?;
        println!(
            "wrote {}/{{summary.json,report.md,chart.svg}}",
            args.out.display()
        );
        return Ok(());
    }
    if args.sizes.is_empty() || args.sizes.contains(&0) {
        bail!("--sizes needs at least one positive pod count");
    }
    if args.workers.is_empty() || args.workers.contains(&0) {
        bail!("--workers needs at least one positive worker count");
    }
    if args.processes.is_empty() || args.processes.contains(&0) {
        bail!("--processes needs at least one positive process count");
    }
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let layout = dovetail_bench::processes::Layout {
        processes: args.processes[0],
        workers: args.workers[0],
    };
    let size = args.sizes[0];
    let settings = Settings {
        sizes: args.sizes,
        changes: args.changes,
        workers: args.workers,
        seed: args.seed,
        sample_every: args.sample_every,
        nodepools: args.nodepools.max(1),
        processes: args.processes,
    };
    if let Some(after) = args.scratch_after {
        let report = scratch_child(&settings, layout, size, after)?;
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    println!(
        "dovetail-bench: sizes {:?}, workers {:?}, {} changes, seed {}",
        settings.sizes, settings.workers, settings.changes, settings.seed
    );
    let results = run(&settings)?;
    println!("\n{}", tables(&settings, &results, &args.note));
    write_all(&args.out, &command, &settings, &results, &args.note)?;
    processes::append_report(&args.out, &results)?;
    println!(
        "wrote {}/{{summary.json,report.md,chart.svg}}",
        args.out.display()
    );
    Ok(())
}
