//! What the controller writes to the cluster, through the API server: NodeClaims (created for a
//! launch before CreateFleet, their status once the instance exists, deleted), Node taints,
//! cordons and annotations, and evictions through the Eviction API. Each write is submitted and
//! returns at once (the `Cluster` interface's contract); a refusal or failure comes back from
//! [`ClusterWriter::poll_replies`] naming the object, and nothing is retried silently.

use crate::kinds::{WatchedKind, NODECLAIM};
use crate::nodeclaim::{
    kubelet_node, nodeclaim_annotations, nodeclaim_object, nodeclaim_status, ConditionTimes,
    NodeClaimTemplate, TERMINATION_FINALIZER,
};
use crossbeam_channel::{Receiver, Sender};
use dovetail_dataflow::backend::{ClusterEvent, ClusterReply, NodeClaim};
use dovetail_dataflow::model::labels::UNREGISTERED_TAINT;
use dovetail_dataflow::model::{Node as NodeRecord, Taint};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{
    Api, DeleteParams, DynamicObject, EvictParams, ListParams, Patch, PatchParams, PostParams,
};
use kube::Client;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use tokio::sync::oneshot;

/// Why a NodeClaim could not be created.
#[derive(Debug, thiserror::Error)]
pub enum NodeClaimCreateError {
    #[error("the NodeClaim object is not valid: {0}")]
    Object(serde_json::Error),
    #[error("the API server refused it: {0}")]
    Api(kube::Error),
}

/// How many times a read-modify-write of a Node is tried when its resourceVersion moved on.
const CONFLICT_RETRIES: usize = 5;

/// Submits writes on a tokio runtime; their failures arrive at [`ClusterWriter::poll_replies`].
pub struct ClusterWriter {
    client: Client,
    /// For evictions: without kube-rs's retry of 429, which is a PodDisruptionBudget's refusal
    /// to report (the drain waits and asks again on its own schedule), not throttling.
    evict_client: Client,
    runtime: tokio::runtime::Handle,
    sender: Sender<ClusterReply>,
    replies: Receiver<ClusterReply>,
    /// The last write submitted for each object: the next one waits for it.
    order: Mutex<HashMap<String, oneshot::Receiver<()>>>,
    dry_run: bool,
    withheld: std::sync::atomic::AtomicU64,
}

/// How many objects' last writes are remembered before finished ones are forgotten.
const ORDER_PRUNE_AT: usize = 4096;

fn failed(object: String, e: impl std::fmt::Display) -> ClusterReply {
    ClusterReply::Failed {
        object,
        error: e.to_string(),
    }
}

impl ClusterWriter {
    /// Clients for the API server `config` names; their connections run on `runtime`.
    pub fn new(
        config: kube::Config,
        runtime: tokio::runtime::Handle,
    ) -> Result<ClusterWriter, kube::Error> {
        let _entered = runtime.enter();
        let client = Client::try_from(config.clone())?;
        let mut no_retry = config;
        no_retry.default_retry = false;
        let evict_client = Client::try_from(no_retry)?;
        let (sender, replies) = crossbeam_channel::unbounded();
        Ok(ClusterWriter {
            client,
            evict_client,
            runtime,
            sender,
            replies,
            order: Mutex::new(HashMap::new()),
            dry_run: false,
            withheld: Default::default(),
        })
    }

    /// From now on writes are logged and counted, not sent (`dovetail run --dry-run`).
    pub fn dry_run(mut self) -> ClusterWriter {
        self.dry_run = true;
        self
    }

