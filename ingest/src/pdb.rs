//! `policy/v1` PodDisruptionBudgets.

use crate::error::FieldResult;
use crate::fields::At;
use crate::meta::meta;
use crate::notes::Notes;
use crate::selectors::label_selector;
use dovetail_dataflow::model::PodDisruptionBudget;

/// Reads a PodDisruptionBudget. `None` (noted) without a selector: in `policy/v1` a missing
/// selector selects no pods, so the budget protects nothing.
pub(crate) fn pdb(root: &At, notes: &mut Notes) -> FieldResult<Option<PodDisruptionBudget>> {
    let m = meta(root)?;
    let spec = root.req_obj("spec")?;
    let Some(sel) = spec.obj("selector")? else {
        notes.add("skipped: no spec.selector, so it selects no pods");
        return Ok(None);
    };
    let min_available = spec.int_or_string("minAvailable")?;
    let max_unavailable = spec.int_or_string("maxUnavailable")?;
    if min_available.is_some() && max_unavailable.is_some() {
        return Err(spec.err_at(
            "maxUnavailable",
            "minAvailable and maxUnavailable cannot both be set",
        ));
    }
    Ok(Some(PodDisruptionBudget {
        namespace: m.namespace,
        name: m.name,
        selector: label_selector(&sel)?,
        min_available,
        max_unavailable,
    }))
}
