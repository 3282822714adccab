//! Method 2 — emptiness: every empty candidate past `consolidateAfter` that its NodePool's
//! budget allows goes in one command, with no replacement (Karpenter's `emptiness.go`).

use super::{price_of, Command, Evaluation};
use dovetail_dataflow::decisions::DisruptionReason;

impl Evaluation<'_> {
    /// One command for the empty nodes that may go; the others are listed with their blocker.
    pub(super) fn emptiness(&mut self) {
        let mut empty = Vec::new();
        for node in self.empty {
            let Some(c) = self.candidates.get(node) else {
                continue;
            };
            if c.disrupting || self.is_taken(c) || !c.consolidatable {
                continue;
            }
            if let Some(b) = Self::consolidation_blocker(c, true) {
                self.blocked.push((c, DisruptionReason::Empty, b));
            } else if self.take_budget(&c.nodepool, DisruptionReason::Empty) {
                empty.push(c.node.clone());
            } else {
                self.over_budget(c, DisruptionReason::Empty);
            }
        }
        if empty.is_empty() {
            return;
        }
        let savings = empty
            .iter()
            .filter_map(|n| self.candidate(n))
            .map(price_of)
            .sum();
        self.world.take(&mut self.taken, empty.iter().cloned());
        self.commands.push(Command {
            nodes: empty,
            reason: DisruptionReason::Empty,
            launches: Vec::new(),
            savings,
        });
    }
}
