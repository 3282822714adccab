//! Taints (Nodes, NodeClaims, NodePools) and tolerations (pods).

use crate::error::FieldResult;
use crate::fields::At;
use dovetail_dataflow::model::{Effect, Taint, Toleration, TolerationOperator};

const EFFECTS: &str = "NoSchedule, PreferNoSchedule or NoExecute";

fn effect(at: &At, text: &str) -> FieldResult<Effect> {
    Effect::parse(text).ok_or_else(|| {
        at.err_at(
            "effect",
            format!("unknown effect {text:?} (expected {EFFECTS})"),
        )
    })
}

/// The taints listed at `key` (empty when absent). `key` and `effect` are required.
pub(crate) fn taints(at: &At, key: &str) -> FieldResult<Vec<Taint>> {
    at.list(key)?
        .iter()
        .map(|t| {
            let key = t.req_str("key")?;
            let value = t.str("value")?.unwrap_or_default();
            let effect = effect(t, &t.req_str("effect")?)?;
            Ok(Taint { key, value, effect })
        })
        .collect()
}

/// A pod's `tolerations`. `operator` defaults to `Equal`, an empty `effect` matches every
/// effect, and `tolerationSeconds` is ignored (it only delays eviction).
pub(crate) fn tolerations(spec: &At) -> FieldResult<Vec<Toleration>> {
    spec.list("tolerations")?
        .iter()
        .map(|t| {
            let operator = match t.str("operator")?.as_deref() {
                None | Some("") | Some("Equal") => TolerationOperator::Equal,
                Some("Exists") => TolerationOperator::Exists,
                Some(other) => {
                    return Err(t.err_at(
                        "operator",
                        format!("unknown toleration operator {other:?} (expected Equal or Exists)"),
                    ))
                }
            };
            let effect = match t.str("effect")?.as_deref() {
                None | Some("") => None,
                Some(e) => Some(effect(t, e)?),
            };
            Ok(Toleration {
                key: t.str("key")?.unwrap_or_default(),
                operator,
                value: t.str("value")?.unwrap_or_default(),
                effect,
            })
        })
        .collect()
}
