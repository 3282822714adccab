//! `dovetail run`: the control loop on the wall clock against a real cloud or a real cluster.
//! `--cloud aws --cluster sim`: EC2 with a simulated cluster, which registers a Node when its
//! instance runs, binds pods, and removes what is terminated, so the whole life of a node runs
//! against the EC2 API. `--cloud sim --cluster kube`: the Kubernetes controller on a real API
//! server with the simulated cloud playing kubelet (see `kube.rs`).

mod args;
mod catalog_refresh;
mod explain;
mod http;
mod kube;
mod live_cloud;
mod metrics;
mod setup;
mod summary;

pub use args::{CloudKind, ClusterKind, RunArgs};
pub use kube::KubeStats;
pub use summary::RunSummary;

use crate::replay::world::World;
use anyhow::{Context, Result};
use dovetail_actuate::driver::Clock;
use dovetail_actuate::POLL_INTERVAL_MS;
use dovetail_aws::Ec2Cloud;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How many epochs one instant may take while acting changes what the engine must be told.
const MAX_STEPS_PER_TICK: usize = 16;

/// Runs until `--for` has passed; returns the summary (also written to `--summary` when given).
pub fn run(args: RunArgs) -> Result<RunSummary> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let summary = match (args.cloud, args.cluster) {
        (CloudKind::Aws, ClusterKind::Sim) => run_aws_sim(&args, &runtime)?,
        (CloudKind::Sim, ClusterKind::Kube) => kube::run_sim(&args, &runtime)?,
        (CloudKind::Sim, ClusterKind::Sim) => {
            anyhow::bail!("--cloud sim --cluster sim is a replay: use `dovetail replay`")
        }
        (CloudKind::Aws, ClusterKind::Kube) => kube::run_aws(&args, &runtime)?,
    };
    if let Some(path) = &args.summary {
        let text = serde_json::to_string_pretty(&summary)?;
        std::fs::write(path, format!("{text}\n"))
            .with_context(|| format!("writing the summary to {}", path.display()))?;
    }
    runtime.shutdown_timeout(Duration::from_secs(5));
    Ok(summary)
}

fn run_aws_sim(args: &RunArgs, runtime: &tokio::runtime::Runtime) -> Result<RunSummary> {
    if args.paths.is_empty() {
        anyhow::bail!("--cluster sim needs the cluster's starting state: -f FILE...");
    }
    let started = Instant::now();
    let args = args.clone();
    let mut live = setup::start(&args, runtime)?;
    let w = &mut live.world;
    let mut last_gc = i64::MIN;
    let mut last_resolve = live.clock.now_ms();
    let mut catalog = catalog_refresh::CatalogRefresh::new(args.catalog_refresh_ms, last_resolve);
    let mut last_progress = Instant::now();
    loop {
        let now = live.clock.now_ms();
        w.control.set_clock(now);
        while let Ok(i) = live.interruptions.try_recv() {
            w.queue_interruption(i);
        }
        w.cloud_events(now);
        w.expire_unavailable(now);
        w.step(now, MAX_STEPS_PER_TICK)?;
        if now.saturating_sub(last_gc) >= args.gc_interval_ms {
            last_gc = now;
            let (cloud, cluster) = (&mut w.cloud, &mut w.cluster);
            w.control
                .actuator_mut()
                .collect_garbage(now, args.gc_grace_ms, cloud, cluster);
        }
        if now.saturating_sub(last_resolve) >= args.nodeclass_refresh_ms {
            last_resolve = now;
            setup::refresh_nodeclasses(
                w,
                runtime,
                &live.clients,
                &live.calls,
                args.kubernetes_version.as_deref(),
            )?;
            if let Err(e) = w.cloud.delete_unused_launch_templates() {
                tracing::warn!(error = %e, "deleting unused launch templates failed");
            }
            if let Err(e) = w.cloud.delete_unused_instance_profiles() {
                tracing::warn!(error = %e, "deleting unused instance profiles failed");
            }
        }
        if let Some(found) = catalog.poll(now, runtime.handle(), &live.clients, &live.calls) {
            w.cloud.set_catalog(&found.catalog);
            w.set_catalog(Arc::new(found.catalog))?;
        }
        w.peak_nodes = w.peak_nodes.max(w.alive_nodes());
        if last_progress.elapsed() >= Duration::from_secs(5) {
            last_progress = Instant::now();
            eprintln!(
                "[{:>4}s] nodes {}  pods pending {}  CreateFleet {}  TerminateInstances {}",
                started.elapsed().as_secs(),
                w.alive_nodes(),
                w.pods_pending(),
                calls_of(&w.cloud, "CreateFleet"),
                calls_of(&w.cloud, "TerminateInstances"),
            );
        }
        if live.deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let tick = Duration::from_millis(args.tick_ms.max(1) as u64);
        std::thread::sleep(tick.min(Duration::from_millis(POLL_INTERVAL_MS as u64)));
    }
    // Stop cleanly: answers to calls already made are taken in, nothing is terminated.
    live.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    w.cloud.settle(Duration::from_secs(60));
    let now = live.clock.now_ms();
    w.cloud_events(now);
    let s = summary::summarise(&live, started.elapsed());
    drop(live);
    Ok(s)
}

fn calls_of(cloud: &Ec2Cloud, action: &str) -> u64 {
    cloud
        .calls()
        .counts()
        .iter()
        .filter(|c| c.action == action)
        .map(|c| c.calls)
        .sum()
}

/// The world a run drives.
pub(crate) type LiveWorld = World<Ec2Cloud>;