    /// Writes not sent because of `--dry-run`.
    pub fn writes_withheld(&self) -> u64 {
        self.withheld.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The client the writes go through (the watches share it).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Runs `write` on the runtime after every write submitted before it for the same
    /// `object` (`Kind/name`; empty: no order), so a NodeClaim's status never races ahead of
    /// its creation. Writes to different objects run concurrently.
    fn submit<F>(&self, object: String, write: F)
    where
        F: std::future::Future<Output = Option<ClusterReply>> + Send + 'static,
    {
        if self.dry_run {
            self.withheld
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::info!(object = %object, "dry run: write not sent");
            return;
        }
        let sender = self.sender.clone();
        let (done, finished) = oneshot::channel::<()>();
        let previous = if object.is_empty() {
            None
        } else {
            let mut order = self.order.lock().unwrap_or_else(|p| p.into_inner());
            if order.len() > ORDER_PRUNE_AT {
                // Writes that have finished hold nothing back any more.
                order.retain(|_, rx| {
                    matches!(rx.try_recv(), Err(oneshot::error::TryRecvError::Empty))
                });
            }
            order.insert(object, finished)
        };
        self.runtime.spawn(async move {
            if let Some(previous) = previous {
                // A dropped sender (a write that panicked) releases the next one too.
                let _ = previous.await;
            }
            if let Some(reply) = write.await {
                let _ = sender.send(reply);
            }
            let _ = done.send(());
        });
    }

    fn nodeclaims(&self) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), &NODECLAIM.api_resource())
    }

    /// Creates the NodeClaim of a launch (the durable intent), then writes its status if it has
    /// one already.
    pub fn create_nodeclaim(&self, claim: &NodeClaim, template: NodeClaimTemplate<'_>) {
        let api = self.nodeclaims();
        let object = nodeclaim_object(claim, template);
        let status = nodeclaim_status(claim, &ConditionTimes::default(), &now_rfc3339());
        let name = claim.name.clone();
        self.submit(format!("NodeClaim/{}", claim.name), async move {
            let what = format!("NodeClaim/{name}");
            let object: DynamicObject = match serde_json::from_value(object) {
                Ok(o) => o,
                Err(e) => return Some(failed(what, e)),
            };
            if let Err(e) = api.create(&PostParams::default(), &object).await {
                return Some(failed(what, e));
            }
            match status {
                Some(s) => write_status(&api, &name, s)
                    .await
                    .err()
                    .map(|e| failed(what, e)),
                None => None,
            }
        });
    }

    /// Creates the NodeClaim of a launch and waits for the API server's answer: the launch's
    /// CreateFleet goes out only once its NodeClaim exists, so an instance is never launched
    /// for a NodeClaim nobody will find after a restart. In a dry run nothing is sent.
    pub fn create_nodeclaim_now(
        &self,
        claim: &NodeClaim,
        template: NodeClaimTemplate<'_>,
    ) -> Result<(), NodeClaimCreateError> {
        if self.dry_run {
            self.withheld
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::info!(nodeclaim = %claim.name, "dry run: NodeClaim not created");
            return Ok(());
        }
        let api = self.nodeclaims();
        let object: DynamicObject = serde_json::from_value(nodeclaim_object(claim, template))
            .map_err(NodeClaimCreateError::Object)?;
        self.runtime
            .block_on(async move { api.create(&PostParams::default(), &object).await })
            .map(|_| ())
            .map_err(NodeClaimCreateError::Api)?;
        if claim.status.is_some() {
            self.update_nodeclaim(claim, &ConditionTimes::default());
        }
        Ok(())
    }

    /// Writes a NodeClaim's annotations (what was recorded at launch) and its status
    /// (launched: provider id, capacity; registered; initialised).
    pub fn update_nodeclaim(&self, claim: &NodeClaim, times: &ConditionTimes) {
        let Some(status) = nodeclaim_status(claim, times, &now_rfc3339()) else {
            return;
        };
        let annotations = nodeclaim_annotations(claim);
        let api = self.nodeclaims();
        let name = claim.name.clone();
        self.submit(format!("NodeClaim/{name}"), async move {
            let what = format!("NodeClaim/{name}");
            let patch = json!({"metadata": {"annotations": annotations}});
            if let Err(e) = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                return Some(failed(what, e));
            }
            write_status(&api, &name, status)
                .await
                .err()
                .map(|e| failed(what, e))
        });
    }

    /// Deletes a NodeClaim whose instance is gone (or was never launched): the termination
    /// finalizer is removed, so it goes at once.
    pub fn delete_nodeclaim(&self, name: &str) {
        let api = self.nodeclaims();
        let name = name.to_string();
        self.submit(format!("NodeClaim/{name}"), async move {
            let what = format!("NodeClaim/{name}");
            let unfinalize = json!({"metadata": {"finalizers": null}});
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(unfinalize))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_not_found() => return None,
                Err(e) => return Some(failed(what, e)),
            }
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => None,
                Err(kube::Error::Api(s)) if s.is_not_found() => None,
                Err(e) => Some(failed(what, e)),
            }
        });
    }

    /// Writes a NodePool's status (see [`crate::nodeclaim::nodepool_status`]).
    pub fn nodepool_status(&self, name: &str, status: Value) {
        self.status_of(&crate::kinds::NODEPOOL, name, status);
    }

    /// Writes an EC2NodeClass's status (a merge patch of the status subresource).
    pub fn nodeclass_status(&self, name: &str, status: Value) {
        self.status_of(&crate::kinds::EC2NODECLASS, name, status);
    }

    fn status_of(&self, kind: &WatchedKind, name: &str, status: Value) {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &kind.api_resource());
        let what = format!("{}/{name}", kind.kind);
        let name = name.to_string();
        self.submit(what.clone(), async move {
            write_status(&api, &name, status)
                .await
                .err()
                .map(|e| failed(what, e))
        });
    }

    /// Every NodeClaim on the API server, as objects (read back at start and on a take-over).
    pub fn list_nodeclaims(&self) -> Result<Vec<Value>, kube::Error> {
        let api = self.nodeclaims();
        let list = self
            .runtime
            .block_on(async move { api.list(&ListParams::default()).await })?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|o| {
                let mut v = serde_json::to_value(o).ok()?;
                v["apiVersion"] = Value::from(NODECLAIM.api_version());
                v["kind"] = Value::from(NODECLAIM.kind);
                Some(v)
            })
            .collect())
    }

    /// Karpenter's registration of a joined Node: the NodeClaim's labels and taints synced onto
    /// it, the termination finalizer added, `karpenter.sh/unregistered` removed.
    pub fn register_node(&self, node: &str, labels: BTreeMap<String, String>, taints: Vec<Taint>) {
        let api: Api<Node> = Api::all(self.client.clone());
        let node = node.to_string();
        self.submit(format!("Node/{node}"), async move {
            let taints: Vec<k8s_openapi::api::core::v1::Taint> =
                taints.iter().map(api_taint).collect();
            modify_node(&api, &node, move |n| {
                let meta = &mut n.metadata;
                let have = meta.labels.get_or_insert_with(Default::default);
                for (k, v) in &labels {
                    have.insert(k.clone(), v.clone());
                }
                let finalizers = meta.finalizers.get_or_insert_with(Vec::new);
                if !finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
                    finalizers.push(TERMINATION_FINALIZER.to_string());
                }
                let spec_taints = n
                    .spec
                    .get_or_insert_with(Default::default)
                    .taints
                    .get_or_insert_with(Vec::new);
                spec_taints.retain(|t| t.key != UNREGISTERED_TAINT);
                for t in &taints {
                    if !spec_taints
                        .iter()
                        .any(|x| x.key == t.key && x.effect == t.effect)
                    {
                        spec_taints.push(t.clone());
                    }
                }
                true
            })
            .await
            .err()
            .map(|e| failed(format!("Node/{node}"), e))
        });
    }

    /// Deletes a Node (its finalizer holds it until the instance is gone).
    pub fn delete_node(&self, node: &str) {
        let api: Api<Node> = Api::all(self.client.clone());
        let node = node.to_string();
        self.submit(format!("Node/{node}"), async move {
            match api.delete(&node, &DeleteParams::default()).await {
                Ok(_) => None,
                Err(kube::Error::Api(s)) if s.is_not_found() => None,
                Err(e) => Some(failed(format!("Node/{node}"), e)),
            }
        });
    }

    /// The instance of a Node is gone: the termination finalizer comes off and the Node is
    /// deleted (if nobody has yet).
    pub fn remove_node(&self, node: &str) {
        let api: Api<Node> = Api::all(self.client.clone());
        let node = node.to_string();
        self.submit(format!("Node/{node}"), async move {
            let what = format!("Node/{node}");
            let unfinalized = modify_node(&api, &node, |n| {
                let Some(f) = n.metadata.finalizers.as_mut() else {
                    return false;
                };
                let before = f.len();
                f.retain(|x| x != TERMINATION_FINALIZER);
                f.len() != before
            })
            .await;
            match unfinalized {
                Ok(()) => {}
                Err(kube::Error::Api(s)) if s.is_not_found() => return None,
                Err(e) => return Some(failed(what, e)),
            }
            match api.delete(&node, &DeleteParams::default()).await {
                Ok(_) => None,
                Err(kube::Error::Api(s)) if s.is_not_found() => None,
                Err(e) => Some(failed(what, e)),
            }
        });
    }

    /// The simulated cloud's kubelet registers the Node of a launched NodeClaim.
    pub fn kubelet_register(&self, node: &NodeRecord, startup_taints: &[Taint]) {
        let api: Api<Node> = Api::all(self.client.clone());
        let object = kubelet_node(node, startup_taints, &now_rfc3339());
        let name = node.name.clone();
        self.submit(format!("Node/{name}"), async move {
            let what = format!("Node/{name}");
            let node: Node = match serde_json::from_value(object) {
                Ok(n) => n,
                Err(e) => return Some(failed(what, e)),
            };
            match api.create(&PostParams::default(), &node).await {
                Ok(_) => None,
                Err(kube::Error::Api(s)) if s.code == 409 => None,
                Err(e) => Some(failed(what, e)),
            }
        });
    }

    /// The simulated node is initialised: `Ready=True`, and its startup taints removed (as the
    /// agent that owns them would).
    pub fn kubelet_ready(&self, node: &str, startup_taints: &[Taint]) {
        let api: Api<Node> = Api::all(self.client.clone());
        let node = node.to_string();
        let keys: Vec<String> = startup_taints.iter().map(|t| t.key.clone()).collect();
        self.submit(format!("Node/{node}"), async move {
            let what = format!("Node/{node}");
            let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True",
                "reason": "KubeletReady", "lastTransitionTime": now_rfc3339()}]}});
            if let Err(e) = api
                .patch_status(&node, &PatchParams::default(), &Patch::Merge(ready))
                .await
            {
                return Some(failed(what, e));
            }
            modify_node(&api, &node, move |n| {
                let Some(taints) = n.spec.as_mut().and_then(|s| s.taints.as_mut()) else {
                    return false;
                };
                let before = taints.len();
                taints.retain(|t| !keys.contains(&t.key));
                taints.len() != before
            })
            .await
            .err()
            .map(|e| failed(what, e))
        });
    }

    /// Records a Kubernetes Event about `event.object` (`Node/NAME`, `NodeClaim/NAME`,
    /// `Pod/NS/NAME`), in the object's namespace (`default` for cluster-scoped ones).
    pub fn record_event(&self, event: &ClusterEvent, now_ms: i64) {
        let mut parts = event.object.splitn(3, '/');
        let kind = parts.next().unwrap_or_default().to_string();
        let (namespace, name) = match (parts.next(), parts.next()) {
            (Some(ns), Some(name)) => (ns.to_string(), name.to_string()),
            (Some(name), None) => ("default".to_string(), name.to_string()),
            _ => return,
        };
        // The kind's own apiVersion (NodeClaims are not a watched kind, Events name them too).
        let watched = crate::kinds::WATCHED
            .iter()
            .chain([&NODECLAIM])
            .find(|k| k.kind == kind);
        let api_version = watched.map_or_else(|| "v1".to_string(), WatchedKind::api_version);
        let time = dovetail_ingest::format_rfc3339_ms(now_ms);
        let mut involved = json!({"apiVersion": api_version, "kind": kind, "name": name});
        if watched.is_some_and(|k| k.namespaced) {
            involved["namespace"] = Value::from(namespace.clone());
        }
        let object = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": format!("{name}.{now_ms:x}"), "namespace": namespace},
            "involvedObject": involved,
            "reason": event.reason,
            "message": event.message,
            // As Karpenter's: only failures warn (DisruptionBlocked is Normal).
            "type": if event.reason.starts_with("Failed") { "Warning" } else { "Normal" },
            "source": {"component": "dovetail"},
            "reportingComponent": "dovetail",
            "firstTimestamp": time,
            "lastTimestamp": time,
            "count": 1,
        });
        let api: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(self.client.clone(), &namespace);
        let what = event.object.clone();
        self.submit(String::new(), async move {
            let e: k8s_openapi::api::core::v1::Event = match serde_json::from_value(object) {
                Ok(e) => e,
                Err(e) => return Some(failed(what, e)),
            };
            match api.create(&PostParams::default(), &e).await {
                Ok(_) => None,
                Err(kube::Error::Api(s)) if s.code == 409 => None,
                Err(e) => Some(failed(format!("Event for {what}"), e)),
            }
        });
    }

    /// Adds a taint to a Node (once), as a read-modify-write guarded by its resourceVersion.
    pub fn taint_node(&self, node: &str, taint: Taint) {
        let api: Api<Node> = Api::all(self.client.clone());
        let node = node.to_string();
        self.submit(format!("Node/{node}"), async move {
            let t = api_taint(&taint);
            modify_node(&api, &node, move |n| {
                let taints = n
                    .spec
                    .get_or_insert_with(Default::default)
                    .taints
                    .get_or_insert_with(Vec::new);
                if taints
                    .iter()
                    .any(|x| x.key == t.key && x.effect == t.effect)
                {
                    return false;
                }
                taints.push(t.clone());
                true
            })
            .await
            .err()
            .map(|e| failed(format!("Node/{node}"), e))
        });
    }

    /// Removes every taint with `key` from a Node.
    pub fn untaint_node(&self, node: &str, key: &str) {
        let api: Api<Node> = Api::all(self.client.clone());
        let (node, key) = (node.to_string(), key.to_string());
        self.submit(format!("Node/{node}"), async move {
            modify_node(&api, &node, move |n| {
                let Some(taints) = n.spec.as_mut().and_then(|s| s.taints.as_mut()) else {
                    return false;
                };
                let before = taints.len();
                taints.retain(|t| t.key != key);
                taints.len() != before
            })
            .await
            .err()
            .map(|e| failed(format!("Node/{node}"), e))
        });
    }

    /// `spec.unschedulable = true`.
    pub fn cordon(&self, node: &str) {
        self.patch_node(node, json!({"spec": {"unschedulable": true}}));
    }

    /// Sets one annotation on a Node.
    pub fn annotate_node(&self, node: &str, key: &str, value: &str) {
        self.patch_node(node, json!({"metadata": {"annotations": {key: value}}}));
    }

    fn patch_node(&self, node: &str, patch: Value) {
        let api: Api<Node> = Api::all(self.client.clone());
        let node = node.to_string();
        self.submit(format!("Node/{node}"), async move {
            api.patch(&node, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .err()
                .map(|e| failed(format!("Node/{node}"), e))
        });
    }

    /// Evicts a pod (`namespace/name`) through the Eviction API: 429 means a
    /// PodDisruptionBudget allows no disruption now ([`ClusterReply::EvictionRefused`]); a pod
    /// already gone is not an error.
    pub fn evict(&self, pod: &str) {
        let (namespace, name) = pod.split_once('/').unwrap_or(("default", pod));
        let api: Api<Pod> = Api::namespaced(self.evict_client.clone(), namespace);
        let (name, key) = (name.to_string(), pod.to_string());
        self.submit(format!("Pod/{key}"), async move {
            match api.evict(&name, &EvictParams::default()).await {
                Ok(_) => None,
                Err(kube::Error::Api(s)) if s.code == 429 => Some(ClusterReply::EvictionRefused {
                    pod: key,
                    reason: s.message.clone(),
                }),
                Err(kube::Error::Api(s)) if s.is_not_found() => None,
                Err(e) => Some(failed(format!("Pod/{key}"), e)),
            }
        });
    }

    /// The answers to writes that failed or were refused, so far.
    pub fn poll_replies(&self) -> Vec<ClusterReply> {
        self.replies.try_iter().collect()
    }
}

