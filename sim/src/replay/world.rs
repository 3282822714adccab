//! The replay loop: a trace drives the simulated cluster and cloud on the virtual clock; the real
//! engine makes every decision; its launch diffs become CreateFleet calls on the simulated cloud.
//!
//! At each instant with something to do (a trace event, a cloud lifecycle event, an expiring
//! capacity error) the driver applies it, lets the simulated kube-scheduler bind what it can,
//! tells the engine what changed, and executes the launches the engine adds. A launch that meets
//! InsufficientInstanceCapacity marks the offerings it tried unavailable for the TTL (Karpenter's
//! unavailable-offerings cache) and the engine replans at once.

use super::facts::FactSet;
use super::summary::{CapacityTypeUsage, Percentiles, ReplaySummary, TimelineRow};
use crate::{
    node_for_instance, CloudEventKind, FleetError, InterruptionKind, OfferingKey, SimCloud,
    SimCluster, SimConfig,
};
use dovetail_actuate::{actions, Action};
use dovetail_dataflow::catalog::{embedded, ResolveOptions};
use dovetail_dataflow::decisions::{Decision, Launch};
use dovetail_dataflow::engine::Engine;
use dovetail_dataflow::facts::Fact;
use dovetail_dataflow::model::{
    EC2NodeClass, InstanceType, NodePool, Pod, PodDisruptionBudget, Price,
};
use dovetail_ingest::trace::{
    AppliedObject, InterruptKind, InterruptTarget, TimedEvent, TraceEvent,
};
use dovetail_ingest::Manifests;
use hdrhistogram::Histogram;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;
use thiserror::Error;

const MINUTE_MS: i64 = 60_000;
/// How many times the engine may replan at one instant after capacity errors.
const MAX_REPLANS_PER_INSTANT: usize = 8;

#[derive(Debug, Error)]
pub enum ReplayError {
    #[error("simulated cloud: {0}")]
    Cloud(String),
    #[error("engine: {0}")]
    Engine(#[from] dovetail_dataflow::engine::EngineError),
    #[error("catalogue: {0}")]
    Catalog(#[from] dovetail_dataflow::catalog::CatalogError),
}

/// How to replay.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    pub sim: SimConfig,
    /// Keep simulating this long after the last trace event, so launches can settle.
    pub settle_ms: i64,
    /// Timely worker threads for the engine.
    pub workers: usize,
    /// Run at this multiple of real time (None: as fast as possible).
    pub speed: Option<f64>,
    /// A name for the trace in the summary.
    pub trace_name: String,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            sim: SimConfig::default(),
            settle_ms: 10 * MINUTE_MS,
            workers: 1,
            speed: None,
            trace_name: String::new(),
        }
    }
}

/// Periodic progress for a bar or log lines.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub now_ms: i64,
    pub end_ms: i64,
    pub nodes: u64,
    pub pods_pending: u64,
}

/// The result of a replay.
#[derive(Debug, Clone)]
pub struct ReplayOutcome {
    pub summary: ReplaySummary,
    pub timeline: Vec<TimelineRow>,
    /// Every instance the simulated cloud launched, in launch order.
    pub instances: Vec<crate::Instance>,
}

struct World {
    engine: Engine,
    epoch: u64,
    cloud: SimCloud,
    cluster: SimCluster,
    facts: FactSet,
    nodepools: BTreeMap<String, NodePool>,
    nodeclasses: BTreeMap<String, EC2NodeClass>,
    pdbs: BTreeMap<String, PodDisruptionBudget>,
    /// Every type as the cloud sells it (prices, offerings), with price changes applied.
    fleet_types: BTreeMap<String, InstanceType>,
    /// Offerings without capacity, until the given time.
    unavailable: BTreeMap<OfferingKey, i64>,
    launched: BTreeSet<String>,
    lower_bound: Price,
    // statistics
    engine_latency: Histogram<u64>,
    capacity_errors: u64,
    interruptions: u64,
    nodes_terminated: u64,
    peak_nodes: u64,
    pods_created: u64,
    disruptions: BTreeMap<String, u64>,
    notes: BTreeSet<String>,
}

fn histogram() -> Histogram<u64> {
    // Auto-resizing, three significant figures: a constant configuration that cannot fail.
    Histogram::new(3).expect("3 significant figures is a valid histogram precision")
}

