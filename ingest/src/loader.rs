//! From documents to [`Manifests`]: each object is read by its kind's parser, then the parts
//! that depend on other objects are resolved (workload expansion, volume zones, priority
//! classes, NodeClaims matched to Nodes).

use crate::capacity_blocks::{blocks_ending, capacity_blocks, CapacityBlock};
use crate::daemonset::{daemonset, ParsedDaemonSet};
use crate::error::{FieldError, ManifestError};
use crate::fields::At;
use crate::node::{attach_claims, node, nodeclaim, Claim};
use crate::nodeclass::nodeclass;
use crate::nodepool::nodepool;
use crate::notes::Notes;
use crate::overlay::overlay;
use crate::pdb::pdb;
use crate::pod::{pod, ParsedPod};
use crate::priority::Priorities;
use crate::rules::validate;
use crate::volumes::{pv, pvc, storage_class, VolumeIndex};
use crate::workloads::{workload, Existing, Workload, WorkloadKind};
use crate::yaml::{objects, Document, Object};
use crate::Manifests;
use dovetail_dataflow::model::{DaemonSet, Node};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Which apiVersions a kind is read from.
#[derive(Debug, Clone, Copy)]
enum Api {
    /// Any version of this API group (`""` is the core group); another group is a different
    /// kind that happens to share the name, and is skipped.
    Group(&'static str),
    /// Exactly this apiVersion; any other is an error (Karpenter's schemas change between
    /// versions, so reading another one would silently misread it).
    Exact(&'static str),
}

/// The kinds dovetail reads: (kind, api, namespaced).
const KINDS: &[(&str, Api, bool)] = &[
    ("Pod", Api::Group(""), true),
    ("Node", Api::Group(""), false),
    ("PersistentVolumeClaim", Api::Group(""), true),
    ("PersistentVolume", Api::Group(""), false),
    ("StorageClass", Api::Group("storage.k8s.io"), false),
    ("Deployment", Api::Group("apps"), true),
    ("ReplicaSet", Api::Group("apps"), true),
    ("StatefulSet", Api::Group("apps"), true),
    ("DaemonSet", Api::Group("apps"), true),
    ("Job", Api::Group("batch"), true),
    ("PodDisruptionBudget", Api::Group("policy"), true),
    ("PriorityClass", Api::Group("scheduling.k8s.io"), false),
    ("NodePool", Api::Exact("karpenter.sh/v1"), false),
    ("NodeClaim", Api::Exact("karpenter.sh/v1"), false),
    ("EC2NodeClass", Api::Exact("karpenter.k8s.aws/v1"), false),
    ("NodeOverlay", Api::Exact("karpenter.sh/v1alpha1"), false),
];

/// Everything read, before cross-object resolution.
#[derive(Default)]
pub(crate) struct Collected {
    pub pods: Vec<(ParsedPod, String)>,
    workloads: Vec<Workload>,
    daemonsets: Vec<ParsedDaemonSet>,
    nodes: Vec<Node>,
    claims: Vec<Claim>,
    pub volumes: VolumeIndex,
    pub priorities: Priorities,
    capacity_blocks: Vec<CapacityBlock>,
    /// Kind and object of everything read, with where it was read: the API server holds one
    /// object per kind, namespace and name.
    names: BTreeMap<(&'static str, String), String>,
    pub out: Manifests,
}

/// Where an object came from, for errors.
struct Ctx<'a> {
    file: &'a str,
    document: usize,
    kind: &'static str,
    object: String,
}

impl Ctx<'_> {
    fn error(&self, e: FieldError) -> ManifestError {
        ManifestError::Field {
            file: self.file.to_string(),
            document: self.document,
            kind: self.kind,
            object: self.object.clone(),
            field: e.field,
            reason: e.reason,
        }
    }
}

/// Reads every object of `docs` and resolves them into [`Manifests`].
pub(crate) fn assemble(docs: &[Document]) -> Result<Manifests, ManifestError> {
    let mut c = Collected::default();
    for doc in docs {
        for obj in objects(doc)? {
            read_object(&obj, &mut c)?;
        }
    }
    Ok(resolve(c))
}

/// Reads one object as a watch delivers it, without resolving it against others: what it
/// contributes, for [`crate::live`] to resolve.
pub(crate) fn read_one(source: &str, value: &Value) -> Result<Collected, ManifestError> {
    let mut c = Collected::default();
    read_object(
        &Object {
            file: source,
            document: 1,
            prefix: String::new(),
            value,
            implied: None,
        },
        &mut c,
    )?;
    Ok(c)
}

fn str_at<'v>(v: &'v Value, keys: &[&str]) -> Option<&'v str> {
    let mut cur = v;
    for k in keys {
        cur = cur.get(k)?;
    }
    cur.as_str()
}

