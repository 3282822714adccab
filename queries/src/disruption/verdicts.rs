//! Query — node verdicts: what each disruption method reads of a node, for `dovetail explain`.
//!
//! Rule: for every disruption candidate, one [`NodeVerdict`] gathering what the other
//! disruption queries keep about it — its movable pods and price, when `consolidateAfter` has
//! passed, every blocker (not only the first), its drift reason, its expiry deadline and an
//! interruption — keyed by node, so a change reaches only its node's verdict. What the commands
//! decide (the command a node is in, or why it is listed as blocked) comes from the commands
//! query's own decisions beside it; nothing here re-decides.

use super::types::{Candidate, Forced, OfferKey};
use differential_dataflow::VecCollection;
use dovetail_dataflow::disruption_reasons::{Blocker, NodeVerdict};
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::Price;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
enum Part {
    Candidate(Box<Candidate>),
    Price(Price),
    Blocker(Blocker),
    Forced(Forced),
    ExpiresAt(i64),
}

/// Every candidate's verdict. `forced` is drift, expiration and interruption as the commands
/// query reads them; `deadlines` every node's expiry time, come or not.
pub fn verdicts<'s>(
    candidates: VecCollection<'s, Epoch, (String, Candidate)>,
    prices: VecCollection<'s, Epoch, (OfferKey, Price)>,
    blockers: VecCollection<'s, Epoch, (String, Blocker)>,
    forced: VecCollection<'s, Epoch, (String, Forced)>,
    deadlines: VecCollection<'s, Epoch, (String, i64)>,
) -> VecCollection<'s, Epoch, NodeVerdict> {
    let priced = candidates
        .clone()
        .flat_map(|(node, c)| c.offer.map(|k| (k, node)))
        .join_map(prices, |_, node, price| (node.clone(), Part::Price(*price)));
    candidates
        .map(|(node, c)| (node, Part::Candidate(Box::new(c))))
        .concat(priced)
        .concat(blockers.map(|(node, b)| (node, Part::Blocker(b))))
        .concat(forced.map(|(node, f)| (node, Part::Forced(f))))
        .concat(deadlines.map(|(node, at)| (node, Part::ExpiresAt(at))))
        .reduce_named("NodeVerdicts", |_, parts, out| {
            let mut candidate = None;
            let mut v = NodeVerdict {
                node: String::new(),
                nodeclaim: None,
                nodepool: String::new(),
                instance_type: String::new(),
                capacity_type: String::new(),
                pods: 0,
                price: None,
                consolidatable_at_ms: None,
                blockers: Vec::new(),
                drift: None,
                expires_at_ms: None,
                interrupted: None,
                disrupting: false,
            };
            for (part, r) in parts {
                if *r <= 0 {
                    continue;
                }
                match part {
                    Part::Candidate(c) => candidate = Some(c),
                    Part::Price(p) => v.price = Some(*p),
                    Part::Blocker(b) => v.blockers.push(b.clone()),
                    Part::Forced(Forced::Drifted(d)) => v.drift = Some(d.clone()),
                    Part::Forced(Forced::Interrupted(k)) => v.interrupted = Some(*k),
                    Part::Forced(Forced::Expired { at_ms }) => v.expires_at_ms = Some(*at_ms),
                    Part::ExpiresAt(at) => {
                        v.expires_at_ms.get_or_insert(*at);
                    }
                }
            }
            let Some(c) = candidate else {
                return;
            };
            // The node's own do-not-disrupt comes first, as the candidate names it.
            if let Some(b @ Blocker::NodeDoNotDisrupt { .. }) = &c.blocked_by {
                v.blockers.insert(0, b.clone());
            }
            v.node = c.node.clone();
            v.nodeclaim = c.nodeclaim.clone();
            v.nodepool = c.nodepool.clone();
            v.instance_type = c.instance_type.clone();
            v.capacity_type = c.capacity_type.clone();
            v.pods = c.pods.iter().map(|(_, n)| n).sum();
            v.consolidatable_at_ms = c.consolidatable_at_ms;
            v.disrupting = c.disrupting;
            out.push((v, 1));
        })
        .map(|(_, v)| v)
}
