//! Launch execution. A launch the engine adds becomes a NodeClaim — created *before* the cloud
//! is called, as the durable record of the intent — and one CreateFleet with the overrides
//! Karpenter would send ([`crate::overrides`]). When CreateFleet answers, the NodeClaim gets the
//! instance's shape (the Node it registers as, [`crate::registration`]); a capacity error marks
//! the offerings it tried unavailable for the TTL and deletes the NodeClaim, and the engine
//! replans on what remains.

use crate::actions::{actions, Action};
use crate::actuator::{Actuator, Purpose};
use crate::naming::unique_nodeclaim_name;
use crate::overrides::fleet_overrides;
use crate::registration::{node_for_instance, nodeclaim_labels, nodeclaim_taints, record_launch};
use dovetail_dataflow::backend::{
    Cloud, Cluster, FleetRequest, Instance, LaunchError, NodeClaim, OfferingKey,
};
use dovetail_dataflow::catalog::reserved_offerings;
use dovetail_dataflow::decisions::{Decision, Launch};
use dovetail_dataflow::model::labels::CAPACITY_TYPE_RESERVED;
use dovetail_dataflow::model::{CapacityReservation, InstanceType};
use std::collections::{BTreeMap, BTreeSet};

impl Actuator {
    /// Executes the launches the engine added, except `held` ones (replacements, which their
    /// disruption command launches when it starts).
    pub(crate) fn execute_launches(
        &mut self,
        now_ms: i64,
        diffs: &[(Decision, isize)],
        held: &BTreeSet<String>,
        cloud: &mut impl Cloud,
        cluster: &mut impl Cluster,
    ) {
        let launches: Vec<(Decision, isize)> = diffs
            .iter()
            .filter(|(d, _)| matches!(d, Decision::Launch(l) if !held.contains(&l.name)))
            .cloned()
            .collect();
        for action in actions(&launches) {
            match action {
                // A NodeClaim of this name still waiting for its instance *is* this launch (its
                // CreateFleet is in flight, or was resubmitted after a restart): the intent is
                // already recorded, so nothing is launched twice.
                Action::Create(l) | Action::Update(l) if self.launching(&l.name, cluster) => {}
                // A launch whose name stays while its content changes is still wanted: either
                // its NodeClaim failed (a capacity error deleted it, and the engine replanned
                // onto other offerings under the same name) or the one executed became capacity
                // and the engine wants another like it. Either way nothing is executing it.
                Action::Create(l) | Action::Update(l) => {
                    // A launch that matched nothing is noted; the engine decides again when
                    // what it read changes.
                    let _ = self.submit_launch(now_ms, l, Purpose::Provisioning, cloud, cluster);
                }
                // Launches are executed the instant they appear, so nothing is left to cancel.
                Action::Cancel { .. } => {}
            }
        }
    }

    /// Whether the NodeClaim `name` exists and has no instance yet.
    fn launching(&self, name: &str, cluster: &impl Cluster) -> bool {
        self.in_flight_calls.contains_key(name)
            || cluster.nodeclaim(name).is_some_and(|c| c.status.is_none())
    }

    /// After a restart: every NodeClaim without an instance recorded is finished from what the
    /// backends list. An instance already tagged for it (the call went out, its answer was lost)
    /// is recorded on it; otherwise (the claim was created, the call never went out) its
    /// CreateFleet is submitted again under the same client token. Nothing is launched twice.
    pub fn recover(&mut self, now_ms: i64, cloud: &mut impl Cloud, cluster: &mut impl Cluster) {
        let unlaunched: Vec<_> = cluster
            .nodeclaims()
            .into_iter()
            .filter(|c| c.status.is_none() && !self.in_flight_calls.contains_key(&c.name))
            .cloned()
            .collect();
        for claim in unlaunched {
            match cloud.instance_for_nodeclaim(&claim.name).cloned() {
                Some(instance) => {
                    tracing::info!(nodeclaim = %claim.name, instance = %instance.id, "recovered a launched instance");
                    self.on_launched(now_ms, &claim.name, Ok(Box::new(instance)), cluster);
                }
                None => {
                    tracing::info!(nodeclaim = %claim.name, "resubmitting a launch that never reached the cloud");
                    match self.fleet_request(&claim.launch, claim.created_ms) {
                        Some(request) => {
                            self.in_flight_calls
                                .insert(claim.name.clone(), Purpose::Provisioning);
                            self.call_sent.insert(claim.name.clone(), now_ms);
                            cloud.create_fleet(now_ms, request);
                        }
                        None => cluster.delete_nodeclaim(now_ms, &claim.name),
                    }
                }
            }
        }
        self.collect_replies(now_ms, cloud, cluster);
    }

