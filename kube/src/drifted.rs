//! Which NodeClaims are drifted, as the engine's decisions say: a NodeClaim is drifted while
//! at least one `Disruption` with reason `Drifted` names it (a command, or a candidate a budget,
//! a pod or a missing replacement holds back), as Karpenter's drift controller marks the
//! `Drifted` condition whether or not the node can be replaced yet.

use dovetail_dataflow::decisions::{Decision, DisruptionReason};
use std::collections::BTreeMap;

/// See the module documentation.
#[derive(Debug, Default)]
pub struct DriftedClaims {
    /// Drifted decisions naming each NodeClaim.
    held: BTreeMap<String, isize>,
}

impl DriftedClaims {
    /// Takes in the decisions' diffs; returns the NodeClaims that became drifted (`true`) or
    /// stopped being (`false`).
    pub fn changes(&mut self, diffs: &[(Decision, isize)]) -> Vec<(String, bool)> {
        let mut touched: BTreeMap<String, isize> = BTreeMap::new();
        for (decision, diff) in diffs {
            if let Decision::Disruption(d) = decision {
                if let (DisruptionReason::Drifted, Some(claim)) = (d.reason, &d.nodeclaim) {
                    *touched.entry(claim.clone()).or_insert(0) += diff;
                }
            }
        }
        let mut out = Vec::new();
        for (claim, diff) in touched {
            let before = self.held.get(&claim).copied().unwrap_or(0);
            let after = before + diff;
            if after > 0 {
                self.held.insert(claim.clone(), after);
            } else {
                self.held.remove(&claim);
            }
            if (before > 0) != (after > 0) {
                out.push((claim, after > 0));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_dataflow::decisions::Disruption;
    use dovetail_dataflow::disruption_reasons::Blocker;
    use dovetail_dataflow::model::Price;

    fn drifted(claim: &str, blocked: Option<Blocker>) -> Decision {
        Decision::Disruption(Disruption {
            node: format!("{claim}-node"),
            nodeclaim: Some(claim.into()),
            nodepool: "general".into(),
            reason: DisruptionReason::Drifted,
            command: blocked.is_none().then(|| "c1".to_string()),
            replacements: Vec::new(),
            savings_per_hour: Price(0),
            blocked_by: blocked.map(Box::new),
        })
    }

    #[test]
    fn a_claim_is_drifted_while_a_drifted_decision_names_it() {
        let mut d = DriftedClaims::default();
        let held = drifted(
            "a",
            Some(Blocker::Budget {
                nodepool: "general".into(),
                reason: DisruptionReason::Drifted,
                budget: None,
            }),
        );
        assert_eq!(d.changes(&[(held.clone(), 1)]), [("a".to_string(), true)]);
        // Its blocker goes and a command takes it: still drifted, nothing changes.
        let command = drifted("a", None);
        assert!(d.changes(&[(held, -1), (command.clone(), 1)]).is_empty());
        // An empty-node decision about another claim is not drift.
        let mut empty = drifted("b", None);
        if let Decision::Disruption(x) = &mut empty {
            x.reason = DisruptionReason::Empty;
        }
        assert!(d.changes(&[(empty, 1)]).is_empty());
        // The NodePool's change is undone: no drifted decision names it any more.
        assert_eq!(d.changes(&[(command, -1)]), [("a".to_string(), false)]);
    }
}