async fn write_status(api: &Api<DynamicObject>, name: &str, status: Value) -> kube::Result<()> {
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .map(|_| ())
}

/// Reads a Node, changes it, and writes it back with its resourceVersion; on 409 (someone
/// wrote meanwhile) it reads again, a few times. `change` says whether it changed anything.
async fn modify_node(
    api: &Api<Node>,
    name: &str,
    change: impl Fn(&mut Node) -> bool,
) -> kube::Result<()> {
    let mut last = None;
    for _ in 0..CONFLICT_RETRIES {
        let mut node = api.get(name).await?;
        if !change(&mut node) {
            return Ok(());
        }
        match api.replace(name, &PostParams::default(), &node).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.is_conflict() => last = Some(kube::Error::Api(s)),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        kube::Error::Api(Box::new(kube::core::Status::failure(
            "conflict retries exhausted",
            "Conflict",
        )))
    }))
}

fn api_taint(taint: &Taint) -> k8s_openapi::api::core::v1::Taint {
    k8s_openapi::api::core::v1::Taint {
        key: taint.key.clone(),
        value: (!taint.value.is_empty()).then(|| taint.value.clone()),
        effect: format!("{:?}", taint.effect),
        time_added: None,
    }
}

fn now_rfc3339() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    dovetail_ingest::format_rfc3339_ms(ms)
}
