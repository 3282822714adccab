//! Bound pods per node for each (namespaces, selector) a spread constraint or pod-affinity term
//! has asked about, kept up to date as pods bind and unbind.
//!
//! Working a selector's counts out reads every bound pod. Done afresh in every scheduling pass,
//! that was most of a 100,000-pod replay's time (a pass runs at every simulated step with a
//! pending pod), so the counts are kept between passes and each bind, unbind and node removal
//! updates the selectors that match.

use crate::state::{NodeState, PodState};
use dovetail_dataflow::model::{LabelSelector, Pod};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Namespaces and the selector that picks pods in them.
type CountKey = (BTreeSet<String>, LabelSelector);

/// Past this many selectors the counts start again: each kept selector costs every bind a
/// match, and a trace whose selectors keep changing should not make that grow without bound.
const SELECTORS_KEPT: usize = 4096;

/// Per (namespaces, selector): bound pods per node that it picks (nodes with none are absent).
#[derive(Debug, Clone, Default)]
pub(crate) struct BoundCounts {
    by_selector: HashMap<CountKey, BTreeMap<String, i64>>,
}

impl BoundCounts {
    /// Bound pods per node that are in `namespaces` and that `selector` picks, worked out from
    /// `nodes` and `pods` the first time it is asked for.
    pub(crate) fn of(
        &mut self,
        namespaces: BTreeSet<String>,
        selector: &LabelSelector,
        nodes: &BTreeMap<String, NodeState>,
        pods: &BTreeMap<String, PodState>,
    ) -> &BTreeMap<String, i64> {
        let key = (namespaces, selector.clone());
        if self.by_selector.len() >= SELECTORS_KEPT && !self.by_selector.contains_key(&key) {
            self.by_selector.clear();
        }
        self.by_selector
            .entry(key)
            .or_insert_with_key(|(nss, sel)| {
                let mut out = BTreeMap::new();
                for (name, n) in nodes {
                    let here = n
                        .pods
                        .iter()
                        .filter_map(|k| pods.get(k))
                        .filter(|p| nss.contains(&p.pod.namespace) && sel.matches(&p.pod.labels))
                        .count() as i64;
                    if here > 0 {
                        out.insert(name.clone(), here);
                    }
                }
                out
            })
    }

    /// `pod` was bound to `node`.
    pub(crate) fn bound(&mut self, pod: &Pod, node: &str) {
        for ((nss, sel), per_node) in self.by_selector.iter_mut() {
            if nss.contains(&pod.namespace) && sel.matches(&pod.labels) {
                *per_node.entry(node.to_string()).or_insert(0) += 1;
            }
        }
    }

    /// `pod` was unbound from `node` (or deleted while bound there).
    pub(crate) fn unbound(&mut self, pod: &Pod, node: &str) {
        for ((nss, sel), per_node) in self.by_selector.iter_mut() {
            if !(nss.contains(&pod.namespace) && sel.matches(&pod.labels)) {
                continue;
            }
            if let Some(n) = per_node.get_mut(node) {
                *n -= 1;
                if *n <= 0 {
                    per_node.remove(node);
                }
            }
        }
    }