impl World {
    fn new(opts: &ReplayOptions) -> Result<World, ReplayError> {
        let catalog = embedded(&opts.sim.region)?;
        let fleet_types = catalog
            .instance_types(&ResolveOptions::default())
            .into_iter()
            .map(|t| (t.name.clone(), t))
            .collect();
        Ok(World {
            engine: Engine::start(opts.workers, dovetail_queries::provisioning)?,
            epoch: 0,
            cloud: SimCloud::new(opts.sim.clone())
                .map_err(|e| ReplayError::Cloud(e.to_string()))?,
            cluster: SimCluster::new(),
            facts: FactSet::default(),
            nodepools: BTreeMap::new(),
            nodeclasses: BTreeMap::new(),
            pdbs: BTreeMap::new(),
            fleet_types,
            unavailable: BTreeMap::new(),
            launched: BTreeSet::new(),
            lower_bound: Price(0),
            engine_latency: histogram(),
            capacity_errors: 0,
            interruptions: 0,
            nodes_terminated: 0,
            peak_nodes: 0,
            pods_created: 0,
            disruptions: BTreeMap::new(),
            notes: BTreeSet::new(),
        })
    }

    /// The instance types a NodeClass resolves, with the cloud's current prices and capacity
    /// errors applied, as facts.
    fn refresh_instance_types(&mut self, region: &str) -> Result<(), ReplayError> {
        let catalog = embedded(region)?;
        for class in self.nodeclasses.values() {
            let opts = ResolveOptions::for_node_class(class);
            for mut it in catalog.instance_types(&opts) {
                let sold = self.fleet_types.get(&it.name);
                for o in it.offerings.iter_mut() {
                    if let Some(s) = sold.and_then(|s| {
                        s.offerings
                            .iter()
                            .find(|so| so.zone == o.zone && so.capacity_type == o.capacity_type)
                    }) {
                        o.price = s.price;
                    }
                    let key = OfferingKey::new(&it.name, &o.zone, &o.capacity_type);
                    o.available = !self.unavailable.contains_key(&key);
                }
                self.facts.set(Fact::InstanceType {
                    node_class: class.name.clone(),
                    instance_type: it,
                });
            }
        }
        Ok(())
    }

    fn apply(&mut self, object: &AppliedObject) {
        match object {
            AppliedObject::NodePool(p) => {
                self.nodepools.insert(p.name.clone(), p.clone());
                self.facts.set(Fact::NodePool(p.clone()));
            }
            AppliedObject::EC2NodeClass(c) => {
                self.nodeclasses.insert(c.name.clone(), c.clone());
                self.facts.set(Fact::NodeClass(c.clone()));
            }
            AppliedObject::NodeOverlay(o) => self.facts.set(Fact::Overlay(o.clone())),
            AppliedObject::DaemonSet(d) => self.facts.set(Fact::DaemonSet(d.clone())),
            AppliedObject::PodDisruptionBudget(p) => {
                self.pdbs
                    .insert(format!("{}/{}", p.namespace, p.name), p.clone());
                self.facts.set(Fact::Pdb(p.clone()));
            }
            // Priority classes were resolved into pods' priorities when the trace was read.
            AppliedObject::PriorityClass { .. } => {}
        }
    }

    fn sync_pod(&mut self, key: &str) {
        match self.cluster.pod(key) {
            Some(p) => self.facts.set(Fact::Pod(p.clone())),
            None => self.facts.remove(&format!("Pod {key}")),
        }
    }

    fn sync_pods(&mut self, pods: &[Pod]) {
        for p in pods {
            self.sync_pod(&p.key());
        }
    }

