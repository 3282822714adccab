//! Topology groups: the pods a spread constraint or (anti-)affinity term counts, and how many of
//! them each domain (zone, capacity type, node) holds.

use crate::types::PodClass;
use dovetail_dataflow::model::labels::HOSTNAME;
use dovetail_dataflow::model::{LabelSelector, PodAffinityTerm, WhenUnsatisfiable};
use std::collections::{BTreeMap, BTreeSet};

/// The pods one constraint counts: those in `namespaces` whose labels match `selector`,
/// counted per value of `key`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Group {
    pub key: String,
    pub selector: LabelSelector,
    pub namespaces: BTreeSet<String>,
}

impl Group {
    pub fn counts_pod(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        self.namespaces.contains(namespace) && self.selector.matches(labels)
    }

    pub fn per_node(&self) -> bool {
        self.key == HOSTNAME
    }
}

/// A class's hard topology constraints, by group index.
#[derive(Debug, Clone, Default)]
pub struct ClassTopology {
    /// DoNotSchedule spreads: (group, maxSkew, minDomains).
    pub spreads: Vec<(usize, i64, Option<i64>)>,
    pub affinity: Vec<usize>,
    pub anti_affinity: Vec<usize>,
    /// Groups that count this class's own pods.
    pub member_of: BTreeSet<usize>,
}

/// Every group the classes mention, with the per-domain counts of label-keyed groups.
#[derive(Debug, Default)]
pub struct Topology {
    pub groups: Vec<Group>,
    index: BTreeMap<Group, usize>,
    /// For groups not keyed by hostname: count of matching pods per domain value.
    pub counts: Vec<BTreeMap<String, i64>>,
}

impl Topology {
    fn intern(&mut self, group: Group) -> usize {
        if let Some(i) = self.index.get(&group) {
            return *i;
        }
        let i = self.groups.len();
        self.groups.push(group.clone());
        self.index.insert(group, i);
        self.counts.push(BTreeMap::new());
        i
    }

    /// Registers the constraints of `class` and returns them by group index.
    /// ScheduleAnyway spreads and preferred (anti-)affinity are soft: they are relaxed at once
    /// (Karpenter tries them first and relaxes on failure).
    pub fn class_constraints(&mut self, class: &PodClass) -> ClassTopology {
        let own_ns = || BTreeSet::from([class.namespace.clone()]);
        let mut out = ClassTopology::default();
        for s in &class.scheduling.topology_spread {
            if s.when_unsatisfiable != WhenUnsatisfiable::DoNotSchedule {
                continue;
            }
            let g = self.intern(Group {
                key: s.topology_key.clone(),
                selector: s.selector.clone(),
                namespaces: own_ns(),
            });
            out.spreads.push((g, s.max_skew.max(1), s.min_domains));
        }
        for term in &class.scheduling.pod_affinity {
            let g = self.term_group(class, term);
            out.affinity.push(g);
        }
        for term in &class.scheduling.pod_anti_affinity {
            let g = self.term_group(class, term);
            out.anti_affinity.push(g);
        }
        out
    }

    /// The group an affinity term counts; no namespaces means the pod's own.
    fn term_group(&mut self, class: &PodClass, term: &PodAffinityTerm) -> usize {
        let namespaces = if term.namespaces.is_empty() {
            BTreeSet::from([class.namespace.clone()])
        } else {
            term.namespaces.clone()
        };
        self.intern(Group {
            key: term.topology_key.clone(),
            selector: term.selector.clone(),
            namespaces,
        })
    }

