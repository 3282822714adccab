//! Query — PodDisruptionBudgets that forbid evicting a node's pods.
//!
//! Rule: a PodDisruptionBudget selects the pods of its namespace its selector matches; bound
//! pods count as healthy, pending ones as not. It allows `healthy − minAvailable` disruptions,
//! or `maxUnavailable − unhealthy` (percentages of the selected pods, rounded up, as the
//! disruption controller does). When it allows none, every node holding one of its pods is
//! blocked from graceful disruption (Karpenter's eviction would be refused). A pod selected by
//! more than one budget blocks its node too: the eviction API refuses such a pod outright, and
//! Karpenter checks for it before it disrupts.

use differential_dataflow::VecCollection;
use dovetail_dataflow::disruption_reasons::Blocker;
use dovetail_dataflow::engine::Epoch;
use dovetail_dataflow::model::{PodDisruptionBudget, SharedPod};

/// `"3"` or `"50%"` of `total`, rounded up; `None` when malformed.
pub fn scaled(value: &str, total: i64) -> Option<i64> {
    let v = value.trim();
    match v.strip_suffix('%') {
        Some(pct) => {
            let p: i64 = pct.trim().parse().ok()?;
            Some((p * total + 99) / 100)
        }
        None => v.parse().ok(),
    }
}

/// Disruptions a budget allows with `healthy` of `total` selected pods running.
pub fn allowed_disruptions(pdb: &PodDisruptionBudget, healthy: i64, total: i64) -> i64 {
    if let Some(min) = pdb.min_available.as_deref().and_then(|v| scaled(v, total)) {
        return healthy - min;
    }
    if let Some(max) = pdb
        .max_unavailable
        .as_deref()
        .and_then(|v| scaled(v, total))
    {
        return max - (total - healthy);
    }
    // Neither field (or malformed): the API server defaults to minAvailable 1.
    healthy - 1
}

pub fn pdb_blockers<'s>(
    pods: VecCollection<'s, Epoch, SharedPod>,
    pdbs: VecCollection<'s, Epoch, PodDisruptionBudget>,
) -> VecCollection<'s, Epoch, (String, Blocker)> {
    // The pod itself, shared, not a copy of its labels per pod (52 MiB at 100,000 pods).
    let pods = pods
        .filter(|p| !p.is_daemon)
        .map(|p| (p.namespace.clone(), p));
    let selected = pdbs
        .map(|b| (b.namespace.clone(), b))
        .join_map(pods, |_, pdb, pod| {
            (
                pdb.clone(),
                pdb.selector
                    .matches(&pod.labels)
                    .then(|| (pod.key(), pod.node_name.clone())),
            )
        })
        .flat_map(|(pdb, pod)| pod.map(|p| (pdb, p)));
    let many = selected
        .clone()
        .flat_map(|(pdb, (key, node))| {
            node.map(|node| ((key, node), format!("{}/{}", pdb.namespace, pdb.name)))
        })
        .reduce_named("PodsUnderManyPdbs", |(key, node), budgets, out| {
            if budgets.len() > 1 {
                let why = Blocker::ManyPdbs {
                    pod: key.clone(),
                    pdbs: budgets.iter().map(|(n, _)| (*n).clone()).collect(),
                };
                out.push(((node.clone(), why), 1));
            }
        })
        .map(|(_, blocker)| blocker);
    selected
        .reduce_named("PdbBlockers", |pdb, pods, out| {
            let total: i64 = pods.iter().map(|(_, r)| *r as i64).sum();
            let healthy: i64 = pods
                .iter()
                .filter(|((_, node), _)| node.is_some())
                .map(|(_, r)| *r as i64)
                .sum();
            if allowed_disruptions(pdb, healthy, total) > 0 {
                return;
            }
            for ((key, node), _) in pods {
                if let Some(node) = node {
                    let why = Blocker::Pdb {
                        pdb: format!("{}/{}", pdb.namespace, pdb.name),
                        pod: key.clone(),
                    };
                    out.push(((node.clone(), why), 1));
                }
            }
        })
        .map(|(_, blocker)| blocker)
        .concat(many)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pdb(min: Option<&str>, max: Option<&str>) -> PodDisruptionBudget {
        PodDisruptionBudget {
            min_available: min.map(str::to_string),
            max_unavailable: max.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn budgets_as_the_disruption_controller_counts_them() {
        assert_eq!(allowed_disruptions(&pdb(Some("2"), None), 3, 3), 1);
        assert_eq!(allowed_disruptions(&pdb(Some("100%"), None), 3, 3), 0);
        assert_eq!(allowed_disruptions(&pdb(None, Some("1")), 3, 4), 0);
        assert_eq!(allowed_disruptions(&pdb(None, Some("50%")), 3, 3), 2);
        assert_eq!(scaled("10%", 11), Some(2));
    }
}
