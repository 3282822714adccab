//! Watches → facts. One kube-runtime watcher per watched kind; every object is read by the same
//! per-object readers the manifest loader uses (`dovetail_ingest::load_values`) and becomes the
//! facts it says, keyed as [`Fact::describe`] names them, so a change of one object moves only
//! its own facts. A relist (at start, after a disconnect the watch cannot resume from, or 410
//! Gone) becomes one [`FactUpdate::Replace`] of the whole kind: nothing is lost or duplicated
//! however the watch broke off. An object that fails validation is skipped (logged and counted);
//! its last good facts stay, and the watch goes on.
//!
//! PersistentVolumeClaims, PersistentVolumes, StorageClasses and PriorityClasses become no facts
//! of their own: pods are resolved against them (`dovetail_ingest::live`), and a change of one
//! re-sends only the pods whose volume zones or priority it moved.

use crate::kinds::WatchedKind;
use crate::provisionable::left_out;
use crossbeam_channel::{Receiver, Sender};
use dovetail_dataflow::facts::Fact;
use dovetail_ingest::live::{Dependency, LivePods};
use dovetail_ingest::ManifestError;
use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

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

/// An object a watch skipped, for an Event about it: `Kind/NAME` or `Kind/NAMESPACE/NAME`, and
/// why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedObject {
    pub object: String,
    pub message: String,
}

/// The most skipped objects kept for Events between two turns of the loop.
const SKIPPED_KEPT: usize = 1000;

/// What the watches have done, for metrics.
#[derive(Debug, Default)]
pub struct WatchStats {
    /// Objects skipped since the loop last took them (for Events; the first
    /// [`SKIPPED_KEPT`] of them).
    skipped: Mutex<Vec<SkippedObject>>,
    /// Objects that failed validation and were skipped (their last good facts kept).
    pub objects_skipped: AtomicU64,
    /// Complete lists taken (one per kind at start, then one per resync).
    pub relists: AtomicU64,
    /// Watch errors (disconnects, 410 Gone, refused requests), each retried with backoff.
    pub watch_errors: AtomicU64,
}

