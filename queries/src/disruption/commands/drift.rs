//! Method 3 — drift: each drifted node its own command, within its NodePool's `Drifted`
//! budget, with the launches its pods need; a node whose pods would not fit stays, listed with
//! why (Karpenter's `drift.go`).

use super::{price_of, Command, Evaluation};
use crate::disruption::commands::parts::Slot;
use crate::disruption::types::Forced;
use dovetail_dataflow::decisions::DisruptionReason;
use std::borrow::Cow;

impl<'a> Evaluation<'a> {
    /// A command for each drifted node among `forced` that may go.
    pub(super) fn drift(&mut self, forced: &[(&'a Slot, &'a Forced)]) {
        for &(slot, f) in forced {
            let c = &slot.candidate;
            if self.is_taken(slot) || !matches!(f, Forced::Drifted(_)) {
                continue;
            }
            if let Some(b) = &c.blocked_by {
                self.blocked
                    .push((slot, DisruptionReason::Drifted, Cow::Borrowed(b)));
                continue;
            }
            if self.budget_left(&c.nodepool, DisruptionReason::Drifted) <= 0 {
                self.over_budget(slot, DisruptionReason::Drifted);
                continue;
            }
            match self.simulate(&[c]) {
                Ok(launches) => {
                    self.take_budget(&c.nodepool, DisruptionReason::Drifted);
                    let savings = price_of(c) - launches.iter().map(|l| l.price.0).sum::<i64>();
                    self.reserve_landing(&[c]);
                    self.world.take(&mut self.taken, [c.node.clone()]);
                    self.commands.push(Command {
                        nodes: vec![c.node.clone()],
                        reason: DisruptionReason::Drifted,
                        launches,
                        savings,
                    });
                }
                Err(why) => self
                    .blocked
                    .push((slot, DisruptionReason::Drifted, Cow::Owned(why))),
            }
        }
    }
}