    fn event(&mut self, now: i64, e: &TimedEvent, region: &str) -> Result<(), ReplayError> {
        match &e.event {
            TraceEvent::PodCreated(pod) => {
                let pod: Pod = (**pod).clone();
                let key = pod.key();
                self.pods_created += 1;
                if let Err(err) = self.cluster.add_pod(now, pod) {
                    self.notes.insert(format!("trace line {}: {err}", e.line));
                }
                self.sync_pod(&key);
            }
            TraceEvent::PodDeleted(r) => {
                let key = format!("{}/{}", r.namespace, r.name);
                if self.cluster.delete_pod(&key).is_err() {
                    self.notes
                        .insert("some trace deletions name pods that are not present".to_string());
                }
                self.sync_pod(&key);
            }
            TraceEvent::Apply(object) => {
                let class_changed = matches!(**object, AppliedObject::EC2NodeClass(_));
                self.apply(object);
                if class_changed {
                    self.refresh_instance_types(region)?;
                }
            }
            TraceEvent::Delete(r) => {
                let key = format!("{:?} {}", r.kind, r.name);
                self.notes.insert(format!(
                    "trace deletes of objects ({key}, ...) are not replayed yet"
                ));
            }
            TraceEvent::Price(change) => {
                if let Some(it) = self.fleet_types.get_mut(&change.instance_type) {
                    let ct = change.capacity_type.as_str().to_string();
                    for o in it.offerings.iter_mut() {
                        if o.capacity_type == ct
                            && change.zone.as_ref().is_none_or(|z| *z == o.zone)
                        {
                            o.price = Price::from_dollars(change.price_per_hour);
                        }
                    }
                }
                self.refresh_instance_types(region)?;
            }
            TraceEvent::Capacity(_) => {
                self.notes.insert(
                    "trace capacity changes are not replayed yet (set capacity in --sim-config)"
                        .to_string(),
                );
            }
            TraceEvent::Interrupt(i) => {
                let kind = match i.kind {
                    InterruptKind::Spot => InterruptionKind::SpotInterruption,
                    InterruptKind::Rebalance => InterruptionKind::RebalanceRecommendation,
                    InterruptKind::ScheduledChange => InterruptionKind::ScheduledChange,
                    InterruptKind::Terminate => InterruptionKind::StateChange,
                };
                let ids: Vec<String> = self
                    .cloud
                    .instances()
                    .filter(|inst| inst.state.is_alive())
                    .filter(|inst| match &i.target {
                        InterruptTarget::Node(n) => inst.node_name() == *n || inst.launch == *n,
                        InterruptTarget::Offering {
                            instance_type,
                            zone,
                            capacity_type,
                        } => {
                            inst.instance_type == *instance_type
                                && zone.as_ref().is_none_or(|z| *z == inst.zone)
                                && capacity_type
                                    .as_ref()
                                    .is_none_or(|c| c.as_str() == inst.capacity_type)
                        }
                    })
                    .map(|inst| inst.id.clone())
                    .collect();
                for id in ids {
                    self.cloud
                        .forced_interrupt(now, &id, kind)
                        .map_err(|e| ReplayError::Cloud(e.to_string()))?;
                }
            }
        }
        Ok(())
    }

    /// Cordons and drains a node whose instance is about to go (Karpenter's interruption
    /// handling): its pods become pending and the engine launches replacements.
    fn drain(&mut self, now: i64, node: &str, reason: &str) {
        if self.cluster.node(node).is_none() {
            // Not registered yet: the engine still sees it as in flight; stop it taking pods.
            if let Some(Fact::Node(n)) = self.facts.get(&format!("Node {node}")).cloned() {
                let mut n = n;
                n.unschedulable = true;
                self.facts.set(Fact::Node(n));
            }
            return;
        }
        let _ = self.cluster.set_unschedulable(node, true);
        if let Some(n) = self.cluster.node(node).cloned() {
            self.facts.set(Fact::Node(n));
        }
        let pdbs: Vec<PodDisruptionBudget> = self.pdbs.values().cloned().collect();
        if let Ok(outcome) = self.cluster.evict_for_drain(now, node, &pdbs) {
            self.sync_pods(&outcome.evicted);
        }
        *self.disruptions.entry(reason.to_string()).or_insert(0) += 1;
    }

