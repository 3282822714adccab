//! The simulated world a replay drives: the simulated cloud and cluster (the `Cloud` and
//! `Cluster` the control loop acts through), the trace's objects, and the statistics the summary
//! reports. Applying trace events and cloud events to it lives here; the engine's view of nodes
//! in `node_facts.rs`; acting on decisions is the control loop's (`dovetail_actuate`); the
//! driver's clock in `run.rs`.

use super::error::ReplayError;
use super::summary::TimelineRow;
use dovetail_actuate::{ActuationSettings, ControlLoop};
use dovetail_dataflow::backend::{Cloud, CloudEvent, CloudEventKind, Instance, OfferingKey};
use dovetail_dataflow::catalog::{embedded, RegionCatalog, ResolveOptions};
use dovetail_dataflow::decisions::Decision;
use dovetail_dataflow::facts::{self, Fact, Interruption};
use dovetail_dataflow::model::{InstanceType, Pod, Price};
use dovetail_ingest::trace::{
    AppliedObject, InterruptKind, InterruptTarget, ObjectKind, TimedEvent, TraceEvent,
};
use dovetail_ingest::Reading;
use dovetail_sim::{eventbridge, InterruptionKind, SimCloud, SimCluster};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub(crate) const MINUTE_MS: i64 = 60_000;

/// The simulated cluster with a cloud: the simulated one in a replay, EC2 in `dovetail run
/// --cloud aws --cluster sim`.
pub(crate) struct World<C = SimCloud> {
    /// The engine and the actuator, acting through `cloud` and `cluster`.
    pub(crate) control: ControlLoop,
    /// The catalogue the instance types come from (embedded, or discovered from EC2).
    pub(crate) catalog: Arc<RegionCatalog>,
    pub(crate) cloud: C,
    pub(crate) cluster: SimCluster,
    /// When a pod was last bound to or removed from each node (`status.lastPodEventTime`).
    pub(crate) pod_events: BTreeMap<String, i64>,
    /// Nodes whose fact must be re-sent to the engine.
    pub(crate) dirty_nodes: BTreeSet<String>,
    /// Interruption facts told to the engine, by instance id, until the instance is gone.
    pub(crate) interruption_facts: BTreeMap<String, Vec<Fact>>,
    pub(crate) lower_bound: Price,
    // statistics
    pub(crate) interruptions: u64,
    /// Messages sent to the interruption queue (their sequence numbers).
    messages: u64,
    pub(crate) nodes_terminated: u64,
    pub(crate) peak_nodes: u64,
    pub(crate) pods_created: u64,
    pub(crate) notes: BTreeSet<String>,
    /// The simulated kubelet joins when the cloud says the instance runs (a real cloud), not
    /// on the simulated cloud's own registration events.
    pub(crate) kubelet_joins_when_running: bool,
}

impl World<SimCloud> {
    pub(crate) fn new(
        sim: &dovetail_sim::SimConfig,
        build: impl dovetail_dataflow::engine::QueryBuilder,
        workers: usize,
    ) -> Result<World, ReplayError> {
        let catalog = Arc::new(embedded(&sim.region)?.clone());
        let settings = ActuationSettings {
            capacity_error_ttl_ms: sim.ice_ttl_ms,
            ..ActuationSettings::default()
        };
        let cloud = SimCloud::new(sim.clone()).map_err(|e| ReplayError::Cloud(e.to_string()))?;
        World::with_cloud(cloud, catalog, settings, build, workers)
    }
}

