//! Whether a pending pod fits a node: the filters of kube-scheduler that the engine also models.
//!
//! A pod fits a node when, in this order:
//! 1. the node is Ready and not cordoned (a NotReady or unschedulable node carries a NoSchedule
//!    taint in Kubernetes; the simulator does not let tolerations of those through);
//! 2. its requests (with at least one pod slot) fit in allocatable minus what bound pods request;
//! 3. the node's labels satisfy its `nodeSelector` and one of its required node-affinity terms;
//! 4. it tolerates every NoSchedule / NoExecute taint;
//! 5. its zonal volumes (if any) allow the node's zone;
//! 6. each `DoNotSchedule` topology spread constraint holds: with domains the values of the
//!    topology key on the nodes that match the pod's node selector and affinity, and counts the
//!    bound pods in the pod's namespace that the selector picks,
//!    `count(node's domain) + (1 if the pod matches its own selector) − min count ≤ maxSkew`
//!    (the minimum is 0 while there are fewer domains than `minDomains`); a node without the key
//!    does not fit;
//! 7. each required pod-affinity term has a matching bound pod in the node's domain of the term's
//!    topology key — unless no bound pod matches the term at all and the pod matches it itself
//!    (the first pod of a group);
//! 8. no required anti-affinity term of the pod has a matching bound pod in the node's domain,
//!    and no bound pod's required anti-affinity term matches the pod in that domain (symmetry).
//!
//! A term's namespaces default to the namespace of the pod that has the term. Among the nodes a
//! pod fits, [`crate::score`] ranks them; preferences (`ScheduleAnyway`, PreferNoSchedule,
//! preferred affinity) are not scored.

use crate::bound_counts::BoundCounts;
use crate::state::{NodeState, PodState};
use dovetail_dataflow::model::labels::ZONE;
use dovetail_dataflow::model::quantity::units;
use dovetail_dataflow::model::taints::first_untolerated;
use dovetail_dataflow::model::{
    LabelSelector, Pod, PodAffinityTerm, Requirements, Resources, WhenUnsatisfiable,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

/// Why a pod does not fit a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Unfit {
    NotReady,
    Unschedulable,
    /// The first resource short.
    Resources(String),
    NodeSelector,
    NodeAffinity,
    /// The first taint not tolerated.
    Taint(String),
    VolumeZone,
    /// The topology key of the violated constraint.
    TopologySpread(String),
    PodAffinity(String),
    PodAntiAffinity(String),
}

impl fmt::Display for Unfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unfit::NotReady => write!(f, "node not ready"),
            Unfit::Unschedulable => write!(f, "node unschedulable"),
            Unfit::Resources(r) => write!(f, "insufficient {r}"),
            Unfit::NodeSelector => write!(f, "node selector does not match"),
            Unfit::NodeAffinity => write!(f, "required node affinity does not match"),
            Unfit::Taint(t) => write!(f, "untolerated taint {t}"),
            Unfit::VolumeZone => write!(f, "volume zone conflict"),
            Unfit::TopologySpread(k) => write!(f, "topology spread on {k} would exceed maxSkew"),
            Unfit::PodAffinity(k) => write!(f, "no pod to be near on {k}"),
            Unfit::PodAntiAffinity(k) => write!(f, "pod anti-affinity on {k}"),
        }
    }
}

/// What a pod requests for accounting: its requests with at least one pod slot.
pub(crate) fn effective_requests(pod: &Pod) -> Resources {
    let mut r = pod.scheduling.requests.clone();
    if r.pods < units(1) {
        r.pods = units(1);
    }
    r
}

/// True when a node labelled `labels` satisfies a node selector and required affinity terms
/// (any term; no terms is no constraint).
fn node_affinity_matches(
    node_selector: &Requirements,
    required: &[Requirements],
    labels: &BTreeMap<String, String>,
) -> bool {
    node_selector.matches_labels(labels)
        && (required.is_empty() || required.iter().any(|t| t.matches_labels(labels)))
}

/// The namespaces a term (held by a pod in `owner_ns`) looks in.
fn term_namespaces(term: &PodAffinityTerm, owner_ns: &str) -> BTreeSet<String> {
    if term.namespaces.is_empty() {
        BTreeSet::from([owner_ns.to_string()])
    } else {
        term.namespaces.clone()
    }
}

/// True when `term` (held by a pod in `owner_ns`) selects a pod in `ns` labelled `labels`.
fn term_selects(
    term: &PodAffinityTerm,
    owner_ns: &str,
    ns: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    let ns_ok = if term.namespaces.is_empty() {
        ns == owner_ns
    } else {
        term.namespaces.contains(ns)
    };
    ns_ok && term.selector.matches(labels)
}

type ClassKey = (String, BTreeMap<String, String>);

/// A spread constraint's domain counts depend on the namespace, selector, topology key and the
/// node selector and required affinity that decide which nodes are domains.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SpreadKey {
    namespace: String,
    selector: LabelSelector,
    topology_key: String,
    node_selector: Requirements,
    required_affinity: Vec<Requirements>,
}

