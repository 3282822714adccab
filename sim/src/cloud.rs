//! `SimCloud`: simulated EC2 on the virtual clock.
//!
//! - **CreateFleet** (`Type=instant`, one instance): the request's overrides are tried in their
//!   order (actuation builds them as Karpenter does); the first with capacity is filled. Each offering holds at most
//!   its configured capacity of live instances (unlimited by default); a full one is an
//!   InsufficientInstanceCapacity error for that offering. Asking again with a client token
//!   whose instance is still alive returns that instance.
//! - **Lifecycle**: an instance is `running` `launch_to_running_ms` after CreateFleet, its node
//!   registers `running_to_registered_ms` later and is initialised (Ready)
//!   `registered_to_initialized_ms` after that. Each step is an event at that exact instant.
//! - **TerminateInstances**: billing and capacity stop at the call; `Terminated` follows
//!   `shutdown_ms` later. Terminating a terminated instance is a no-op, as in EC2.
//! - **Spot interruptions**: each spot instance draws a time to interruption from its
//!   type's spot advisor bucket (see [`crate::spot_advisor`]), counted from `running`. Then a
//!   `SpotInterruptionWarning` is issued, and the instance is reclaimed (`Terminated`) two
//!   minutes later unless terminated first.
//! - **Time**: every call takes the current virtual time. Due events are applied before the call
//!   acts, so the cloud's state is always that of `now`; events are applied at their own instant
//!   (billing stops when a reclaim was due, not when it was noticed). Time never goes backwards:
//!   an earlier `now_ms` than one already seen counts as the latest seen.

use crate::clock::{EventQueue, VirtualClock};
use crate::config::{ConfigError, SimConfig, INTERRUPTION_WARNING_MS};
use crate::cost::{cost_report, CostReport};
use crate::interrupt::InterruptionKind;
use crate::rng::SimRng;
use crate::spot_advisor::{
    embedded_interruption_buckets, interruption_rate_per_ms, SpotAdvisorError, DEFAULT_BUCKET,
};
use dovetail_dataflow::backend::{
    Cloud, CloudEvent, CloudEventKind, CloudReply, FleetRequest, Instance, InstanceState,
    LaunchError, OfferingKey, TerminationCause,
};
use std::collections::BTreeMap;
use tracing::debug;

/// Why a cloud call failed (other than CreateFleet, see [`LaunchError`]).
#[derive(Debug, thiserror::Error)]
pub enum CloudError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    SpotAdvisor(#[from] SpotAdvisorError),
    /// InvalidInstanceID.NotFound.
    #[error("no instance {0}")]
    UnknownInstance(String),
}

/// Interruption times further out than this (about 3,000 years) are not scheduled.
const NEVER_MS: f64 = 1e14;

/// What the queue holds: steps that change an instance's state when they come due.
#[derive(Debug, Clone)]
enum Step {
    Running(String),
    Registered(String),
    Initialized(String),
    /// The drawn spot interruption.
    Interruption(String),
    /// A forced interruption from a trace.
    Notice(String, InterruptionKind),
    /// Reclaimed after a warning.
    Reclaim(String, TerminationCause),
    /// `shutting-down` → `terminated`.
    Finish(String, TerminationCause),
}

impl Step {
    fn id(&self) -> &str {
        match self {
            Step::Running(id)
            | Step::Registered(id)
            | Step::Initialized(id)
            | Step::Interruption(id)
            | Step::Notice(id, _)
            | Step::Reclaim(id, _)
            | Step::Finish(id, _) => id,
        }
    }
}

/// Simulated EC2.
#[derive(Debug, Clone)]
pub struct SimCloud {
    config: SimConfig,
    clock: VirtualClock,
    rng: SimRng,
    buckets: BTreeMap<String, u8>,
    overrides: BTreeMap<OfferingKey, u32>,
    in_use: BTreeMap<OfferingKey, u32>,
    instances: BTreeMap<String, Instance>,
    /// Client token → id of its live instance.
    by_token: BTreeMap<String, String>,
    /// NodeClaim name → id of its live instance.
    by_nodeclaim: BTreeMap<String, String>,
    queue: EventQueue<Step>,
    outbox: Vec<CloudEvent>,
    /// Answers to calls, each due at its time (the call's plus `call_latency_ms`).
    replies: Vec<(i64, CloudReply)>,
}

