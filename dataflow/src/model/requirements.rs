//! Node selector requirements with Karpenter's semantics.
//!
//! A [`Requirement`] is a set of allowed values for one label key: either a finite set (`In`,
//! `DoesNotExist` = the empty set) or the complement of one (`NotIn`, `Exists` = complement of the
//! empty set), optionally bounded by `Gt` / `Lt`, with an optional `minValues` (how many distinct
//! values a NodeClaim's instance-type options must still cover). This is the representation of
//! Karpenter's `scheduling.Requirement`, so intersections behave as they do there.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The operators of a Kubernetes `NodeSelectorRequirement`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

impl Operator {
    pub fn parse(s: &str) -> Option<Operator> {
        Some(match s {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" => Operator::Gt,
            "Lt" => Operator::Lt,
            _ => return None,
        })
    }
}

/// The allowed values of one label key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Requirement {
    /// True when `values` lists the values that are *not* allowed.
    pub complement: bool,
    pub values: BTreeSet<String>,
    /// Values must be integers strictly greater than this.
    pub greater_than: Option<i64>,
    /// Values must be integers strictly less than this.
    pub less_than: Option<i64>,
    pub min_values: Option<u32>,
}

impl Requirement {
    /// Builds a requirement from an operator and its values, as written in a manifest.
    /// `Gt` / `Lt` take one integer value; an unparsable bound yields an empty (unsatisfiable)
    /// requirement, as Karpenter's validation would have rejected it.
    pub fn new<I, S>(op: Operator, values: I) -> Requirement
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let values: BTreeSet<String> = values.into_iter().map(Into::into).collect();
        let bound = || values.iter().next().and_then(|v| v.parse::<i64>().ok());
        match op {
            Operator::In => Requirement::finite(values),
            Operator::NotIn => Requirement {
                complement: true,
                values,
                ..Requirement::any()
            },
            Operator::Exists => Requirement::any(),
            Operator::DoesNotExist => Requirement::finite(BTreeSet::new()),
            Operator::Gt => match bound() {
                Some(b) => Requirement {
                    greater_than: Some(b),
                    ..Requirement::any()
                },
                None => Requirement::finite(BTreeSet::new()),
            },
            Operator::Lt => match bound() {
                Some(b) => Requirement {
                    less_than: Some(b),
                    ..Requirement::any()
                },
                None => Requirement::finite(BTreeSet::new()),
            },
        }
    }

    /// Any value (the `Exists` operator).
    pub fn any() -> Requirement {
        Requirement {
            complement: true,
            values: BTreeSet::new(),
            greater_than: None,
            less_than: None,
            min_values: None,
        }
    }

    /// Exactly these values (`In`).
    pub fn finite(values: BTreeSet<String>) -> Requirement {
        Requirement {
            complement: false,
            values,
            greater_than: None,
            less_than: None,
            min_values: None,
        }
    }

    pub fn single(value: impl Into<String>) -> Requirement {
        Requirement::finite(BTreeSet::from([value.into()]))
    }

    pub fn with_min_values(mut self, min_values: Option<u32>) -> Requirement {
        self.min_values = min_values;
        self
    }

    /// The operator this requirement reads as (Karpenter's `Requirement.Operator`).
    pub fn operator(&self) -> Operator {
        match (self.complement, self.values.is_empty()) {
            (true, false) => Operator::NotIn,
            (true, true) => Operator::Exists,
            (false, false) => Operator::In,
            (false, true) => Operator::DoesNotExist,
        }
    }

    fn within_bounds(&self, value: &str) -> bool {
        if self.greater_than.is_none() && self.less_than.is_none() {
            return true;
        }
        let Ok(v) = value.parse::<i64>() else {
            return false;
        };
        self.greater_than.is_none_or(|gt| v > gt) && self.less_than.is_none_or(|lt| v < lt)
    }

    /// True when `value` is allowed.
    pub fn has(&self, value: &str) -> bool {
        let listed = self.values.contains(value);
        (if self.complement { !listed } else { listed }) && self.within_bounds(value)
    }

    /// True when no value at all is allowed.
    pub fn is_empty(&self) -> bool {
        if self.complement {
            matches!((self.greater_than, self.less_than), (Some(gt), Some(lt)) if gt.saturating_add(1) >= lt)
        } else {
            self.values.is_empty()
        }
    }

    /// The number of allowed values; `usize::MAX` minus the excluded ones for complements.
    pub fn len(&self) -> usize {
        if self.complement {
            usize::MAX - self.values.len()
        } else {
            self.values.len()
        }
    }

    /// The values allowed by both (Karpenter's `Requirement.Intersection`).
    pub fn intersection(&self, other: &Requirement) -> Requirement {
        let complement = self.complement && other.complement;
        let greater_than = match (self.greater_than, other.greater_than) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let less_than = match (self.less_than, other.less_than) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let min_values = match (self.min_values, other.min_values) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if let (Some(gt), Some(lt)) = (greater_than, less_than) {
            if gt >= lt.saturating_sub(1) {
                return Requirement::finite(BTreeSet::new()).with_min_values(min_values);
            }
        }
        let values: BTreeSet<String> = match (self.complement, other.complement) {
            (true, true) => self.values.union(&other.values).cloned().collect(),
            (true, false) => other.values.difference(&self.values).cloned().collect(),
            (false, true) => self.values.difference(&other.values).cloned().collect(),
            (false, false) => self.values.intersection(&other.values).cloned().collect(),
        };
        let mut out = Requirement {
            complement,
            values,
            greater_than,
            less_than,
            min_values,
        };
        let bounded = Requirement {
            complement: true,
            values: BTreeSet::new(),
            greater_than,
            less_than,
            min_values: None,
        };
        out.values.retain(|v| bounded.within_bounds(v));
        if !complement {
            out.greater_than = None;
            out.less_than = None;
        }
        out
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let vals: Vec<&str> = self.values.iter().map(String::as_str).collect();
        match self.operator() {
            Operator::In => write!(f, "In [{}]", vals.join(", "))?,
            Operator::NotIn => write!(f, "NotIn [{}]", vals.join(", "))?,
            Operator::Exists => write!(f, "Exists")?,
            Operator::DoesNotExist => write!(f, "DoesNotExist")?,
            _ => {}
        }
        if let Some(gt) = self.greater_than {
            write!(f, " >{gt}")?;
        }
        if let Some(lt) = self.less_than {
            write!(f, " <{lt}")?;
        }
        if let Some(mv) = self.min_values {
            write!(f, " minValues {mv}")?;
        }
        Ok(())
    }
}

