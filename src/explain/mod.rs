//! `dovetail explain`: why the engine decides what it does about one object. The answers come
//! from the standing queries — their decisions and the verdicts they keep — run on the
//! manifests as `plan` runs them; reasons are typed there and put into words only here.

pub mod decided;
pub mod launch;
pub mod node;
pub mod pod;

use crate::feature_gates::FeatureGates;
use crate::plan::PlanOptions;
use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum Explain {
    /// Each disruption method's verdict for a node (empty, drifted, expired, consolidatable,
    /// interrupted) and, when nothing happens, what blocks it.
    Node(node::NodeArgs),
    /// Where a pending pod may go: each NodePool's first blocker, nearest first, with the one
    /// change that would remove it; the preferences relaxed; the binding or launch it got.
    Pod(pod::PodArgs),
    /// A planned NodeClaim: its pods, its types in price order, its own pods' lower bound.
    Launch(launch::LaunchArgs),
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// What every explanation reads besides its object: the manifests and the time, as `plan`.
#[derive(Args)]
pub struct Source {
    /// Manifest files or folders (YAML or JSON, multi-document, `kind: List`).
    #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
    pub paths: Vec<PathBuf>,
    /// Region whose embedded catalogue, offerings and prices are used.
    #[arg(long, default_value = "us-east-1")]
    pub region: String,
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: Format,
    /// The time to explain at (RFC 3339), as `plan --now`. Default: now.
    #[arg(long, value_name = "RFC3339", value_parser = crate::plan::parse_now)]
    pub now: Option<u64>,
    /// Karpenter's feature gates, e.g. `SpotToSpotConsolidation=true`.
    #[arg(long, value_name = "NAME=BOOL,...", value_parser = crate::feature_gates::parse, default_value = "")]
    pub feature_gates: FeatureGates,
    /// Interruption messages, as `plan --interruptions`.
    #[arg(long, value_name = "PATH", num_args = 1..)]
    pub interruptions: Vec<PathBuf>,
}

impl Source {
    /// The plan options these arguments stand for, at `now_ms`.
    pub fn options(&self, now_ms: u64) -> PlanOptions<'_> {
        PlanOptions {
            region: &self.region,
            workers: 1,
            now_ms,
            gates: &self.feature_gates.0,
            interruptions: &self.interruptions,
        }
    }
}

/// Runs an explain subcommand; `wall_clock_ms` is the time when `--now` is not given.
pub fn run(e: Explain, wall_clock_ms: u64) -> Result<()> {
    match e {
        Explain::Node(args) => node::run(args, wall_clock_ms),
        Explain::Pod(args) => pod::run(args, wall_clock_ms),
        Explain::Launch(args) => launch::run(args, wall_clock_ms),
    }
}
