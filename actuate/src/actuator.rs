//! The actuator: acts on the engine's decisions through a [`Cloud`] and a [`Cluster`], and
//! turns what comes back into what the next epoch's facts must say (capacity errors, NodeClaims
//! launched). It decides nothing: which pods go where, and which nodes to disrupt, is the
//! engine's.
//!
//! One epoch's decision diffs are acted on in this order: launches the engine added (except the
//! replacements a disruption command holds), drift-hash adoption, disruption commands that may
//! start, then the progress of those under way. Calls are submitted and their answers collected
//! with the backends' `poll_replies`; a synchronous backend has answered by then, an async one
//! later, and its answer is handled by a later call.

use crate::capacity_errors::UnavailableOfferings;
use crate::disruption::Disruptions;
use crate::drain::Drains;
use dovetail_dataflow::backend::{Cloud, CloudReply, Cluster, ClusterReply, OfferingKey};
use dovetail_dataflow::decisions::Decision;
use dovetail_dataflow::facts::{capacity_error_key, Fact};
use dovetail_dataflow::model::{EC2NodeClass, InstanceType, NodePool};
use std::collections::{BTreeMap, BTreeSet};

/// Every interval actuation waits on, as settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActuationSettings {
    /// How long an offering that failed with a capacity error stays unavailable (Karpenter's
    /// 3-minute `unavailableOfferingsTTLSeconds`).
    pub capacity_error_ttl_ms: i64,
    /// Karpenter's disruption loop polls this often; a command that failed is retried no
    /// sooner.
    pub disruption_poll_ms: i64,
    /// Karpenter validates a consolidation command (Empty, Underutilized) by waiting this long
    /// and simulating again before it acts; at most one such command starts per period.
    pub consolidation_validation_ms: i64,
}

impl Default for ActuationSettings {
    fn default() -> Self {
        ActuationSettings {
            capacity_error_ttl_ms: 180_000,
            disruption_poll_ms: 10_000,
            consolidation_validation_ms: 15_000,
        }
    }
}

/// What actuation counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActuationStats {
    /// Instances CreateFleet launched.
    pub nodes_launched: u64,
    /// Offerings that answered with a capacity error.
    pub capacity_errors: u64,
    pub disruption_commands_started: u64,
    pub disruption_commands_abandoned: u64,
    /// Nodes whose disruption started, by reason.
    pub disruptions_started_by_reason: BTreeMap<String, u64>,
    /// Nodes the disruption terminated, by reason.
    pub disruptions_terminated_by_reason: BTreeMap<String, u64>,
    pub replacements_launched: u64,
    /// Instances garbage collection terminated for having no NodeClaim.
    pub garbage_instances: u64,
    /// NodeClaims garbage collection deleted for having no instance.
    pub garbage_nodeclaims: u64,
    /// Drains ended by their NodePool's `terminationGracePeriod` with pods still on the node.
    pub drains_forced: u64,
    /// CreateFleet calls sent again after the launch timeout (same client token).
    pub launches_retried: u64,
}

/// Why a launch was submitted, for routing its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    Provisioning,
    Replacement,
}

/// Acts on decisions; see the module documentation.
pub struct Actuator {
    pub(crate) settings: ActuationSettings,
    pub(crate) nodepools: BTreeMap<String, NodePool>,
    pub(crate) nodeclasses: BTreeMap<String, EC2NodeClass>,
    /// Every type as the cloud sells it (offerings, prices), for CreateFleet overrides.
    pub(crate) instance_types: BTreeMap<String, InstanceType>,
    pub(crate) unavailable: UnavailableOfferings,
    /// Facts for the engine: capacity errors to set (`Some`) or to forget (`None`, by key).
    pub(crate) fact_changes: Vec<(String, Option<Fact>)>,
    /// Launches submitted and not answered, by NodeClaim name.
    pub(crate) in_flight_calls: BTreeMap<String, Purpose>,
    /// When each in-flight CreateFleet was (last) sent, for the launch timeout.
    pub(crate) call_sent: BTreeMap<String, i64>,
    /// Answers to replacement launches, by NodeClaim name: launched or not.
    pub(crate) replacement_results: BTreeMap<String, bool>,
    pub(crate) disruption: Disruptions,
    pub(crate) drains: Drains,
    pub(crate) stats: ActuationStats,
    pub(crate) notes: BTreeSet<String>,
}

impl Actuator {
    pub fn new(settings: ActuationSettings) -> Actuator {
        Actuator {
            settings,
            nodepools: BTreeMap::new(),
            nodeclasses: BTreeMap::new(),
            instance_types: BTreeMap::new(),
            unavailable: UnavailableOfferings::default(),
            fact_changes: Vec::new(),
            in_flight_calls: BTreeMap::new(),
            call_sent: BTreeMap::new(),
            replacement_results: BTreeMap::new(),
            disruption: Disruptions::default(),
            drains: Drains::default(),
            stats: ActuationStats::default(),
            notes: BTreeSet::new(),
        }
    }

    pub fn set_nodepool(&mut self, pool: NodePool) {
        self.nodepools.insert(pool.name.clone(), pool);
    }

    pub fn remove_nodepool(&mut self, name: &str) {
        self.nodepools.remove(name);
    }

    pub fn nodepool(&self, name: &str) -> Option<&NodePool> {
        self.nodepools.get(name)
    }

    /// The NodePools the sources have told the loop of, by name.
    pub fn nodepools(&self) -> &BTreeMap<String, NodePool> {
        &self.nodepools
    }

    pub fn set_nodeclass(&mut self, class: EC2NodeClass) {
        self.nodeclasses.insert(class.name.clone(), class);
    }

