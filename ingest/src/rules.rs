//! The validation layer: what the API server would refuse in the objects dovetail reads, as one
//! table ([`RULES`]) rather than checks scattered through the readers.
//!
//! The references are Karpenter's CRDs (their OpenAPI patterns, minimums, maximums and enums, as
//! in `deploy/crds/`, plus the CEL rules Karpenter's own CRDs add) and the API server's
//! validation of the core kinds dovetail reads. A rule that refuses makes loading fail with an
//! error naming file, document, object and field; a rule that only notes accepts the value (the
//! API server would too) and says what dovetail makes of it in `notes`. The readers still check
//! what they need to read a field (types, units); the table holds what a reader would otherwise
//! accept silently.

use crate::error::FieldResult;
use crate::fields::At;
use crate::notes::Notes;
use dovetail_dataflow::model::cron::Schedule;
use regex::Regex;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// What a rule checks of the value at its path.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Check {
    /// An integer (a YAML `1.5` or `"5"` is not) from `min` to `max`.
    Int { min: i64, max: i64 },
    /// A string (a YAML number is taken as written) that the CRD's regular expression matches.
    Pattern(&'static str),
    /// One of these strings.
    OneOf(&'static [&'static str]),
    /// A cron schedule Karpenter's parser (robfig/cron, five fields or `@daily`) accepts.
    Cron,
    /// A list with at least one element.
    NonEmpty,
    /// An object (an item of a `kind: List`).
    Object,
    /// A list (a `kind: List`'s `items`).
    List,
    /// Set exactly when the sibling field of this name is set.
    With(&'static str),
    /// A string map whose keys and values add up to at most this many bytes.
    TotalBytes(usize),
}

/// What happens to a value a rule's check fails on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Loading fails: the API server refuses the object.
    Refuse,
    /// Accepted, as the API server accepts it, with this note (what dovetail makes of it).
    Note(&'static str),
}

/// One rule: the check every value at `path` of a `kind` object must pass.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rule {
    /// The object's kind; `PodSpec` rules apply to pods and to the pod templates of
    /// Deployments, ReplicaSets, StatefulSets, DaemonSets and Jobs.
    pub kind: &'static str,
    /// Dotted path; `name[]` is every element of the list `name`, `name{}` every value of the map
    /// `name`. `PodSpec` paths start at the pod spec.
    pub path: &'static str,
    pub check: Check,
    pub verdict: Verdict,
    /// Where the rule comes from.
    pub source: &'static str,
}

const NODEPOOL_CRD: &str = "NodePool CRD";
const NODEPOOL_CEL: &str = "NodePool CRD (CEL)";
const NODECLASS_CRD: &str = "EC2NodeClass CRD";
const OVERLAY_CRD: &str = "NodeOverlay CRD";
const CRON: &str = "Karpenter's cron parser";
const API_SERVER: &str = "API server";