    /// Creates the NodeClaim for `launch` under a unique name and submits its CreateFleet.
    /// Returns the NodeClaim's name, or why nothing was asked of the cloud.
    pub(crate) fn submit_launch(
        &mut self,
        now_ms: i64,
        mut launch: Launch,
        purpose: Purpose,
        cloud: &mut impl Cloud,
        cluster: &mut impl Cluster,
    ) -> Result<String, LaunchError> {
        launch.name = unique_nodeclaim_name(&launch.name, |n| {
            cluster.nodeclaim(n).is_some() || self.in_flight_calls.contains_key(n)
        });
        let Some(request) = self.fleet_request(&launch, now_ms) else {
            self.notes
                .insert("some launches matched no offering the cloud sells".to_string());
            return Err(LaunchError::NoMatchingOfferings);
        };
        let name = launch.name.clone();
        let startup_taints = self
            .nodepools
            .get(&launch.nodepool)
            .map(|p| p.startup_taints.clone())
            .unwrap_or_default();
        cluster.create_nodeclaim(
            now_ms,
            NodeClaim {
                name: name.clone(),
                nodepool: launch.nodepool.clone(),
                created_ms: now_ms,
                startup_taints,
                status: None,
                registered: false,
                annotations: Default::default(),
                launch: launch.clone(),
            },
        );
        // No CreateFleet without its NodeClaim recorded: an instance launched for a NodeClaim
        // that was never written would be found by nobody after a restart.
        if cluster.nodeclaim(&name).is_none() {
            self.notes
                .insert("some NodeClaims could not be created; their launches wait".to_string());
            return Err(LaunchError::Failed(format!("NodeClaim {name} not created")));
        }
        self.in_flight_calls.insert(name.clone(), purpose);
        self.call_sent.insert(name.clone(), now_ms);
        cloud.create_fleet(now_ms, request);
        Ok(name)
    }

    /// CreateFleet for the NodeClaim `launch.name`: the overrides Karpenter would send, minus
    /// the offerings in the capacity-error cache, under the NodeClaim's identity as client token;
    /// `None` when no offering is left.
    pub(crate) fn fleet_request(&self, launch: &Launch, created_ms: i64) -> Option<FleetRequest> {
        let unavailable = |k: &OfferingKey| self.unavailable.contains(k);
        let pool = self.nodepools.get(&launch.nodepool);
        let reservations = pool
            .and_then(|p| p.node_class.as_ref())
            .and_then(|c| self.nodeclasses.get(c))
            .map(|c| c.status.capacity_reservations.as_slice())
            .unwrap_or_default();
        let with_reserved;
        let types = if reservations.is_empty() {
            &self.instance_types
        } else {
            with_reserved = with_reservations(&self.instance_types, launch, reservations);
            &with_reserved
        };
        let overrides = fleet_overrides(launch, types, &unavailable);
        let capacity_type = overrides.first()?.key.capacity_type.clone();
        Some(FleetRequest {
            nodeclaim: launch.name.clone(),
            nodepool: launch.nodepool.clone(),
            node_class: pool.and_then(|p| p.node_class.clone()),
            client_token: format!("{}@{created_ms}", launch.name),
            labels: pool
                .map(|p| nodeclaim_labels(p, &launch.requirements, &capacity_type))
                .unwrap_or_default(),
            taints: pool.map(nodeclaim_taints).unwrap_or_default(),
            capacity_type,
            overrides,
        })
    }

    /// CreateFleet answered for `claim`: record the instance on its NodeClaim, or the capacity
    /// errors. True when an instance was launched.
    pub(crate) fn on_launched(
        &mut self,
        now_ms: i64,
        claim: &str,
        result: Result<Box<Instance>, LaunchError>,
        cluster: &mut impl Cluster,
    ) -> bool {
        match result {
            Ok(instance) => {
                self.stats.nodes_launched += 1;
                if !instance.fleet_errors.is_empty() {
                    self.stats.capacity_errors += instance.fleet_errors.len() as u64;
                    for k in instance.fleet_errors.clone() {
                        self.mark_unavailable(now_ms, k);
                    }
                }
                let status = match (
                    self.instance_types.get(&instance.instance_type),
                    self.nodepools.get(&instance.nodepool),
                ) {
                    (Some(it), Some(pool)) => {
                        let (mut node, _startup) = node_for_instance(&instance, it, pool, now_ms);
                        node.in_flight = true;
                        let class = pool
                            .node_class
                            .as_ref()
                            .and_then(|c| self.nodeclasses.get(c));
                        record_launch(&mut node, pool, class);
                        Some(node)
                    }
                    _ => None,
                };
                if let Some(mut c) = cluster.nodeclaim(claim).cloned() {
                    c.status = status;
                    cluster.update_nodeclaim(now_ms, c);
                }
                true
            }
            Err(LaunchError::InsufficientCapacity { tried }) => {
                self.stats.capacity_errors += tried.len() as u64;
                for k in tried {
                    self.mark_unavailable(now_ms, k);
                }
                cluster.delete_nodeclaim(now_ms, claim);
                false
            }
            Err(e) => {
                tracing::warn!(nodeclaim = %claim, error = %e, "launch failed");
                self.notes.insert(format!("a launch failed: {e}"));
                cluster.delete_nodeclaim(now_ms, claim);
                false
            }
        }
    }
}

/// The launch's instance types with the `reserved` offerings its EC2NodeClass's capacity
/// reservations add (the region's instance types carry none: reservations are per node class).
fn with_reservations(
    instance_types: &BTreeMap<String, InstanceType>,
    launch: &Launch,
    reservations: &[CapacityReservation],
) -> BTreeMap<String, InstanceType> {
    launch
        .instance_types
        .iter()
        .filter_map(|name| {
            let mut it = instance_types.get(name)?.clone();
            let zone_id = |zone: &str| {
                it.offerings
                    .iter()
                    .find(|o| o.zone == zone)
                    .map(|o| o.zone_id.clone())
                    .unwrap_or_default()
            };
            let reserved = reserved_offerings(name, reservations, None, zone_id);
            it.offerings
                .retain(|o| o.capacity_type != CAPACITY_TYPE_RESERVED);
            it.offerings.extend(reserved);
            Some((name.clone(), it))
        })
        .collect()
}
