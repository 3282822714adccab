//! Watches → facts. One kube-runtime watcher per watched kind; every object is read by the same
//! per-object readers the manifest loader uses (`dovetail_ingest::load_values`) and becomes the
//! facts it says, keyed as [`Fact::describe`] names them, so a change of one object moves only
//! its own facts. A relist (at start, after a disconnect the watch cannot resume from, or 410
//! Gone) becomes one [`FactUpdate::Replace`] of the whole kind: nothing is lost or duplicated
//! however the watch broke off. An object that fails validation is skipped (logged and counted);
//! its last good facts stay, and the watch goes on.

use crate::kinds::WatchedKind;
use crate::provisionable::left_out;
use crossbeam_channel::{Receiver, Sender};
use dovetail_dataflow::facts::Fact;
use dovetail_ingest::ManifestError;
use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A change to the engine's facts, in the order the watches saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum FactUpdate {
    /// Set (or replace) the fact under its key.
    Set(Box<Fact>),
    /// Retract the fact under this key.
    Remove(String),
    /// A relist: these are all the facts of the kind; any other fact of the kind is gone.
    Replace { kind: WatchedKind, facts: Vec<Fact> },
}

/// What the watches have done, for metrics.
#[derive(Debug, Default)]
pub struct WatchStats {
    /// Objects that failed validation and were skipped (their last good facts kept).
    pub objects_skipped: AtomicU64,
    /// Complete lists taken (one per kind at start, then one per resync).
    pub relists: AtomicU64,
    /// Watch errors (disconnects, 410 Gone, refused requests), each retried with backoff.
    pub watch_errors: AtomicU64,
}

/// Why an object was skipped.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error("{kind} {name}: cannot be read as JSON: {source}")]
    Json {
        kind: &'static str,
        name: String,
        source: serde_json::Error,
    },
    #[error(transparent)]
    Manifest(#[from] ManifestError),
}

/// The facts one object becomes: none for a pod the engine does not see (see
/// [`crate::provisionable`]) or a finished one.
pub fn object_facts(kind: &WatchedKind, object: &DynamicObject) -> Result<Vec<Fact>, ObjectError> {
    let mut value = serde_json::to_value(object).map_err(|source| ObjectError::Json {
        kind: kind.kind,
        name: object.metadata.name.clone().unwrap_or_default(),
        source,
    })?;
    // List items carry no apiVersion / kind; the readers check them.
    if let Value::Object(map) = &mut value {
        map.insert("apiVersion".into(), Value::from(kind.api_version()));
        map.insert("kind".into(), Value::from(kind.kind));
    }
    if kind.kind == "Pod" {
        if let Some(why) = left_out(&value) {
            tracing::trace!(pod = ?object.metadata.name, why, "pod not seen by the engine");
            return Ok(Vec::new());
        }
    }
    let m = dovetail_ingest::load_values("watch", vec![value])?;
    let mut facts = Vec::new();
    facts.extend(m.pods.into_iter().map(Fact::Pod));
    facts.extend(m.nodes.into_iter().map(Fact::Node));
    facts.extend(m.nodepools.into_iter().map(Fact::NodePool));
    facts.extend(m.nodeclasses.into_iter().map(Fact::NodeClass));
    facts.extend(m.overlays.into_iter().map(Fact::Overlay));
    facts.extend(m.daemonsets.into_iter().map(Fact::DaemonSet));
    facts.extend(m.pdbs.into_iter().map(Fact::Pdb));
    Ok(facts)
}

fn key_of(kind: &WatchedKind, object: &DynamicObject) -> String {
    kind.fact_key(
        object.metadata.namespace.as_deref(),
        object.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// Watches one kind until `out` is dropped, sending its facts' changes.
pub async fn watch_kind(
    client: Client,
    kind: WatchedKind,
    out: Sender<FactUpdate>,
    stats: Arc<WatchStats>,
) {
    let api: Api<DynamicObject> = Api::all_with(client, &kind.api_resource());
    let mut stream = watcher(api).default_backoff().boxed();
    // The facts each object last read well into, by fact key: what a skipped object keeps.
    let mut last_good: BTreeMap<String, Vec<Fact>> = BTreeMap::new();
    let mut relist: Option<BTreeMap<String, Vec<Fact>>> = None;
    let skipped = |e: &ObjectError| {
        stats.objects_skipped.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(kind = kind.kind, error = %e, "object skipped; its last good facts stay");
    };
    while let Some(event) = stream.next().await {
        let update = match event {
            Ok(Event::Init) => {
                relist = Some(BTreeMap::new());
                None
            }
            Ok(Event::InitApply(object)) => {
                let key = key_of(&kind, &object);
                let facts = match object_facts(&kind, &object) {
                    Ok(facts) => Some(facts),
                    Err(e) => {
                        skipped(&e);
                        last_good.get(&key).cloned()
                    }
                };
                if let (Some(r), Some(facts)) = (relist.as_mut(), facts) {
                    r.insert(key, facts);
                }
                None
            }
            Ok(Event::InitDone) => relist.take().map(|r| {
                stats.relists.fetch_add(1, Ordering::Relaxed);
                last_good = r;
                FactUpdate::Replace {
                    kind,
                    facts: last_good.values().flatten().cloned().collect(),
                }
            }),
            Ok(Event::Apply(object)) => {
                let key = key_of(&kind, &object);
                match object_facts(&kind, &object) {
                    Ok(facts) => {
                        let previous = last_good.insert(key.clone(), facts.clone());
                        if facts.is_empty() {
                            previous
                                .is_some_and(|p| !p.is_empty())
                                .then_some(FactUpdate::Remove(key))
                        } else {
                            for fact in facts.iter().skip(1) {
                                if out.send(FactUpdate::Set(Box::new(fact.clone()))).is_err() {
                                    return;
                                }
                            }
                            facts
                                .into_iter()
                                .next()
                                .map(|f| FactUpdate::Set(Box::new(f)))
                        }
                    }
                    Err(e) => {
                        skipped(&e);
                        None
                    }
                }
            }
            Ok(Event::Delete(object)) => {
                let key = key_of(&kind, &object);
                last_good.remove(&key);
                Some(FactUpdate::Remove(key))
            }
            Err(e) => {
                stats.watch_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(kind = kind.kind, error = %e, "watch failed; retrying with backoff");
                None
            }
        };
        if let Some(update) = update {
            if out.send(update).is_err() {
                return;
            }
        }
    }
}

fn watcher(
    api: Api<DynamicObject>,
) -> impl futures::Stream<Item = Result<Event<DynamicObject>, watcher::Error>> {
    watcher::watcher(api, watcher::Config::default())
}

/// Starts a watch of every kind in `kinds` on `runtime`; their updates arrive on the receiver
/// (which stops them when dropped).
pub fn watch_all(
    runtime: &tokio::runtime::Handle,
    client: Client,
    kinds: &[WatchedKind],
) -> (Receiver<FactUpdate>, Arc<WatchStats>) {
    let (sender, receiver) = crossbeam_channel::unbounded();
    let stats = Arc::new(WatchStats::default());
    for kind in kinds {
        runtime.spawn(watch_kind(
            client.clone(),
            *kind,
            sender.clone(),
            Arc::clone(&stats),
        ));
    }
    (receiver, stats)
}