/// Karpenter's duration fields: hours, minutes, seconds (`720h`, `1h30m`), or `Never`.
const DURATION_OR_NEVER: &str = r"^(([0-9]+(s|m|h))+|Never)$";
/// Kubernetes' resource quantity (`250m`, `1Gi`, `1e3`).
const QUANTITY: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// Every rule, in the order they are checked (within an object: table order).
pub(crate) const RULES: &[Rule] = &[
    // --- karpenter.sh/v1 NodePool
    Rule {
        kind: "NodePool",
        path: "spec.weight",
        check: Check::Int { min: 1, max: 100 },
        verdict: Verdict::Refuse,
        source: NODEPOOL_CRD,
    },
    Rule {
        kind: "NodePool",
        path: "spec.replicas",
        check: Check::Int {
            min: 0,
            max: i64::MAX,
        },
        verdict: Verdict::Refuse,
        source: NODEPOOL_CRD,
    },
    Rule {
        kind: "NodePool",
        path: "spec.limits{}",
        check: Check::Pattern(QUANTITY),
        verdict: Verdict::Refuse,
        source: NODEPOOL_CRD,
    },
    Rule {
        kind: "NodePool",
        path: "spec.template.spec.expireAfter",
        check: Check::Pattern(DURATION_OR_NEVER),
        verdict: Verdict::Refuse,
        source: NODEPOOL_CRD,
    },
    Rule {
        kind: "NodePool",
        path: "spec.template.spec.terminationGracePeriod",
        check: Check::Pattern(r"^([0-9]+(s|m|h))+$"),
        verdict: Verdict::Refuse,
        source: NODEPOOL_CRD,
    },
    Rule {
        kind: "NodePool",
        path: "spec.template.spec.requirements[].minValues",
        check: Check::Int { min: 1, max: 50 },
        verdict: Verdict::Refuse,
        source: NODEPOOL_CRD,
    },
    Rule {
        kind: "NodePool",
        path: "spec.disruption.consolidateAfter",
        check: Check::Pattern(DURATION_OR_NEVER),
        verdict: Verdict::Refuse,
        source: NODEPOOL_CRD,
    },
    Rule {
        kind: "NodePool",
        path: "spec.disruption.budgets[].nodes",
        check: Check::Pattern(r"^((100|[0-9]{1,2})%|[0-9]+)$"),
        verdict: Verdict::Refuse,
        source: NODEPOOL_CRD,
    },
    Rule {
        kind: "NodePool",
        path: "spec.disruption.budgets[].schedule",
        check: Check::Pattern(
            r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$",
        ),
        verdict: Verdict::Refuse,
        source: NODEPOOL_CRD,
    },
    Rule {
        kind: "NodePool",
        path: "spec.disruption.budgets[].schedule",
        check: Check::Cron,
        verdict: Verdict::Refuse,
        source: CRON,
    },
    Rule {
        kind: "NodePool",
        path: "spec.disruption.budgets[].schedule",
        check: Check::With("duration"),
        verdict: Verdict::Refuse,
        source: NODEPOOL_CEL,
    },
    Rule {
        kind: "NodePool",
        path: "spec.disruption.budgets[].duration",
        check: Check::Pattern(r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$"),
        verdict: Verdict::Refuse,
        source: NODEPOOL_CRD,
    },
    Rule {
        kind: "NodePool",
        path: "spec.disruption.budgets[].reasons[]",
        check: Check::OneOf(&["Underutilized", "Empty", "Drifted"]),
        verdict: Verdict::Refuse,
        source: NODEPOOL_CRD,
    },
    // --- karpenter.k8s.aws/v1 EC2NodeClass
    Rule {
        kind: "EC2NodeClass",
        path: "spec.kubelet.maxPods",
        check: Check::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        verdict: Verdict::Refuse,
        source: NODECLASS_CRD,
    },
    Rule {
        kind: "EC2NodeClass",
        path: "spec.kubelet.podsPerCore",
        check: Check::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        verdict: Verdict::Refuse,
        source: NODECLASS_CRD,
    },
    // --- karpenter.sh/v1alpha1 NodeOverlay
    Rule {
        kind: "NodeOverlay",
        path: "spec.priceAdjustment",
        check: Check::Pattern(r"^([+-]\d*\.?\d+|\+\d*\.?\d+%|-(\d{1,2}(\.\d+)?|100)%)$"),
        verdict: Verdict::Refuse,
        source: OVERLAY_CRD,
    },
    Rule {
        kind: "NodeOverlay",
        path: "spec.price",
        check: Check::Pattern(r"^\d+(\.\d+)?$"),
        verdict: Verdict::Refuse,
        source: OVERLAY_CRD,
    },
    Rule {
        kind: "NodeOverlay",
        path: "spec.weight",
        check: Check::Int { min: 1, max: 10000 },
        verdict: Verdict::Refuse,
        source: OVERLAY_CRD,
    },
    Rule {
        kind: "NodeOverlay",
        path: "spec.capacity{}",
        check: Check::Pattern(QUANTITY),
        verdict: Verdict::Refuse,
        source: OVERLAY_CRD,
    },
    // --- core kinds: the pod spec of Pods and of workload templates
    Rule {
        kind: "PodSpec",
        path: "containers",
        check: Check::NonEmpty,
        verdict: Verdict::Refuse,
        source: API_SERVER,
    },
    Rule {
        kind: "PodSpec",
        path: "tolerations[].tolerationSeconds",
        check: Check::Int {
            min: i64::MIN,
            max: i64::MAX,
        },
        verdict: Verdict::Refuse,
        source: API_SERVER,
    },
    Rule {
        kind: "PodSpec",
        path: "tolerations[].tolerationSeconds",
        check: Check::Int {
            min: 0,
            max: i64::MAX,
        },
        verdict: Verdict::Note("is negative; the pod is evicted at once, as with 0"),
        source: API_SERVER,
    },
    Rule {
        kind: "PodSpec",
        path: "topologySpreadConstraints[].minDomains",
        check: Check::Int {
            min: 1,
            max: i32::MAX as i64,
        },
        verdict: Verdict::Refuse,
        source: API_SERVER,
    },
    // --- every object
    Rule {
        kind: "*",
        path: "metadata.annotations",
        check: Check::TotalBytes(256 * 1024),
        verdict: Verdict::Refuse,
        source: API_SERVER,
    },
    // --- `kind: List` and typed lists (`PodList`)
    Rule {
        kind: "List",
        path: "items",
        check: Check::List,
        verdict: Verdict::Refuse,
        source: API_SERVER,
    },
    Rule {
        kind: "List",
        path: "items[]",
        check: Check::Object,
        verdict: Verdict::Refuse,
        source: API_SERVER,
    },
];

/// Where each kind keeps the pod spec that `PodSpec` rules check.
const POD_SPECS: &[(&str, &str)] = &[
    ("Pod", "spec"),
    ("Deployment", "spec.template.spec"),
    ("ReplicaSet", "spec.template.spec"),
    ("StatefulSet", "spec.template.spec"),
    ("DaemonSet", "spec.template.spec"),
    ("Job", "spec.template.spec"),
];

/// Checks `root`, an object of `kind`, against every rule for it: the first refusal is the
/// error; values a noting rule's check fails on are noted.
pub(crate) fn validate(kind: &str, root: &At, notes: &mut Notes) -> FieldResult<()> {
    let pod_spec = POD_SPECS.iter().find(|(k, _)| *k == kind).map(|(_, p)| *p);
    for rule in RULES {
        let path = if rule.kind == kind || rule.kind == "*" {
            rule.path.to_string()
        } else if rule.kind == "PodSpec" {
            match pod_spec {
                Some(prefix) => format!("{prefix}.{}", rule.path),
                None => continue,
            }
        } else {
            continue;
        };
        let segments: Vec<&str> = path.split('.').collect();
        let (parents, last) = segments.split_at(segments.len() - 1);
        for parent in select(root, parents)? {
            if let Err(e) = check_field(&parent, last[0], rule) {
                match rule.verdict {
                    Verdict::Refuse => return Err(e),
                    Verdict::Note(note) => notes.add(format!("{} {note}", e.field)),
                }
            }
        }
    }
    Ok(())
}

/// The objects `segments` lead to from `at` (none where a field is absent).
fn select<'a>(at: &At<'a>, segments: &[&str]) -> FieldResult<Vec<At<'a>>> {
    let mut current = vec![at.clone()];
    for segment in segments {
        let mut next = Vec::new();
        for at in &current {
            if let Some(key) = segment.strip_suffix("[]") {
                next.extend(at.list(key)?);
            } else if let Some(key) = segment.strip_suffix("{}") {
                next.extend(at.entries(key)?.into_iter().map(|(_, v)| v));
            } else if let Some(child) = at.get(segment)? {
                next.push(child);
            }
        }
        current = next;
    }
    Ok(current)
}

