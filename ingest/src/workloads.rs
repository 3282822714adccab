//! Deployments, ReplicaSets, StatefulSets and Jobs, expanded into the pods their controllers
//! would create: the desired count minus the pods of theirs already in the input.

use crate::error::FieldResult;
use crate::fields::At;
use crate::meta::meta;
use crate::notes::Notes;
use crate::pod::{pod_template, Template};
use crate::selectors::label_selector;
use crate::volumes::VolumeClaim;
use dovetail_dataflow::model::{LabelSelector, Pod, Requirements};
use std::collections::{BTreeMap, BTreeSet};

/// The most pods one workload is expanded into: a typo'd `replicas: 1000000000` should be an
/// error, not an attempt to allocate a billion pods.
const MAX_PODS: i64 = 100_000;

/// The workload kinds dovetail expands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WorkloadKind {
    Deployment,
    ReplicaSet,
    StatefulSet,
    Job,
}

impl WorkloadKind {
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Deployment => "Deployment",
            WorkloadKind::ReplicaSet => "ReplicaSet",
            WorkloadKind::StatefulSet => "StatefulSet",
            WorkloadKind::Job => "Job",
        }
    }
}

/// A workload, read.
#[derive(Debug, Clone)]
pub(crate) struct Workload {
    pub kind: WorkloadKind,
    pub namespace: String,
    pub name: String,
    /// The controlling owner (a ReplicaSet's Deployment).
    pub owner: Option<(String, String)>,
    /// How many pods the controller wants running now (replicas, or a Job's parallelism capped
    /// by the completions still missing).
    pub desired: i64,
    pub selector: LabelSelector,
    pub template: Template,
    /// A StatefulSet's `volumeClaimTemplates`: (template name, storage class).
    pub claim_templates: Vec<(String, Option<String>)>,
    /// A StatefulSet's first ordinal (`spec.ordinals.start`).
    pub ordinal_start: i64,
}

/// Reads a workload of `kind`.
pub(crate) fn workload(kind: WorkloadKind, root: &At, notes: &mut Notes) -> FieldResult<Workload> {
    let m = meta(root)?;
    let spec = root.req_obj("spec")?;
    let template = pod_template(&spec, notes)?;
    // apps/v1 requires a selector that matches the template; the template labels stand in when
    // a hand-written manifest leaves it out.
    let selector = match spec.obj("selector")? {
        Some(s) => label_selector(&s)?,
        None => LabelSelector {
            requirements: Requirements::from_labels(&template.labels),
        },
    };
    let non_negative = |key: &str, v: Option<i64>| match v {
        Some(n) if n < 0 => Err(spec.err_at(key, format!("{n} must not be negative"))),
        _ => Ok(v),
    };
    let desired = match kind {
        WorkloadKind::Job => job_desired(root, &spec)?,
        _ => non_negative("replicas", spec.i64("replicas")?)?.unwrap_or(1),
    };
    if desired > MAX_PODS {
        let field = if kind == WorkloadKind::Job {
            "parallelism"
        } else {
            "replicas"
        };
        return Err(spec.err_at(
            field,
            format!("{desired} pods is more than dovetail expands for one workload ({MAX_PODS})"),
        ));
    }
    let mut claim_templates = Vec::new();
    let mut ordinal_start = 0;
    if kind == WorkloadKind::StatefulSet {
        for t in spec.list("volumeClaimTemplates")? {
            let name = t.req_obj("metadata")?.req_str("name")?;
            let class = match t.obj("spec")? {
                Some(s) => s.str("storageClassName")?,
                None => None,
            };
            claim_templates.push((name, class));
        }
        if let Some(o) = spec.obj("ordinals")? {
            ordinal_start = non_negative("ordinals.start", o.i64("start")?)?.unwrap_or(0);
        }
    }
    if kind == WorkloadKind::Deployment && spec.bool("paused")? == Some(true) {
        notes.add("is paused; its replicas are still planned for");
    }
    Ok(Workload {
        kind,
        namespace: m.namespace,
        name: m.name,
        owner: m.controller,
        desired,
        selector,
        template,
        claim_templates,
        ordinal_start,
    })
}

/// A Job's wanted pods: `parallelism` (default 1), capped by `completions - succeeded`; none
/// when suspended or finished.
fn job_desired(root: &At, spec: &At) -> FieldResult<i64> {
    if spec.bool("suspend")? == Some(true) {
        return Ok(0);
    }
    let status = root.obj("status")?;
    let mut succeeded = 0;
    if let Some(s) = &status {
        for c in s.list("conditions")? {
            let finished = matches!(c.str("type")?.as_deref(), Some("Complete" | "Failed"));
            if finished && c.str("status")?.as_deref() == Some("True") {
                return Ok(0);
            }
        }
        succeeded = s.i64("succeeded")?.unwrap_or(0).max(0);
    }
    let parallelism = spec.i64("parallelism")?.unwrap_or(1);
    if parallelism < 0 {
        return Err(spec.err_at("parallelism", format!("{parallelism} must not be negative")));
    }
    Ok(match spec.i64("completions")? {
        Some(completions) => parallelism.min((completions - succeeded).max(0)),
        // Without completions the Job is done once any pod succeeds.
        None if succeeded > 0 => 0,
        None => parallelism,
    })
}

impl Workload {
    /// `Kind namespace/name`, as notes name it.
    pub fn subject(&self) -> String {
        format!("{} {}/{}", self.kind.name(), self.namespace, self.name)
    }

