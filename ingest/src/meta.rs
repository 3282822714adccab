//! `metadata`: identity, labels, annotations, the controlling owner and timestamps.

use crate::error::FieldResult;
use crate::fields::At;
use crate::time::parse_rfc3339_ms;
use std::collections::BTreeMap;

/// The parts of `metadata` dovetail uses.
#[derive(Debug, Clone, Default)]
pub(crate) struct Meta {
    pub name: String,
    /// `metadata.namespace`, `default` when absent (ignored for cluster-scoped kinds).
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Kind and name of the owner reference with `controller: true`.
    pub controller: Option<(String, String)>,
    pub created_ms: Option<i64>,
    /// `metadata.deletionTimestamp` is set: the object is going away.
    pub deleting: bool,
}

/// Reads `metadata` of an object; `metadata.name` is required.
pub(crate) fn meta(root: &At) -> FieldResult<Meta> {
    let m = root.req_obj("metadata")?;
    let name = m.req_str("name")?;
    if name.is_empty() {
        return Err(m.err_at("name", "must not be empty"));
    }
    let namespace = m
        .str("namespace")?
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_string());
    let mut controller = None;
    for owner in m.list("ownerReferences")? {
        if owner.bool("controller")? == Some(true) {
            controller = Some((owner.req_str("kind")?, owner.req_str("name")?));
            break;
        }
    }
    let created_ms = match m.get("creationTimestamp")? {
        Some(ts) => {
            let text = ts.as_string()?;
            Some(parse_rfc3339_ms(&text).ok_or_else(|| {
                ts.err(format!(
                    "{text:?} is not an RFC 3339 timestamp (e.g. 2024-05-01T12:00:00Z)"
                ))
            })?)
        }
        None => None,
    };
    Ok(Meta {
        name,
        namespace,
        labels: m.string_map("labels")?,
        annotations: m.string_map("annotations")?,
        controller,
        created_ms,
        deleting: m.get("deletionTimestamp")?.is_some(),
    })
}
