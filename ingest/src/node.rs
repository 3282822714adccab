//! Nodes and Karpenter NodeClaims: existing capacity, and capacity on its way.

use crate::error::FieldResult;
use crate::fields::At;
use crate::meta::meta;
use crate::resources::to_resources;
use crate::selectors::requirement_list;
use crate::taints::taints;
use crate::time::parse_rfc3339_ms;
use dovetail_dataflow::model::duration::parse_duration;
use dovetail_dataflow::model::labels::{ENCLAVES, INITIALIZED, SECURITY_GROUP_IDS, SUBNET_ID};
use dovetail_dataflow::model::{LaunchedWith, Node, Operator};
use std::collections::BTreeMap;

/// Reads a `v1` Node. Allocatable falls back to capacity, which is what a node reports before
/// the kubelet subtracts its reservations.
pub(crate) fn node(root: &At) -> FieldResult<Node> {
    let m = meta(root)?;
    let spec = root.obj("spec")?;
    let (taint_list, unschedulable, provider_id) = match &spec {
        Some(s) => (
            taints(s, "taints")?,
            s.bool("unschedulable")?.unwrap_or(false),
            s.str("providerID")?.filter(|p| !p.is_empty()),
        ),
        None => (Vec::new(), false, None),
    };
    let status = root.obj("status")?;
    let allocatable = match &status {
        Some(status) => {
            let alloc = status.quantity_map("allocatable")?;
            if alloc.is_empty() {
                status.quantity_map("capacity")?
            } else {
                alloc
            }
        }
        None => Default::default(),
    };
    let capacity = match &status {
        Some(status) => status.quantity_map("capacity")?,
        None => Default::default(),
    };
    let not_ready = match &status {
        Some(s) => !is_ready(s)?,
        None => false,
    };
    Ok(Node {
        name: m.name,
        nodeclaim: None,
        labels: m.labels,
        annotations: m.annotations,
        taints: taint_list,
        allocatable: to_resources(&allocatable),
        capacity: to_resources(&capacity),
        in_flight: false,
        unschedulable: unschedulable || m.deleting,
        provider_id,
        created_ms: m.created_ms,
        deleting: m.deleting,
        not_ready,
        ..Node::default()
    })
}

/// Whether `status.conditions` holds condition `kind`, and if so whether it is `True`.
fn condition(status: &At, kind: &str) -> FieldResult<Option<bool>> {
    for c in &status.list("conditions")? {
        if c.req_str("type")? == kind {
            return Ok(Some(c.str("status")?.as_deref() == Some("True")));
        }
    }
    Ok(None)
}

/// Whether a Node's `status.conditions` say it is Ready. A node that reports no conditions at
/// all counts as ready, so hand-written manifests need not spell them out; once conditions are
/// reported, a missing `Ready` one is not ready, as Karpenter reads it (the kubelet always posts
/// `Ready` with the others).
fn is_ready(status: &At) -> FieldResult<bool> {
    let conditions = status.list("conditions")?;
    if conditions.is_empty() {
        return Ok(true);
    }
    for c in &conditions {
        if c.req_str("type")? == "Ready" {
            return Ok(c.str("status")?.as_deref() == Some("True"));
        }
    }
    Ok(false)
}

/// An RFC 3339 timestamp at `key`, in ms since the epoch.
fn timestamp(at: &At, key: &str) -> FieldResult<Option<i64>> {
    match at.get(key)? {
        Some(ts) => {
            let text = ts.as_string()?;
            parse_rfc3339_ms(&text).map(Some).ok_or_else(|| {
                ts.err(format!(
                    "{text:?} is not an RFC 3339 timestamp (e.g. 2024-05-01T12:00:00Z)"
                ))
            })
        }
        None => Ok(None),
    }
}

