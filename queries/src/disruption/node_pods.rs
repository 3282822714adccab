//! Query — the pods that would move if a node went away, and the pods that forbid it.
//!
//! Rule: every pod bound to a node, other than DaemonSet and mirror pods, is movable, with
//! Karpenter's eviction cost (1 + `controller.kubernetes.io/pod-deletion-cost` / 2²⁷ +
//! priority / 2²⁵, clamped to ±10). A pod annotated `karpenter.sh/do-not-disrupt: "true"` blocks
//! graceful disruption of its node; with a duration (`"30m"`) it blocks only until that long
//! after the pod was created. DaemonSet and mirror pods block as well (they are not movable, but
//! Karpenter honours their annotation). Pods without an owner do not block: Karpenter v1 evicts
//! them.

use super::types::MovablePod;
use crate::pod_classes::class_id;
use differential_dataflow::VecCollection;
use dovetail_dataflow::disruption_reasons::Blocker;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::duration::parse_duration;
use dovetail_dataflow::model::labels::DO_NOT_DISRUPT;
use dovetail_dataflow::model::{Pod, SharedPod};
use dovetail_dataflow::temporal::during;

const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// Karpenter's `EvictionCost`, in millionths.
pub fn eviction_cost(p: &Pod) -> i64 {
    let mut cost = 1.0;
    if let Some(c) = p
        .annotations
        .get(DELETION_COST)
        .and_then(|v| v.trim().parse::<f64>().ok())
    {
        cost += c / 2f64.powi(27);
    }
    cost += f64::from(p.scheduling.priority) / 2f64.powi(25);
    (cost.clamp(-10.0, 10.0) * 1e6).round() as i64
}

/// Movable pods by node.
pub fn movable_pods<'s>(
    pods: VecCollection<'s, Epoch, SharedPod>,
) -> VecCollection<'s, Epoch, (String, MovablePod)> {
    pods.flat_map(|p| {
        let node = p.node_name.clone()?;
        if p.is_daemon {
            return None;
        }
        let eviction_cost = eviction_cost(&p);
        let key = p.key();
        let class = class_id(&p);
        Some((
            node,
            MovablePod {
                key,
                class,
                eviction_cost,
            },
        ))
    })
}

/// A do-not-disrupt window: `(from, until)` in ms; `until: None` is forever.
fn do_not_disrupt(p: &Pod) -> Option<(i64, Option<i64>)> {
    let value = p.annotations.get(DO_NOT_DISRUPT)?.trim();
    if value == "true" {
        return Some((0, None));
    }
    match parse_duration(value) {
        Ok(Some(ms)) => Some((0, Some(p.created_ms.unwrap_or(0).saturating_add(ms)))),
        _ => None,
    }
}

/// Pods that block graceful disruption of their node now: (node, why).
pub fn pod_blockers<'s>(
    pods: VecCollection<'s, Epoch, SharedPod>,
) -> VecCollection<'s, Epoch, (String, Blocker)> {
    let annotated = pods.flat_map(|p| {
        let node = p.node_name.clone()?;
        // DaemonSet and mirror pods block too: Karpenter checks the annotation on every active
        // pod of the node, "so that Mirror Pods and DaemonSets can block disruption".
        let (from, until) = do_not_disrupt(&p)?;
        let why = Blocker::PodDoNotDisrupt {
            pod: p.key(),
            until_ms: until,
        };
        Some(((node, why), (from, until)))
    });
    during(annotated, |(_, window)| *window).map(|(blocker, _)| blocker)
}