    /// The domains where the group has pods.
    pub fn occupied(&self, group: usize) -> BTreeSet<String> {
        self.counts
            .get(group)
            .map(|c| {
                c.iter()
                    .filter(|(_, n)| **n > 0)
                    .map(|(d, _)| d.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Fills in `member_of` once every class has registered its groups.
    pub fn memberships(&self, class: &PodClass) -> BTreeSet<usize> {
        self.groups
            .iter()
            .enumerate()
            .filter(|(_, g)| g.counts_pod(&class.namespace, &class.labels))
            .map(|(i, _)| i)
            .collect()
    }

    pub fn add(&mut self, group: usize, domain: &str, n: i64) {
        if let Some(c) = self.counts.get_mut(group) {
            *c.entry(domain.to_string()).or_insert(0) += n;
        }
    }

    pub fn count(&self, group: usize, domain: &str) -> i64 {
        self.counts
            .get(group)
            .and_then(|c| c.get(domain))
            .copied()
            .unwrap_or(0)
    }
}

/// Deals `n` copies over `domains` so that each copy goes to a domain with the fewest matching
/// pods (what a skew check admits one pod at a time), respecting `max_skew`; when fewer than
/// `min_domains` domains are eligible the global minimum counts as zero (Kubernetes' rule), which
/// caps every domain at `max_skew`. Returns copies per domain; the sum may be below `n` when the
/// constraint admits no more.
pub fn water_fill(
    counts: &BTreeMap<String, i64>,
    domains: &BTreeSet<String>,
    n: i64,
    max_skew: i64,
    min_domains: Option<i64>,
) -> BTreeMap<String, i64> {
    let mut current: Vec<(String, i64)> = domains
        .iter()
        .map(|d| (d.clone(), counts.get(d).copied().unwrap_or(0)))
        .collect();
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    if current.is_empty() {
        return out;
    }
    let below_min_domains = min_domains.is_some_and(|m| (current.len() as i64) < m);
    let mut left = n;
    while left > 0 {
        // The domain with the fewest pods (ties: name order) takes copies up to the next level.
        current.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        let min = current[0].1;
        let global_min = if below_min_domains { 0 } else { min };
        let cap = global_min + max_skew; // a domain may reach this count
        let ties = current.iter().take_while(|(_, c)| *c == min).count();
        let next_level = current.get(ties).map(|(_, c)| *c).unwrap_or(i64::MAX);
        let target = next_level.min(cap).max(min);
        if target <= min {
            // Every domain at the minimum would exceed the skew by taking one more.
            if min + 1 > cap {
                break;
            }
        }
        let step = if target > min { target - min } else { 1 };
        let mut progressed = false;
        for (domain, count) in current.iter_mut().take(ties) {
            if left == 0 {
                break;
            }
            let take = step.min(left).min(cap - *count);
            if take <= 0 {
                continue;
            }
            *count += take;
            left -= take;
            *out.entry(domain.clone()).or_insert(0) += take;
            progressed = true;
        }
        if !progressed {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn spreads_evenly_from_existing_counts() {
        let counts = BTreeMap::from([("a".to_string(), 2)]);
        let out = water_fill(&counts, &set(&["a", "b", "c"]), 7, 1, None);
        // final counts 3,3,3: a gets 1, b 3, c 3
        assert_eq!(out.get("a"), Some(&1));
        assert_eq!(out.get("b"), Some(&3));
        assert_eq!(out.get("c"), Some(&3));
    }

    #[test]
    fn min_domains_caps_each_domain_at_max_skew() {
        let out = water_fill(&BTreeMap::new(), &set(&["a", "b"]), 10, 2, Some(3));
        assert_eq!(out.values().sum::<i64>(), 4);
    }

    #[test]
    fn uneven_totals_stay_within_skew() {
        let out = water_fill(&BTreeMap::new(), &set(&["a", "b", "c"]), 10, 1, None);
        let max = out.values().max().copied().unwrap_or(0);
        let min = ["a", "b", "c"]
            .iter()
            .map(|d| out.get(*d).copied().unwrap_or(0))
            .min()
            .unwrap_or(0);
        assert!(max - min <= 1);
        assert_eq!(out.values().sum::<i64>(), 10);
    }
}