    pub fn remove_nodeclass(&mut self, name: &str) {
        self.nodeclasses.remove(name);
    }

    /// The EC2NodeClasses the sources have told the loop of, by name.
    pub fn nodeclasses(&self) -> &BTreeMap<String, EC2NodeClass> {
        &self.nodeclasses
    }

    /// The instance types as the cloud sells them (prices, offerings), by name.
    pub fn set_instance_types(&mut self, types: BTreeMap<String, InstanceType>) {
        self.instance_types = types;
    }

    pub fn instance_types(&self) -> &BTreeMap<String, InstanceType> {
        &self.instance_types
    }

    /// For a price change.
    pub fn instance_types_mut(&mut self) -> &mut BTreeMap<String, InstanceType> {
        &mut self.instance_types
    }

    /// Whether a capacity error (or interruption) has made this offering unavailable.
    pub fn offering_unavailable(&self, key: &OfferingKey) -> bool {
        self.unavailable.contains(key)
    }

    /// Marks an offering unavailable for the capacity-error TTL (a capacity error, or a spot
    /// interruption, as Karpenter does), here for building fleet requests and, as a
    /// `Fact::CapacityError` with its window on the engine's clock, for the engine.
    pub fn mark_unavailable(&mut self, now_ms: i64, key: OfferingKey) {
        let ttl_ms = self
            .settings
            .capacity_error_ttl_ms
            .max(crate::capacity_errors::MIN_CAPACITY_ERROR_TTL_MS);
        let until_ms = now_ms.saturating_add(ttl_ms);
        self.unavailable.mark(key.clone(), now_ms, ttl_ms);
        let fact = Fact::CapacityError {
            offering: key,
            at_ms: now_ms,
            until_ms,
        };
        self.fact_changes.push((fact.describe(), Some(fact)));
    }

    /// Forgets capacity errors past their TTL (their facts, whose windows have closed, too).
    pub fn expire_unavailable(&mut self, now_ms: i64) {
        for key in self.unavailable.expire(now_ms) {
            self.fact_changes.push((capacity_error_key(&key), None));
        }
    }

    /// The facts actuation has learned since the last call, for the engine.
    pub fn take_fact_changes(&mut self) -> Vec<(String, Option<Fact>)> {
        std::mem::take(&mut self.fact_changes)
    }

    /// When the next capacity error expires.
    pub fn next_expiry_ms(&self) -> Option<i64> {
        self.unavailable.next_expiry_ms()
    }

    pub fn stats(&self) -> &ActuationStats {
        &self.stats
    }

    /// Things worth telling a person that are not errors (launches that matched nothing, …).
    pub fn notes(&self) -> &BTreeSet<String> {
        &self.notes
    }

    /// When a consolidation command decided now would be validated, for waking up then.
    pub fn next_validation_ms(&self, now_ms: i64) -> Option<i64> {
        self.disruption
            .next_validation_ms(now_ms, self.settings.consolidation_validation_ms)
    }

    pub fn nodes_disrupting(&self) -> u64 {
        self.disruption.nodes_disrupting()
    }

    pub fn nodes_disrupted(&self) -> u64 {
        self.stats.disruptions_terminated_by_reason.values().sum()
    }

    /// A node is about to be interrupted: if a disruption command holds it, drain it now (it is
    /// not a candidate any more, so the engine will not decide it).
    pub fn drain_now(&mut self, node: &str) {
        self.disruption.drain_now(node);
    }

    /// Acts on one epoch's diffs: provisioning launches, drift-hash adoption, new disruption
    /// commands, and the progress of those under way.
    pub fn act(
        &mut self,
        now_ms: i64,
        diffs: &[(Decision, isize)],
        cloud: &mut impl Cloud,
        cluster: &mut impl Cluster,
    ) {
        let held = self.disruption.observe(now_ms, diffs);
        self.execute_launches(now_ms, diffs, &held, cloud, cluster);
        self.collect_replies(now_ms, cloud, cluster);
        self.adopt(now_ms, cloud, cluster);
        self.start_commands(now_ms, cloud, cluster);
        self.progress_commands(now_ms, cloud, cluster);
    }

    /// Handles every answer that has arrived.
    pub fn collect_replies(
        &mut self,
        now_ms: i64,
        cloud: &mut impl Cloud,
        cluster: &mut impl Cluster,
    ) {
        for reply in cloud.poll_replies(now_ms) {
            match reply {
                CloudReply::Launched { nodeclaim, result } => {
                    self.call_sent.remove(&nodeclaim);
                    let purpose = self.in_flight_calls.remove(&nodeclaim);
                    if purpose.is_none()
                        && self.duplicate_answer(
                            now_ms,
                            &nodeclaim,
                            result.as_ref().ok().map(|i| &**i),
                            cloud,
                            cluster,
                        )
                    {
                        continue;
                    }
                    let launched = self.on_launched(now_ms, &nodeclaim, result, cluster);
                    if purpose == Some(Purpose::Replacement) {
                        self.replacement_results.insert(nodeclaim, launched);
                    }
                }
                CloudReply::TerminateFailed { instance_id, error } => {
                    tracing::warn!(%instance_id, %error, "TerminateInstances failed");
                    self.notes
                        .insert(format!("terminating {instance_id}: {error}"));
                }
            }
        }
        for reply in cluster.poll_replies(now_ms) {
            match reply {
                // Draining evicts again at the next step.
                ClusterReply::EvictionRefused { .. } => {}
                ClusterReply::Failed { object, error } => {
                    tracing::warn!(%object, %error, "cluster write failed");
                }
            }
        }
    }
}