    /// True for a ReplicaSet whose Deployment is in the input (the Deployment is expanded).
    pub fn managed_by(&self, index: &Existing) -> bool {
        self.kind == WorkloadKind::ReplicaSet
            && self.owner.as_ref().is_some_and(|(kind, name)| {
                kind == "Deployment"
                    && index
                        .deployments
                        .contains(&(self.namespace.clone(), name.clone()))
            })
    }

    /// The pods still to be created, each with its volume claims.
    pub fn expand(&self, index: &Existing) -> Vec<(Pod, Vec<VolumeClaim>)> {
        match self.kind {
            // Ordinals are stable identities: create exactly the ones that are missing.
            WorkloadKind::StatefulSet => (self.ordinal_start..self.ordinal_start + self.desired)
                .map(|i| format!("{}-{i}", self.name))
                .filter(|name| {
                    !index
                        .pod_names
                        .contains(&(self.namespace.clone(), name.clone()))
                })
                .map(|name| self.stateful_pod(name))
                .collect(),
            _ => (0..(self.desired - index.owned(self)).max(0))
                .map(|i| self.pod(format!("{}-dovetail-{i}", self.name)))
                .collect(),
        }
    }

    fn pod(&self, name: String) -> (Pod, Vec<VolumeClaim>) {
        let mut labels = self.template.labels.clone();
        if self.kind == WorkloadKind::Job {
            // Set by the Job controller; selectors (PDBs, spread constraints) may use them.
            labels.insert("job-name".to_string(), self.name.clone());
            labels.insert(
                "batch.kubernetes.io/job-name".to_string(),
                self.name.clone(),
            );
        }
        let pod = Pod {
            namespace: self.namespace.clone(),
            name,
            labels,
            annotations: self.template.annotations.clone(),
            scheduling: self.template.spec.scheduling.clone(),
            node_name: None,
            owner: Some((self.kind.name().to_string(), self.name.clone())),
            is_daemon: false,
            created_ms: None,
        };
        (pod, self.template.spec.claims.clone())
    }

    fn stateful_pod(&self, name: String) -> (Pod, Vec<VolumeClaim>) {
        let (mut pod, mut claims) = self.pod(name.clone());
        pod.labels.insert(
            "statefulset.kubernetes.io/pod-name".to_string(),
            name.clone(),
        );
        if let Some(index) = name.rsplit('-').next() {
            pod.labels.insert(
                "apps.kubernetes.io/pod-index".to_string(),
                index.to_string(),
            );
        }
        // The controller names each claim `<template>-<pod>` and overrides a pod volume of the
        // same name; a claim that does not exist yet is created with the template's class.
        claims.extend(
            self.claim_templates
                .iter()
                .map(|(tmpl, class)| VolumeClaim::FromTemplate {
                    claim: format!("{tmpl}-{name}"),
                    storage_class: class.clone(),
                }),
        );
        (pod, claims)
    }
}

/// The input's pods, indexed by the workload they belong to, so that expansion is linear in the
/// number of pods rather than pods × workloads.
#[derive(Debug, Default)]
pub(crate) struct Existing {
    /// (namespace, name) of every Deployment in the input.
    deployments: BTreeSet<(String, String)>,
    /// (namespace, name) of every pod in the input.
    pod_names: BTreeSet<(String, String)>,
    /// Pods per owning workload: (namespace, kind, name) -> count. A Deployment's count includes
    /// the pods of its ReplicaSets.
    owned: BTreeMap<(String, String, String), i64>,
}

impl Existing {
    pub fn new(pods: &[Pod], workloads: &[Workload]) -> Existing {
        let mut index = Existing::default();
        let mut rs_owner = BTreeMap::new();
        let mut selectors = BTreeMap::new();
        for w in workloads {
            let key = (w.namespace.clone(), w.name.clone());
            match w.kind {
                WorkloadKind::Deployment => {
                    index.deployments.insert(key.clone());
                    selectors.insert(key, &w.selector);
                }
                WorkloadKind::ReplicaSet => {
                    rs_owner.insert(key, w.owner.clone());
                }
                _ => {}
            }
        }
        for pod in pods {
            index
                .pod_names
                .insert((pod.namespace.clone(), pod.name.clone()));
            let Some((kind, owner)) = &pod.owner else {
                continue;
            };
            let ns = pod.namespace.clone();
            *index
                .owned
                .entry((ns.clone(), kind.clone(), owner.clone()))
                .or_insert(0) += 1;
            if kind != "ReplicaSet" {
                continue;
            }
            // A Deployment's pods belong to its ReplicaSets, named `<deployment>-<hash>`. With
            // the ReplicaSet in the input its owner reference says which Deployment; without it,
            // the name and the Deployment's selector must both agree.
            let deployment = match rs_owner.get(&(ns.clone(), owner.clone())) {
                Some(Some((k, d))) if k == "Deployment" => Some(d.clone()),
                Some(_) => None,
                None => owner
                    .rsplit_once('-')
                    .map(|(d, _)| d.to_string())
                    .filter(|d| {
                        selectors
                            .get(&(ns.clone(), d.clone()))
                            .is_some_and(|sel| sel.matches(&pod.labels))
                    }),
            };
            if let Some(d) = deployment {
                *index
                    .owned
                    .entry((ns, "Deployment".to_string(), d))
                    .or_insert(0) += 1;
            }
        }
        index
    }

    /// How many of the input's pods belong to `w`.
    fn owned(&self, w: &Workload) -> i64 {
        self.owned
            .get(&(
                w.namespace.clone(),
                w.kind.name().to_string(),
                w.name.clone(),
            ))
            .copied()
            .unwrap_or(0)
    }
}
