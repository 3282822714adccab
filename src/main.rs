//! dovetail: a Kubernetes node autoscaler in the mould of Karpenter, whose decisions are
//! standing queries kept up to date by differential dataflow.

mod cli_ranges;
mod processes;
mod replay_cmd;
mod report;
mod trace;

// In the library so `dovetail run` serves the same explanations over HTTP.
use dovetail::{explain, feature_gates, output, plan};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

// The engine allocates and frees many small records per change; glibc's allocator spent a fifth
// of a disruption evaluation at 10,000 nodes consolidating freed chunks.
#[cfg(not(feature = "heap-profile"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "dovetail", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    processes: processes::ProcessArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Json,
    Table,
}

#[derive(Subcommand)]
enum Command {
    /// What-if: read manifests, run the engine to quiescence, print its decisions.
    Plan {
        /// Manifest files or folders (YAML or JSON, multi-document, `kind: List`).
        #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
        paths: Vec<PathBuf>,
        /// Region whose embedded catalogue, offerings and prices are used.
        #[arg(long, default_value = "us-east-1")]
        region: String,
        #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
        output: Format,
        /// Timely worker threads (1 to 256).
        #[arg(short = 'w', long, default_value = "1", value_parser = cli_ranges::parse_workers)]
        workers: usize,
        /// The time to plan at (RFC 3339): expiry, consolidateAfter, do-not-disrupt durations
        /// and budget schedules are judged at it. Default: now.
        #[arg(long, value_name = "RFC3339", value_parser = plan::parse_now)]
        now: Option<u64>,
        /// Karpenter's feature gates, e.g. `SpotToSpotConsolidation=true`.
        #[arg(long, value_name = "NAME=BOOL,...", value_parser = feature_gates::parse, default_value = "")]
        feature_gates: feature_gates::FeatureGates,
        /// Interruption messages (EventBridge events as the SQS queue delivers them: files or
        /// folders of `*.json` / `*.jsonl`, several bodies per file allowed).
        #[arg(long, value_name = "PATH", num_args = 1..)]
        interruptions: Vec<PathBuf>,
    },
    /// Why the engine decides what it does about an object, from the manifests as `plan` reads
    /// them.
    Explain {
        #[command(subcommand)]
        what: explain::Explain,
    },
    /// The embedded default: replay a workload trace against a simulated cluster and EC2, with
    /// the real engine making every decision; print a summary and optionally write a report.
    Replay(replay_cmd::ReplayArgs),
    /// The control loop on the wall clock: the Kubernetes controller (`--cluster kube`, with
    /// EC2 or the simulated cloud), or EC2 for a simulated cluster (`--cloud aws --cluster sim`).
    Run(Box<dovetail::run::RunArgs>),
    /// Print the CustomResourceDefinitions of Karpenter's v1 APIs (NodePool, NodeClaim,
    /// EC2NodeClass, NodeOverlay) for a fresh install: `dovetail crds | kubectl apply -f -`.
    /// On a cluster that has Karpenter's own CRDs, keep those.
    Crds,
    /// Work with workload traces (convert the real Alibaba traces into dovetail's format).
    Trace {
        #[command(subcommand)]
        command: trace::TraceCommand,
    },
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DOVETAIL_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    if processes::join(&cli.processes, &cli.command)? {
        return Ok(());
    }
    match cli.command {
        Command::Plan {
            paths,
            region,
            output,
            workers,
            now,
            feature_gates,
            interruptions,
        } => {
            let now_ms = match now {
                Some(ms) => ms,
                None => wall_clock_ms()?,
            };
            let options = plan::PlanOptions {
                region: &region,
                workers,
                now_ms,
                gates: &feature_gates.0,
                interruptions: &interruptions,
            };
            let result = plan::plan(&paths, &options)?;
            match output {
                Format::Json => output::emit(
                    "plan",
                    &format!("{}\n", serde_json::to_string_pretty(&result)?),
                )?,
                Format::Table => output::emit("plan", &report::table(&result))?,
            }
        }
        Command::Explain { what } => explain::run(what, wall_clock_ms()?)?,
        Command::Replay(args) => replay_cmd::run(args)?,
        Command::Run(args) => {
            let to_file = args.summary.is_some();
            let summary = dovetail::run::run(*args)?;
            if !to_file {
                output::emit(
                    "run",
                    &format!("{}\n", serde_json::to_string_pretty(&summary)?),
                )?;
            }
        }
        Command::Crds => output::emit("crds", &dovetail::crds::stream())?,
        Command::Trace { command } => trace::run(command)?,
    }
    Ok(())
}

/// The wall clock in ms since the epoch: read here only, so everything below runs on a clock
/// it is given.
fn wall_clock_ms() -> Result<u64> {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("the system clock is before 1970")?;
    Ok(u64::try_from(since.as_millis())?)
}
