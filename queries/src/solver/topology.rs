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

/// A class's topology constraints, by group index: the required ones and the soft ones still
/// honoured (Karpenter treats preferences as required until a pod fails to schedule).
#[derive(Debug, Clone, Default)]
pub struct ClassTopology {
    /// Spreads held to: (group, maxSkew, minDomains).
    pub spreads: Vec<(usize, i64, Option<i64>)>,
    pub affinity: Vec<usize>,
    pub anti_affinity: Vec<usize>,
    /// Groups that count this class's own pods.
    pub member_of: BTreeSet<usize>,
    /// The soft constraints among the above, in the order they are dropped.
    pub soft: Vec<Soft>,
    /// Required anti-affinity groups: a bin holding this class refuses their pods. A preferred
    /// term binds only the pod that has it, as kube-scheduler scores it only for that pod.
    pub refuses: Vec<usize>,
}

/// A preference held as a constraint until it is relaxed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Soft {
    Affinity(usize),
    AntiAffinity(usize),
    Spread(usize, i64, Option<i64>),
}

impl ClassTopology {
    /// Drops the next soft constraint, as Karpenter's `Preferences.Relax` does one per failed
    /// attempt; false when none is left.
    pub fn relax(&mut self) -> bool {
        if self.soft.is_empty() {
            return false;
        }
        let next = self.soft.remove(0);
        fn drop_one<T: PartialEq>(list: &mut Vec<T>, item: &T) {
            if let Some(i) = list.iter().position(|x| x == item) {
                list.remove(i);
            }
        }
        match next {
            Soft::Affinity(g) => drop_one(&mut self.affinity, &g),
            Soft::AntiAffinity(g) => drop_one(&mut self.anti_affinity, &g),
            Soft::Spread(g, skew, min) => drop_one(&mut self.spreads, &(g, skew, min)),
        }
        true
    }
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