impl SimCloud {
    /// A cloud with no instances at time 0, its spot buckets from the embedded advisor feed for
    /// the configured region.
    pub fn new(config: SimConfig) -> Result<SimCloud, CloudError> {
        let buckets = embedded_interruption_buckets(&config.region)?;
        SimCloud::with_buckets(config, buckets)
    }

    /// A cloud with the given interruption buckets (instance type → 0..4).
    pub fn with_buckets(
        config: SimConfig,
        buckets: BTreeMap<String, u8>,
    ) -> Result<SimCloud, CloudError> {
        config.validate()?;
        let overrides = config.overrides()?;
        Ok(SimCloud {
            rng: SimRng::new(config.seed),
            config,
            clock: VirtualClock::new(0),
            buckets,
            overrides,
            in_use: BTreeMap::new(),
            instances: BTreeMap::new(),
            by_token: BTreeMap::new(),
            by_nodeclaim: BTreeMap::new(),
            queue: EventQueue::new(),
            outbox: Vec::new(),
            replies: Vec::new(),
        })
    }

    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// The latest virtual time the cloud has seen.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// CreateFleet `Type=instant` for one instance: the first override (in the request's
    /// order) whose offering has capacity is filled; those before it are the answer's capacity
    /// errors. A client token whose instance is still alive returns that instance.
    pub fn create_fleet_now(
        &mut self,
        now_ms: i64,
        request: &FleetRequest,
    ) -> Result<Instance, LaunchError> {
        let now = self.advance(now_ms);
        if let Some(existing) = self
            .by_token
            .get(&request.client_token)
            .and_then(|id| self.instances.get(id))
        {
            return Ok(existing.clone());
        }
        if request.overrides.is_empty() {
            return Err(LaunchError::NoMatchingOfferings);
        }
        let mut tried = Vec::new();
        let mut chosen = None;
        for c in &request.overrides {
            if self.capacity_left(&c.key).is_none_or(|n| n > 0) {
                chosen = Some(c.clone());
                break;
            }
            tried.push(c.key.clone());
        }
        let Some(c) = chosen else {
            debug!(nodeclaim = %request.nodeclaim, pools = tried.len(), "InsufficientInstanceCapacity");
            return Err(LaunchError::InsufficientCapacity { tried });
        };
        *self.in_use.entry(c.key.clone()).or_insert(0) += 1;
        let id = self.new_instance_id();
        let running_ms = now.saturating_add(self.config.launch_to_running_ms);
        let registered_ms = running_ms.saturating_add(self.config.running_to_registered_ms);
        let initialized_ms = registered_ms.saturating_add(self.config.registered_to_initialized_ms);
        let instance = Instance {
            id: id.clone(),
            launch: request.nodeclaim.clone(),
            nodepool: request.nodepool.clone(),
            instance_type: c.key.instance_type.clone(),
            zone: c.key.zone.clone(),
            zone_id: c.zone_id,
            region: self.config.region.clone(),
            capacity_type: c.key.capacity_type.clone(),
            price: c.price,
            launched_ms: now,
            running_ms,
            state: InstanceState::Pending,
            interruption_warning_ms: None,
            stopped_ms: None,
            fleet_errors: tried,
            capacity_reservation_id: None,
            capacity_reservation_type: None,
        };
        self.queue.schedule(running_ms, Step::Running(id.clone()));
        self.queue
            .schedule(registered_ms, Step::Registered(id.clone()));
        self.queue
            .schedule(initialized_ms, Step::Initialized(id.clone()));
        if let Some(at) = self.draw_interruption(&instance) {
            self.queue.schedule(at, Step::Interruption(id.clone()));
        }
        debug!(%id, nodeclaim = %request.nodeclaim, offering = %instance.offering(), "launched");
        self.by_token
            .insert(request.client_token.clone(), id.clone());
        self.by_nodeclaim
            .insert(request.nodeclaim.clone(), id.clone());
        self.instances.insert(id, instance.clone());
        // Zero delays make steps due now.
        self.advance(now);
        Ok(instance)
    }

