//! A CreateFleet that never answers. The call is one HTTP request, which a network fault can
//! leave hanging; the NodeClaim would wait for it forever and its pods with it. Once a call
//! has gone unanswered for the launch timeout (`--launch-timeout`, 5 min), it is sent again
//! **under the same client token**: EC2 makes CreateFleet idempotent by token, so if the first
//! call launched an instance the second returns that one, and if it did not the second
//! launches. Nothing is launched twice, and the NodeClaim keeps its name and identity (unlike
//! Karpenter, which deletes a NodeClaim that has not launched in time and lets the provisioner
//! create another: a hung call that later succeeds would then leave an instance for garbage
//! collection). A late answer to the first call is then a second answer for the NodeClaim:
//! [`Actuator::duplicate_answer`] drops it.

use crate::actuator::Actuator;
use dovetail_dataflow::backend::{Cloud, Cluster, Instance};

impl Actuator {
    /// Sends again every CreateFleet unanswered for `timeout_ms`, under its client token;
    /// returns the NodeClaims asked again.
    pub fn retry_hung_launches(
        &mut self,
        now_ms: i64,
        timeout_ms: i64,
        cloud: &mut impl Cloud,
        cluster: &mut impl Cluster,
    ) -> Vec<String> {
        let hung: Vec<String> = self
            .call_sent
            .iter()
            .filter(|(_, sent)| now_ms.saturating_sub(**sent) >= timeout_ms)
            .map(|(claim, _)| claim.clone())
            .collect();
        let mut asked = Vec::new();
        for name in hung {
            let Some(claim) = cluster.nodeclaim(&name).filter(|c| c.status.is_none()) else {
                // Answered meanwhile, or the NodeClaim is gone: nothing to wait for.
                self.call_sent.remove(&name);
                continue;
            };
            let Some(request) = self.fleet_request(&claim.launch, claim.created_ms) else {
                self.call_sent.remove(&name);
                continue;
            };
            tracing::warn!(nodeclaim = %name, timeout_ms, "CreateFleet unanswered; asking again under the same client token");
            self.call_sent.insert(name.clone(), now_ms);
            self.stats.launches_retried += 1;
            cloud.create_fleet(now_ms, request);
            asked.push(name);
        }
        asked
    }

    /// Whether an answer for `claim`, which has no call in flight, is a second one (the first
    /// answer came already): dropped if it names the instance the NodeClaim recorded; an
    /// instance it names besides (an idempotent cloud never launches one), or for a NodeClaim
    /// that is gone (its first answer was an error), is terminated at once.
    pub(crate) fn duplicate_answer(
        &mut self,
        now_ms: i64,
        claim: &str,
        instance: Option<&Instance>,
        cloud: &mut impl Cloud,
        cluster: &impl Cluster,
    ) -> bool {
        let recorded = cluster
            .nodeclaim(claim)
            .map(|c| c.instance_id().map(str::to_string));
        match (recorded, instance) {
            // The NodeClaim is still waiting: this is its answer after all.
            (Some(None), _) => false,
            (Some(Some(id)), Some(i)) if i.id == id => true,
            (_, Some(i)) => {
                tracing::warn!(nodeclaim = %claim, instance = %i.id, "an instance no NodeClaim waits for; terminating it");
                cloud.terminate(now_ms, &i.id);
                true
            }
            (_, None) => true,
        }
    }
}