impl<C: Cloud> World<C> {
    /// A world around `cloud`, its instance types from `catalog`.
    pub(crate) fn with_cloud(
        cloud: C,
        catalog: Arc<RegionCatalog>,
        settings: ActuationSettings,
        build: impl dovetail_dataflow::engine::QueryBuilder,
        workers: usize,
    ) -> Result<World<C>, ReplayError> {
        let mut control = ControlLoop::start(build, workers, settings)?;
        control
            .actuator_mut()
            .set_instance_types(region_types(&catalog));
        Ok(World {
            control,
            catalog,
            cloud,
            cluster: SimCluster::new(),
            pod_events: BTreeMap::new(),
            dirty_nodes: BTreeSet::new(),
            interruption_facts: BTreeMap::new(),
            lower_bound: Price(0),
            interruptions: 0,
            messages: 0,
            nodes_terminated: 0,
            peak_nodes: 0,
            pods_created: 0,
            notes: BTreeSet::new(),
            kubelet_joins_when_running: false,
        })
    }

    /// The cluster-scoped objects of `m` (NodePools, EC2NodeClasses, NodeOverlays, DaemonSets,
    /// PodDisruptionBudgets), then the instance types their EC2NodeClasses resolve.
    pub(crate) fn apply_manifests(
        &mut self,
        m: &dovetail_ingest::Manifests,
    ) -> Result<(), ReplayError> {
        for p in &m.nodepools {
            self.apply(&AppliedObject::NodePool(p.clone()));
        }
        for c in &m.nodeclasses {
            self.apply(&AppliedObject::EC2NodeClass(c.clone()));
        }
        for o in &m.overlays {
            self.apply(&AppliedObject::NodeOverlay(o.clone()));
        }
        for d in &m.daemonsets {
            self.apply(&AppliedObject::DaemonSet(d.clone()));
        }
        for p in &m.pdbs {
            self.apply(&AppliedObject::PodDisruptionBudget(p.clone()));
        }
        self.refresh_instance_types()
    }

    /// Binds what the simulated kube-scheduler can, closes an epoch and acts on it, again while
    /// acting changed what the engine must be told, at most `max_steps` times at one instant.
    /// True when anything changed: a decision, or something the engine must be told.
    pub(crate) fn step(&mut self, now: i64, max_steps: usize) -> Result<bool, ReplayError> {
        let mut changed = false;
        for _ in 0..max_steps {
            self.schedule(now);
            let diffs = self.advance_engine(now)?;
            changed |= !diffs.is_empty();
            if !self.act(now, &diffs) {
                break;
            }
            changed = true;
        }
        Ok(changed)
    }

    /// Nothing under way that a periodic poll would move on: no facts waiting for the engine,
    /// no disruption command, no NodeClaim waiting to register.
    pub(crate) fn settled(&self) -> bool {
        !self.control.has_changes()
            && self.dirty_nodes.is_empty()
            && self.control.actuator().nodes_disrupting() == 0
            && self.cluster.in_flight().next().is_none()
    }

    /// Nothing left that the replay should wait for once the trace is over: [`Self::settled`]
    /// (no launch unregistered, no disruption command under way), no registered node still
    /// initialising, no consolidation command waiting for its validation and no batch window
    /// open. Timers that might start new work (a capacity error's expiry, `consolidateAfter`)
    /// do not hold the end by themselves.
    pub(crate) fn finished(&self) -> bool {
        self.settled()
            && self.cluster.nodes().all(|n| self.cluster.is_ready(&n.name))
            && self
                .control
                .actuator()
                .next_validation_ms(self.control.last_advance_ms())
                .is_none()
            && self.control.next_batch_close_ms().is_none()
    }

    /// Pending pods the engine placed on a node that is not ready yet: a NodeClaim launching or
    /// a node initialising.
    pub(crate) fn pods_waiting_for_node(&self) -> u64 {
        let pending: BTreeSet<String> = self
            .cluster
            .pods()
            .filter(|p| p.node_name.is_none())
            .map(|p| p.key())
            .collect();
        if pending.is_empty() {
            return 0;
        }
        let decisions = self.control.engine().decisions();
        let on_its_way = |target: &str| {
            !self.cluster.is_ready(target)
                && (self.cluster.node(target).is_some()
                    || self.cluster.in_flight().any(|n| n.name == target)
                    || dovetail_dataflow::backend::Cluster::nodeclaim(&self.cluster, target)
                        .is_some())
        };
        let waiting: BTreeSet<&String> = decisions
            .iter()
            .filter_map(|d| match d {
                Decision::Binding { pod, target }
                    if pending.contains(pod) && on_its_way(target) =>
                {
                    Some(pod)
                }
                _ => None,
            })
            .collect();
        waiting.len() as u64
    }