/// Checks the field `last` of `parent` (`name`, `name[]` or `name{}`) against `rule`.
fn check_field(parent: &At, last: &str, rule: &Rule) -> FieldResult<()> {
    if let Check::With(sibling) = rule.check {
        let key = last.trim_end_matches("[]").trim_end_matches("{}");
        let (this, other) = (parent.get(key)?.is_some(), parent.get(sibling)?.is_some());
        if this != other {
            let (set, unset) = if this { (key, sibling) } else { (sibling, key) };
            return Err(parent.err_at(
                set,
                format!("{set} is set without {unset}; set both or neither"),
            ));
        }
        return Ok(());
    }
    let values = if let Some(key) = last.strip_suffix("[]") {
        parent.list(key)?
    } else if let Some(key) = last.strip_suffix("{}") {
        parent.entries(key)?.into_iter().map(|(_, v)| v).collect()
    } else {
        match rule.check {
            // Absent counts as empty for a list that must not be.
            Check::NonEmpty if parent.get(last)?.is_none() => {
                return Err(parent.err_at(last, "must have at least one element (required)"))
            }
            _ => parent.get(last)?.into_iter().collect(),
        }
    };
    for value in values {
        check_value(&value, rule.check)?;
    }
    Ok(())
}

fn check_value(at: &At, check: Check) -> FieldResult<()> {
    match check {
        Check::Int { min, max } => {
            let n = at.as_i64()?;
            if n < min || n > max {
                // Bounds at the type's own limits (an int32 field's 2147483647) go unsaid.
                let open_above = max >= i64::from(i32::MAX);
                return Err(at.err(if n < min && open_above {
                    format!("{n} is less than the minimum {min}")
                } else if open_above {
                    format!("{n} is more than the maximum {max}")
                } else {
                    format!("{n} is not between {min} and {max}")
                }));
            }
        }
        Check::Pattern(pattern) => {
            let text = scalar(at)?;
            if !regex(pattern).is_match(&text) {
                return Err(at.err(format!("{text:?} does not match {pattern}")));
            }
        }
        Check::OneOf(allowed) => {
            let text = scalar(at)?;
            if !allowed.contains(&text.as_str()) {
                let listed: Vec<String> = allowed
                    .iter()
                    .filter(|a| !a.is_empty())
                    .map(|a| a.to_string())
                    .collect();
                return Err(at.err(format!("{text:?} is not one of {}", listed.join(", "))));
            }
        }
        Check::Cron => {
            let text = scalar(at)?;
            Schedule::parse(&text)
                .map_err(|e| at.err(format!("{text:?} is not a cron schedule: {e}")))?;
        }
        Check::NonEmpty => {
            if at.elements()?.is_empty() {
                return Err(at.err("must have at least one element (required)"));
            }
        }
        Check::Object => {
            // A null item is skipped, as the list reader does.
            if !at.value().is_object() && !at.value().is_null() {
                return Err(at.err(format!("expected an object, found {}", shown(at.value()))));
            }
        }
        Check::List => {
            at.elements()?;
        }
        Check::TotalBytes(limit) => {
            let total: usize = match at.value() {
                Value::Object(map) => map
                    .iter()
                    .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
                    .sum(),
                _ => 0,
            };
            if total > limit {
                return Err(at.err(format!(
                    "{total} bytes in all; the limit is {limit} ({} KiB)",
                    limit / 1024
                )));
            }
        }
        Check::With(_) => {}
    }
    Ok(())
}