    fn cloud_events(&mut self, now: i64) {
        for e in self.cloud.poll(now) {
            let Some(instance) = self.cloud.instance(&e.instance_id).cloned() else {
                continue;
            };
            let name = instance.node_name();
            match e.kind {
                CloudEventKind::Running => {}
                CloudEventKind::NodeRegistered => {
                    let (Some(it), Some(pool)) = (
                        self.fleet_types.get(&instance.instance_type),
                        self.nodepools.get(&instance.nodepool),
                    ) else {
                        continue;
                    };
                    let (node, startup) = node_for_instance(&instance, it, pool, e.at_ms);
                    let unschedulable = matches!(
                        self.facts.get(&format!("Node {name}")),
                        Some(Fact::Node(n)) if n.unschedulable
                    );
                    if self.cluster.add_node(node, startup).is_ok() {
                        if unschedulable {
                            let _ = self.cluster.set_unschedulable(&name, true);
                        }
                        if let Some(n) = self.cluster.node(&name).cloned() {
                            self.facts.set(Fact::Node(engine_view(n, pool)));
                        }
                    }
                }
                CloudEventKind::NodeInitialized => {
                    let _ = self.cluster.mark_ready(&name);
                }
                CloudEventKind::SpotInterruptionWarning { .. }
                | CloudEventKind::CapacityReservationInterruptionWarning { .. } => {
                    self.interruptions += 1;
                    self.drain(now, &name, "Interrupted");
                }
                CloudEventKind::RebalanceRecommendation => {
                    self.notes.insert(
                        "rebalance recommendations were recorded, no action (as Karpenter)"
                            .to_string(),
                    );
                }
                CloudEventKind::ScheduledChange => {
                    self.interruptions += 1;
                    self.drain(now, &name, "Interrupted");
                }
                CloudEventKind::Terminated { .. } => {
                    self.nodes_terminated += 1;
                    if let Ok(pods) = self.cluster.remove_node(now, &name) {
                        self.sync_pods(&pods);
                    }
                    self.facts.remove(&format!("Node {name}"));
                }
            }
        }
    }

    fn expire_unavailable(&mut self, now: i64, region: &str) -> Result<(), ReplayError> {
        let before = self.unavailable.len();
        self.unavailable.retain(|_, until| *until > now);
        if self.unavailable.len() != before {
            self.refresh_instance_types(region)?;
        }
        Ok(())
    }

    fn mark_unavailable(&mut self, now: i64, keys: &[OfferingKey], ttl: i64) {
        for k in keys {
            self.unavailable.insert(k.clone(), now + ttl);
        }
    }

    fn advance_engine(&mut self) -> Result<Vec<(Decision, isize)>, ReplayError> {
        let changes = self.facts.take_changes();
        self.epoch += 1;
        let started = Instant::now();
        let diffs = self.engine.advance(self.epoch, changes)?;
        let micros = started.elapsed().as_micros() as u64;
        let _ = self.engine_latency.record(micros.max(1));
        for (d, r) in &diffs {
            if let (Decision::ClusterLowerBound(p), 1) = (d, r) {
                self.lower_bound = *p;
            }
        }
        Ok(diffs)
    }

    /// Executes the launches the engine added; returns whether capacity errors need a replan.
    fn execute(&mut self, now: i64, diffs: &[(Decision, isize)]) -> bool {
        let mut replan = false;
        let ttl = self.cloud.config().ice_ttl_ms;
        for action in actions(diffs) {
            let mut launch: Launch = match action {
                Action::Create(l) => l,
                // Launches are executed the instant they appear, so nothing is left to update
                // or cancel.
                Action::Update(_) | Action::Cancel { .. } => continue,
            };
            // Launch names identify what a NodeClaim is, so the same name comes back when an
            // identical NodeClaim is needed again after the first was launched; each launch is a
            // new NodeClaim, so it gets a fresh name (and CreateFleet client token).
            if self.launched.contains(&launch.name) {
                let base = launch.name.clone();
                let mut n = 2;
                while self.launched.contains(&format!("{base}-{n}")) {
                    n += 1;
                }
                launch.name = format!("{base}-{n}");
            }
            match self.cloud.create_fleet(now, &launch, &self.fleet_types) {
                Ok(instance) => {
                    self.launched.insert(launch.name.clone());
                    if !instance.fleet_errors.is_empty() {
                        self.capacity_errors += instance.fleet_errors.len() as u64;
                        let errs = instance.fleet_errors.clone();
                        self.mark_unavailable(now, &errs, ttl);
                        replan = true;
                    }
                    let (Some(it), Some(pool)) = (
                        self.fleet_types.get(&instance.instance_type),
                        self.nodepools.get(&instance.nodepool),
                    ) else {
                        continue;
                    };
                    let (mut node, _startup) = node_for_instance(&instance, it, pool, now);
                    node.in_flight = true;
                    self.facts.set(Fact::Node(engine_view(node, pool)));
                }
                Err(FleetError::InsufficientCapacity { tried, .. }) => {
                    self.capacity_errors += tried.len() as u64;
                    self.mark_unavailable(now, &tried, ttl);
                    replan = true;
                }
                Err(FleetError::NoMatchingOfferings { .. }) => {
                    self.notes.insert(
                        "some launches matched no offering in the simulated cloud".to_string(),
                    );
                }
            }
        }
        replan
    }