    /// A catalogue discovered again: the region's types (what launches are built from) and each
    /// EC2NodeClass's instance-type facts follow it; types it no longer has are retracted.
    pub(crate) fn set_catalog(&mut self, catalog: Arc<RegionCatalog>) -> Result<(), ReplayError> {
        self.control
            .actuator_mut()
            .set_instance_types(region_types(&catalog));
        self.catalog = catalog;
        self.refresh_instance_types()
    }

    /// The instance types each EC2NodeClass resolves, with the cloud's current prices, as facts
    /// (capacity errors reach the engine as facts of their own).
    pub(crate) fn refresh_instance_types(&mut self) -> Result<(), ReplayError> {
        self.control.refresh_instance_types(&self.catalog);
        Ok(())
    }

    pub(crate) fn apply(&mut self, object: &AppliedObject) {
        match object {
            AppliedObject::NodePool(p) => self.control.set_fact(Fact::NodePool(p.clone())),
            AppliedObject::EC2NodeClass(c) => self.control.set_fact(Fact::NodeClass(c.clone())),
            AppliedObject::NodeOverlay(o) => self.control.set_fact(Fact::Overlay(o.clone())),
            AppliedObject::DaemonSet(d) => self.control.set_fact(Fact::DaemonSet(d.clone())),
            AppliedObject::PodDisruptionBudget(p) => {
                self.cluster.set_pdb(p.clone());
                self.control.set_fact(Fact::Pdb(p.clone()));
            }
            // Priority classes were resolved into pods' priorities when the trace was read.
            AppliedObject::PriorityClass { .. } => {}
        }
    }

    fn sync_pod(&mut self, key: &str) {
        match self.cluster.shared_pod(key) {
            Some(p) => self.control.set_fact(Fact::Pod(p.clone())),
            None => self.control.remove_fact(&facts::object_key("Pod", key)),
        }
    }

    /// Takes what changed in the cluster (its watch) into facts: pods at once, nodes marked
    /// to be re-sent, and `lastPodEventTime` of the nodes a pod came to or left.
    pub(crate) fn sync_cluster(&mut self, now: i64) {
        let changes = self.cluster.take_changes();
        for key in &changes.pods {
            self.sync_pod(key);
        }
        for node in changes.pod_events {
            self.pod_events.insert(node.clone(), now);
            self.dirty_nodes.insert(node);
        }
        self.dirty_nodes.extend(changes.nodes);
    }

    /// Binds what the simulated kube-scheduler can.
    pub(crate) fn schedule(&mut self, now: i64) {
        self.cluster.schedule(now);
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
                    self.interrupted(instance, i.kind, i.at_ms);
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
        self.control.set_fact(fact.clone());
        self.interruption_facts
            .entry(instance.id.clone())
            .or_default()
            .push(fact);
        // Karpenter's interruption controller marks a reclaimed spot pool unavailable, so the
        // replacement is not launched into it.
        if kind == facts::InterruptionKind::SpotInterruption {
            self.control
                .actuator_mut()
                .mark_unavailable(at_ms, instance.offering());
        }
        let name = instance.node_name();
        let claim = self
            .cluster
            .nodeclaim_of_node(&name)
            .filter(|c| !c.registered)
            .cloned();
        if let Some(mut c) = claim {
            if let Some(status) = c.status.as_mut() {
                status.unschedulable = true;
            }
            dovetail_dataflow::backend::Cluster::update_nodeclaim(&mut self.cluster, at_ms, c);
        }
        // A node already in a graceful command is not a candidate any more, so the engine
        // will not decide its interruption: drain it now rather than at the reclaim.
        self.control.actuator_mut().drain_now(&name);
    }