/// Counts that many pending pods share, kept for one scheduling pass and updated as pods bind
/// (nothing unbinds during a pass): matching bound pods per domain of a spread constraint, and
/// the domains bound pods' anti-affinity forbids for a (namespace, labels). Bound pods per node
/// for a (namespaces, selector) outlive the pass ([`BoundCounts`]).
#[derive(Debug, Default)]
pub(crate) struct MatchCache {
    /// Domain value → matching bound pods, every domain present (zero included).
    spreads: HashMap<SpreadKey, BTreeMap<String, i64>>,
    forbidden: HashMap<ClassKey, BTreeSet<(String, String)>>,
}

impl MatchCache {
    /// Matching bound pods per domain of a spread constraint, every domain listed.
    fn spread_counts(
        &mut self,
        key: SpreadKey,
        bound: &mut BoundCounts,
        nodes: &BTreeMap<String, NodeState>,
        pods: &BTreeMap<String, PodState>,
    ) -> &BTreeMap<String, i64> {
        if !self.spreads.contains_key(&key) {
            let per_node = bound.of(
                BTreeSet::from([key.namespace.clone()]),
                &key.selector,
                nodes,
                pods,
            );
            let mut counts: BTreeMap<String, i64> = BTreeMap::new();
            for (name, n) in nodes {
                let labels = &n.node.labels;
                if !node_affinity_matches(&key.node_selector, &key.required_affinity, labels) {
                    continue;
                }
                if let Some(v) = labels.get(&key.topology_key) {
                    *counts.entry(v.clone()).or_insert(0) +=
                        per_node.get(name).copied().unwrap_or(0);
                }
            }
            self.spreads.insert(key.clone(), counts);
        }
        self.spreads.entry(key).or_default()
    }

    /// The (key, value) domains bound pods' required anti-affinity forbids for `pod`.
    fn forbidden(
        &mut self,
        pod: &Pod,
        nodes: &BTreeMap<String, NodeState>,
        pods: &BTreeMap<String, PodState>,
        anti_holders: &BTreeSet<String>,
    ) -> &BTreeSet<(String, String)> {
        self.forbidden
            .entry((pod.namespace.clone(), pod.labels.clone()))
            .or_insert_with_key(|(ns, labels)| {
                let mut out = BTreeSet::new();
                for k in anti_holders {
                    let Some(holder) = pods.get(k) else { continue };
                    let Some(node) = holder.pod.node_name.as_ref().and_then(|n| nodes.get(n))
                    else {
                        continue;
                    };
                    out.extend(forbidden_by(&holder.pod, &node.node.labels, ns, labels));
                }
                out
            })
    }

    /// Updates the cached counts for `pod` just bound to a node labelled `node_labels` (the
    /// [`BoundCounts`] the bind updated itself).
    pub(crate) fn on_bind(&mut self, pod: &Pod, node_labels: &BTreeMap<String, String>) {
        for (k, counts) in self.spreads.iter_mut() {
            if k.namespace != pod.namespace || !k.selector.matches(&pod.labels) {
                continue;
            }
            let Some(v) = node_labels.get(&k.topology_key) else {
                continue;
            };
            if node_affinity_matches(&k.node_selector, &k.required_affinity, node_labels) {
                *counts.entry(v.clone()).or_insert(0) += 1;
            }
        }
        if pod.scheduling.pod_anti_affinity.is_empty() {
            return;
        }
        for ((ns, labels), set) in self.forbidden.iter_mut() {
            set.extend(forbidden_by(pod, node_labels, ns, labels));
        }
    }
}

/// The domains `holder` (bound to a node labelled `node_labels`) forbids, by its required
/// anti-affinity, to pods in `ns` labelled `labels`.
fn forbidden_by(
    holder: &Pod,
    node_labels: &BTreeMap<String, String>,
    ns: &str,
    labels: &BTreeMap<String, String>,
) -> Vec<(String, String)> {
    holder
        .scheduling
        .pod_anti_affinity
        .iter()
        .filter(|t| term_selects(t, &holder.namespace, ns, labels))
        .filter_map(|t| {
            node_labels
                .get(&t.topology_key)
                .map(|v| (t.topology_key.clone(), v.clone()))
        })
        .collect()
}

struct Spread {
    key: String,
    max_skew: i64,
    counts: BTreeMap<String, i64>,
    min: i64,
    self_match: i64,
}

struct Affinity {
    key: String,
    domains: BTreeSet<String>,
    anywhere: bool,
}

struct Anti {
    key: String,
    domains: BTreeSet<String>,
}

/// A pending pod's constraints, with the cluster-wide counts they need computed once.
pub(crate) struct PodFit<'a> {
    pod: &'a Pod,
    requests: Resources,
    spreads: Vec<Spread>,
    affinities: Vec<Affinity>,
    antis: Vec<Anti>,
    /// (key, value) domains that bound pods' anti-affinity forbids for this pod.
    forbidden: BTreeSet<(String, String)>,
}

