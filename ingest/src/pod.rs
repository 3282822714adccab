//! Pods and pod specs (also the templates of workloads and DaemonSets): requests, node selector
//! and affinity, tolerations, topology spread, pod (anti-)affinity, priority and volumes.

use crate::error::FieldResult;
use crate::fields::At;
use crate::meta::meta;
use crate::notes::Notes;
use crate::resources::pod_spec_requests;
use crate::selectors::{label_selector, node_selector_term};
use crate::taints::tolerations;
use crate::volumes::{pod_volume_claims, VolumeClaim};
use dovetail_dataflow::model::{
    LabelSelector, Operator, Pod, PodAffinityTerm, PodScheduling, Requirement, Requirements,
    TopologySpread, WhenUnsatisfiable,
};
use std::collections::BTreeMap;

/// Annotation the kubelet puts on mirror pods of static pods.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// A pod spec, read. Volume zones and a `priorityClassName` are resolved later, against the
/// claims, volumes and PriorityClasses of the whole input.
#[derive(Debug, Clone)]
pub(crate) struct PodSpec {
    /// Everything but `volume_zones`; `priority` is `spec.priority` or 0.
    pub scheduling: PodScheduling,
    pub claims: Vec<VolumeClaim>,
    pub priority_class: Option<String>,
    /// `spec.priority` was set (it wins over the class, as the admission plugin sets it from
    /// the class in the first place).
    pub explicit_priority: bool,
}

/// Reads a pod spec. `labels` are the pod's own (the template's), which `matchLabelKeys` use.
pub(crate) fn pod_spec(
    spec: &At,
    labels: &BTreeMap<String, String>,
    notes: &mut Notes,
) -> FieldResult<PodSpec> {
    let requests = pod_spec_requests(spec)?;
    if spec.obj("resources")?.is_some() {
        notes.add(format!(
            "{}.resources (pod-level resources) is ignored; container requests are used",
            spec.path()
        ));
    }
    let mut node_selector = Requirements::new();
    for (k, v) in spec.string_map("nodeSelector")? {
        node_selector.add(k, Requirement::single(v));
    }
    let mut scheduling = PodScheduling {
        requests,
        node_selector,
        tolerations: tolerations(spec)?,
        topology_spread: topology_spread(spec, labels, notes)?,
        priority: spec.i32("priority")?.unwrap_or(0),
        ..Default::default()
    };
    if let Some(affinity) = spec.obj("affinity")? {
        node_affinity(&affinity, &mut scheduling, notes)?;
        if let Some(a) = affinity.obj("podAffinity")? {
            let (req, pref) = pod_affinity(&a, labels, notes)?;
            scheduling.pod_affinity = req;
            scheduling.preferred_pod_affinity = pref;
        }
        if let Some(a) = affinity.obj("podAntiAffinity")? {
            let (req, pref) = pod_affinity(&a, labels, notes)?;
            scheduling.pod_anti_affinity = req;
            scheduling.preferred_pod_anti_affinity = pref;
        }
    }
    if !spec.list("schedulingGates")?.is_empty() {
        notes.add("has schedulingGates; kube-scheduler will not place it until they are removed, but dovetail plans for it");
    }
    Ok(PodSpec {
        scheduling,
        claims: pod_volume_claims(spec)?,
        priority_class: spec.str("priorityClassName")?.filter(|c| !c.is_empty()),
        explicit_priority: spec.get("priority")?.is_some(),
    })
}

fn node_affinity(
    affinity: &At,
    scheduling: &mut PodScheduling,
    notes: &mut Notes,
) -> FieldResult<()> {
    let Some(na) = affinity.obj("nodeAffinity")? else {
        return Ok(());
    };
    if let Some(req) = na.obj("requiredDuringSchedulingIgnoredDuringExecution")? {
        for term in req.req_list("nodeSelectorTerms")? {
            scheduling
                .required_node_affinity
                .push(node_selector_term(&term, notes)?);
        }
    }
    let mut preferred = Vec::new();
    for p in na.list("preferredDuringSchedulingIgnoredDuringExecution")? {
        let weight = p.i32("weight")?.unwrap_or(1);
        preferred.push((
            weight,
            node_selector_term(&p.req_obj("preference")?, notes)?,
        ));
    }
    // Heaviest first; equal weights keep their written order (sort_by_key is stable).
    preferred.sort_by_key(|p| std::cmp::Reverse(p.0));
    scheduling.preferred_node_affinity = preferred;
    Ok(())
}

/// `podAffinity` or `podAntiAffinity`: required terms and (weight, term) preferences.
#[allow(clippy::type_complexity)]
fn pod_affinity(
    at: &At,
    labels: &BTreeMap<String, String>,
    notes: &mut Notes,
) -> FieldResult<(Vec<PodAffinityTerm>, Vec<(i32, PodAffinityTerm)>)> {
    let mut required = Vec::new();
    for term in at.list("requiredDuringSchedulingIgnoredDuringExecution")? {
        if let Some(t) = affinity_term(&term, labels, notes)? {
            required.push(t);
        }
    }
    let mut preferred = Vec::new();
    for p in at.list("preferredDuringSchedulingIgnoredDuringExecution")? {
        let weight = p.i32("weight")?.unwrap_or(1);
        if let Some(t) = affinity_term(&p.req_obj("podAffinityTerm")?, labels, notes)? {
            preferred.push((weight, t));
        }
    }
    preferred.sort_by_key(|p| std::cmp::Reverse(p.0));
    Ok((required, preferred))
}

