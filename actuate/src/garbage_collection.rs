//! Garbage collection, as Karpenter's: an instance tagged as this cluster's with no NodeClaim
//! (a launch whose NodeClaim was lost, an instance left by a crash between CreateFleet and
//! recording it) is terminated once it is older than the grace period, so a launch in flight is
//! never collected; a launched NodeClaim whose instance is gone is deleted.

use crate::actuator::Actuator;
use dovetail_dataflow::backend::{Cloud, Cluster};

/// What one collection did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collected {
    /// Instances terminated for having no NodeClaim.
    pub instances: Vec<String>,
    /// NodeClaims deleted for having no instance.
    pub nodeclaims: Vec<String>,
}

impl Actuator {
    /// Collects what is left over; `grace_ms` is how old an instance without a NodeClaim must
    /// be before it is terminated (Karpenter: 30 s).
    pub fn collect_garbage(
        &mut self,
        now_ms: i64,
        grace_ms: i64,
        cloud: &mut impl Cloud,
        cluster: &mut impl Cluster,
    ) -> Collected {
        let mut collected = Collected::default();
        let leaked: Vec<String> = cloud
            .instances()
            .into_iter()
            .filter(|i| i.state.is_alive())
            .filter(|i| now_ms.saturating_sub(i.launched_ms) >= grace_ms)
            .filter(|i| {
                !self.in_flight_calls.contains_key(&i.launch)
                    && cluster.nodeclaim(&i.launch).is_none()
            })
            .map(|i| i.id.clone())
            .collect();
        for id in leaked {
            tracing::info!(instance = %id, "terminating an instance with no NodeClaim");
            cloud.terminate(now_ms, &id);
            collected.instances.push(id);
        }
        let orphaned: Vec<String> = cluster
            .nodeclaims()
            .into_iter()
            .filter(|c| !self.in_flight_calls.contains_key(&c.name))
            .filter(|c| {
                c.instance_id()
                    .is_some_and(|id| cloud.instance(id).is_none_or(|i| !i.state.is_alive()))
            })
            .map(|c| c.name.clone())
            .collect();
        for name in orphaned {
            tracing::info!(nodeclaim = %name, "deleting a NodeClaim whose instance is gone");
            cluster.delete_nodeclaim(now_ms, &name);
            collected.nodeclaims.push(name);
        }
        self.stats.garbage_instances += collected.instances.len() as u64;
        self.stats.garbage_nodeclaims += collected.nodeclaims.len() as u64;
        collected
    }
}