    fn alive_nodes(&self) -> u64 {
        self.cloud
            .instances()
            .filter(|i| i.state.is_alive())
            .count() as u64
    }

    fn cost_rate(&self) -> f64 {
        self.cloud
            .instances()
            .filter(|i| i.state.is_alive())
            .map(|i| i.price.dollars())
            .sum()
    }

    /// Appends a row for every minute that starts before `now`, with the current state.
    fn timeline_until(&self, now: i64, next_minute: &mut i64, timeline: &mut Vec<TimelineRow>) {
        while *next_minute * MINUTE_MS < now {
            let pending = self.pods_pending();
            timeline.push(TimelineRow {
                minute: *next_minute as u64,
                nodes: self.alive_nodes(),
                pods_pending: pending,
                pods_running: self.cluster.pods().count() as u64 - pending,
                cost_rate: self.cost_rate(),
                lower_bound_rate: self.lower_bound.dollars(),
            });
            *next_minute += 1;
        }
    }

    fn pods_pending(&self) -> u64 {
        self.cluster
            .pods()
            .filter(|p| p.node_name.is_none())
            .count() as u64
    }
}

/// The node as the engine should see it: startup taints do not block scheduling (Karpenter
/// ignores them when planning), so only the NodePool's taints are kept.
fn engine_view(
    mut node: dovetail_dataflow::model::Node,
    pool: &NodePool,
) -> dovetail_dataflow::model::Node {
    node.taints.retain(|t| !pool.startup_taints.contains(t));
    node
}