fn read_object(obj: &Object, c: &mut Collected) -> Result<(), ManifestError> {
    let whereabouts = if obj.prefix.is_empty() {
        format!("{}: document {}", obj.file, obj.document)
    } else {
        format!("{}: document {}: {}", obj.file, obj.document, obj.prefix)
    };
    if !obj.value.is_object() {
        c.out
            .notes
            .push(format!("{whereabouts}: skipped (not an object)"));
        return Ok(());
    }
    let implied = obj.implied.as_ref();
    let kind = str_at(obj.value, &["kind"]).or(implied.map(|(k, _)| k.as_str()));
    let api_version = str_at(obj.value, &["apiVersion"]).or(implied.map(|(_, a)| a.as_str()));
    let Some(kind) = kind.filter(|k| !k.is_empty()) else {
        c.out.notes.push(format!(
            "{whereabouts}: skipped (no kind; not a Kubernetes object)"
        ));
        return Ok(());
    };
    let name = str_at(obj.value, &["metadata", "name"]).unwrap_or("<unnamed>");
    let namespace = str_at(obj.value, &["metadata", "namespace"]).filter(|n| !n.is_empty());
    let Some(&(known_kind, api, namespaced)) = KINDS.iter().find(|(k, _, _)| *k == kind) else {
        let object = match namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name.to_string(),
        };
        c.out.notes.push(format!(
            "skipped {kind} {object} (kind not used by dovetail)"
        ));
        return Ok(());
    };
    let object = if namespaced {
        format!("{}/{name}", namespace.unwrap_or("default"))
    } else {
        name.to_string()
    };
    let ctx = Ctx {
        file: obj.file,
        document: obj.document,
        kind: known_kind,
        object,
    };
    let root = At::root(obj.value, &obj.prefix);
    match api {
        Api::Exact(expected) => {
            if api_version != Some(expected) {
                let reason = match api_version {
                    Some(v) => format!("{v} is not supported (dovetail reads {kind} {expected})"),
                    None => format!("required field is missing (expected {expected})"),
                };
                return Err(ctx.error(root.err_at("apiVersion", reason)));
            }
        }
        Api::Group(group) => {
            let actual = api_version.map(|v| v.split_once('/').map_or("", |(g, _)| g));
            if actual.is_some_and(|g| g != group) {
                c.out.notes.push(format!(
                    "skipped {kind} {} (apiVersion {} is not the Kubernetes {kind}; kind not used by dovetail)",
                    ctx.object,
                    api_version.unwrap_or_default()
                ));
                return Ok(());
            }
        }
    }
    let mut notes = Notes::new(format!("{} {}", ctx.kind, ctx.object));
    if str_at(obj.value, &["metadata", "name"]).is_some() {
        let key = (known_kind, ctx.object.clone());
        if let Some(first) = c.names.get(&key) {
            let field = match obj.prefix.as_str() {
                "" => "metadata.name".to_string(),
                prefix => format!("{prefix}.metadata.name"),
            };
            return Err(ctx.error(FieldError::new(
                field,
                format!(
                    "another {known_kind} {} was read at {first}; names are unique per kind",
                    ctx.object
                ),
            )));
        }
        c.names.insert(key, whereabouts.clone());
    }
    // The readers first, for their messages about types and units; then what they would take.
    read_kind(kind, &root, c, &mut notes).map_err(|e| ctx.error(e))?;
    validate(known_kind, &root, &mut notes).map_err(|e| ctx.error(e))?;
    c.out.notes.extend(notes.into_vec());
    Ok(())
}

