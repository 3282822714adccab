//! `dovetail trace convert`: the real Alibaba traces into dovetail's trace format.

use anyhow::{Context, Result};
use clap::{Subcommand, ValueEnum};
use dovetail_ingest::trace::{convert_dlrm, convert_openb, ConvertOptions};
use std::path::PathBuf;

#[derive(Clone, Copy, ValueEnum)]
pub enum Source {
    /// Alibaba cluster-trace-gpu-v2025 disaggregated DLRM (`dlrm_pod_events.csv`).
    Dlrm,
    /// Alibaba cluster-trace-gpu-v2023 openb (`openb_pod_events.csv`).
    Openb,
}

#[derive(Subcommand)]
pub enum TraceCommand {
    /// Convert a CSV of pod events into a dovetail trace (JSON lines) on stdout or --out.
    Convert {
        #[arg(value_enum)]
        source: Source,
        csv: PathBuf,
        #[arg(short, long)]
        out: Option<PathBuf>,
        /// Each pod becomes this many copies.
        #[arg(long, default_value_t = 1)]
        replicate: u32,
        /// Divide trace time by this factor.
        #[arg(long, default_value_t = 1.0)]
        time_compress: f64,
        /// Keep one group (DLRM app, openb pod) in N.
        #[arg(long, default_value_t = 1)]
        sample_one_in: u32,
        /// Stop after this many trace seconds.
        #[arg(long)]
        until_s: Option<f64>,
        /// Namespace of the converted pods.
        #[arg(long, default_value = "default")]
        namespace: String,
        /// Count malformed rows and continue.
        #[arg(long)]
        skip_bad: bool,
    },
}

pub fn run(command: TraceCommand) -> Result<()> {
    match command {
        TraceCommand::Convert {
            source,
            csv,
            out,
            replicate,
            time_compress,
            sample_one_in,
            until_s,
            namespace,
            skip_bad,
        } => {
            let opts = ConvertOptions {
                namespace,
                replicate,
                time_compress,
                sample_one_in,
                until_s,
                skip_bad,
                ..ConvertOptions::default()
            };
            let input = std::io::BufReader::new(
                std::fs::File::open(&csv).with_context(|| format!("opening {}", csv.display()))?,
            );
            let writer: Box<dyn std::io::Write> = match &out {
                Some(p) => Box::new(std::io::BufWriter::new(
                    std::fs::File::create(p)
                        .with_context(|| format!("creating {}", p.display()))?,
                )),
                None => Box::new(std::io::BufWriter::new(std::io::stdout())),
            };
            let stats = match source {
                Source::Dlrm => convert_dlrm(input, &opts, writer)?,
                Source::Openb => convert_openb(input, &opts, writer)?,
            };
            eprintln!("{}", serde_json::to_string_pretty(&stats)?);
        }
    }
    Ok(())
}
