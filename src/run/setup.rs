//! Starting a run: the SDK clients, discovery of the region's catalogue, each EC2NodeClass's
//! selector terms resolved, the cloud connected (its first listing taken, so recovery sees what
//! a previous process launched), the simulated cluster filled from the manifests, and the
//! interruption queue's consumer.

use super::{LiveWorld, RunArgs};
use crate::replay::world::World;
use anyhow::{Context, Result};
use crossbeam_channel::Receiver;
use dovetail_actuate::driver::{Clock, WallClock};
use dovetail_actuate::{ActuationSettings, POLL_INTERVAL_MS};
use dovetail_aws::calls::Calls;
use dovetail_aws::discovery::discover_catalog;
use dovetail_aws::interruption_queue::{InterruptionQueue, QueueStats};
use dovetail_aws::sdk::{load, ClientOptions, Clients};
use dovetail_aws::selectors::resolve;
use dovetail_aws::{AwsSettings, Ec2Cloud};
use dovetail_dataflow::facts::Interruption;
use dovetail_dataflow::model::EC2NodeClass;
use dovetail_ingest::trace::AppliedObject;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A run in progress.
pub(crate) struct Live {
    pub(crate) world: LiveWorld,
    pub(crate) clients: Clients,
    pub(crate) calls: Arc<Calls>,
    pub(crate) interruptions: Receiver<Interruption>,
    pub(crate) queue: Option<Arc<InterruptionQueue>>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) deadline: Option<Instant>,
    /// The loop's clock (actuate's wall clock, as `drive` uses).
    pub(crate) clock: WallClock,
    pub(crate) notes: Vec<String>,
}

impl Live {
    pub(crate) fn queue_stats(&self) -> Option<QueueStats> {
        self.queue.as_ref().map(|q| q.stats())
    }
}

pub(crate) async fn resolved(
    clients: &Clients,
    calls: &Calls,
    class: &EC2NodeClass,
    kubernetes_version: Option<&str>,
) -> Result<EC2NodeClass> {
    let spec: serde_json::Value = serde_json::from_str(&class.spec_json)
        .with_context(|| format!("EC2NodeClass {}: spec is not JSON", class.name))?;
    let status = resolve(clients, calls, &class.name, &spec, kubernetes_version).await?;
    Ok(EC2NodeClass {
        status,
        ..class.clone()
    })
}

/// EC2 connected: the SDK clients, the call counter, the settings and the region's catalogue.
pub(crate) struct Ec2 {
    pub(crate) clients: Clients,
    pub(crate) calls: Arc<Calls>,
    pub(crate) settings: AwsSettings,
    pub(crate) catalog: dovetail_dataflow::catalog::RegionCatalog,
    pub(crate) notes: Vec<String>,
}

/// The SDK clients, the region's catalogue discovered, and the cloud connected (its first
/// listing taken, so recovery sees what a previous process launched).
pub(crate) fn connect_ec2(
    args: &RunArgs,
    runtime: &tokio::runtime::Runtime,
) -> Result<(Ec2, Ec2Cloud)> {
    let clients = runtime.block_on(load(&ClientOptions {
        region: args.region.clone(),
        ..ClientOptions::default()
    }))?;
    let settings = AwsSettings {
        cluster_name: args
            .cluster_name
            .clone()
            .context("--cluster-name (or CLUSTER_NAME) is required with --cloud aws")?,
        cluster_endpoint: args.cluster_endpoint.clone(),
        interruption_queue: args.interruption_queue.clone(),
        describe_interval: Duration::from_millis(args.describe_interval_ms.max(0) as u64),
        ..AwsSettings::from_env()
    };
    let calls = Arc::new(Calls::new(&settings));
    eprintln!("discovering the EC2 catalogue of {} ...", clients.region);
    let discovered = runtime.block_on(discover_catalog(&clients.ec2, &calls, &clients.region))?;
    eprintln!(
        "  {} instance types, {} zones",
        discovered.catalog.entries.len(),
        discovered.zone_ids.len()
    );
    let cloud = Ec2Cloud::connect(
        runtime.handle().clone(),
        clients.clone(),
        settings.clone(),
        &discovered.catalog,
        Arc::clone(&calls),
    )?;
    Ok((
        Ec2 {
            clients,
            calls,
            settings,
            catalog: discovered.catalog,
            notes: discovered.notes,
        },
        cloud,
    ))
}

