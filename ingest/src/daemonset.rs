//! `apps/v1` DaemonSets: per-node overhead that every admitting node carries.

use crate::error::FieldResult;
use crate::fields::At;
use crate::meta::meta;
use crate::notes::Notes;
use crate::pod::{pod_template, Template};

/// A DaemonSet, read; the template's volumes and priority class are resolved later.
#[derive(Debug, Clone)]
pub(crate) struct ParsedDaemonSet {
    pub namespace: String,
    pub name: String,
    pub template: Template,
}

pub(crate) fn daemonset(root: &At, notes: &mut Notes) -> FieldResult<ParsedDaemonSet> {
    let m = meta(root)?;
    let spec = root.req_obj("spec")?;
    Ok(ParsedDaemonSet {
        namespace: m.namespace,
        name: m.name,
        template: pod_template(&spec, notes)?,
    })
}