/// Replays `events` (sorted by time) against the simulated world, starting from `initial`.
pub fn replay(
    events: &[TimedEvent],
    initial: &Manifests,
    opts: &ReplayOptions,
    mut progress: impl FnMut(Progress),
) -> Result<ReplayOutcome, ReplayError> {
    let wall = Instant::now();
    let region = opts.sim.region.clone();
    let mut w = World::new(opts)?;
    for p in &initial.nodepools {
        w.apply(&AppliedObject::NodePool(p.clone()));
    }
    for c in &initial.nodeclasses {
        w.apply(&AppliedObject::EC2NodeClass(c.clone()));
    }
    for o in &initial.overlays {
        w.apply(&AppliedObject::NodeOverlay(o.clone()));
    }
    for d in &initial.daemonsets {
        w.apply(&AppliedObject::DaemonSet(d.clone()));
    }
    for p in &initial.pdbs {
        w.apply(&AppliedObject::PodDisruptionBudget(p.clone()));
    }
    w.refresh_instance_types(&region)?;

    let end_ms = events.last().map(|e| e.t as i64).unwrap_or(0) + opts.settle_ms;
    let mut timeline: Vec<TimelineRow> = Vec::new();
    let mut next_minute: i64 = 0;
    let mut lower_bound_usd = 0.0;
    let mut last_t: i64 = 0;
    let mut idx = 0;
    let mut steps: u64 = 0;
    loop {
        let candidates = [
            events.get(idx).map(|e| e.t as i64),
            w.cloud.next_event_ms(),
            w.unavailable.values().min().copied(),
        ];
        let Some(now) = candidates.into_iter().flatten().min() else {
            break;
        };
        if now > end_ms {
            break;
        }
        if let Some(speed) = opts.speed.filter(|s| *s > 0.0) {
            let wait = (now - last_t) as f64 / speed;
            if wait > 0.0 {
                std::thread::sleep(std::time::Duration::from_micros((wait * 1000.0) as u64));
            }
        }
        // The state that held until now is what the timeline shows for the minutes passed.
        w.timeline_until(now, &mut next_minute, &mut timeline);
        lower_bound_usd += w.lower_bound.dollars() * (now - last_t) as f64 / 3_600_000.0;
        last_t = now;

        while let Some(e) = events.get(idx).filter(|e| e.t as i64 <= now) {
            w.event(now, e, &region)?;
            idx += 1;
        }
        w.cloud_events(now);
        w.expire_unavailable(now, &region)?;
        for (pod, _node) in w.cluster.schedule(now) {
            w.sync_pod(&pod);
        }
        for _ in 0..MAX_REPLANS_PER_INSTANT {
            let diffs = w.advance_engine()?;
            let replan = w.execute(now, &diffs);
            if replan {
                w.refresh_instance_types(&region)?;
            }
            if !w.facts.has_changes() {
                break;
            }
        }
        w.peak_nodes = w.peak_nodes.max(w.alive_nodes());
        steps += 1;
        if steps.is_multiple_of(200) {
            progress(Progress {
                now_ms: now,
                end_ms,
                nodes: w.alive_nodes(),
                pods_pending: w.pods_pending(),
            });
        }
    }
    w.timeline_until(end_ms + 1, &mut next_minute, &mut timeline);
    lower_bound_usd += w.lower_bound.dollars() * (end_ms - last_t).max(0) as f64 / 3_600_000.0;
    progress(Progress {
        now_ms: end_ms,
        end_ms,
        nodes: w.alive_nodes(),
        pods_pending: w.pods_pending(),
    });

    let cost = w.cloud.cost_so_far(end_ms);
    let mut pending = histogram();
    for ms in w.cluster.pending_durations() {
        let _ = pending.record(((*ms).max(0) as u64) / 1000);
    }
    let mut notes: Vec<String> = w.notes.iter().cloned().collect();
    // Explain up to a few pods left pending: what the engine decided for them, and why the
    // simulated kube-scheduler did not follow.
    let decisions = w.engine.decisions();
    let stuck: Vec<String> = w
        .cluster
        .pods()
        .filter(|p| p.node_name.is_none())
        .map(|p| p.key())
        .take(5)
        .collect();
    for pod in stuck {
        let engine = decisions.iter().find_map(|d| match d {
            Decision::Binding { pod: p, target } if *p == pod => {
                Some(format!("engine placed it on {target}"))
            }
            Decision::Unschedulable { pod: p, reason } if *p == pod => {
                Some(format!("engine: unschedulable: {reason}"))
            }
            _ => None,
        });
        let engine = engine.unwrap_or_else(|| "engine has no decision for it".to_string());
        let sim = match decisions.iter().find_map(|d| match d {
            Decision::Binding { pod: p, target } if *p == pod => Some(target.clone()),
            _ => None,
        }) {
            Some(node) => match w.cluster.why_not(&pod, &node) {
                Ok(Some(unfit)) => format!("; the simulated scheduler says: {unfit}"),
                Ok(None) => "; the simulated scheduler says it fits".to_string(),
                Err(e) => format!("; {e}"),
            },
            None => String::new(),
        };
        notes.push(format!("pending at the end: {pod}: {engine}{sim}"));
    }
    notes.push("disruption (consolidation, drift, expiry) is not implemented yet: nodes are only removed by interruptions".to_string());
    let summary = ReplaySummary {
        trace: opts.trace_name.clone(),
        seed: opts.sim.seed,
        simulated_hours: end_ms as f64 / 3_600_000.0,
        wall_seconds: wall.elapsed().as_secs_f64(),
        total_cost_usd: cost.total_usd,
        lower_bound_usd,
        cost_over_lower_bound: if lower_bound_usd > 0.0 {
            cost.total_usd / lower_bound_usd
        } else {
            0.0
        },
        by_capacity_type: cost
            .by_capacity_type
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    CapacityTypeUsage {
                        usd: v.usd,
                        node_hours: v.node_hours,
                        instances: v.instances,
                    },
                )
            })
            .collect(),
        nodes_launched: w.launched.len() as u64,
        nodes_terminated: w.nodes_terminated,
        peak_nodes: w.peak_nodes,
        disruptions_by_reason: w.disruptions,
        capacity_errors: w.capacity_errors,
        interruptions_handled: w.interruptions,
        pods_created: w.pods_created,
        pod_pending_seconds: Percentiles::of(&pending),
        pods_never_scheduled: w.cluster.pods().filter(|p| p.node_name.is_none()).count() as u64,
        engine_epochs: w.epoch,
        engine_update_micros: Percentiles::of(&w.engine_latency),
        notes,
    };
    let mut instances: Vec<crate::Instance> = w.cloud.instances().cloned().collect();
    instances.sort_by(|a, b| {
        a.launched_ms
            .cmp(&b.launched_ms)
            .then_with(|| a.id.cmp(&b.id))
    });
    Ok(ReplayOutcome {
        summary,
        timeline,
        instances,
    })
}
