//! `karpenter.sh/v1` NodePools, with the defaults Karpenter's CRD applies.

use crate::error::FieldResult;
use crate::fields::At;
use crate::meta::meta;
use crate::notes::Notes;
use crate::selectors::requirement_list;
use crate::taints::taints;
use dovetail_dataflow::model::{Budget, ConsolidationPolicy, Disruption, NodePool, Requirement};

/// Reads a NodePool. The template labels are added to the requirements as single values, so
/// that a pod selecting one of them finds it (Karpenter does the same).
pub(crate) fn nodepool(root: &At, notes: &mut Notes) -> FieldResult<NodePool> {
    let m = meta(root)?;
    let spec = root.req_obj("spec")?;
    let template = spec.req_obj("template")?;
    let (template_labels, template_annotations) = match template.obj("metadata")? {
        Some(tm) => (tm.string_map("labels")?, tm.string_map("annotations")?),
        None => Default::default(),
    };
    let tspec = template.req_obj("spec")?;
    let mut requirements = requirement_list(&tspec, "requirements", true)?;
    for (k, v) in &template_labels {
        requirements.add(k.clone(), Requirement::single(v.clone()));
    }
    let node_class = match tspec.obj("nodeClassRef")? {
        Some(r) => Some(r.req_str("name")?),
        None => None,
    };
    let replicas = spec.i64("replicas")?;
    if replicas.is_some() {
        notes.add("spec.replicas (static NodePool) is not supported yet");
    }
    Ok(NodePool {
        name: m.name,
        weight: spec.i32("weight")?.unwrap_or(0),
        template_labels,
        template_annotations,
        taints: taints(&tspec, "taints")?,
        startup_taints: taints(&tspec, "startupTaints")?,
        requirements,
        node_class,
        limits: spec.quantity_map("limits")?,
        expire_after: Some(
            tspec
                .str("expireAfter")?
                .unwrap_or_else(|| "720h".to_string()),
        ),
        termination_grace_period: tspec.str("terminationGracePeriod")?,
        disruption: disruption(&spec)?,
        replicas,
    })
}

fn disruption(spec: &At) -> FieldResult<Disruption> {
    let defaults = Disruption::default();
    let Some(d) = spec.obj("disruption")? else {
        return Ok(defaults);
    };
    let consolidation_policy = match d.str("consolidationPolicy")?.as_deref() {
        None => defaults.consolidation_policy,
        Some("WhenEmpty") => ConsolidationPolicy::WhenEmpty,
        Some("WhenEmptyOrUnderutilized") => ConsolidationPolicy::WhenEmptyOrUnderutilized,
        Some("Balanced") => ConsolidationPolicy::Balanced,
        Some(other) => {
            return Err(d.err_at(
                "consolidationPolicy",
                format!("unknown policy {other:?} (expected WhenEmpty, WhenEmptyOrUnderutilized or Balanced)"),
            ))
        }
    };
    // An explicit empty list means "no budgets" and is kept; only an absent one is defaulted.
    let budgets = match d.get("budgets")? {
        Some(_) => d
            .list("budgets")?
            .iter()
            .map(|b| {
                Ok(Budget {
                    nodes: b
                        .int_or_string("nodes")?
                        .unwrap_or_else(|| "10%".to_string()),
                    schedule: b.str("schedule")?,
                    duration: b.str("duration")?,
                    reasons: b.str_list("reasons")?,
                })
            })
            .collect::<FieldResult<Vec<_>>>()?,
        None => defaults.budgets,
    };
    Ok(Disruption {
        consolidation_policy,
        consolidate_after: Some(
            d.str("consolidateAfter")?
                .unwrap_or_else(|| "0s".to_string()),
        ),
        budgets,
    })
}
