//! Node selector requirements (`key` / `operator` / `values` / `minValues`), node selector terms
//! and label selectors (`matchLabels` + `matchExpressions`), shared by pods, NodePools,
//! NodeClaims, NodeOverlays, PersistentVolumes and PodDisruptionBudgets.

use crate::error::FieldResult;
use crate::fields::At;
use crate::notes::Notes;
use dovetail_dataflow::model::{LabelSelector, Operator, Requirement, Requirements};

const OPERATORS: &str = "In, NotIn, Exists, DoesNotExist, Gt or Lt";

/// One requirement. Validation follows the API server and Karpenter's CRD rules: `In` (and
/// `NotIn`, for label selectors) needs a value, `Gt` / `Lt` exactly one integer, and `minValues`
/// no more than the values listed for `In`. An invalid requirement is an error rather than an
/// empty set, since the API server would have refused the object.
pub(crate) fn requirement(at: &At, with_min_values: bool) -> FieldResult<(String, Requirement)> {
    let key = at.req_str("key")?;
    if key.is_empty() {
        return Err(at.err_at("key", "must not be empty"));
    }
    let op_text = at.req_str("operator")?;
    let op = Operator::parse(&op_text).ok_or_else(|| {
        at.err_at(
            "operator",
            format!("unknown operator {op_text:?} (expected {OPERATORS})"),
        )
    })?;
    let values = at.str_list("values")?;
    match op {
        Operator::In if values.is_empty() => {
            return Err(at.err_at("values", "operator In needs at least one value"));
        }
        Operator::Gt | Operator::Lt => {
            let ok = matches!(values.as_slice(), [v] if v.trim().parse::<i64>().is_ok());
            if !ok {
                return Err(at.err_at(
                    "values",
                    format!("operator {op_text} needs exactly one integer value, found {values:?}"),
                ));
            }
        }
        _ => {}
    }
    let values: Vec<String> = values.into_iter().map(|v| v.trim().to_string()).collect();
    let mut req = Requirement::new(op, values.iter().cloned());
    if with_min_values {
        if let Some(n) = at.i64("minValues")? {
            let distinct = req.values.len();
            if !(1..=50).contains(&n) {
                return Err(at.err_at("minValues", format!("{n} is not between 1 and 50")));
            }
            if op == Operator::In && (n as usize) > distinct {
                return Err(at.err_at(
                    "minValues",
                    format!("{n} is more than the {distinct} values listed"),
                ));
            }
            req = req.with_min_values(Some(n as u32));
        }
    }
    Ok((key, req))
}

/// A list of requirements at `key`, intersected key by key.
pub(crate) fn requirement_list(
    at: &At,
    key: &str,
    with_min_values: bool,
) -> FieldResult<Requirements> {
    let mut out = Requirements::new();
    for item in at.list(key)? {
        let (k, r) = requirement(&item, with_min_values)?;
        out.add(k, r);
    }
    Ok(out)
}

/// A node selector term (`matchExpressions`; `matchFields` are noted and ignored, since the only
/// field is `metadata.name`, which the DaemonSet controller sets and a new node cannot know).
pub(crate) fn node_selector_term(at: &At, notes: &mut Notes) -> FieldResult<Requirements> {
    let reqs = requirement_list(at, "matchExpressions", false)?;
    let fields = at.list("matchFields")?;
    for f in &fields {
        let key = f.str("key")?.unwrap_or_default();
        notes.add(format!("{}: matchFields on {key:?} ignored", f.path()));
    }
    if reqs.is_empty() && fields.is_empty() {
        // Kubernetes: an empty term matches no node. dovetail has no way to say "nothing", and
        // such a term is almost always a mistake, so it is noted and read as "anything".
        notes.add(format!(
            "{}: empty node selector term (Kubernetes matches no node with it; read as unconstrained)",
            at.path()
        ));
    }
    Ok(reqs)
}

/// A label selector. `matchLabels` become `In` single values; `matchExpressions` take `In`,
/// `NotIn`, `Exists` and `DoesNotExist`.
pub(crate) fn label_selector(at: &At) -> FieldResult<LabelSelector> {
    let mut requirements = Requirements::new();
    for (k, v) in at.string_map("matchLabels")? {
        requirements.add(k, Requirement::single(v));
    }
    for item in at.list("matchExpressions")? {
        let op = item.req_str("operator")?;
        if matches!(op.as_str(), "Gt" | "Lt") {
            return Err(item.err_at(
                "operator",
                format!("operator {op} is not valid in a label selector (expected In, NotIn, Exists or DoesNotExist)"),
            ));
        }
        if op == "NotIn" && item.str_list("values")?.is_empty() {
            return Err(item.err_at("values", "operator NotIn needs at least one value"));
        }
        let (k, r) = requirement(&item, false)?;
        requirements.add(k, r);
    }
    Ok(LabelSelector { requirements })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_operators_and_min_values() {
        let doc = json!({"r": [
            {"key": "a", "operator": "In", "values": ["x", "y"], "minValues": 2},
            {"key": "b", "operator": "Gt", "values": ["4"]},
            {"key": "c", "operator": "DoesNotExist"},
        ]});
        let reqs = requirement_list(&At::root(&doc, ""), "r", true).unwrap();
        assert_eq!(reqs.get("a").unwrap().min_values, Some(2));
        assert!(reqs.allows("b", "5") && !reqs.allows("b", "4"));
        assert_eq!(reqs.get("c").unwrap().operator(), Operator::DoesNotExist);
    }

    #[test]
    fn rejects_bad_requirements_naming_the_field() {
        let cases = [
            (json!({"key": "a", "operator": "Near"}), "r[0].operator"),
            (
                json!({"key": "a", "operator": "In", "values": []}),
                "r[0].values",
            ),
            (
                json!({"key": "a", "operator": "Gt", "values": ["x"]}),
                "r[0].values",
            ),
            (
                json!({"key": "a", "operator": "Lt", "values": ["1", "2"]}),
                "r[0].values",
            ),
            (
                json!({"key": "a", "operator": "In", "values": ["x"], "minValues": 2}),
                "r[0].minValues",
            ),
        ];
        for (item, field) in cases {
            let doc = json!({ "r": [item] });
            let err = requirement_list(&At::root(&doc, ""), "r", true).unwrap_err();
            assert_eq!(err.field, field, "{err:?}");
        }
    }

    #[test]
    fn label_selectors_combine_labels_and_expressions() {
        let doc = json!({"matchLabels": {"app": "web"}, "matchExpressions": [
            {"key": "tier", "operator": "NotIn", "values": ["db"]}
        ]});
        let sel = label_selector(&At::root(&doc, "")).unwrap();
        let labels = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(sel.matches(&labels(&[("app", "web")])));
        assert!(!sel.matches(&labels(&[("app", "web"), ("tier", "db")])));
        assert!(!sel.matches(&labels(&[("app", "api")])));
    }
}