impl<'a> PodFit<'a> {
    /// `anti_holders`: keys of bound pods that have required anti-affinity terms.
    pub(crate) fn new(
        pod: &'a Pod,
        nodes: &BTreeMap<String, NodeState>,
        pods: &BTreeMap<String, PodState>,
        anti_holders: &BTreeSet<String>,
        bound: &mut BoundCounts,
        cache: &mut MatchCache,
    ) -> PodFit<'a> {
        let s = &pod.scheduling;
        let mut spreads = Vec::new();
        for c in &s.topology_spread {
            if c.when_unsatisfiable != WhenUnsatisfiable::DoNotSchedule {
                continue;
            }
            let counts = cache
                .spread_counts(
                    SpreadKey {
                        namespace: pod.namespace.clone(),
                        selector: c.selector.clone(),
                        topology_key: c.topology_key.clone(),
                        node_selector: s.node_selector.clone(),
                        required_affinity: s.required_node_affinity.clone(),
                    },
                    bound,
                    nodes,
                    pods,
                )
                .clone();
            let too_few = c.min_domains.is_some_and(|m| (counts.len() as i64) < m);
            let min = if too_few {
                0
            } else {
                counts.values().copied().min().unwrap_or(0)
            };
            spreads.push(Spread {
                key: c.topology_key.clone(),
                max_skew: c.max_skew,
                counts,
                min,
                self_match: i64::from(c.selector.matches(&pod.labels)),
            });
        }
        let mut domains_of = |term: &PodAffinityTerm| {
            let per_node = bound.of(
                term_namespaces(term, &pod.namespace),
                &term.selector,
                nodes,
                pods,
            );
            let domains: BTreeSet<String> = per_node
                .keys()
                .filter_map(|n| nodes.get(n)?.node.labels.get(&term.topology_key).cloned())
                .collect();
            (domains, !per_node.is_empty())
        };
        let mut affinities = Vec::new();
        for t in &s.pod_affinity {
            let (domains, any) = domains_of(t);
            affinities.push(Affinity {
                key: t.topology_key.clone(),
                domains,
                anywhere: !any && term_selects(t, &pod.namespace, &pod.namespace, &pod.labels),
            });
        }
        let mut antis = Vec::new();
        for t in &s.pod_anti_affinity {
            antis.push(Anti {
                key: t.topology_key.clone(),
                domains: domains_of(t).0,
            });
        }
        let forbidden = if anti_holders.is_empty() {
            BTreeSet::new()
        } else {
            cache.forbidden(pod, nodes, pods, anti_holders).clone()
        };
        PodFit {
            pod,
            requests: effective_requests(pod),
            spreads,
            affinities,
            antis,
            forbidden,
        }
    }

    /// Whether the pod fits `node` (see the module documentation for the order of checks).
    pub(crate) fn check(&self, node: &NodeState) -> Result<(), Unfit> {
        let s = &self.pod.scheduling;
        let labels = &node.node.labels;
        if !node.ready {
            return Err(Unfit::NotReady);
        }
        if node.node.unschedulable {
            return Err(Unfit::Unschedulable);
        }
        let free = node.node.allocatable.sub(&node.requested);
        if !self.requests.fits_in(&free) {
            let short = self
                .requests
                .first_shortfall(&free)
                .unwrap_or_else(|| "resources".to_string());
            return Err(Unfit::Resources(short));
        }
        if !s.node_selector.matches_labels(labels) {
            return Err(Unfit::NodeSelector);
        }
        if !s.required_node_affinity.is_empty()
            && !s
                .required_node_affinity
                .iter()
                .any(|t| t.matches_labels(labels))
        {
            return Err(Unfit::NodeAffinity);
        }
        if let Some(t) = first_untolerated(&node.node.taints, &s.tolerations) {
            return Err(Unfit::Taint(t.to_string()));
        }
        if let Some(zones) = &s.volume_zones {
            if !labels.get(ZONE).is_some_and(|z| zones.contains(z)) {
                return Err(Unfit::VolumeZone);
            }
        }
        for sp in &self.spreads {
            let Some(v) = labels.get(&sp.key) else {
                return Err(Unfit::TopologySpread(sp.key.clone()));
            };
            let count = sp.counts.get(v).copied().unwrap_or(0);
            if count + sp.self_match - sp.min > sp.max_skew {
                return Err(Unfit::TopologySpread(sp.key.clone()));
            }
        }
        for a in &self.affinities {
            if a.anywhere {
                continue;
            }
            if !labels.get(&a.key).is_some_and(|v| a.domains.contains(v)) {
                return Err(Unfit::PodAffinity(a.key.clone()));
            }
        }
        for a in &self.antis {
            if labels.get(&a.key).is_some_and(|v| a.domains.contains(v)) {
                return Err(Unfit::PodAntiAffinity(a.key.clone()));
            }
        }
        for (k, v) in &self.forbidden {
            if labels.get(k) == Some(v) {
                return Err(Unfit::PodAntiAffinity(k.clone()));
            }
        }
        Ok(())
    }
}