    pub(crate) fn cloud_events(&mut self, now: i64) {
        for e in self.cloud.poll_events(now) {
            let Some(instance) = self.cloud.instance(&e.instance_id).cloned() else {
                continue;
            };
            let name = instance.node_name();
            match e.kind {
                // A real cloud says nothing of the kubelet: the simulated cluster's kubelet
                // joins as soon as the instance runs.
                CloudEventKind::Running if self.kubelet_joins_when_running => {
                    self.node_registered(e.at_ms, &name);
                    self.node_initialized(&name);
                }
                CloudEventKind::Running => {}
                CloudEventKind::NodeRegistered => self.node_registered(e.at_ms, &name),
                CloudEventKind::NodeInitialized => self.node_initialized(&name),
                CloudEventKind::SpotInterruptionWarning { .. }
                | CloudEventKind::CapacityReservationInterruptionWarning { .. }
                | CloudEventKind::ScheduledChange
                | CloudEventKind::RebalanceRecommendation => self.message(&e, &instance),
                CloudEventKind::Terminated { .. } => self.gone(now, &instance),
            }
        }
    }

    /// The kubelet joins: the Node is what actuation wrote on its NodeClaim.
    fn node_registered(&mut self, at_ms: i64, name: &str) {
        if self.cluster.register(name, at_ms) {
            // Karpenter's registration, at once: the engine never sees the unregistered taint.
            dovetail_actuate::registration::register_node(at_ms, name, &mut self.cluster);
        } else {
            self.notes
                .insert("an instance registered with no NodeClaim launched for it".to_string());
        }
    }

    fn node_initialized(&mut self, name: &str) {
        if self.cluster.mark_ready(name).is_ok() {
            self.dirty_nodes.insert(name.to_string());
        }
    }

    /// An interruption read from the queue (the real one): acted on as the simulated queue's.
    pub(crate) fn queue_interruption(&mut self, i: Interruption) {
        let Some(instance) = self.cloud.instance(&i.target).cloned() else {
            self.notes
                .insert("interruption messages about instances not of this cluster".to_string());
            return;
        };
        self.interrupted(&instance, i.kind, i.at_ms);
    }

    /// One interruption read from a queue, simulated or real: a rebalance recommendation is
    /// recorded, anything else acted on.
    fn interrupted(&mut self, instance: &Instance, kind: facts::InterruptionKind, at_ms: i64) {
        if kind == facts::InterruptionKind::RebalanceRecommendation {
            self.notes.insert(
                "rebalance recommendations were recorded, no action (as Karpenter)".to_string(),
            );
        } else {
            self.interruption(instance, kind, at_ms);
        }
    }

    /// The instance is gone: its Node, its pods' binding and what the engine knew of it.
    fn gone(&mut self, now: i64, instance: &Instance) {
        let name = instance.node_name();
        self.nodes_terminated += 1;
        self.cluster.remove_node_and_claim(now, &name);
        self.pod_events.remove(&name);
        self.dirty_nodes.insert(name);
        for fact in self
            .interruption_facts
            .remove(&instance.id)
            .unwrap_or_default()
        {
            self.control.remove_fact(&fact.describe());
        }
    }

    pub(crate) fn expire_unavailable(&mut self, now: i64) {
        self.control.expire_capacity_errors(now);
    }

    /// Closes the epoch at `now` with what changed, and returns the decisions' diffs.
    pub(crate) fn advance_engine(
        &mut self,
        now: i64,
    ) -> Result<Vec<(Decision, isize)>, ReplayError> {
        self.sync_cluster(now);
        self.sync_nodes();
        let diffs = self.control.advance(now)?;
        for (d, r) in &diffs {
            if let (Decision::ClusterLowerBound(p), 1) = (d, r) {
                self.lower_bound = *p;
            }
        }
        Ok(diffs)
    }