    /// TerminateInstances: billing and capacity stop now, `Terminated` after `shutdown_ms`.
    /// A no-op for an instance already shutting down or terminated.
    pub fn terminate_instance(&mut self, now_ms: i64, id: &str) -> Result<(), CloudError> {
        let now = self.advance(now_ms);
        let alive = self.state_of(id)?.is_alive();
        if alive {
            self.stop(id, now, InstanceState::ShuttingDown);
            let at = now.saturating_add(self.config.shutdown_ms);
            self.queue.schedule(
                at,
                Step::Finish(id.to_string(), TerminationCause::Requested),
            );
            self.advance(now);
        }
        Ok(())
    }

    /// Injects an interruption from a trace at `now_ms` (see [`InterruptionKind`] for what
    /// each does). Nothing happens to an instance that is already shutting down or gone.
    pub fn forced_interrupt(
        &mut self,
        now_ms: i64,
        id: &str,
        kind: InterruptionKind,
    ) -> Result<(), CloudError> {
        let now = self.advance(now_ms);
        if self.state_of(id)?.is_alive() {
            self.queue.schedule(now, Step::Notice(id.to_string(), kind));
            self.advance(now);
        }
        Ok(())
    }

    /// The events due at or before `now_ms` that were not returned yet, in time order.
    pub fn poll(&mut self, now_ms: i64) -> Vec<CloudEvent> {
        self.advance(now_ms);
        std::mem::take(&mut self.outbox)
    }

    /// The instant of the next event or answer (already due or future), for jumping the clock
    /// to it.
    pub fn next_event_ms(&self) -> Option<i64> {
        let event = match self.outbox.first() {
            Some(e) => Some(e.at_ms),
            None => self.queue.peek_time(),
        };
        let reply = self.replies.iter().map(|(t, _)| *t).min();
        event.into_iter().chain(reply).min()
    }

    /// What everything launched has cost up to `now_ms` (see [`crate::cost`]).
    pub fn cost_so_far(&self, now_ms: i64) -> CostReport {
        cost_report(self.instances.values(), now_ms)
    }

    pub fn instance(&self, id: &str) -> Option<&Instance> {
        self.instances.get(id)
    }

    /// Every instance ever launched, by id.
    pub fn instances(&self) -> impl Iterator<Item = &Instance> {
        self.instances.values()
    }

    /// The live instance launched for a NodeClaim.
    pub fn instance_for_launch(&self, nodeclaim: &str) -> Option<&Instance> {
        self.instances.get(self.by_nodeclaim.get(nodeclaim)?)
    }

    /// Live instances in an offering.
    pub fn in_use(&self, key: &OfferingKey) -> u32 {
        self.in_use.get(key).copied().unwrap_or(0)
    }

    /// From now on the offering holds at most `instances` live instances (those above a lowered
    /// limit keep running; launches beyond it fail as insufficient capacity).
    pub fn set_capacity(&mut self, key: OfferingKey, instances: u32) {
        self.overrides.insert(key, instances);
    }

    /// The offering's configured capacity: its override, else `capacity_per_offering`;
    /// `None` is unlimited.
    pub fn capacity_of(&self, key: &OfferingKey) -> Option<u32> {
        self.overrides
            .get(key)
            .copied()
            .or(self.config.capacity_per_offering)
    }

    /// Instances the offering can still take; `None` is unlimited.
    pub fn capacity_left(&self, key: &OfferingKey) -> Option<u32> {
        self.capacity_of(key)
            .map(|cap| cap.saturating_sub(self.in_use(key)))
    }

    /// The spot advisor bucket used for a type (0..4; unlisted types get bucket 2).
    pub fn interruption_bucket(&self, instance_type: &str) -> u8 {
        self.buckets
            .get(instance_type)
            .copied()
            .unwrap_or(DEFAULT_BUCKET)
    }