    /// `node` is gone, and every pod bound to it with it.
    pub(crate) fn node_removed(&mut self, node: &str) {
        for per_node in self.by_selector.values_mut() {
            per_node.remove(node);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::SimCluster;
    use crate::rng::SimRng;
    use dovetail_dataflow::model::labels::{HOSTNAME, ZONE};
    use dovetail_dataflow::model::quantity::{mib, units};
    use dovetail_dataflow::model::{
        Node, PodAffinityTerm, Requirement, Requirements, Resources, TopologySpread,
        WhenUnsatisfiable,
    };

    fn node(name: &str, zone: &str) -> Node {
        Node {
            name: name.into(),
            labels: [
                (HOSTNAME.to_string(), name.to_string()),
                (ZONE.to_string(), zone.to_string()),
            ]
            .into(),
            allocatable: Resources {
                cpu: units(4),
                memory: mib(16_384),
                pods: units(110),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn selector(app: &str) -> LabelSelector {
        let mut r = Requirements::new();
        r.add("app", Requirement::single(app.to_string()));
        LabelSelector { requirements: r }
    }

    /// A pod of one of four apps: zone-spread, hostname anti-affinity, zone affinity to the
    /// spread app, and none.
    fn pod(n: u64, app: u64) -> Pod {
        let app_name = format!("app{app}");
        let mut p = Pod {
            namespace: if app == 3 { "other" } else { "default" }.into(),
            name: format!("p{n}"),
            labels: [("app".to_string(), app_name.clone())].into(),
            ..Default::default()
        };
        p.scheduling.requests = Resources {
            cpu: units(1),
            memory: mib(256),
            pods: units(1),
            ..Default::default()
        };
        let term = |key: &str, target: &str| PodAffinityTerm {
            topology_key: key.into(),
            selector: selector(target),
            namespaces: BTreeSet::new(),
        };
        match app {
            0 => p.scheduling.topology_spread.push(TopologySpread {
                topology_key: ZONE.into(),
                max_skew: 1,
                when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                selector: selector(&app_name),
                min_domains: None,
            }),
            1 => p
                .scheduling
                .pod_anti_affinity
                .push(term(HOSTNAME, &app_name)),
            2 => p.scheduling.pod_affinity.push(term(ZONE, "app0")),
            _ => {}
        }
        p
    }

    /// Binds, unbinds, evictions, pod deletions and node removals between scheduling passes
    /// leave the kept counts equal to counts worked out afresh, and the passes bind as a
    /// cluster that works every count out afresh does.
    #[test]
    fn kept_counts_equal_counts_worked_out_afresh() {
        let mut rng = SimRng::new(7);
        let mut c = SimCluster::new();
        let zones = ["a", "b", "c"];
        let mut next_node = 0u64;
        let mut add_node = |c: &mut SimCluster, rng: &mut SimRng| {
            let name = format!("n{next_node}");
            next_node += 1;
            let zone = zones[(rng.next_u64() % 3) as usize];
            c.add_node(node(&name, zone), vec![]).expect("a new name");
            c.mark_ready(&name).expect("just added");
        };
        for _ in 0..5 {
            add_node(&mut c, &mut rng);
        }
        let mut bound_total = 0;
        for step in 0..400u64 {
            let now = step as i64 * 1000;
            match rng.next_u64() % 10 {
                0..=4 => c
                    .add_pod(now, pod(step, rng.next_u64() % 4))
                    .expect("a new pod"),
                5 | 6 => {
                    let keys: Vec<String> = c.pods().map(Pod::key).collect();
                    if !keys.is_empty() {
                        let k = &keys[(rng.next_u64() as usize) % keys.len()];
                        c.delete_pod(k).expect("listed");
                    }
                }
                7 => {
                    let bound: Vec<String> = c
                        .pods()
                        .filter(|p| p.node_name.is_some())
                        .map(Pod::key)
                        .collect();
                    if !bound.is_empty() {
                        let k = &bound[(rng.next_u64() as usize) % bound.len()];
                        c.evict_pod(now, k).expect("no budgets");
                    }
                }
                8 => {
                    let names: Vec<String> = c.nodes().map(|n| n.name.clone()).collect();
                    let gone = &names[(rng.next_u64() as usize) % names.len()];
                    c.remove_node(now, gone).expect("listed");
                    add_node(&mut c, &mut rng);
                }
                _ => add_node(&mut c, &mut rng),
            }
            let mut afresh = c.clone();
            afresh.bound_counts = BoundCounts::default();
            let bindings = c.schedule(now);
            assert_eq!(bindings, afresh.schedule(now), "step {step}");
            bound_total += bindings.len();
            for ((nss, sel), kept) in &c.bound_counts.by_selector {
                let worked_out = BoundCounts::default()
                    .of(nss.clone(), sel, &c.nodes, &c.pods)
                    .clone();
                assert_eq!(kept, &worked_out, "step {step}, selector {sel:?}");
            }
        }
        // The sequence exercised what it is about: the spread's and the anti-affinity's
        // selectors kept (the affinity term shares the spread's), pods bound.
        assert_eq!(c.bound_counts.by_selector.len(), 2);
        assert!(bound_total > 100, "{bound_total}");
    }
}