    /// Acts on the decisions through the simulated cloud and cluster, then takes in what came
    /// of it; true when the engine must be told something.
    pub(crate) fn act(&mut self, now: i64, diffs: &[(Decision, isize)]) -> bool {
        self.control
            .act(now, diffs, &mut self.cloud, &mut self.cluster);
        self.sync_cluster(now);
        self.control.has_changes() || !self.dirty_nodes.is_empty()
    }

    /// Whether any node or NodeClaim exists (the disruption loop polls only then).
    pub(crate) fn has_nodes(&self) -> bool {
        self.cluster.in_flight().next().is_some() || self.cluster.nodes().next().is_some()
    }

    pub(crate) fn alive_nodes(&self) -> u64 {
        Cloud::instances(&self.cloud)
            .into_iter()
            .filter(|i| i.state.is_alive())
            .count() as u64
    }

    fn cost_rate(&self) -> f64 {
        Cloud::instances(&self.cloud)
            .into_iter()
            .filter(|i| i.state.is_alive())
            .map(|i| i.price.dollars())
            .sum()
    }

    /// Appends a row for every minute that starts before `now`, with the current state.
    pub(crate) fn timeline_until(
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
                nodes_disrupting: self.control.actuator().nodes_disrupting(),
                nodes_disrupted: self.control.actuator().nodes_disrupted(),
            });
            *next_minute += 1;
        }
    }

    pub(crate) fn pods_pending(&self) -> u64 {
        self.cluster
            .pods()
            .filter(|p| p.node_name.is_none())
            .count() as u64
    }
}

impl World<SimCloud> {
    pub(crate) fn event(&mut self, now: i64, e: &TimedEvent) -> Result<(), ReplayError> {
        match &e.event {
            TraceEvent::PodCreated(pod) => {
                let pod: Pod = (**pod).clone();
                self.pods_created += 1;
                if let Err(err) = self.cluster.add_pod(now, pod) {
                    self.notes.insert(format!("trace line {}: {err}", e.line));
                }
            }
            TraceEvent::PodDeleted(r) => {
                let key = format!("{}/{}", r.namespace, r.name);
                if self.cluster.delete_pod(&key).is_err() {
                    self.notes
                        .insert("some trace deletions name pods that are not present".to_string());
                }
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
                        // Its NodeClaims are owned by it and go with it, as in Karpenter (which
                        // drains them first; here they are terminated at once).
                        let claims: Vec<String> = self
                            .cloud
                            .instances()
                            .filter(|i| i.state.is_alive() && i.nodepool == r.name)
                            .map(|i| i.launch.clone())
                            .collect();
                        for claim in claims {
                            self.control.actuator_mut().terminate_claim(
                                now,
                                &claim,
                                &mut self.cloud,
                                &mut self.cluster,
                            );
                        }
                    }
                    ObjectKind::PodDisruptionBudget => {
                        self.cluster.remove_pdb(&name);
                    }
                    // Only facts: their removal below (an EC2NodeClass's also leaves what the
                    // loop launches with).
                    ObjectKind::NodeOverlay | ObjectKind::DaemonSet | ObjectKind::EC2NodeClass => {}
                    // Priorities were resolved into the pods when the trace was read.
                    ObjectKind::PriorityClass => return Ok(()),
                }
                self.control
                    .remove_fact(&facts::object_key(r.kind.as_str(), &name));
                if r.kind == ObjectKind::EC2NodeClass {
                    self.refresh_instance_types()?;
                }
            }
            TraceEvent::Price(change) => {
                if let Some(it) = self
                    .control
                    .actuator_mut()
                    .instance_types_mut()
                    .get_mut(&change.instance_type)
                {
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
                        .control
                        .actuator()
                        .instance_types()
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
}

/// The region's instance types by name, as launches are built from them (every zone, no node
/// class's changes).
pub(crate) fn region_types(
    catalog: &RegionCatalog,
) -> std::collections::BTreeMap<String, InstanceType> {
    catalog
        .instance_types(&ResolveOptions::default())
        .into_iter()
        .map(|t| (t.name.clone(), t))
        .collect()
}