    fn state_of(&self, id: &str) -> Result<InstanceState, CloudError> {
        self.instances
            .get(id)
            .map(|i| i.state)
            .ok_or_else(|| CloudError::UnknownInstance(id.to_string()))
    }

    /// `i-` and 17 hex digits (68 random bits), unique among instances launched.
    fn new_instance_id(&mut self) -> String {
        loop {
            let high = self.rng.next_u64() & 0xf;
            let low = self.rng.next_u64();
            let id = format!("i-{high:x}{low:016x}");
            if !self.instances.contains_key(&id) {
                return id;
            }
        }
    }

    /// When a spot instance will get its interruption warning, if ever.
    fn draw_interruption(&mut self, instance: &Instance) -> Option<i64> {
        if instance.capacity_type != "spot" || !self.config.spot_interruptions {
            return None;
        }
        let bucket = self.interruption_bucket(&instance.instance_type);
        let rate = interruption_rate_per_ms(bucket, self.config.interruption_rate_scale);
        if !(rate.is_finite() && rate > 0.0) {
            return None;
        }
        let after = self.rng.exp_sample(1.0 / rate);
        if !(after.is_finite() && after < NEVER_MS) {
            return None;
        }
        Some(instance.running_ms.saturating_add(after.ceil() as i64))
    }

    /// Applies every step due at or before `now_ms`; returns the current time.
    fn advance(&mut self, now_ms: i64) -> i64 {
        let now = self.clock.catch_up(now_ms);
        while let Some((at, step)) = self.queue.pop_due(now) {
            self.apply(at, step);
        }
        now
    }

    fn emit(&mut self, at_ms: i64, id: &str, kind: CloudEventKind) {
        self.outbox.push(CloudEvent {
            at_ms,
            instance_id: id.to_string(),
            kind,
        });
    }

    /// Moves an alive instance from `from` to `to`; false (and nothing changes) otherwise.
    fn transition(&mut self, id: &str, from: InstanceState, to: InstanceState) -> bool {
        match self.instances.get_mut(id) {
            Some(i) if i.state == from => {
                i.state = to;
                true
            }
            _ => false,
        }
    }

    fn apply(&mut self, at: i64, step: Step) {
        match step {
            Step::Running(id) => {
                if self.transition(&id, InstanceState::Pending, InstanceState::Running) {
                    self.emit(at, &id, CloudEventKind::Running);
                }
            }
            Step::Registered(id) => {
                if self.transition(&id, InstanceState::Running, InstanceState::Registered) {
                    self.emit(at, &id, CloudEventKind::NodeRegistered);
                }
            }
            Step::Initialized(id) => {
                if self.transition(&id, InstanceState::Registered, InstanceState::Initialized) {
                    self.emit(at, &id, CloudEventKind::NodeInitialized);
                }
            }
            Step::Interruption(id) => self.warn(at, &id, TerminationCause::SpotInterruption),
            Step::Notice(id, kind) => match kind {
                InterruptionKind::SpotInterruption => {
                    self.warn(at, &id, TerminationCause::SpotInterruption)
                }
                InterruptionKind::CapacityReservationInterruption => {
                    self.warn(at, &id, TerminationCause::CapacityReservationInterruption)
                }
                InterruptionKind::RebalanceRecommendation => {
                    if self.is_alive(&id) {
                        self.emit(at, &id, CloudEventKind::RebalanceRecommendation);
                    }
                }
                InterruptionKind::ScheduledChange => {
                    if self.is_alive(&id) {
                        self.emit(at, &id, CloudEventKind::ScheduledChange);
                    }
                }
                InterruptionKind::StateChange => {
                    self.reclaim(at, &id, TerminationCause::StateChange)
                }
            },
            Step::Reclaim(id, cause) => self.reclaim(at, &id, cause),
            Step::Finish(id, cause) => {
                if self.transition(&id, InstanceState::ShuttingDown, InstanceState::Terminated) {
                    self.emit(at, &id, CloudEventKind::Terminated { cause });
                }
            }
        }
    }

