//! `dovetail run --cluster kube`: the controller on a live cluster. The watches of Pods, Nodes,
//! NodePools, EC2NodeClasses, NodeOverlays, DaemonSets and PodDisruptionBudgets feed the engine
//! (pods resolved against PersistentVolumeClaims, PersistentVolumes, StorageClasses and
//! PriorityClasses); decisions as they change become Events (`DecisionEvents`);
//! the NodeClaims on the API server are read back first, so a restart finishes a launch instead
//! of launching again; decisions are acted on through the cluster (`KubeCluster`) and the cloud.
//!
//! With `--cloud sim` the simulated cloud also plays kubelet: when its instance has booted it
//! registers the Node object (with the provider id), and marks it Ready when it initialises, so
//! the whole life of a node shows on the API server without AWS.

use super::http::{self, Published};
use super::live_cloud::{AwsLive, DryRun, LiveCloud};
use super::metrics;
use super::{RunArgs, RunSummary};
use crate::replay::world::region_types;
use anyhow::{Context, Result};
use dovetail_actuate::driver::{Clock, WallClock};
use dovetail_actuate::{ActuationSettings, ControlLoop, POLL_INTERVAL_MS};
use dovetail_dataflow::backend::{CloudEventKind, Cluster, ClusterEvent};
use dovetail_dataflow::catalog::{embedded, RegionCatalog};
use dovetail_dataflow::facts::{Fact, Interruption, InterruptionKind};
use dovetail_dataflow::model::{NodeClassStatus, Resources};
use dovetail_kube::decision_events::DecisionEvents;
use dovetail_kube::drifted::DriftedClaims;
use dovetail_kube::leader::{Election, Role};
use dovetail_kube::{ClusterWriter, FactUpdate, KubeCluster, WatchStats, WATCHED};
use dovetail_sim::{SimCloud, SimConfig};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the first lists of the watched kinds may take before the loop starts anyway.
const FIRST_LIST_TIMEOUT: Duration = Duration::from_secs(30);

/// dovetail's leader Lease.
const LEASE_NAME: &str = "dovetail-leader-election";

/// How often NodePools' status is brought up to date.
const STATUS_INTERVAL: Duration = Duration::from_secs(2);

/// How often a standby looks at its role.
const TICK_STANDBY: Duration = Duration::from_millis(200);

/// What the Kubernetes side did, for the summary.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct KubeStats {
    pub nodeclaims_read_back: u64,
    pub nodes_registered: u64,
    /// NodeClaims given up because their Node did not register within `--registration-ttl`.
    pub registration_timeouts: u64,
    pub nodeclaims_initialized: u64,
    pub relists: u64,
    pub objects_skipped: u64,
    pub watch_errors: u64,
    /// `--dry-run`: writes to the API server and cloud calls logged, not made.
    pub writes_withheld: u64,
    pub cloud_calls_withheld: u64,
    /// `--dry-run`: it decided while Karpenter's controller held its leader Lease.
    pub decided_beside_karpenter: bool,
    /// Events written from decisions, and dropped for the per-turn limit.
    pub events_recorded: u64,
    pub events_dropped: u64,
}

/// Runs the controller against the cluster and the simulated cloud until `--for` has passed.
pub fn run_sim(args: &RunArgs, runtime: &tokio::runtime::Runtime) -> Result<RunSummary> {
    let sim = match &args.sim_config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            SimConfig::from_json(&text).with_context(|| format!("{}", path.display()))?
        }
        None => SimConfig {
            spot_interruptions: false,
            ..SimConfig::default()
        },
    };
    let catalog = Arc::new(embedded(&sim.region)?.clone());
    let settings = actuation(args, sim.ice_ttl_ms);
    let cloud = SimCloud::new(sim).map_err(|e| anyhow::anyhow!("the simulated cloud: {e}"))?;
    if args.dry_run {
        return Ok(drive(args, runtime, DryRun::new(cloud), catalog, settings)?.0);
    }
    Ok(drive(args, runtime, cloud, catalog, settings)?.0)
}

