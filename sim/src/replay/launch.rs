//! Launches become CreateFleet calls on the simulated cloud, the instant they appear. A launch
//! that meets InsufficientInstanceCapacity marks the offerings it tried unavailable for the TTL
//! (Karpenter's unavailable-offerings cache) and the engine replans at once.

use super::world::World;
use crate::node::record_launch;
use crate::{node_for_instance, FleetError, OfferingKey};
use dovetail_actuate::{actions, Action};
use dovetail_dataflow::decisions::{Decision, Launch};
use std::collections::BTreeSet;

impl World {
    /// Executes the launches the engine added, except `held` ones (replacements, which their
    /// disruption command launches when it starts).
    pub(super) fn execute_launches(
        &mut self,
        now: i64,
        diffs: &[(Decision, isize)],
        held: &BTreeSet<String>,
    ) {
        let launches: Vec<(Decision, isize)> = diffs
            .iter()
            .filter(|(d, _)| matches!(d, Decision::Launch(l) if !held.contains(&l.name)))
            .cloned()
            .collect();
        for action in actions(&launches) {
            match action {
                Action::Create(l) => {
                    self.launch(now, l);
                }
                // Launches are executed the instant they appear, so nothing is left to update
                // or cancel.
                Action::Update(_) | Action::Cancel { .. } => {}
            }
        }
    }

    /// CreateFleet for one launch, and its in-flight NodeClaim fact. Returns the name it was
    /// launched under, or `None` when no instance came of it.
    pub(super) fn launch(&mut self, now: i64, mut launch: Launch) -> Option<String> {
        let ttl = self.cloud.config().ice_ttl_ms;
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
                }
                if let (Some(it), Some(pool)) = (
                    self.fleet_types.get(&instance.instance_type),
                    self.nodepools.get(&instance.nodepool),
                ) {
                    let (mut node, _startup) = node_for_instance(&instance, it, pool, now);
                    node.in_flight = true;
                    let class = pool
                        .node_class
                        .as_ref()
                        .and_then(|c| self.nodeclasses.get(c));
                    record_launch(&mut node, pool, class);
                    let name = node.name.clone();
                    self.in_flight.insert(name.clone(), node);
                    self.dirty_nodes.insert(name);
                }
                Some(launch.name)
            }
            Err(FleetError::InsufficientCapacity { tried, .. }) => {
                self.capacity_errors += tried.len() as u64;
                self.mark_unavailable(now, &tried, ttl);
                None
            }
            Err(FleetError::NoMatchingOfferings { .. }) => {
                self.notes
                    .insert("some launches matched no offering in the simulated cloud".to_string());
                None
            }
        }
    }

    fn mark_unavailable(&mut self, now: i64, keys: &[OfferingKey], ttl: i64) {
        for k in keys {
            self.unavailable.insert(k.clone(), now + ttl);
        }
        self.replan = true;
    }
}