impl WatchStats {
    /// The objects skipped since the last call.
    pub fn take_skipped(&self) -> Vec<SkippedObject> {
        std::mem::take(&mut *self.skipped.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn skip(&self, kind: &WatchedKind, object: &DynamicObject, error: &dyn std::fmt::Display) {
        self.objects_skipped.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(kind = kind.kind, %error, "object skipped; its last good version stays");
        let name = object.metadata.name.as_deref().unwrap_or_default();
        let object = match object.metadata.namespace.as_deref() {
            Some(ns) if kind.namespaced => format!("{}/{ns}/{name}", kind.kind),
            _ => format!("{}/{name}", kind.kind),
        };
        let mut skipped = self.skipped.lock().unwrap_or_else(PoisonError::into_inner);
        if skipped.len() < SKIPPED_KEPT {
            skipped.push(SkippedObject {
                object,
                message: format!("skipped, the last good version is kept: {error}"),
            });
        }
    }
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

/// An object as the readers take it: JSON with its apiVersion and kind (list items carry
/// none; the readers check them).
fn object_value(kind: &WatchedKind, object: &DynamicObject) -> Result<Value, ObjectError> {
    let mut value = serde_json::to_value(object).map_err(|source| ObjectError::Json {
        kind: kind.kind,
        name: object.metadata.name.clone().unwrap_or_default(),
        source,
    })?;
    if let Value::Object(map) = &mut value {
        map.insert("apiVersion".into(), Value::from(kind.api_version()));
        map.insert("kind".into(), Value::from(kind.kind));
    }
    Ok(value)
}

/// The facts one object becomes: none for a pod the engine does not see (see
/// [`crate::provisionable`]) or a finished one. Pods are read through `live`, which resolves
/// their volume zones and priority against the claims, volumes and classes watched so far.
pub fn object_facts(
    kind: &WatchedKind,
    object: &DynamicObject,
    live: &mut LivePods,
) -> Result<Vec<Fact>, ObjectError> {
    let value = object_value(kind, object)?;
    if kind.kind == "Pod" {
        if let Some(why) = left_out(&value) {
            tracing::trace!(pod = ?object.metadata.name, why, "pod not seen by the engine");
            live.forget_pod(&pod_key(object));
            return Ok(Vec::new());
        }
        let pod = live.set_pod(&value)?;
        log_notes(live);
        return Ok(pod.into_iter().map(|p| Fact::Pod(p.into())).collect());
    }
    let m = dovetail_ingest::load_values("watch", vec![value])?;
    let mut facts = Vec::new();
    facts.extend(m.pods.into_iter().map(|p| Fact::Pod(p.into())));
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

/// `namespace/name`, as [`LivePods`] keys pods.
fn pod_key(object: &DynamicObject) -> String {
    let ns = object
        .metadata
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or("default");
    format!(
        "{ns}/{}",
        object.metadata.name.as_deref().unwrap_or_default()
    )
}

/// What resolution noticed, to the log (not kept: a live cluster says it again on every
/// change).
fn log_notes(live: &mut LivePods) {
    for note in live.take_notes() {
        tracing::debug!(%note, "resolution");
    }
}

/// The resolver every pod and dependency watch shares. The lock is held while an event's
/// updates are sent, so that a pod re-resolved by a claim's change and the pod's own change
/// reach the engine in the order they were made.
fn lock(live: &Mutex<LivePods>) -> MutexGuard<'_, LivePods> {
    live.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Watches one kind until `out` is dropped, sending its facts' changes.
pub async fn watch_kind(
    client: Client,
    kind: WatchedKind,
    out: Sender<FactUpdate>,
    stats: Arc<WatchStats>,
    live: Arc<Mutex<LivePods>>,
) {
    if let Some(dependency) = Dependency::of_kind(kind.kind) {
        return watch_dependency(client, kind, dependency, out, stats, live).await;
    }
    let api: Api<DynamicObject> = Api::all_with(client, &kind.api_resource());
    let mut stream = watcher(api).default_backoff().boxed();
    // The facts each object last read well into, by fact key: what a skipped object keeps.
    let mut last_good: BTreeMap<String, Vec<Fact>> = BTreeMap::new();
    let mut relist: Option<BTreeMap<String, Vec<Fact>>> = None;
    while let Some(event) = stream.next().await {
        let mut live = lock(&live);
        let update = match event {
            Ok(Event::Init) => {
                relist = Some(BTreeMap::new());
                None
            }
            Ok(Event::InitApply(object)) => {
                let key = key_of(&kind, &object);
                let facts = match object_facts(&kind, &object, &mut live) {
                    Ok(facts) => Some(facts),
                    Err(e) => {
                        stats.skip(&kind, &object, &e);
                        last_good.get(&key).cloned()
                    }
                };
                if let (Some(r), Some(facts)) = (relist.as_mut(), facts) {
                    r.insert(key, facts);
                }
                None
            }
            Ok(Event::InitDone) => relist.take().map(|mut r| {
                stats.relists.fetch_add(1, Ordering::Relaxed);
                if kind.kind == "Pod" {
                    relisted_pods(&mut r, &mut live);
                }
                last_good = r;
                FactUpdate::Replace {
                    kind,
                    facts: last_good.values().flatten().cloned().collect(),
                }
            }),
            Ok(Event::Apply(object)) => {
                let key = key_of(&kind, &object);
                match object_facts(&kind, &object, &mut live) {
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
                        stats.skip(&kind, &object, &e);
                        None
                    }
                }
            }
            Ok(Event::Delete(object)) => {
                let key = key_of(&kind, &object);
                if kind.kind == "Pod" {
                    live.forget_pod(&pod_key(&object));
                }
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

/// A relist of pods: the resolver forgets the pods it did not name, and each relisted pod's
/// fact is the resolver's latest (a claim may have re-resolved it since it was listed).
fn relisted_pods(relist: &mut BTreeMap<String, Vec<Fact>>, live: &mut LivePods) {
    let keys = relist
        .keys()
        .filter_map(|k| k.strip_prefix("Pod "))
        .map(str::to_string)
        .collect();
    live.keep_pods(&keys);
    for (key, facts) in relist.iter_mut() {
        let current = key.strip_prefix("Pod ").and_then(|k| live.pod(k));
        if let (Some(pod), false) = (current, facts.is_empty()) {
            *facts = vec![Fact::Pod(pod.clone().into())];
        }
    }
}

/// Watches one kind pods depend on (claims, volumes, StorageClasses, PriorityClasses): its
/// objects become no facts of their own, but each change re-resolves the pods that use it, and
/// those whose volume zones or priority moved are sent again. A relist is sent as an empty
/// [`FactUpdate::Replace`] of the kind, after the pods it moved.
async fn watch_dependency(
    client: Client,
    kind: WatchedKind,
    dependency: Dependency,
    out: Sender<FactUpdate>,
    stats: Arc<WatchStats>,
    live: Arc<Mutex<LivePods>>,
) {
    let api: Api<DynamicObject> = Api::all_with(client, &kind.api_resource());
    let mut stream = watcher(api).default_backoff().boxed();
    let mut relist: Option<Vec<(DynamicObject, Value)>> = None;
    while let Some(event) = stream.next().await {
        let mut live = lock(&live);
        let mut updates: Vec<FactUpdate> = Vec::new();
        let moved = match event {
            Ok(Event::Init) => {
                relist = Some(Vec::new());
                Vec::new()
            }
            Ok(Event::InitApply(object)) => {
                match (object_value(&kind, &object), relist.as_mut()) {
                    (Ok(value), Some(r)) => r.push((object, value)),
                    (Err(e), _) => stats.skip(&kind, &object, &e),
                    (Ok(_), None) => {}
                }
                Vec::new()
            }
            Ok(Event::InitDone) => match relist.take() {
                Some(listed) => {
                    stats.relists.fetch_add(1, Ordering::Relaxed);
                    let values: Vec<Value> = listed.iter().map(|(_, v)| v.clone()).collect();
                    let (moved, errors) = live.replace_dependencies(dependency, &values);
                    for (object, e) in errors {
                        stats.skip(&kind, &listed[object].0, &e);
                    }
                    updates.push(FactUpdate::Replace {
                        kind,
                        facts: Vec::new(),
                    });
                    moved
                }
                None => Vec::new(),
            },
            Ok(Event::Apply(object)) => match object_value(&kind, &object)
                .map_err(|e| e.to_string())
                .and_then(|v| {
                    live.set_dependency(dependency, &v)
                        .map_err(|e| e.to_string())
                }) {
                Ok(moved) => moved,
                Err(e) => {
                    stats.skip(&kind, &object, &e);
                    Vec::new()
                }
            },
            Ok(Event::Delete(object)) => live.forget_dependency(
                dependency,
                object.metadata.namespace.as_deref(),
                object.metadata.name.as_deref().unwrap_or_default(),
            ),
            Err(e) => {
                stats.watch_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(kind = kind.kind, error = %e, "watch failed; retrying with backoff");
                Vec::new()
            }
        };
        log_notes(&mut live);
        let pods = moved
            .into_iter()
            .map(|p| FactUpdate::Set(Box::new(Fact::Pod(p.into()))));
        for update in pods.chain(updates) {
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
    let live = Arc::new(Mutex::new(LivePods::new()));
    for kind in kinds {
        runtime.spawn(watch_kind(
            client.clone(),
            *kind,
            sender.clone(),
            Arc::clone(&stats),
            Arc::clone(&live),
        ));
    }
    (receiver, stats)
}
