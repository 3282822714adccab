//! Method 1 — interruption and expiration: forceful, outside budgets and blockers (though they
//! use the budgets up), each node a command of its own with the launches its pods need
//! (Karpenter's interruption controller and `expiration` method).

use super::{price_of, Command, Evaluation};
use crate::disruption::commands::parts::Slot;
use crate::disruption::types::Forced;
use dovetail_dataflow::decisions::DisruptionReason;

impl<'a> Evaluation<'a> {
    /// The forced nodes not already disrupting, in name order as the candidates are: looking
    /// each of ten thousand candidates up among the few forced was a pass's worth of cache
    /// misses.
    pub(super) fn forced_slots(&self) -> Vec<(&'a Slot, &'a Forced)> {
        self.forced
            .iter()
            .filter_map(|(node, f)| Some((self.candidates.get(*node)?, *f)))
            .filter(|(c, _)| !c.disrupting)
            .collect()
    }

    /// One command per interrupted or expired node.
    pub(super) fn forceful(&mut self, forced: &[(&'a Slot, &'a Forced)]) {
        for &(slot, f) in forced {
            let c = &slot.candidate;
            let reason = match f {
                Forced::Interrupted(_) => DisruptionReason::Interrupted,
                Forced::Expired { .. } => DisruptionReason::Expired,
                Forced::Drifted(_) => continue,
            };
            // It goes whatever the simulation says: in-flight NodeClaims do not hold it back.
            let out = self.simulation(&[c]);
            let launches = if out.failures().is_empty() {
                out.launches().to_vec()
            } else {
                Vec::new()
            };
            let savings = price_of(c) - launches.iter().map(|l| l.price.0).sum::<i64>();
            // Outside budgets, but it uses them up: graceful methods see one node fewer.
            self.use_budget(&c.nodepool);
            self.reserve_landing(&[c]);
            self.world.take(&mut self.taken, [c.node.clone()]);
            self.commands.push(Command {
                nodes: vec![c.node.clone()],
                reason,
                launches,
                savings,
            });
        }
    }
}
