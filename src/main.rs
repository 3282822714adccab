//! dovetail: a Kubernetes node autoscaler in the mould of Karpenter, whose decisions are
//! standing queries kept up to date by differential dataflow.

mod plan;
mod replay;
mod report;
mod trace;

use anyhow::Result;
use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "dovetail", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
        /// Timely worker threads.
        #[arg(short = 'w', long, default_value_t = 1)]
        workers: usize,
    },
    /// The embedded default: replay a workload trace against a simulated cluster and EC2, with
    /// the real engine making every decision; print a summary and optionally write a report.
    Replay(replay::ReplayArgs),
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
    match Cli::parse().command {
        Command::Plan {
            paths,
            region,
            output,
            workers,
        } => {
            let result = plan::plan(&paths, &region, workers)?;
            match output {
                Format::Json => println!("{}", serde_json::to_string_pretty(&result)?),
                Format::Table => print!("{}", report::table(&result)),
            }
        }
        Command::Replay(args) => replay::run(args)?,
        Command::Trace { command } => trace::run(command)?,
    }
    Ok(())
}