fn read_kind(
    kind: &str,
    root: &At,
    c: &mut Collected,
    notes: &mut Notes,
) -> Result<(), FieldError> {
    let meta_name = || -> Result<(String, String), FieldError> {
        let m = root.req_obj("metadata")?;
        let name = m.req_str("name")?;
        let ns = m
            .str("namespace")?
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".to_string());
        Ok((ns, name))
    };
    match kind {
        "Pod" => {
            if let Some(p) = pod(root, notes)? {
                let subject = format!("Pod {}", p.pod.key());
                c.pods.push((p, subject));
            }
        }
        "Node" => c.nodes.push(node(root)?),
        "NodeClaim" => c.claims.push(nodeclaim(root)?),
        "PersistentVolumeClaim" => {
            let (ns, name) = meta_name()?;
            c.volumes.add_pvc(pvc(root, ns, name)?);
        }
        "PersistentVolume" => {
            let (_, name) = meta_name()?;
            c.volumes.add_pv(pv(root, name)?);
        }
        "StorageClass" => {
            let (_, name) = meta_name()?;
            c.volumes.add_class(storage_class(root, name)?);
        }
        "PriorityClass" => {
            let (_, name) = meta_name()?;
            c.priorities.add(root, name)?;
        }
        "Deployment" => c
            .workloads
            .push(workload(WorkloadKind::Deployment, root, notes)?),
        "ReplicaSet" => c
            .workloads
            .push(workload(WorkloadKind::ReplicaSet, root, notes)?),
        "StatefulSet" => c
            .workloads
            .push(workload(WorkloadKind::StatefulSet, root, notes)?),
        "Job" => c.workloads.push(workload(WorkloadKind::Job, root, notes)?),
        "DaemonSet" => c.daemonsets.push(daemonset(root, notes)?),
        "PodDisruptionBudget" => c.out.pdbs.extend(pdb(root, notes)?),
        "NodePool" => c.out.nodepools.push(nodepool(root, notes)?),
        "EC2NodeClass" => {
            c.out.nodeclasses.push(nodeclass(root, notes)?);
            c.capacity_blocks.extend(capacity_blocks(root)?);
        }
        "NodeOverlay" => c.out.overlays.push(overlay(root)?),
        // KINDS and this match list the same kinds; a kind in one only is a bug, not input.
        other => notes.add(format!("kind {other} is listed but has no reader")),
    }
    Ok(())
}

/// Resolves what needs the whole input: priorities and volume zones of pods (read and
/// expanded), workload expansion, DaemonSets, and NodeClaims against Nodes.
fn resolve(c: Collected) -> Manifests {
    let Collected {
        pods,
        workloads,
        daemonsets,
        mut nodes,
        claims,
        volumes,
        priorities,
        capacity_blocks,
        names: _,
        mut out,
    } = c;

    for (parsed, subject) in pods {
        let mut notes = Notes::new(subject);
        let mut pod = parsed.pod;
        pod.scheduling.priority = priorities.resolve(&parsed.spec, &mut notes);
        pod.scheduling.volume_zones =
            volumes.pod_zones(&pod.namespace, &pod.name, &parsed.spec.claims, &mut notes);
        out.pods.push(pod);
        out.notes.extend(notes.into_vec());
    }

    let existing = Existing::new(&out.pods, &workloads);
    for w in &workloads {
        if w.managed_by(&existing) {
            continue;
        }
        let mut notes = Notes::new(w.subject());
        let priority = priorities.resolve(&w.template.spec, &mut notes);
        for (mut pod, claims) in w.expand(&existing) {
            pod.scheduling.priority = priority;
            pod.scheduling.volume_zones =
                volumes.pod_zones(&pod.namespace, &pod.name, &claims, &mut notes);
            out.pods.push(pod);
        }
        out.notes.extend(notes.into_vec());
    }

    for ds in daemonsets {
        let mut notes = Notes::new(format!("DaemonSet {}/{}", ds.namespace, ds.name));
        let mut scheduling = ds.template.spec.scheduling.clone();
        scheduling.priority = priorities.resolve(&ds.template.spec, &mut notes);
        scheduling.volume_zones = volumes.pod_zones(
            &ds.namespace,
            &format!("{}-dovetail", ds.name),
            &ds.template.spec.claims,
            &mut notes,
        );
        out.daemonsets.push(DaemonSet {
            namespace: ds.namespace,
            name: ds.name,
            scheduling,
        });
        out.notes.extend(notes.into_vec());
    }

    out.notes.extend(attach_claims(&mut nodes, claims));
    out.interruptions = blocks_ending(&capacity_blocks, &nodes);
    out.nodes = nodes;

    // Expanded pods of one workload repeat the same note; keep the first of each.
    let mut seen = BTreeSet::new();
    out.notes.retain(|n| seen.insert(n.clone()));
    out
}