/// One pod affinity term; `None` when it has no label selector (it then selects no pod, so it
/// constrains nothing).
fn affinity_term(
    term: &At,
    labels: &BTreeMap<String, String>,
    notes: &mut Notes,
) -> FieldResult<Option<PodAffinityTerm>> {
    let topology_key = term.req_str("topologyKey")?;
    if topology_key.is_empty() {
        return Err(term.err_at("topologyKey", "must not be empty"));
    }
    if term.obj("namespaceSelector")?.is_some() {
        notes.add(format!(
            "{}.namespaceSelector is not supported; only namespaces (or the pod's own) are used",
            term.path()
        ));
    }
    let Some(mut selector) = selector_with_keys(term, labels, notes)? else {
        return Ok(None);
    };
    for key in term.str_list("mismatchLabelKeys")? {
        if let Some(v) = labels.get(&key) {
            selector
                .requirements
                .add(key, Requirement::new(Operator::NotIn, [v.clone()]));
        }
    }
    Ok(Some(PodAffinityTerm {
        topology_key,
        selector,
        namespaces: term.str_list("namespaces")?.into_iter().collect(),
    }))
}

/// `labelSelector` plus `matchLabelKeys` (each key the pod has is added as `In` its value).
/// `None` (noted) when the selector is missing: Kubernetes then selects no pods at all.
fn selector_with_keys(
    at: &At,
    labels: &BTreeMap<String, String>,
    notes: &mut Notes,
) -> FieldResult<Option<LabelSelector>> {
    let Some(sel) = at.obj("labelSelector")? else {
        notes.add(format!(
            "{} has no labelSelector, so it selects no pods and is ignored",
            at.path()
        ));
        return Ok(None);
    };
    let mut selector = label_selector(&sel)?;
    for key in at.str_list("matchLabelKeys")? {
        if let Some(v) = labels.get(&key) {
            selector
                .requirements
                .add(key, Requirement::single(v.clone()));
        }
    }
    Ok(Some(selector))
}

fn topology_spread(
    spec: &At,
    labels: &BTreeMap<String, String>,
    notes: &mut Notes,
) -> FieldResult<Vec<TopologySpread>> {
    let mut out = Vec::new();
    for c in spec.list("topologySpreadConstraints")? {
        let max_skew = c
            .i64("maxSkew")?
            .ok_or_else(|| c.err_at("maxSkew", "required field is missing"))?;
        if max_skew < 1 {
            return Err(c.err_at("maxSkew", format!("{max_skew} is not at least 1")));
        }
        let topology_key = c.req_str("topologyKey")?;
        let when_unsatisfiable = match c.req_str("whenUnsatisfiable")?.as_str() {
            "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
            "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
            other => {
                return Err(c.err_at(
                    "whenUnsatisfiable",
                    format!("unknown value {other:?} (expected DoNotSchedule or ScheduleAnyway)"),
                ))
            }
        };
        let min_domains = c.i64("minDomains")?;
        let Some(selector) = selector_with_keys(&c, labels, notes)? else {
            continue;
        };
        out.push(TopologySpread {
            topology_key,
            max_skew,
            when_unsatisfiable,
            selector,
            min_domains,
        });
    }
    Ok(out)
}

/// A Pod object, read; `spec` carries what is resolved later.
#[derive(Debug, Clone)]
pub(crate) struct ParsedPod {
    pub pod: Pod,
    pub spec: PodSpec,
}

/// Reads a Pod. `None` (noted) for pods that have finished (`Succeeded` / `Failed`): they hold
/// no resources.
pub(crate) fn pod(root: &At, notes: &mut Notes) -> FieldResult<Option<ParsedPod>> {
    let m = meta(root)?;
    if let Some(status) = root.obj("status")? {
        if let Some(phase @ ("Succeeded" | "Failed")) = status.str("phase")?.as_deref() {
            notes.add(format!("skipped (phase {phase})"));
            return Ok(None);
        }
    }
    let spec_at = root.req_obj("spec")?;
    let spec = pod_spec(&spec_at, &m.labels, notes)?;
    let is_daemon = m
        .controller
        .as_ref()
        .is_some_and(|(kind, _)| kind == "DaemonSet")
        || m.annotations.contains_key(MIRROR_ANNOTATION);
    let pod = Pod {
        namespace: m.namespace,
        name: m.name,
        labels: m.labels,
        annotations: m.annotations,
        scheduling: spec.scheduling.clone(),
        node_name: spec_at.str("nodeName")?.filter(|n| !n.is_empty()),
        owner: m.controller,
        is_daemon,
        created_ms: m.created_ms,
    };
    Ok(Some(ParsedPod { pod, spec }))
}

/// A workload's or DaemonSet's `spec.template`.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub spec: PodSpec,
}

/// Reads `template` (metadata and spec) from a workload's `spec`.
pub(crate) fn pod_template(spec: &At, notes: &mut Notes) -> FieldResult<Template> {
    let t = spec.req_obj("template")?;
    let (labels, annotations) = match t.obj("metadata")? {
        Some(m) => (m.string_map("labels")?, m.string_map("annotations")?),
        None => Default::default(),
    };
    let spec = pod_spec(&t.req_obj("spec")?, &labels, notes)?;
    Ok(Template {
        labels,
        annotations,
        spec,
    })
}