    /// Registers the constraints of `class` and returns them by group index, preferences
    /// included as soft constraints in Karpenter's relaxation order: preferred pod affinity
    /// terms (heaviest first), then preferred anti-affinity terms (heaviest first), then
    /// ScheduleAnyway spreads (in the order Karpenter's swap-removal takes them). Preferred
    /// node affinity sits between the anti-affinity terms and the spreads in Karpenter's order;
    /// it is relaxed by the compatibility query, and `pod_preferences` is false when that query
    /// already had to drop a node preference, which Karpenter reaches only after dropping every
    /// preferred pod (anti-)affinity term.
    pub fn class_constraints(&mut self, class: &PodClass, pod_preferences: bool) -> ClassTopology {
        let own_ns = || BTreeSet::from([class.namespace.clone()]);
        let mut out = ClassTopology::default();
        let spreads = &class.scheduling.topology_spread;
        let spread_group = |this: &mut Self, i: usize| {
            let s = &spreads[i];
            let g = this.intern(Group {
                key: s.topology_key.clone(),
                selector: s.selector.clone(),
                namespaces: own_ns(),
            });
            (g, s.max_skew.max(1), s.min_domains)
        };
        for (i, s) in spreads.iter().enumerate() {
            if s.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule {
                let c = spread_group(self, i);
                out.spreads.push(c);
            }
        }
        for term in &class.scheduling.pod_affinity {
            let g = self.term_group(class, term);
            out.affinity.push(g);
        }
        for term in &class.scheduling.pod_anti_affinity {
            let g = self.term_group(class, term);
            out.anti_affinity.push(g);
            out.refuses.push(g);
        }
        if pod_preferences {
            for term in by_weight(&class.scheduling.preferred_pod_affinity) {
                let g = self.term_group(class, term);
                out.affinity.push(g);
                out.soft.push(Soft::Affinity(g));
            }
            for term in by_weight(&class.scheduling.preferred_pod_anti_affinity) {
                let g = self.term_group(class, term);
                out.anti_affinity.push(g);
                out.soft.push(Soft::AntiAffinity(g));
            }
        }
        // Karpenter removes the first ScheduleAnyway spread by moving the last constraint into
        // its place, which decides the order of the next removals.
        let mut left: Vec<usize> = (0..spreads.len()).collect();
        while let Some(i) = left
            .iter()
            .position(|&j| spreads[j].when_unsatisfiable != WhenUnsatisfiable::DoNotSchedule)
        {
            let (g, skew, min) = spread_group(self, left.swap_remove(i));
            out.spreads.push((g, skew, min));
            out.soft.push(Soft::Spread(g, skew, min));
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

    /// Takes `n` pods out of a domain's count, forgetting the domain at zero (as a count built
    /// from the remaining pods would not have it).
    pub fn remove(&mut self, group: usize, domain: &str, n: i64) {
        let Some(c) = self.counts.get_mut(group) else {
            return;
        };
        if let Some(v) = c.get_mut(domain) {
            *v -= n;
            if *v == 0 {
                c.remove(domain);
            }
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

/// Terms heaviest first, equal weights in their given order (Karpenter's stable sort).
fn by_weight(terms: &[(i32, PodAffinityTerm)]) -> Vec<&PodAffinityTerm> {
    let mut sorted: Vec<&(i32, PodAffinityTerm)> = terms.iter().collect();
    sorted.sort_by_key(|t| std::cmp::Reverse(t.0));
    sorted.into_iter().map(|(_, t)| t).collect()
}

/// The domains a spread is measured against: those copies may go to (`domains`) and those that
/// only count (`counted_only`: domains of existing nodes no NodePool offers any more, cordoned or
/// tainted nodes). Kubernetes and Karpenter take the global minimum over both.
pub struct SpreadDomains<'a> {
    pub domains: &'a BTreeSet<String>,
    pub counted_only: &'a BTreeSet<String>,
}

impl SpreadDomains<'_> {
    /// How many domains the skew is measured over.
    pub fn count(&self) -> usize {
        self.domains.len()
            + self
                .counted_only
                .iter()
                .filter(|d| !self.domains.contains(*d))
                .count()
    }

    /// The fewest matching pods in any domain, after `extra` copies.
    pub fn min_count(
        &self,
        counts: &BTreeMap<String, i64>,
        extra: &BTreeMap<String, i64>,
    ) -> Option<i64> {
        self.domains
            .iter()
            .chain(self.counted_only)
            .map(|d| counts.get(d).copied().unwrap_or(0) + extra.get(d).copied().unwrap_or(0))
            .min()
    }
}

/// Deals `n` copies over `spread.domains` so that each copy goes to a domain with the fewest
/// matching pods (what a skew check admits one pod at a time), respecting `max_skew` against the
/// global minimum, which counts `spread.counted_only` too (Karpenter's `domainMinCount`); when
/// fewer than `min_domains` domains exist the global minimum counts as zero (Kubernetes' rule),
/// which caps every domain at `max_skew`. Returns copies per domain; the sum may be below `n`
/// when the constraint admits no more.
pub fn water_fill(
    counts: &BTreeMap<String, i64>,
    spread: &SpreadDomains<'_>,
    n: i64,
    max_skew: i64,
    min_domains: Option<i64>,
) -> BTreeMap<String, i64> {
    let mut current: Vec<(String, i64)> = spread
        .domains
        .iter()
        .map(|d| (d.clone(), counts.get(d).copied().unwrap_or(0)))
        .collect();
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    if current.is_empty() {
        return out;
    }
    let below_min_domains = min_domains.is_some_and(|m| (spread.count() as i64) < m);
    // Copies never go to a counted-only domain, so its count is a fixed floor.
    let outside_min = spread
        .counted_only
        .iter()
        .filter(|d| !spread.domains.contains(*d))
        .map(|d| counts.get(d).copied().unwrap_or(0))
        .min()
        .unwrap_or(i64::MAX);
    let mut left = n;
    while left > 0 {
        // The domain with the fewest pods (ties: name order) takes copies up to the next level.
        current.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        let min = current[0].1;
        let global_min = if below_min_domains {
            0
        } else {
            min.min(outside_min)
        };
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

    fn fill(
        counts: &BTreeMap<String, i64>,
        domains: &[&str],
        n: i64,
        max_skew: i64,
        min_domains: Option<i64>,
    ) -> BTreeMap<String, i64> {
        let domains = set(domains);
        let none = BTreeSet::new();
        let spread = SpreadDomains {
            domains: &domains,
            counted_only: &none,
        };
        water_fill(counts, &spread, n, max_skew, min_domains)
    }

    #[test]
    fn spreads_evenly_from_existing_counts() {
        let counts = BTreeMap::from([("a".to_string(), 2)]);
        let out = fill(&counts, &["a", "b", "c"], 7, 1, None);
        // final counts 3,3,3: a gets 1, b 3, c 3
        assert_eq!(out.get("a"), Some(&1));
        assert_eq!(out.get("b"), Some(&3));
        assert_eq!(out.get("c"), Some(&3));
    }

    #[test]
    fn min_domains_caps_each_domain_at_max_skew() {
        let out = fill(&BTreeMap::new(), &["a", "b"], 10, 2, Some(3));
        assert_eq!(out.values().sum::<i64>(), 4);
    }

    #[test]
    fn uneven_totals_stay_within_skew() {
        let out = fill(&BTreeMap::new(), &["a", "b", "c"], 10, 1, None);
        let max = out.values().max().copied().unwrap_or(0);
        let min = ["a", "b", "c"]
            .iter()
            .map(|d| out.get(*d).copied().unwrap_or(0))
            .min()
            .unwrap_or(0);
        assert!(max - min <= 1);
        assert_eq!(out.values().sum::<i64>(), 10);
    }

    #[test]
    fn a_domain_that_only_counts_holds_the_minimum_down() {
        // Zone c has one matching pod on a node no NodePool can add to: a and b may each reach
        // one above it, not more (Karpenter topologygroup.go, domainMinCount).
        let counts = BTreeMap::from([
            ("a".to_string(), 1),
            ("b".to_string(), 1),
            ("c".to_string(), 1),
        ]);
        let domains = set(&["a", "b"]);
        let only = set(&["c"]);
        let spread = SpreadDomains {
            domains: &domains,
            counted_only: &only,
        };
        let out = water_fill(&counts, &spread, 4, 1, None);
        assert_eq!(out, BTreeMap::from([("a".into(), 1), ("b".into(), 1)]));
        // Without zone c counted, all four would be dealt.
        assert_eq!(
            fill(&counts, &["a", "b"], 4, 1, None).values().sum::<i64>(),
            4
        );
    }

    #[test]
    fn counted_domains_count_toward_min_domains() {
        let domains = set(&["a", "b"]);
        let only = set(&["c"]);
        let spread = SpreadDomains {
            domains: &domains,
            counted_only: &only,
        };
        let counts = BTreeMap::from([("c".to_string(), 5)]);
        // Three domains exist, so minDomains 3 is met and the minimum is a's and b's 0.
        let out = water_fill(&counts, &spread, 4, 1, Some(3));
        assert_eq!(out.values().sum::<i64>(), 4);
        // minDomains 4 is not met: each domain is capped at maxSkew.
        let out = water_fill(&counts, &spread, 4, 1, Some(4));
        assert_eq!(out.values().sum::<i64>(), 2);
    }
}