/// Actuation's settings from the flags, with the cloud's capacity-error TTL.
fn actuation(args: &RunArgs, capacity_error_ttl_ms: i64) -> ActuationSettings {
    let defaults = ActuationSettings::default();
    ActuationSettings {
        capacity_error_ttl_ms,
        consolidation_validation_ms: args
            .consolidation_validation_ms
            .unwrap_or(defaults.consolidation_validation_ms),
        ..defaults
    }
}

/// Runs the controller against the cluster and EC2 until `--for` has passed.
pub fn run_aws(args: &RunArgs, runtime: &tokio::runtime::Runtime) -> Result<RunSummary> {
    let live = AwsLive::start(args, runtime, WallClock::default().now_ms())?;
    let catalog = Arc::new(live.ec2.catalog.clone());
    let settings = actuation(args, args.capacity_error_ttl_ms);
    let (mut summary, live) = if args.dry_run {
        let (s, dry) = drive(args, runtime, DryRun::new(live), catalog, settings)?;
        (s, dry.0)
    } else {
        drive(args, runtime, live, catalog, settings)?
    };
    summary.cluster_name = live.ec2.settings.cluster_name.clone();
    summary.ec2_calls = live.ec2.calls.counts();
    summary.interruption_queue = live.queue_stats.as_ref().map(|q| q.stats());
    summary.notes.extend(live.ec2.notes.iter().cloned());
    Ok(summary)
}

