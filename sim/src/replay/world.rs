//! The simulated world a replay drives: cloud, cluster, what the engine has been told, and the
//! statistics the summary reports. Applying trace events and cloud events to it lives here;
//! executing decisions is in `launch.rs` and `disruption.rs`, the engine's view of nodes in
//! `node_facts.rs`, the loop in `run.rs`.

use super::disruption::Disruptions;
use super::facts::FactSet;
use super::run::ReplayError;
use super::summary::TimelineRow;
use crate::eventbridge;
use crate::node::record_launch;
use crate::{
    node_for_instance, CloudEvent, CloudEventKind, Instance, InterruptionKind, OfferingKey,
};
use crate::{SimCloud, SimCluster};
use dovetail_dataflow::catalog::{embedded, ResolveOptions};
use dovetail_dataflow::decisions::Decision;
use dovetail_dataflow::engine::Engine;
use dovetail_dataflow::facts::{self, Fact, Interruption};
use dovetail_dataflow::model::{
    EC2NodeClass, InstanceType, Node, NodePool, Pod, PodDisruptionBudget, Price,
};
use dovetail_ingest::trace::{
    AppliedObject, InterruptKind, InterruptTarget, ObjectKind, TimedEvent, TraceEvent,
};
use dovetail_ingest::Reading;
use hdrhistogram::Histogram;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

pub(super) const MINUTE_MS: i64 = 60_000;

pub(super) struct World {
    pub(super) engine: Engine,
    /// How many times the engine was advanced.
    pub(super) advances: u64,
    /// The virtual time of the last advance.
    pub(super) last_advance_ms: i64,
    pub(super) region: String,
    pub(super) cloud: SimCloud,
    pub(super) cluster: SimCluster,
    pub(super) facts: FactSet,
    pub(super) nodepools: BTreeMap<String, NodePool>,
    pub(super) nodeclasses: BTreeMap<String, EC2NodeClass>,
    pub(super) pdbs: BTreeMap<String, PodDisruptionBudget>,
    /// Every type as the cloud sells it (prices, offerings), with price changes applied.
    pub(super) fleet_types: BTreeMap<String, InstanceType>,
    /// Offerings without capacity, until the given time.
    pub(super) unavailable: BTreeMap<OfferingKey, i64>,
    /// Capacity errors since the instance types were last refreshed: the engine must replan.
    pub(super) replan: bool,
    /// Every launch name executed.
    pub(super) launched: BTreeSet<String>,
    /// NodeClaims launched whose Node has not registered yet, by node name.
    pub(super) in_flight: BTreeMap<String, Node>,
    /// When a pod was last bound to or removed from each node (`status.lastPodEventTime`).
    pub(super) pod_events: BTreeMap<String, i64>,
    /// Nodes whose instance was terminated and whose Node is not gone yet.
    pub(super) deleting: BTreeSet<String>,
    /// Nodes whose fact must be re-sent to the engine.
    pub(super) dirty_nodes: BTreeSet<String>,
    /// Interruption facts told to the engine, by instance id, until the instance is gone.
    pub(super) interruption_facts: BTreeMap<String, Vec<Fact>>,
    pub(super) disruption: Disruptions,
    pub(super) lower_bound: Price,
    // statistics
    pub(super) engine_latency: Histogram<u64>,
    pub(super) capacity_errors: u64,
    pub(super) interruptions: u64,
    /// Messages sent to the interruption queue (their sequence numbers).
    messages: u64,
    pub(super) nodes_terminated: u64,
    pub(super) peak_nodes: u64,
    pub(super) pods_created: u64,
    pub(super) notes: BTreeSet<String>,
}

pub(super) fn histogram() -> Histogram<u64> {
    // Auto-resizing, three significant figures: a constant configuration that cannot fail.
    Histogram::new(3).expect("3 significant figures is a valid histogram precision")
}