/// A scalar as text: strings as they are, numbers and booleans written out (YAML's `5` for
/// `"5"`, which the readers accept too).
fn scalar(at: &At) -> FieldResult<String> {
    at.as_string()
}

fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Array(_) => "a list".to_string(),
        Value::Object(_) => "an object".to_string(),
        other => other.to_string(),
    }
}

/// The compiled pattern (each is compiled once; the table's patterns are tested to compile).
fn regex(pattern: &'static str) -> &'static Regex {
    static CACHE: OnceLock<std::sync::Mutex<BTreeMap<&'static str, &'static Regex>>> =
        OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
    map.entry(pattern).or_insert_with(|| {
        // A pattern that does not compile is a bug in the table (the test below compiles each);
        // matching nothing would refuse every value, so match everything instead.
        let re = Regex::new(pattern).unwrap_or_else(|_| Regex::new("").expect("empty regex"));
        Box::leak(Box::new(re))
    })
}

/// The table as Markdown rows (`| kind | field | rule | outcome | source |`), for the README.
pub fn markdown_table() -> String {
    let mut out = String::from("| kind | field | rule | outcome | from |\n|---|---|---|---|---|\n");
    for r in RULES {
        let rule = match r.check {
            Check::Int { min, max } => match (min, max) {
                (i64::MIN, i64::MAX) => "an integer".to_string(),
                (min, max) if max >= i64::from(i32::MAX) => format!("an integer ≥ {min}"),
                (min, max) => format!("an integer {min}–{max}"),
            },
            Check::Pattern(p) => format!("matches `{}`", p.replace('|', "\\|")),
            Check::OneOf(v) => {
                let v: Vec<&str> = v.iter().copied().filter(|s| !s.is_empty()).collect();
                format!("one of {}", v.join(", "))
            }
            Check::Cron => "a cron schedule (5 fields or `@daily`…)".to_string(),
            Check::NonEmpty => "at least one element".to_string(),
            Check::Object => "an object".to_string(),
            Check::List => "a list".to_string(),
            Check::With(s) => format!("set together with `{s}`"),
            Check::TotalBytes(n) => format!("at most {} KiB in all", n / 1024),
        };
        let outcome = match r.verdict {
            Verdict::Refuse => "refused".to_string(),
            Verdict::Note(n) => format!("note: {n}"),
        };
        let kind = if r.kind == "*" { "every kind" } else { r.kind };
        out.push_str(&format!(
            "| {kind} | `{}` | {rule} | {outcome} | {} |\n",
            r.path, r.source
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        for r in RULES {
            if let Check::Pattern(p) = r.check {
                assert!(Regex::new(p).is_ok(), "{}: {p}", r.path);
            }
        }
    }
}