/// Requirements on many label keys (Karpenter's `scheduling.Requirements`). A key that is not
/// present is unconstrained.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Requirements(pub BTreeMap<String, Requirement>);

/// Why two requirement sets cannot be met together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incompatible {
    pub key: String,
    pub detail: String,
    /// The two requirements that share no value (incoming, existing); `None` when the key is
    /// one the existing side does not define. Boxed: a check that passes should not carry the
    /// room for two requirements in its result.
    pub sides: Option<Box<(Requirement, Requirement)>>,
}

impl fmt::Display for Incompatible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.detail)
    }
}

impl Requirements {
    pub fn new() -> Requirements {
        Requirements::default()
    }

    /// Requirements that pin each label to its one value (a node's or an instance type's labels).
    pub fn from_labels<'a>(labels: impl IntoIterator<Item = (&'a String, &'a String)>) -> Self {
        Requirements(
            labels
                .into_iter()
                .map(|(k, v)| (k.clone(), Requirement::single(v.clone())))
                .collect(),
        )
    }

    pub fn get(&self, key: &str) -> Option<&Requirement> {
        self.0.get(key)
    }

    /// Adds a requirement, intersecting with any already on the key.
    pub fn add(&mut self, key: impl Into<String>, requirement: Requirement) {
        let key = key.into();
        let merged = match self.0.get(&key) {
            Some(existing) => existing.intersection(&requirement),
            None => requirement,
        };
        self.0.insert(key, merged);
    }

    /// Adds every requirement of `other`, intersecting key by key.
    pub fn add_all(&mut self, other: &Requirements) {
        for (k, r) in &other.0 {
            self.add(k.clone(), r.clone());
        }
    }

    pub fn intersection(&self, other: &Requirements) -> Requirements {
        let mut out = self.clone();
        out.add_all(other);
        out
    }

    /// True when `value` is allowed for `key` (an absent key allows anything).
    pub fn allows(&self, key: &str, value: &str) -> bool {
        self.0.get(key).is_none_or(|r| r.has(value))
    }

    /// Karpenter's `Intersects`: every key both sides constrain must share a value, except when
    /// both sides only exclude values (`NotIn` / `DoesNotExist` on each).
    pub fn intersects(&self, other: &Requirements) -> Result<(), Incompatible> {
        for (key, existing) in &self.0 {
            let Some(incoming) = other.0.get(key) else {
                continue;
            };
            if existing.intersection(incoming).is_empty() {
                let excluding = |r: &Requirement| {
                    matches!(r.operator(), Operator::NotIn | Operator::DoesNotExist)
                };
                if excluding(incoming) && excluding(existing) {
                    continue;
                }
                return Err(Incompatible {
                    key: key.clone(),
                    detail: format!("{incoming} does not intersect {existing}"),
                    sides: Some(Box::new((incoming.clone(), existing.clone()))),
                });
            }
        }
        Ok(())
    }

    /// Karpenter's `Compatible`: `self` (a NodePool's or node's requirements) can loosely meet
    /// `incoming` (a pod's). A label that is not well known must be defined by `self` unless the
    /// pod only excludes it; well-known labels that `self` leaves open are allowed.
    pub fn compatible(
        &self,
        incoming: &Requirements,
        is_well_known: impl Fn(&str) -> bool,
    ) -> Result<(), Incompatible> {
        for (key, req) in &incoming.0 {
            if is_well_known(key) || self.0.contains_key(key) {
                continue;
            }
            if matches!(req.operator(), Operator::NotIn | Operator::DoesNotExist) {
                continue;
            }
            return Err(Incompatible {
                key: key.clone(),
                detail: "label is not defined by the NodePool (add it to the template labels or requirements)"
                    .to_string(),
                sides: None,
            });
        }
        self.intersects(incoming)
    }

    /// True when a node labelled `labels` satisfies every requirement here (how kube-scheduler
    /// reads a node selector term against a node).
    pub fn matched_by_labels(&self, labels: &BTreeMap<String, String>) -> Result<(), Incompatible> {
        for (key, req) in &self.0 {
            if !Self::label_satisfies(req, labels.get(key)) {
                return Err(Incompatible {
                    key: key.clone(),
                    detail: format!(
                        "node has {} but needs {req}",
                        labels.get(key).map(String::as_str).unwrap_or("no value")
                    ),
                    sides: None,
                });
            }
        }
        Ok(())
    }

    /// `matched_by_labels` without the reason: the solver asks this of every node for every
    /// pod class, and building the message for each miss was a tenth of its time.
    pub fn matches_labels(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0
            .iter()
            .all(|(key, req)| Self::label_satisfies(req, labels.get(key)))
    }

    fn label_satisfies(req: &Requirement, value: Option<&String>) -> bool {
        match value {
            Some(v) => req.has(v),
            // An absent label satisfies only NotIn / DoesNotExist (complement of a set with no
            // bounds, or the empty set).
            None => match req.operator() {
                Operator::NotIn => req.greater_than.is_none() && req.less_than.is_none(),
                Operator::DoesNotExist => true,
                _ => false,
            },
        }
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(k, r)| format!("{k} {r}")).collect();
        write!(f, "{}", parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn req(op: Operator, vals: &[&str]) -> Requirement {
        Requirement::new(op, vals.iter().copied())
    }

    #[test]
    fn operators_read_back() {
        assert_eq!(req(Operator::In, &["a"]).operator(), Operator::In);
        assert_eq!(req(Operator::NotIn, &["a"]).operator(), Operator::NotIn);
        assert_eq!(req(Operator::Exists, &[]).operator(), Operator::Exists);
        assert_eq!(
            req(Operator::DoesNotExist, &[]).operator(),
            Operator::DoesNotExist
        );
        assert_eq!(req(Operator::Gt, &["3"]).operator(), Operator::Exists);
    }

    #[test]
    fn gt_and_lt_bound_integer_values() {
        let gt = req(Operator::Gt, &["4"]);
        assert!(gt.has("5"));
        assert!(!gt.has("4"));
        assert!(!gt.has("abc"));
        let both = gt.intersection(&req(Operator::Lt, &["8"]));
        assert!(both.has("7") && !both.has("8") && !both.has("4"));
        assert!(!both.is_empty());
        assert!(gt.intersection(&req(Operator::Lt, &["5"])).is_empty());
        let concrete = both.intersection(&req(Operator::In, &["2", "6", "9"]));
        assert_eq!(concrete.values, BTreeSet::from(["6".to_string()]));
        assert_eq!(concrete.operator(), Operator::In);
    }

    #[test]
    fn not_in_and_does_not_exist_are_compatible_with_each_other() {
        let mut pool = Requirements::new();
        pool.add("team", req(Operator::DoesNotExist, &[]));
        let mut pod = Requirements::new();
        pod.add("team", req(Operator::NotIn, &["a"]));
        assert!(pool.intersects(&pod).is_ok());
        let mut pod_in = Requirements::new();
        pod_in.add("team", req(Operator::In, &["a"]));
        assert!(pool.intersects(&pod_in).is_err());
    }

    #[test]
    fn undefined_custom_labels_are_incompatible_unless_excluded() {
        let pool = Requirements::new();
        let well_known = |k: &str| k == "kubernetes.io/arch";
        let mut pod = Requirements::new();
        pod.add("kubernetes.io/arch", req(Operator::In, &["arm64"]));
        assert!(pool.compatible(&pod, well_known).is_ok());
        pod.add("team", req(Operator::In, &["a"]));
        let err = pool.compatible(&pod, well_known).unwrap_err();
        assert_eq!(err.key, "team");
        let mut excluded = Requirements::new();
        excluded.add("team", req(Operator::NotIn, &["a"]));
        assert!(pool.compatible(&excluded, well_known).is_ok());
    }

    #[test]
    fn min_values_take_the_larger() {
        let a = req(Operator::In, &["a", "b", "c"]).with_min_values(Some(2));
        let b = req(Operator::Exists, &[]).with_min_values(Some(3));
        assert_eq!(a.intersection(&b).min_values, Some(3));
    }

    fn arb_requirement() -> impl Strategy<Value = Requirement> {
        let vals = proptest::collection::btree_set(
            prop_oneof![
                Just("1"),
                Just("2"),
                Just("3"),
                Just("5"),
                Just("8"),
                Just("a")
            ],
            0..4,
        );
        (0..6u8, vals, 0..10i64).prop_map(|(op, vals, n)| {
            let vals: Vec<&str> = vals.into_iter().collect();
            match op {
                0 => Requirement::new(Operator::In, vals),
                1 => Requirement::new(Operator::NotIn, vals),
                2 => Requirement::any(),
                3 => Requirement::new(Operator::DoesNotExist, Vec::<String>::new()),
                4 => Requirement::new(Operator::Gt, [n.to_string()]),
                _ => Requirement::new(Operator::Lt, [n.to_string()]),
            }
        })
    }

    const UNIVERSE: [&str; 9] = ["0", "1", "2", "3", "5", "8", "9", "a", "zz"];

    proptest! {
        #[test]
        fn intersection_is_conjunction(a in arb_requirement(), b in arb_requirement()) {
            let both = a.intersection(&b);
            for v in UNIVERSE {
                prop_assert_eq!(both.has(v), a.has(v) && b.has(v), "value {}", v);
            }
        }

        #[test]
        fn intersection_commutes(a in arb_requirement(), b in arb_requirement()) {
            let ab = a.intersection(&b);
            let ba = b.intersection(&a);
            for v in UNIVERSE {
                prop_assert_eq!(ab.has(v), ba.has(v));
            }
            prop_assert_eq!(ab.is_empty(), ba.is_empty());
        }

        #[test]
        fn intersection_is_associative(a in arb_requirement(), b in arb_requirement(), c in arb_requirement()) {
            let left = a.intersection(&b).intersection(&c);
            let right = a.intersection(&b.intersection(&c));
            for v in UNIVERSE {
                prop_assert_eq!(left.has(v), right.has(v));
            }
        }

        #[test]
        fn intersection_is_idempotent(a in arb_requirement()) {
            let aa = a.intersection(&a);
            for v in UNIVERSE {
                prop_assert_eq!(aa.has(v), a.has(v));
            }
        }

        #[test]
        fn empty_means_no_value(a in arb_requirement(), b in arb_requirement()) {
            let both = a.intersection(&b);
            if both.is_empty() {
                for v in UNIVERSE {
                    prop_assert!(!both.has(v));
                }
            }
        }

        #[test]
        fn requirements_intersection_is_keywise(a in arb_requirement(), b in arb_requirement()) {
            let mut x = Requirements::new();
            x.add("k", a.clone());
            let mut y = Requirements::new();
            y.add("k", b.clone());
            let xy = x.intersection(&y);
            for v in UNIVERSE {
                prop_assert_eq!(xy.allows("k", v), a.has(v) && b.has(v));
            }
        }
    }
}