impl World {
    pub(super) fn new(
        sim: &crate::SimConfig,
        build: impl dovetail_dataflow::engine::QueryBuilder,
        workers: usize,
    ) -> Result<World, ReplayError> {
        let catalog = embedded(&sim.region)?;
        let fleet_types = catalog
            .instance_types(&ResolveOptions::default())
            .into_iter()
            .map(|t| (t.name.clone(), t))
            .collect();
        Ok(World {
            engine: Engine::start(workers, build)?,
            advances: 0,
            last_advance_ms: 0,
            region: sim.region.clone(),
            cloud: crate::SimCloud::new(sim.clone())
                .map_err(|e| ReplayError::Cloud(e.to_string()))?,
            cluster: SimCluster::new(),
            facts: FactSet::default(),
            nodepools: BTreeMap::new(),
            nodeclasses: BTreeMap::new(),
            pdbs: BTreeMap::new(),
            fleet_types,
            unavailable: BTreeMap::new(),
            replan: false,
            launched: BTreeSet::new(),
            in_flight: BTreeMap::new(),
            pod_events: BTreeMap::new(),
            deleting: BTreeSet::new(),
            dirty_nodes: BTreeSet::new(),
            interruption_facts: BTreeMap::new(),
            disruption: Disruptions::default(),
            lower_bound: Price(0),
            engine_latency: histogram(),
            capacity_errors: 0,
            interruptions: 0,
            messages: 0,
            nodes_terminated: 0,
            peak_nodes: 0,
            pods_created: 0,
            notes: BTreeSet::new(),
        })
    }

    /// The instance types a NodeClass resolves, with the cloud's current prices and capacity
    /// errors applied, as facts.
    pub(super) fn refresh_instance_types(&mut self) -> Result<(), ReplayError> {
        let catalog = embedded(&self.region)?;
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
        self.replan = false;
        Ok(())
    }

