//! What the controller writes to the cluster, through the API server: NodeClaims (created for a
//! launch before CreateFleet, their status once the instance exists, deleted), Node taints,
//! cordons and annotations, and evictions through the Eviction API. Each write is submitted and
//! returns at once (the `Cluster` interface's contract); a refusal or failure comes back from
//! [`ClusterWriter::poll_replies`] naming the object, and nothing is retried silently.

use crate::kinds::NODECLAIM;
use crate::nodeclaim::{nodeclaim_object, nodeclaim_status};
use crossbeam_channel::{Receiver, Sender};
use dovetail_dataflow::backend::{ClusterReply, NodeClaim};
use dovetail_dataflow::model::Taint;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, EvictParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};

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
}

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
        })
    }

    fn submit<F>(&self, write: F)
    where
        F: std::future::Future<Output = Option<ClusterReply>> + Send + 'static,
    {
        let sender = self.sender.clone();
        self.runtime.spawn(async move {
            if let Some(reply) = write.await {
                let _ = sender.send(reply);
            }
        });
    }

    fn nodeclaims(&self) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), &NODECLAIM.api_resource())
    }

    /// Creates the NodeClaim of a launch (the durable intent), then writes its status if it has
    /// one already.
    pub fn create_nodeclaim(&self, claim: &NodeClaim, node_class: Option<&str>, taints: &[Taint]) {
        let api = self.nodeclaims();
        let object = nodeclaim_object(claim, node_class, taints);
        let status = nodeclaim_status(claim, &now_rfc3339());
        let name = claim.name.clone();
        self.submit(async move {
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

    /// Writes a NodeClaim's status (launched: provider id, capacity; registered).
    pub fn update_nodeclaim(&self, claim: &NodeClaim) {
        let Some(status) = nodeclaim_status(claim, &now_rfc3339()) else {
            return;
        };
        let api = self.nodeclaims();
        let name = claim.name.clone();
        self.submit(async move {
            write_status(&api, &name, status)
                .await
                .err()
                .map(|e| failed(format!("NodeClaim/{name}"), e))
        });
    }

    /// Deletes a NodeClaim; its finalizer holds it until the instance is gone.
    pub fn delete_nodeclaim(&self, name: &str) {
        let api = self.nodeclaims();
        let name = name.to_string();
        self.submit(async move {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => None,
                Err(kube::Error::Api(s)) if s.is_not_found() => None,
                Err(e) => Some(failed(format!("NodeClaim/{name}"), e)),
            }
        });
    }

    /// Adds a taint to a Node (once), as a read-modify-write guarded by its resourceVersion.
    pub fn taint_node(&self, node: &str, taint: Taint) {
        let api: Api<Node> = Api::all(self.client.clone());
        let node = node.to_string();
        self.submit(async move {
            let t = k8s_openapi::api::core::v1::Taint {
                key: taint.key.clone(),
                value: (!taint.value.is_empty()).then(|| taint.value.clone()),
                effect: format!("{:?}", taint.effect),
                time_added: None,
            };
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
        self.submit(async move {
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
        self.submit(async move {
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
        self.submit(async move {
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

fn now_rfc3339() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    dovetail_ingest::format_rfc3339_ms(ms)
}
