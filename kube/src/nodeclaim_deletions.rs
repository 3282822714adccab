//! NodeClaims someone asked to delete (`kubectl delete nodeclaim`, a NodePool deleted with its
//! NodeClaims): the API server sets `deletionTimestamp` and the termination finalizer holds the
//! object until the controller has drained the node and terminated its instance, as Karpenter's
//! termination controller does.

use crate::kinds::NODECLAIM;
use crossbeam_channel::Receiver;
use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;

/// Watches NodeClaims on `runtime`; the name of each one marked for deletion arrives on the
/// receiver (again after a relist: the receiver's side keeps what it acts on).
pub fn watch_deletions(runtime: &tokio::runtime::Handle, client: Client) -> Receiver<String> {
    let (sender, receiver) = crossbeam_channel::unbounded();
    let api: Api<DynamicObject> = Api::all_with(client, &NODECLAIM.api_resource());
    runtime.spawn(async move {
        let mut stream = watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(event) = stream.next().await {
            let object = match event {
                Ok(Event::Apply(o)) | Ok(Event::InitApply(o)) => o,
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "NodeClaim watch failed; retrying with backoff");
                    continue;
                }
            };
            if object.metadata.deletion_timestamp.is_some() {
                if let Some(name) = object.metadata.name {
                    if sender.send(name).is_err() {
                        return;
                    }
                }
            }
        }
    });
    receiver
}