    pub(super) fn apply(&mut self, object: &AppliedObject) {
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

    pub(super) fn sync_pod(&mut self, key: &str) {
        match self.cluster.pod(key) {
            Some(p) => self.facts.set(Fact::Pod(p.clone())),
            None => self.facts.remove(&format!("Pod {key}")),
        }
    }

    pub(super) fn sync_pods(&mut self, pods: &[Pod]) {
        for p in pods {
            self.sync_pod(&p.key());
        }
    }

    /// Binds what the simulated kube-scheduler can, and tells the engine.
    pub(super) fn schedule(&mut self, now: i64) {
        for (pod, node) in self.cluster.schedule(now) {
            self.sync_pod(&pod);
            self.pod_event(&pod, &node, now);
        }
    }

    pub(super) fn event(&mut self, now: i64, e: &TimedEvent) -> Result<(), ReplayError> {
        match &e.event {
            TraceEvent::PodCreated(pod) => {
                let pod: Pod = (**pod).clone();
                let key = pod.key();
                self.pods_created += 1;
                if let Err(err) = self.cluster.add_pod(now, pod) {
                    self.notes.insert(format!("trace line {}: {err}", e.line));
                }
                if let Some(node) = self.cluster.pod(&key).and_then(|p| p.node_name.clone()) {
                    self.pod_event(&key, &node, now);
                }
                self.sync_pod(&key);
            }
            TraceEvent::PodDeleted(r) => {
                let key = format!("{}/{}", r.namespace, r.name);
                let node = self
                    .cluster
                    .pod(&key)
                    .filter(|p| !p.is_daemon)
                    .and_then(|p| p.node_name.clone());
                if self.cluster.delete_pod(&key).is_err() {
                    self.notes
                        .insert("some trace deletions name pods that are not present".to_string());
                }
                if let Some(node) = node {
                    self.pod_events.insert(node.clone(), now);
                    self.dirty_nodes.insert(node);
                }
                self.sync_pod(&key);
            }
            TraceEvent::Apply(object) => {
                let class_changed = matches!(**object, AppliedObject::EC2NodeClass(_));
                self.apply(object);
                if class_changed {
                    self.refresh_instance_types()?;
                }
            }
            TraceEvent::Delete(r) => {
                let name = if r.kind.namespaced() {
                    format!("{}/{}", r.namespace.as_deref().unwrap_or("default"), r.name)
                } else {
                    r.name.clone()
                };
                match r.kind {
                    ObjectKind::NodePool => {
                        self.nodepools.remove(&r.name);
                        // Its NodeClaims are owned by it and go with it, as in Karpenter (which
                        // drains them first; here they are terminated at once).
                        let claims: Vec<String> = self
                            .cloud
                            .instances()
                            .filter(|i| i.state.is_alive() && i.nodepool == r.name)
                            .map(|i| i.launch.clone())
                            .collect();
                        for claim in claims {
                            self.terminate_claim(now, &claim);
                        }
                    }
                    ObjectKind::EC2NodeClass => {
                        self.nodeclasses.remove(&r.name);
                    }
                    ObjectKind::PodDisruptionBudget => {
                        self.pdbs.remove(&name);
                    }
                    ObjectKind::NodeOverlay | ObjectKind::DaemonSet => {}
                    // Priorities were resolved into the pods when the trace was read.
                    ObjectKind::PriorityClass => return Ok(()),
                }
                self.facts
                    .remove(&facts::object_key(r.kind.as_str(), &name));
                if r.kind == ObjectKind::EC2NodeClass {
                    self.refresh_instance_types()?;
                }
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
                self.refresh_instance_types()?;
            }
            TraceEvent::Capacity(change) => {
                // Without a zone, the limit holds in each zone of the type separately.
                let zones: Vec<String> = match &change.zone {
                    Some(z) => vec![z.clone()],
                    None => self
                        .fleet_types
                        .get(&change.instance_type)
                        .map(|it| {
                            let zones: BTreeSet<String> =
                                it.offerings.iter().map(|o| o.zone.clone()).collect();
                            zones.into_iter().collect()
                        })
                        .unwrap_or_default(),
                };
                if zones.is_empty() {
                    self.notes.insert(format!(
                        "trace line {}: capacity of unknown instance type {}",
                        e.line, change.instance_type
                    ));
                }
                for zone in zones {
                    self.cloud.set_capacity(
                        OfferingKey {
                            instance_type: change.instance_type.clone(),
                            zone,
                            capacity_type: change.capacity_type.as_str().to_string(),
                        },
                        change.instances,
                    );
                }
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

    /// EC2 (or AWS Health) sent the interruption queue a message: read it as the controller
    /// reads the queue, through the same reader as `dovetail plan --interruptions`.
    fn message(&mut self, event: &CloudEvent, instance: &Instance) {
        self.messages += 1;
        let Some(body) = eventbridge::message_body(event, instance, self.messages) else {
            return;
        };
        let position = usize::try_from(self.messages).unwrap_or(usize::MAX);
        match dovetail_ingest::parse_message("simulated interruption queue", position, &body) {
            Ok(Reading::Interruptions(found)) => {
                for i in found {
                    if i.kind == facts::InterruptionKind::RebalanceRecommendation {
                        self.notes.insert(
                            "rebalance recommendations were recorded, no action (as Karpenter)"
                                .to_string(),
                        );
                    } else {
                        self.interruption(instance, i.kind, i.at_ms);
                    }
                }
            }
            Ok(Reading::Ignored(why)) => {
                self.notes
                    .insert(format!("interruption message ignored: {why}"));
            }
            Err(e) => {
                tracing::warn!(error = %e, "unreadable interruption message");
                self.notes
                    .insert(format!("unreadable interruption message: {e}"));
            }
        }
    }

    /// EC2 says the instance is about to go: tell the engine (Karpenter's interruption queue),
    /// which answers with an `Interrupted` disruption for a registered node. A NodeClaim not
    /// registered yet is not a disruption candidate, so the engine is only told to stop
    /// planning pods onto it.
    fn interruption(&mut self, instance: &Instance, kind: facts::InterruptionKind, at_ms: i64) {
        self.interruptions += 1;
        let fact = Fact::Interruption(Interruption {
            target: instance.id.clone(),
            kind,
            at_ms,
        });
        self.facts.set(fact.clone());
        self.interruption_facts
            .entry(instance.id.clone())
            .or_default()
            .push(fact);
        let name = instance.node_name();
        if let Some(n) = self.in_flight.get_mut(&name) {
            n.unschedulable = true;
            self.dirty_nodes.insert(name.clone());
        }
        // A node already in a graceful command is not a candidate any more, so the engine
        // will not decide its interruption: drain it now rather than at the reclaim.
        self.disruption.drain_now(&name);
    }

    pub(super) fn cloud_events(&mut self, now: i64) {
        for e in self.cloud.poll(now) {
            let Some(instance) = self.cloud.instance(&e.instance_id).cloned() else {
                continue;
            };
            let name = instance.node_name();
            match e.kind {
                CloudEventKind::Running => {}
                CloudEventKind::NodeRegistered => self.register(&instance, e.at_ms),
                CloudEventKind::NodeInitialized => {
                    if self.cluster.mark_ready(&name).is_ok() {
                        self.dirty_nodes.insert(name);
                    }
                }
                CloudEventKind::SpotInterruptionWarning { .. }
                | CloudEventKind::CapacityReservationInterruptionWarning { .. }
                | CloudEventKind::ScheduledChange
                | CloudEventKind::RebalanceRecommendation => self.message(&e, &instance),
                CloudEventKind::Terminated { .. } => self.gone(now, &instance),
            }
        }
    }

    /// The kubelet registered the instance's Node.
    fn register(&mut self, instance: &Instance, at_ms: i64) {
        let name = instance.node_name();
        let (Some(it), Some(pool)) = (
            self.fleet_types.get(&instance.instance_type),
            self.nodepools.get(&instance.nodepool),
        ) else {
            return;
        };
        let (mut node, startup) = node_for_instance(instance, it, pool, at_ms);
        let claim = self.in_flight.remove(&name);
        // What was recorded at launch stays, as on the NodeClaim: a NodePool changed since
        // then is drift, not a new baseline.
        match &claim {
            Some(c) => {
                node.annotations.extend(c.annotations.clone());
                node.launched = c.launched.clone();
            }
            None => {
                let class = pool
                    .node_class
                    .as_ref()
                    .and_then(|c| self.nodeclasses.get(c));
                record_launch(&mut node, pool, class);
            }
        }
        let unschedulable = claim.is_some_and(|c| c.unschedulable);
        if self.cluster.add_node(node, startup).is_ok() && unschedulable {
            let _ = self.cluster.set_unschedulable(&name, true);
        }
        self.dirty_nodes.insert(name);
    }

    /// The instance is gone: its Node, its pods' binding and what the engine knew of it.
    fn gone(&mut self, now: i64, instance: &Instance) {
        let name = instance.node_name();
        self.nodes_terminated += 1;
        if let Ok(pods) = self.cluster.remove_node(now, &name) {
            self.sync_pods(&pods);
        }
        self.in_flight.remove(&name);
        self.deleting.remove(&name);
        self.pod_events.remove(&name);
        self.dirty_nodes.insert(name);
        for fact in self
            .interruption_facts
            .remove(&instance.id)
            .unwrap_or_default()
        {
            self.facts.remove(&fact.describe());
        }
    }

    pub(super) fn expire_unavailable(&mut self, now: i64) -> Result<(), ReplayError> {
        let before = self.unavailable.len();
        self.unavailable.retain(|_, until| *until > now);
        if self.unavailable.len() != before {
            self.refresh_instance_types()?;
        }
        Ok(())
    }

    /// Closes the epoch at `now` with what changed, and returns the decisions' diffs. Timers
    /// due before `now` fire first, on the clock they were set for; later steps at the same
    /// instant take the next milliseconds.
    pub(super) fn advance_engine(
        &mut self,
        now: i64,
    ) -> Result<Vec<(Decision, isize)>, ReplayError> {
        self.sync_nodes();
        let changes = self.facts.take_changes();
        let at = (now.max(0) as u64).max(self.engine.epoch());
        let started = Instant::now();
        let mut diffs = Vec::new();
        // With nothing to apply, one advance past `at` fires the same timers.
        if self.engine.epoch() < at && !changes.is_empty() {
            diffs = self.engine.advance(at, Vec::new())?;
            self.advances += 1;
        }
        let more = self.engine.advance(at + 1, changes)?;
        self.advances += 1;
        let diffs = if diffs.is_empty() {
            more
        } else {
            let mut sum: BTreeMap<Decision, isize> = BTreeMap::new();
            for (d, r) in diffs.into_iter().chain(more) {
                *sum.entry(d).or_insert(0) += r;
            }
            sum.into_iter().filter(|(_, r)| *r != 0).collect()
        };
        let micros = started.elapsed().as_micros() as u64;
        let _ = self.engine_latency.record(micros.max(1));
        self.last_advance_ms = now;
        for (d, r) in &diffs {
            if let (Decision::ClusterLowerBound(p), 1) = (d, r) {
                self.lower_bound = *p;
            }
        }
        Ok(diffs)
    }

    /// Whether any node or NodeClaim exists (the disruption loop polls only then).
    pub(super) fn has_nodes(&self) -> bool {
        !self.in_flight.is_empty() || self.cluster.nodes().next().is_some()
    }

    pub(super) fn alive_nodes(&self) -> u64 {
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
    pub(super) fn timeline_until(
        &self,
        now: i64,
        next_minute: &mut i64,
        timeline: &mut Vec<TimelineRow>,
    ) {
        while *next_minute * MINUTE_MS < now {
            let pending = self.pods_pending();
            timeline.push(TimelineRow {
                minute: *next_minute as u64,
                nodes: self.alive_nodes(),
                pods_pending: pending,
                pods_running: self.cluster.pods().count() as u64 - pending,
                cost_rate: self.cost_rate(),
                lower_bound_rate: self.lower_bound.dollars(),
                nodes_disrupting: self.disruption.nodes_disrupting(),
                nodes_disrupted: self.disruption.nodes_terminated(),
            });
            *next_minute += 1;
        }
    }

    pub(super) fn pods_pending(&self) -> u64 {
        self.cluster
            .pods()
            .filter(|p| p.node_name.is_none())
            .count() as u64
    }
}