    fn is_alive(&self, id: &str) -> bool {
        self.instances.get(id).is_some_and(|i| i.state.is_alive())
    }

    /// Issues an interruption warning (once per instance) and schedules the reclaim.
    fn warn(&mut self, at: i64, id: &str, cause: TerminationCause) {
        let Some(i) = self.instances.get_mut(id) else {
            return;
        };
        if !i.state.is_alive() || i.interruption_warning_ms.is_some() {
            return;
        }
        i.interruption_warning_ms = Some(at);
        let terminate_at_ms = at.saturating_add(INTERRUPTION_WARNING_MS);
        let kind = match cause {
            TerminationCause::CapacityReservationInterruption => {
                CloudEventKind::CapacityReservationInterruptionWarning { terminate_at_ms }
            }
            _ => CloudEventKind::SpotInterruptionWarning { terminate_at_ms },
        };
        debug!(%id, at, terminate_at_ms, "interruption warning");
        self.emit(at, id, kind);
        self.queue
            .schedule(terminate_at_ms, Step::Reclaim(id.to_string(), cause));
    }

    /// Ends an alive instance at once.
    fn reclaim(&mut self, at: i64, id: &str, cause: TerminationCause) {
        if self.is_alive(id) {
            self.stop(id, at, InstanceState::Terminated);
            self.emit(at, id, CloudEventKind::Terminated { cause });
        }
    }

    /// Stops billing, frees the offering, forgets the launch's token and NodeClaim, and cancels
    /// the instance's pending steps.
    fn stop(&mut self, id: &str, at: i64, state: InstanceState) {
        let Some(i) = self.instances.get_mut(id) else {
            return;
        };
        i.state = state;
        i.stopped_ms = Some(at);
        let key = i.offering();
        let launch = i.launch.clone();
        if let Some(n) = self.in_use.get_mut(&key) {
            *n = n.saturating_sub(1);
        }
        self.by_token.retain(|_, i| i != id);
        if self.by_nodeclaim.get(&launch).is_some_and(|l| l == id) {
            self.by_nodeclaim.remove(&launch);
        }
        self.queue.retain(|s| s.id() != id);
    }
}

/// The simulated EC2 as a [`Cloud`]: each call is carried out at once, and its answer is due
/// `call_latency_ms` later (0 by default: by the next poll at the same instant).
impl Cloud for SimCloud {
    fn create_fleet(&mut self, now_ms: i64, request: FleetRequest) {
        let result = self.create_fleet_now(now_ms, &request).map(Box::new);
        let due = now_ms.saturating_add(self.config.call_latency_ms);
        self.replies.push((
            due,
            CloudReply::Launched {
                nodeclaim: request.nodeclaim,
                result,
            },
        ));
    }

    fn terminate(&mut self, now_ms: i64, instance_id: &str) {
        if let Err(e) = self.terminate_instance(now_ms, instance_id) {
            let due = now_ms.saturating_add(self.config.call_latency_ms);
            self.replies.push((
                due,
                CloudReply::TerminateFailed {
                    instance_id: instance_id.to_string(),
                    error: e.to_string(),
                },
            ));
        }
    }

    fn poll_replies(&mut self, now_ms: i64) -> Vec<CloudReply> {
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.replies)
            .into_iter()
            .partition(|(t, _)| *t <= now_ms);
        self.replies = later;
        due.into_iter().map(|(_, r)| r).collect()
    }

    fn poll_events(&mut self, now_ms: i64) -> Vec<CloudEvent> {
        self.poll(now_ms)
    }

    fn instance(&self, id: &str) -> Option<&Instance> {
        self.instances.get(id)
    }

    fn instance_for_nodeclaim(&self, nodeclaim: &str) -> Option<&Instance> {
        self.instance_for_launch(nodeclaim)
    }

    fn instances(&self) -> Vec<&Instance> {
        self.instances.values().collect()
    }

    fn next_due_ms(&self) -> Option<i64> {
        self.next_event_ms()
    }
}
