//! `--processes N --process-index I --hostfile F`: one engine run by several processes as a
//! timely cluster. Process 0 runs the command; every other process, started with the same
//! command and flags, serves its share of the engine until process 0 is done.

use anyhow::{bail, Context, Result};
use clap::Args;
use dovetail_dataflow::cluster::Cluster;
use dovetail_dataflow::engine::{self, Placement};
use std::path::PathBuf;

#[derive(Args)]
pub struct ProcessArgs {
    /// Run the engine on this many processes (a timely cluster), each started with the same
    /// command and flags and its own --process-index; `-w` stays workers per process.
    #[arg(long, global = true, default_value_t = 1, value_name = "N")]
    processes: usize,
    /// This process's place among them: 0 runs the command and prints its output; 1 and above
    /// serve the engine until process 0 finishes.
    #[arg(long, global = true, default_value_t = 0, value_name = "I")]
    process_index: usize,
    /// `host:port` of every process, one line each in process order (timely's hostfile).
    #[arg(long, global = true, value_name = "FILE")]
    hostfile: Option<PathBuf>,
}

impl ProcessArgs {
    /// The cluster, when there is more than one process.
    fn cluster(&self) -> Result<Option<Cluster>> {
        match (self.processes, &self.hostfile) {
            (0, _) => bail!("--processes must be at least 1"),
            (1, _) if self.process_index > 0 => bail!(
                "--process-index {} is not below --processes 1",
                self.process_index
            ),
            (1, _) => Ok(None),
            (n, None) => bail!("--processes {n} needs --hostfile (one host:port line per process)"),
            (n, Some(path)) => Ok(Some(Cluster::from_hostfile(path, n, self.process_index)?)),
        }
    }
}

/// Joins the cluster `args` describes. `Ok(true)`: this process is a follower and has served
/// the engine to its end (the command is not to be run here).
pub fn join(args: &ProcessArgs, command: &crate::Command) -> Result<bool> {
    let Some(cluster) = args.cluster()? else {
        return Ok(false);
    };
    let threads = match command {
        crate::Command::Plan { workers, .. } => *workers,
        crate::Command::Replay(replay) => replay.workers,
        _ => bail!("only `dovetail plan` and `dovetail replay` run on several processes"),
    };
    if cluster.index == 0 {
        engine::join_cluster(cluster);
        return Ok(false);
    }
    let index = cluster.index;
    let placement = Placement {
        threads,
        cluster: Some(cluster),
    };
    // The same queries as the driver's command builds.
    match command {
        crate::Command::Replay(_) => engine::serve(
            &placement,
            dovetail_queries::standing_queries_polled(dovetail_actuate::POLL_INTERVAL_MS as u64),
        ),
        _ => engine::serve(&placement, dovetail_queries::standing_queries),
    }
    .with_context(|| format!("process {index} serving the engine"))?;
    Ok(true)
}