/// What a NodeClaim's instance was launched with: `status.imageID`, and the subnet, security
/// groups and Nitro Enclaves setting dovetail's actuator records in annotations. Empty values
/// are unknown, never drift.
fn launched_with(root: &At, status: Option<&At>) -> FieldResult<LaunchedWith> {
    let image_id = match status {
        Some(s) => s.str("imageID")?.filter(|i| !i.is_empty()),
        None => None,
    };
    let Some(annotations) = root.dig(&["metadata", "annotations"])? else {
        return Ok(LaunchedWith {
            image_id,
            ..LaunchedWith::default()
        });
    };
    let subnet_id = annotations
        .str(SUBNET_ID)?
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let security_group_ids = annotations
        .str(SECURITY_GROUP_IDS)?
        .map(|groups| {
            groups
                .split(',')
                .map(str::trim)
                .filter(|g| !g.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let enclaves = match annotations.get(ENCLAVES)? {
        Some(v) => match v.as_string()?.trim() {
            "true" => Some(true),
            "false" => Some(false),
            other => return Err(v.err(format!("expected \"true\" or \"false\", found {other:?}"))),
        },
        None => None,
    };
    Ok(LaunchedWith {
        image_id,
        subnet_id,
        security_group_ids,
        enclaves,
    })
}

/// A `karpenter.sh/v1` NodeClaim, read.
#[derive(Debug, Clone)]
pub(crate) struct Claim {
    pub name: String,
    /// `status.nodeName`, once the node registered.
    pub node_name: Option<String>,
    pub provider_id: Option<String>,
    pub annotations: BTreeMap<String, String>,
    /// `metadata.deletionTimestamp` is set: its node is being disrupted.
    pub deleting: bool,
    pub launched: LaunchedWith,
    /// `status.lastPodEventTime` in ms.
    pub last_pod_event_ms: Option<i64>,
    /// `spec.expireAfter`, checked to be a duration or `Never`.
    pub expire_after: Option<String>,
    /// `metadata.creationTimestamp` in ms: expiry counts from it.
    pub created_ms: Option<i64>,
    /// False when `status.conditions` has `Initialized` other than `True` (Karpenter sets it
    /// with the Node's `karpenter.sh/initialized` label); a claim that reports no such
    /// condition counts as initialized, so hand-written manifests need not spell it out.
    pub initialized: bool,
    /// The claim as an in-flight node; `None` when it reports no capacity yet (not launched).
    pub node: Option<Node>,
}

/// Reads a NodeClaim. The in-flight node takes the claim's labels plus every requirement that
/// pins a single value (`In [x]`), since those become the node's labels when it registers.
/// Startup taints are left out: they do not block scheduling.
pub(crate) fn nodeclaim(root: &At) -> FieldResult<Claim> {
    let m = meta(root)?;
    let spec = root.req_obj("spec")?;
    let mut labels = m.labels.clone();
    for (key, req) in requirement_list(&spec, "requirements", true)?.0 {
        if req.operator() == Operator::In && req.values.len() == 1 {
            if let Some(v) = req.values.into_iter().next() {
                labels.entry(key).or_insert(v);
            }
        }
    }
    let status = root.obj("status")?;
    let (node_name, provider_id, allocatable, capacity) = match &status {
        Some(s) => {
            let capacity = s.quantity_map("capacity")?;
            let alloc = s.quantity_map("allocatable")?;
            let alloc = if alloc.is_empty() {
                capacity.clone()
            } else {
                alloc
            };
            (
                s.str("nodeName")?.filter(|n| !n.is_empty()),
                s.str("providerID")?.filter(|p| !p.is_empty()),
                alloc,
                capacity,
            )
        }
        None => (None, None, Default::default(), Default::default()),
    };
    let launched = launched_with(root, status.as_ref())?;
    let initialized = match &status {
        Some(s) => condition(s, "Initialized")?.is_none_or(|c| c),
        None => true,
    };
    let expire_after = spec.str("expireAfter")?;
    if let Some(v) = &expire_after {
        if let Err(why) = parse_duration(v) {
            return Err(spec.err_at("expireAfter", why.to_string()));
        }
    }
    let last_pod_event_ms = match &status {
        Some(s) => timestamp(s, "lastPodEventTime")?,
        None => None,
    };
    let node = (!allocatable.is_empty()).then(|| Node {
        name: node_name.clone().unwrap_or_else(|| m.name.clone()),
        nodeclaim: Some(m.name.clone()),
        labels,
        annotations: m.annotations.clone(),
        taints: Vec::new(),
        allocatable: to_resources(&allocatable),
        capacity: to_resources(&capacity),
        in_flight: true,
        unschedulable: m.deleting,
        provider_id: provider_id.clone(),
        created_ms: m.created_ms,
        nodeclaim_created_ms: m.created_ms,
        deleting: m.deleting,
        launched: launched.clone(),
        last_pod_event_ms,
        expire_after: expire_after.clone(),
        ..Node::default()
    });
    let node = match node {
        Some(mut n) => {
            n.taints = taints(&spec, "taints")?;
            Some(n)
        }
        None => None,
    };
    Ok(Claim {
        name: m.name,
        initialized,
        node_name,
        provider_id,
        annotations: m.annotations,
        deleting: m.deleting,
        launched,
        last_pod_event_ms,
        expire_after,
        created_ms: m.created_ms,
        node,
    })
}

/// Matches claims to nodes. A claim whose node is in the input names itself on that node and
/// adds what only the claim knows: its annotations (the node's own winning), what it was
/// launched with, its last pod event, its creation (expiry counts from it), and its deletion (deleting the claim deletes the node).
/// The others become in-flight nodes, appended after the real ones. Returns notes about claims
/// that could not be used.
pub(crate) fn attach_claims(nodes: &mut Vec<Node>, claims: Vec<Claim>) -> Vec<String> {
    let mut notes = Vec::new();
    let mut in_flight = Vec::new();
    let mut by_name = BTreeMap::new();
    let mut by_provider = BTreeMap::new();
    for (i, n) in nodes.iter().enumerate() {
        by_name.entry(n.name.clone()).or_insert(i);
        if let Some(p) = &n.provider_id {
            by_provider.entry(p.clone()).or_insert(i);
        }
    }
    for claim in claims {
        let index = claim
            .node_name
            .as_ref()
            .and_then(|n| by_name.get(n))
            .or_else(|| claim.provider_id.as_ref().and_then(|p| by_provider.get(p)));
        let found = index.and_then(|i| nodes.get_mut(*i));
        match (found, claim.node) {
            (Some(node), _) => {
                node.nodeclaim = Some(claim.name.clone());
                for (k, v) in claim.annotations {
                    node.annotations.entry(k).or_insert(v);
                }
                node.launched = claim.launched;
                node.last_pod_event_ms = claim.last_pod_event_ms;
                node.expire_after = claim.expire_after;
                node.nodeclaim_created_ms = claim.created_ms;
                // Joined but not initialized: still in flight to disruption, as Karpenter's
                // `StateNode.Initialized` reads it (the Node's label decides there).
                if !claim.initialized
                    && node.labels.get(INITIALIZED).map(String::as_str) != Some("true")
                {
                    node.in_flight = true;
                }
                if claim.deleting {
                    node.deleting = true;
                    node.unschedulable = true;
                }
            }
            (None, Some(node)) => in_flight.push(node),
            (None, None) => notes.push(format!(
                "NodeClaim {}: skipped (no status.allocatable or status.capacity yet, so its size is not known)",
                claim.name
            )),
        }
    }
    nodes.extend(in_flight);
    notes
}
