//! The disruption half of the engine: which nodes to drain and replace, kept up to date over
//! every node rather than re-simulated per candidate with a timeout.
//!
//! Per-node queries (candidates, drift, expiration, interruption, blockers) are keyed by node
//! and only recompute what changed; budgets are per NodePool; the commands query ranks the
//! candidates, prunes them with a cheap necessary condition, and runs the packing solver as the
//! exact check for the survivors.

pub mod budgets;
pub mod candidates;
pub mod commands;
pub mod drift;
pub mod expiration;
pub mod interruption;
pub mod lifetime;
pub mod node_pods;
pub mod pdb_blockers;
pub mod pending_room;
pub mod simulate;
pub mod types;
pub mod verdicts;

use crate::types::{ClassId, Compatibility, NodeState, PodClass, PoolTypes};
use commands::Part;
use differential_dataflow::VecCollection;
use dovetail_dataflow::decisions::{Decision, Placement};
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::facts::{Interruption, Minute};
use dovetail_dataflow::model::{
    EC2NodeClass, NodePool, PodDisruptionBudget, SharedNode, SharedPod,
};
use dovetail_dataflow::stable_hash::stable_hash;
use drift::DriftOut;

/// Everything disruption reads, as the provisioning half has already split and derived it.
pub struct Inputs<'s> {
    pub pods: VecCollection<'s, Epoch, SharedPod>,
    pub nodes: VecCollection<'s, Epoch, SharedNode>,
    pub nodepools: VecCollection<'s, Epoch, NodePool>,
    pub nodeclasses: VecCollection<'s, Epoch, EC2NodeClass>,
    pub pools: VecCollection<'s, Epoch, (String, PoolTypes)>,
    pub usage: VecCollection<'s, Epoch, (String, NodeState)>,
    /// Where the provisioning half places pending pods (existing nodes, in-flight NodeClaims,
    /// launches).
    pub placements: VecCollection<'s, Epoch, Placement>,
    pub specs: VecCollection<'s, Epoch, (ClassId, PodClass)>,
    pub compat: VecCollection<'s, Epoch, (ClassId, Compatibility)>,
    pub pdbs: VecCollection<'s, Epoch, PodDisruptionBudget>,
    pub interruptions: VecCollection<'s, Epoch, Interruption>,
    pub clock: VecCollection<'s, Epoch, Minute>,
    /// Enabled feature gates by name.
    pub gates: VecCollection<'s, Epoch, String>,
    /// Evaluate commands at most once per this many milliseconds (None: at every change).
    pub poll_ms: Option<u64>,
    /// Also give each candidate's [`Decision::NodeVerdict`] (for `dovetail explain`).
    pub explain: bool,
}

pub fn disruption(i: Inputs<'_>) -> VecCollection<'_, Epoch, Decision> {
    let movable = node_pods::movable_pods(i.pods.clone());
    let blockers =
        node_pods::pod_blockers(i.pods.clone()).concat(pdb_blockers::pdb_blockers(i.pods, i.pdbs));
    let candidates = candidates::candidates(
        i.nodes.clone(),
        i.pools.clone(),
        movable.clone(),
        blockers.clone(),
    );
    let drift = drift::drift(i.nodes.clone(), i.pools.clone(), i.nodeclasses);
    let adopt = drift.clone().flat_map(|d| match d {
        DriftOut::Adopt(a) => Some(a),
        DriftOut::Drifted(..) => None,
    });
    let deadlines = expiration::expiry_deadlines(i.nodes.clone(), i.nodepools.clone());
    let forced = drift
        .flat_map(|d| match d {
            DriftOut::Drifted(n, f) => Some((n, f)),
            DriftOut::Adopt(_) => None,
        })
        .concat(expiration::expiration(deadlines.clone()))
        .concat(interruption::interruption(i.nodes.clone(), i.interruptions));
    let prices = candidates::offer_prices(i.nodes.clone(), i.pools.clone());
    let verdicts = i.explain.then(|| {
        verdicts::verdicts(
            candidates.clone(),
            prices.clone(),
            blockers,
            forced.clone(),
            deadlines,
        )
        .map(|v| Decision::NodeVerdict(Box::new(v)))
    });
    let budgets = budgets::budgets(i.nodepools, i.nodes, i.clock.clone());
    let bound_classes = movable.map(|(_, p)| (p.class, ())).distinct();
    let room = pending_room::with_pending_pods(i.usage, i.placements, i.specs.clone());
    let classes = i
        .specs
        .join_map(i.compat, |id, class, compat| {
            (*id, (class.clone(), compat.clone()))
        })
        .join_map(bound_classes, |id, (class, compat), ()| {
            Part::Class(*id, class.clone(), compat.clone())
        });
    let parts = candidates
        .map(|(_, c)| Part::Candidate(stable_hash(&c), c))
        .concat(prices.map(|(k, p)| Part::Price(k, p)))
        .concat(forced.map(|(n, f)| Part::Forced(n, f)))
        .concat(room.map(|(_, n)| Part::Node(simulate::fingerprint(&n), n)))
        .concat(classes)
        .concat(i.pools.map(|(_, p)| Part::Pool(p)))
        .concat(budgets.map(|(n, a)| Part::Budget(n, a)))
        .concat(i.clock.map(Part::Clock))
        .concat(
            i.gates
                .filter(|g| g == commands::SPOT_TO_SPOT_GATE)
                .map(|_| Part::SpotToSpot),
        );
    let parts = match i.poll_ms.filter(|p| *p > 1) {
        // Rounding every change up to the end of its poll interval is monotone and only moves
        // times forward, as `delay` requires.
        Some(poll) => parts.delay(move |t| t.div_ceil(poll) * poll),
        None => parts,
    };
    let decided = commands::commands(parts).concat(adopt);
    match verdicts {
        Some(v) => decided.concat(v),
        None => decided,
    }
}