/// Starts the interruption queue's consumer when a queue is set: its interruptions arrive on
/// the receiver until `stop`.
pub(crate) fn start_queue(
    ec2: &Ec2,
    runtime: &tokio::runtime::Runtime,
    stop: &Arc<AtomicBool>,
) -> Result<(Receiver<Interruption>, Option<Arc<InterruptionQueue>>)> {
    let (sender, interruptions) = crossbeam_channel::unbounded();
    let queue = match &ec2.settings.interruption_queue {
        Some(name) => {
            let q = Arc::new(runtime.block_on(InterruptionQueue::open(
                ec2.clients.sqs.clone(),
                Arc::clone(&ec2.calls),
                name,
            ))?);
            let consumer = Arc::clone(&q);
            let stop = Arc::clone(stop);
            runtime.spawn(async move {
                consumer
                    .run(stop, move |i| {
                        let _ = sender.send(i);
                    })
                    .await;
            });
            Some(q)
        }
        None => None,
    };
    Ok((interruptions, queue))
}

pub(crate) fn start(args: &RunArgs, runtime: &tokio::runtime::Runtime) -> Result<Live> {
    let manifests = dovetail_ingest::load_paths(&args.paths)?;
    let (mut ec2, mut cloud) = connect_ec2(args, runtime)?;
    let mut notes = std::mem::take(&mut ec2.notes);
    let mut classes = Vec::new();
    for class in &manifests.nodeclasses {
        classes.push(runtime.block_on(resolved(
            &ec2.clients,
            &ec2.calls,
            class,
            args.kubernetes_version.as_deref(),
        ))?);
    }
    for c in &classes {
        cloud.set_nodeclass(c.clone());
    }
    let actuation = ActuationSettings {
        capacity_error_ttl_ms: args.capacity_error_ttl_ms,
        ..ActuationSettings::default()
    };
    let queries = dovetail_queries::standing_queries_polled(POLL_INTERVAL_MS as u64);
    let mut world = World::with_cloud(cloud, Arc::new(ec2.catalog.clone()), actuation, queries, 1)?;
    world.kubelet_joins_when_running = true;
    world.apply_manifests(&dovetail_ingest::Manifests {
        nodeclasses: classes,
        ..manifests.clone()
    })?;
    let clock = WallClock::default();
    let now = clock.now_ms();
    if !manifests.nodes.is_empty() {
        notes.push(format!(
            "{} Nodes in the manifests were left out: the simulated cluster's nodes are the instances EC2 runs",
            manifests.nodes.len()
        ));
    }
    for mut pod in manifests.pods.clone() {
        if pod.node_name.take().is_some() {
            notes.push(format!(
                "pod {} was bound in the manifests and starts pending",
                pod.key()
            ));
        }
        if let Err(e) = world.cluster.add_pod(now, pod) {
            notes.push(e.to_string());
        }
    }
    world.control.set_clock(now);
    let (cloud, cluster) = (&mut world.cloud, &mut world.cluster);
    world.control.recover(now, cloud, cluster);

    let stop = Arc::new(AtomicBool::new(false));
    let (interruptions, queue) = start_queue(&ec2, runtime, &stop)?;
    Ok(Live {
        world,
        clients: ec2.clients.clone(),
        calls: Arc::clone(&ec2.calls),
        interruptions,
        queue,
        stop,
        clock,
        deadline: args
            .for_ms
            .map(|ms| Instant::now() + Duration::from_millis(ms.max(0) as u64)),
        notes,
    })
}

/// Resolves every EC2NodeClass's selector terms again (Karpenter: every minute); a changed
/// status reaches the engine (drift) and the cloud (what it launches with). A failure keeps the
/// status last resolved.
pub(crate) fn refresh_nodeclasses(
    w: &mut LiveWorld,
    runtime: &tokio::runtime::Runtime,
    clients: &Clients,
    calls: &Calls,
    kubernetes_version: Option<&str>,
) -> Result<()> {
    let classes: Vec<EC2NodeClass> = w
        .control
        .actuator()
        .nodeclasses()
        .values()
        .cloned()
        .collect();
    let mut changed = false;
    for class in classes {
        match runtime.block_on(resolved(clients, calls, &class, kubernetes_version)) {
            Ok(fresh) if fresh.status != class.status => {
                w.cloud.set_nodeclass(fresh.clone());
                w.apply(&AppliedObject::EC2NodeClass(fresh));
                changed = true;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(nodeclass = %class.name, error = %e, "resolving selector terms failed; keeping the last status")
            }
        }
    }
    if changed {
        w.refresh_instance_types()?;
    }
    Ok(())
}