/// The loop: see the module documentation. Returns the summary and the cloud.
fn drive<C: LiveCloud>(
    args: &RunArgs,
    runtime: &tokio::runtime::Runtime,
    mut cloud: C,
    mut catalog: Arc<RegionCatalog>,
    settings: ActuationSettings,
) -> Result<(RunSummary, C)> {
    let kubelet = cloud.plays_kubelet();
    let started = Instant::now();
    let config = runtime.block_on(dovetail_kube::connect::config(args.kubeconfig.as_deref()))?;
    let writer = ClusterWriter::new(config, runtime.handle().clone())
        .context("a client for the API server")?;
    let (updates, watch_stats) =
        dovetail_kube::watch_all(runtime.handle(), writer.client(), WATCHED);
    let deletions =
        dovetail_kube::nodeclaim_deletions::watch_deletions(runtime.handle(), writer.client());
    let mut deleting: BTreeSet<String> = BTreeSet::new();
    let elector = (!args.no_leader_elect)
        .then(|| dovetail_kube::leader::start(runtime.handle(), writer.client(), election(args)));
    let writer = if args.dry_run {
        writer.dry_run()
    } else {
        writer
    };
    let published = Published::default();
    http::serve(runtime, args.metrics_port, published.clone())?;
    http::serve(runtime, args.health_probe_port, published.clone())?;
    let mut cluster = KubeCluster::new(writer);
    let mut stats = KubeStats::default();
    // Nothing would serve the verdicts without the metrics port: then they are not kept.
    let explain = args.explain && args.metrics_port != 0;
    let queries = dovetail_queries::standing_queries_with(Some(POLL_INTERVAL_MS as u64), explain);
    let mut control = ControlLoop::start(queries, 1, settings)?;
    if explain {
        published.explained.on();
    }
    control
        .actuator_mut()
        .set_instance_types(region_types(&catalog));
    let clock = WallClock::default();
    first_lists(
        &updates,
        &mut cluster,
        &mut control,
        &mut cloud,
        &catalog,
        &clock,
    );

    let deadline = args
        .for_ms
        .map(|ms| Instant::now() + Duration::from_millis(ms.max(0) as u64));
    let mut last_gc = i64::MIN;
    let mut last_progress = Instant::now();
    let mut waiting: Option<FactUpdate> = None;
    let mut interruption_facts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    published.ready();
    let mut leading = false;
    let mut class_changed = false;
    let mut last_render: Option<Instant> = None;
    let mut last_status: Option<Instant> = None;
    let mut written_status: BTreeMap<String, (Resources, usize, bool)> = BTreeMap::new();
    let mut events = DecisionEvents::default();
    let mut drifted = DriftedClaims::default();
    let mut written_classes: BTreeMap<String, (NodeClassStatus, Option<String>)> = BTreeMap::new();
    loop {
        let now = clock.now_ms();
        control.set_clock(now);
        published.turned(now);
        let role_now = elector.as_ref().map_or(Role::Leader, |e| e.state.role());
        if last_render.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
            last_render = Some(Instant::now());
            watch_counts(&watch_stats, &mut stats);
            stats.writes_withheld = cluster.writer().writes_withheld();
            stats.cloud_calls_withheld = cloud.calls_withheld();
            published.metrics(metrics::render(&metrics::Snapshot {
                control: &control,
                cluster: cluster.counts(),
                kube: &stats,
                role: role_now,
                calls: cloud.call_counts(),
            }));
        }
        for u in waiting.take().into_iter().chain(updates.try_iter()) {
            class_changed |= take_update(&mut cluster, &mut control, &mut cloud, now, u);
        }
        deleting.extend(deletions.try_iter());
        let role = elector.as_ref().map_or(Role::Leader, |e| e.state.role());
        // A dry run writes nothing, so Karpenter's Lease does not stop it deciding: that is how
        // a Karpenter user compares the two before cutting over.
        let acting = role == Role::Leader || (args.dry_run && role == Role::KarpenterActive);
        published.explained.standby(!acting);
        // The leader tells. A standby keeps what its watches skipped (a bounded list) and tells
        // once it leads: the first lists are read before the Lease is won, and a replica that
        // takes over may be the only one that saw the object.
        if acting {
            let candidates = watch_stats
                .take_skipped()
                .into_iter()
                .map(|s| ClusterEvent {
                    object: s.object,
                    reason: "FailedValidation".to_string(),
                    message: s.message,
                })
                .collect();
            for e in events.admit(now, candidates) {
                cluster.record_event(now, e);
            }
        }
        if role == Role::Lost {
            anyhow::bail!("lost the leader Lease: stopping so a standby takes over");
        }
        if !acting {
            // A standby keeps its caches and the engine's facts warm, and the cloud's listing
            // fresh, but decides nothing: the epoch it would close is the leader's to act on.
            let _ = cloud.poll_events(now);
            if last_progress.elapsed() >= Duration::from_secs(5) {
                last_progress = Instant::now();
                eprintln!("[{:>4}s] {role:?}: not acting", started.elapsed().as_secs());
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            waiting = updates.recv_timeout(TICK_STANDBY).ok();
            continue;
        }
        if !leading {
            leading = true;
            if role == Role::KarpenterActive {
                stats.decided_beside_karpenter = true;
                tracing::warn!("Karpenter's controller holds its leader Lease: this dry run decides beside it and writes nothing");
            }
            take_over(now, &mut cluster, &mut control, &mut cloud, &mut stats)?;
        }
        class_changed |= cloud.tick(now, &mut control, &mut catalog);
        for i in cloud.interruptions() {
            interrupted(&mut control, &cloud, &mut interruption_facts, i);
        }
        if std::mem::take(&mut class_changed) {
            control.refresh_instance_types(&catalog);
        }
        for e in cloud.poll_events(now) {
            let Some(instance) = cloud.instance(&e.instance_id).cloned() else {
                continue;
            };
            let node = instance.node_name();
            match e.kind {
                CloudEventKind::NodeRegistered if kubelet => {
                    if let Some(claim) = cluster.nodeclaim_of_node(&node) {
                        if let Some(n) = &claim.status {
                            cluster.writer().kubelet_register(n, &claim.startup_taints);
                        }
                    }
                }
                CloudEventKind::NodeInitialized if kubelet => {
                    let startup = cluster
                        .nodeclaim_of_node(&node)
                        .map(|c| c.startup_taints.clone())
                        .unwrap_or_default();
                    cluster.writer().kubelet_ready(&node, &startup);
                }
                CloudEventKind::Terminated { .. } => {
                    cluster.instance_gone(&node);
                    for key in interruption_facts.remove(&instance.id).unwrap_or_default() {
                        control.remove_fact(&key);
                    }
                }
                _ => {}
            }
        }
        deleting.retain(|claim| {
            !control
                .actuator_mut()
                .terminate_deleted_claim(now, claim, &mut cloud, &mut cluster)
        });
        stats.nodes_registered += cluster.register_joined(now).len() as u64;
        for claim in cluster.unregistered_past(now, args.registration_ttl_ms) {
            tracing::warn!(nodeclaim = %claim, "its Node did not register in time; terminating its instance");
            stats.registration_timeouts += 1;
            control
                .actuator_mut()
                .terminate_claim(now, &claim, &mut cloud, &mut cluster);
        }
        stats.nodeclaims_initialized += cluster.initialize_ready(now).len() as u64;
        control.actuator_mut().retry_hung_launches(
            now,
            args.launch_timeout_ms,
            &mut cloud,
            &mut cluster,
        );
        send_node_facts(&mut cluster, &mut control);
        control.expire_capacity_errors(now);
        let diffs = control.advance(now)?;
        control.act(now, &diffs, &mut cloud, &mut cluster);
        published.explained.apply(&diffs);
        for e in events.from_diffs(now, &diffs, |n| cluster.node(n).is_some()) {
            cluster.record_event(now, e);
        }
        for (claim, is_drifted) in drifted.changes(&diffs) {
            cluster.set_drifted(now, &claim, is_drifted);
        }
        stats.events_recorded = events.recorded;
        stats.events_dropped = events.dropped;
        send_node_facts(&mut cluster, &mut control);
        if last_status.is_none_or(|t: Instant| t.elapsed() >= STATUS_INTERVAL) {
            last_status = Some(Instant::now());
            write_nodepool_status(now, &cluster, &control, &mut written_status);
            cluster.mark_consolidatable(now);
            if cloud.resolves_nodeclasses() {
                write_nodeclass_status(now, &cluster, &control, &cloud, &mut written_classes);
            }
        }
        if now.saturating_sub(last_gc) >= args.gc_interval_ms {
            last_gc = now;
            control
                .actuator_mut()
                .collect_garbage(now, args.gc_grace_ms, &mut cloud, &mut cluster);
        }
        if last_progress.elapsed() >= Duration::from_secs(5) {
            last_progress = Instant::now();
            let c = cluster.counts();
            eprintln!(
                "[{:>4}s] nodeclaims {}  nodes {}  pods pending {}  bound {}",
                started.elapsed().as_secs(),
                c.nodeclaims,
                c.nodes,
                c.pods_pending,
                c.pods_bound,
            );
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let tick = Duration::from_millis(args.tick_ms.clamp(1, POLL_INTERVAL_MS) as u64);
        waiting = updates.recv_timeout(tick).ok();
    }
    // Stop cleanly: answers to calls already made are taken in, nothing is terminated.
    cloud.settle();
    watch_counts(&watch_stats, &mut stats);
    stats.writes_withheld = cluster.writer().writes_withheld();
    stats.cloud_calls_withheld = cloud.calls_withheld();
    let summary = summarise(&control, &cloud, &cluster, stats, started.elapsed());
    Ok((summary, cloud))
}

/// An interruption read from the queue: the engine is told (it answers with an `Interrupted`
/// disruption of a registered node), a reclaimed spot pool is marked unavailable, and a node
/// already in a graceful command is drained now.
fn interrupted<C: LiveCloud>(
    control: &mut ControlLoop,
    cloud: &C,
    facts: &mut BTreeMap<String, Vec<String>>,
    i: Interruption,
) {
    let Some(instance) = cloud.instance(&i.target).cloned() else {
        tracing::info!(instance = %i.target, "interruption of an instance not of this cluster");
        return;
    };
    if i.kind == InterruptionKind::RebalanceRecommendation {
        // Recorded, no action (as Karpenter).
        return;
    }
    if i.kind == InterruptionKind::SpotInterruption {
        control
            .actuator_mut()
            .mark_unavailable(i.at_ms, instance.offering());
    }
    let fact = Fact::Interruption(i);
    facts
        .entry(instance.id.clone())
        .or_default()
        .push(fact.describe());
    control.set_fact(fact);
    control.actuator_mut().drain_now(&instance.node_name());
}

/// Writes the status of every NodePool whose NodeClaims' capacity, count or EC2NodeClass
/// changed since it was last written.
fn write_nodepool_status(
    now_ms: i64,
    cluster: &KubeCluster,
    control: &ControlLoop,
    written: &mut BTreeMap<String, (Resources, usize, bool)>,
) {
    let actuator = control.actuator();
    for (pool, (resources, nodes)) in cluster.nodepool_usage() {
        let class_ready = actuator
            .nodepool(&pool)
            .and_then(|p| p.node_class.as_ref())
            .is_some_and(|c| actuator.nodeclasses().contains_key(c));
        let now = (resources, nodes, class_ready);
        if written.get(&pool) == Some(&now) {
            continue;
        }
        let stamp = dovetail_ingest::format_rfc3339_ms(now_ms);
        let status = dovetail_kube::nodeclaim::nodepool_status(&now.0, now.1, now.2, &stamp);
        cluster.writer().nodepool_status(&pool, status);
        written.insert(pool, now);
    }
}

/// Writes the status of every EC2NodeClass whose resolved subnets, security groups or AMIs
/// changed since it was last written (a refresh found new ones, or it was just read).
fn write_nodeclass_status<C: LiveCloud>(
    now_ms: i64,
    cluster: &KubeCluster,
    control: &ControlLoop,
    cloud: &C,
    written: &mut BTreeMap<String, (NodeClassStatus, Option<String>)>,
) {
    let classes = control.actuator().nodeclasses();
    written.retain(|name, _| classes.contains_key(name));
    for (name, class) in classes {
        let now = (class.status.clone(), cloud.instance_profile(class));
        if written.get(name) == Some(&now) {
            continue;
        }
        let stamp = dovetail_ingest::format_rfc3339_ms(now_ms);
        cluster.writer().nodeclass_status(
            name,
            dovetail_kube::nodeclass_status::nodeclass_status(class, now.1.as_deref(), &stamp),
        );
        written.insert(name.clone(), now);
    }
}

/// This replica leads now: the NodeClaims on the API server are read back (whoever led before
/// may have created some), and recovery finishes each launch under its client token instead of
/// launching again.
fn take_over<C: LiveCloud>(
    now: i64,
    cluster: &mut KubeCluster,
    control: &mut ControlLoop,
    cloud: &mut C,
    stats: &mut KubeStats,
) -> Result<()> {
    for object in cluster
        .writer()
        .list_nodeclaims()
        .context("listing NodeClaims")?
    {
        match dovetail_ingest::read_nodeclaim("API server", &object) {
            Ok(claim) => {
                stats.nodeclaims_read_back += 1;
                cluster.adopt(claim, dovetail_kube::nodeclaim::condition_times(&object));
            }
            Err(e) => tracing::warn!(error = %e, "NodeClaim left alone"),
        }
    }
    control.set_clock(now);
    control.recover(now, cloud, cluster);
    Ok(())
}

/// The election's settings from the flags; the identity is the pod's name (`POD_NAME`, from
/// the Downward API) or the host's, with the process id.
fn election(args: &RunArgs) -> Election {
    let identity = std::env::var("POD_NAME").unwrap_or_else(|_| {
        let host = std::fs::read_to_string("/etc/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "dovetail".to_string());
        format!("{host}_{}", std::process::id())
    });
    Election {
        namespace: args.leader_namespace.clone(),
        lease_name: LEASE_NAME.to_string(),
        identity,
        lease_duration: Duration::from_millis(args.leader_lease_duration_ms.max(1000) as u64),
        retry: Duration::from_millis((args.leader_lease_duration_ms / 7).clamp(100, 2000) as u64),
        karpenter_namespace: (args.karpenter_namespace != "none")
            .then(|| args.karpenter_namespace.clone()),
    }
}

/// Takes the watches' first lists (one relist per kind) before anything is decided, so the
/// engine does not launch for pods whose nodes it has not heard of yet.
fn first_lists<C: LiveCloud>(
    updates: &crossbeam_channel::Receiver<FactUpdate>,
    cluster: &mut KubeCluster,
    control: &mut ControlLoop,
    cloud: &mut C,
    catalog: &RegionCatalog,
    clock: &WallClock,
) {
    let mut listed = std::collections::BTreeSet::new();
    let until = Instant::now() + FIRST_LIST_TIMEOUT;
    while listed.len() < WATCHED.len() {
        let left = until.saturating_duration_since(Instant::now());
        let Ok(u) = updates.recv_timeout(left) else {
            tracing::warn!(
                listed = listed.len(),
                kinds = WATCHED.len(),
                "not every watched kind was listed in time; starting anyway"
            );
            break;
        };
        if let FactUpdate::Replace { kind, .. } = &u {
            listed.insert(kind.kind);
        }
        take_update(cluster, control, cloud, clock.now_ms(), u);
    }
    control.refresh_instance_types(catalog);
}

/// One watch update into the cluster's cache and the engine's facts; true when an
/// EC2NodeClass changed (its instance types must be resolved again). An EC2NodeClass reaches
/// the engine with its selector terms resolved by the cloud.
fn take_update<C: LiveCloud>(
    cluster: &mut KubeCluster,
    control: &mut ControlLoop,
    cloud: &mut C,
    now: i64,
    update: FactUpdate,
) -> bool {
    let mut class_changed = false;
    for change in cluster.observe(now, update) {
        match change {
            FactUpdate::Set(fact) => match *fact {
                Fact::NodeClass(class) => {
                    class_changed = true;
                    control.set_fact(Fact::NodeClass(cloud.resolve(class)));
                }
                fact => control.set_fact(fact),
            },
            FactUpdate::Remove(key) => {
                if let Some(name) = key.strip_prefix("EC2NodeClass ") {
                    class_changed = true;
                    cloud.forget(name);
                }
                control.remove_fact(&key);
            }
            FactUpdate::Replace { .. } => {}
        }
    }
    class_changed
}

fn send_node_facts(cluster: &mut KubeCluster, control: &mut ControlLoop) {
    for (name, fact) in cluster.take_node_facts() {
        match fact {
            Some(n) => control.set_fact(Fact::Node(n)),
            None => control.remove_fact(&format!("Node {name}")),
        }
    }
}

fn watch_counts(watch: &WatchStats, stats: &mut KubeStats) {
    stats.relists = watch.relists.load(Ordering::Relaxed);
    stats.objects_skipped = watch.objects_skipped.load(Ordering::Relaxed);
    stats.watch_errors = watch.watch_errors.load(Ordering::Relaxed);
}

fn summarise<C: LiveCloud>(
    control: &ControlLoop,
    cloud: &C,
    cluster: &KubeCluster,
    kubernetes: KubeStats,
    elapsed: Duration,
) -> RunSummary {
    let stats = control.actuator().stats();
    let instances = cloud.instances();
    let counts = cluster.counts();
    RunSummary {
        region: cloud.region(),
        cluster_name: String::new(),
        seconds: elapsed.as_secs_f64(),
        ec2_calls: Vec::new(),
        instances: super::summary::Instances {
            launched: stats.nodes_launched,
            terminated: instances.iter().filter(|i| !i.state.is_alive()).count() as u64,
            running: instances.iter().filter(|i| i.state.is_alive()).count() as u64,
        },
        nodeclaims: counts.nodeclaims,
        capacity_errors: stats.capacity_errors,
        pods: super::summary::Pods {
            bound: counts.pods_bound as u64,
            pending: counts.pods_pending as u64,
        },
        garbage_collected: super::summary::Garbage {
            instances: stats.garbage_instances,
            nodeclaims: stats.garbage_nodeclaims,
        },
        interruption_queue: None,
        kubernetes: Some(kubernetes),
        notes: control.actuator().notes().iter().cloned().collect(),
    }
}
