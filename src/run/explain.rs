//! `dovetail explain` served by the controller (`--explain`): `/explain/pod/NS/NAME`,
//! `/explain/node/NAME` and `/explain/launch/NAME` on the metrics port, in the CLI's words
//! (text) or its JSON (`?o=json`, or `Accept: application/json`).
//!
//! The loop applies each epoch's decision diffs to the current decisions ([`Decided`]) behind
//! an `Arc`; a request takes the `Arc` and renders its one object from it after letting go of
//! the lock. The loop updates in place unless a request still holds the previous snapshot,
//! and then copies it first, so neither waits on the other's work.

use crate::explain::decided::Decided;
use crate::explain::{launch, node, pod};
use dovetail_dataflow::decisions::Decision;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// An HTTP answer.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: &'static str,
    pub(crate) content_type: &'static str,
    pub(crate) body: String,
}

/// The current decisions the loop publishes; `None` while explain is off.
#[derive(Clone, Default)]
pub(crate) struct Explained {
    current: Arc<Mutex<Option<Arc<Decided>>>>,
    /// A standby decides nothing, so it has nothing to explain.
    standby: Arc<AtomicBool>,
}

impl Explained {
    /// Explain is on: the decisions are kept from now on.
    pub(crate) fn on(&self) {
        *self.lock() = Some(Arc::new(Decided::default()));
    }

    /// Whether this replica is a standby (not deciding) now.
    pub(crate) fn standby(&self, standby: bool) {
        self.standby.store(standby, Ordering::Relaxed);
    }

    /// Applies one epoch's diffs (nothing while explain is off).
    pub(crate) fn apply(&self, diffs: &[(Decision, isize)]) {
        if !diffs.iter().any(|(d, _)| Decided::reads(d)) {
            return;
        }
        let mut current = self.lock();
        let Some(decided) = current.as_mut() else {
            return;
        };
        // Copies only when a request still renders from the previous snapshot.
        let decided = Arc::make_mut(decided);
        for (d, diff) in diffs {
            decided.update(d, *diff);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Arc<Decided>>> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The answer to `path` (`/explain/...`) at `now_ms`, in JSON when `json`.
    pub(crate) fn answer(&self, path: &str, json: bool, now_ms: i64) -> Answer {
        let snapshot = self.lock().clone();
        match snapshot {
            Some(_) if self.standby.load(Ordering::Relaxed) => error(
                "503 Service Unavailable",
                "this replica is a standby and decides nothing: ask the leader".into(),
                json,
            ),
            Some(decided) => answer(&decided, path, json, now_ms),
            None => error(
                "503 Service Unavailable",
                "explain is off: start dovetail run with --explain".into(),
                json,
            ),
        }
    }
}

/// What `path` asks of the current decisions.
fn answer(decided: &Decided, path: &str, json: bool, now_ms: i64) -> Answer {
    let rest = path.strip_prefix("/explain/").unwrap_or_default();
    let (kind, name) = rest.split_once('/').unwrap_or((rest, ""));
    let found = match kind {
        "pod" if name.split('/').count() == 2 && !name.starts_with('/') && !name.ends_with('/') => {
            pod::explain(name, decided).map(|e| render(&e, pod::text, json))
        }
        "node" if !name.is_empty() && !name.contains('/') => {
            node::explain(name, decided, now_ms).map(|e| render(&e, node::text, json))
        }
        "launch" if !name.is_empty() && !name.contains('/') => {
            launch::explain(name, decided).map(|e| render(&e, launch::text, json))
        }
        _ => {
            return error(
                "404 Not Found",
                "ask /explain/pod/NAMESPACE/NAME, /explain/node/NAME or /explain/launch/NAME"
                    .into(),
                json,
            )
        }
    };
    match found {
        Some(Ok(body)) => Answer {
            status: "200 OK",
            content_type: if json {
                "application/json"
            } else {
                "text/plain; charset=utf-8"
            },
            body,
        },
        Some(Err(e)) => error("500 Internal Server Error", e.to_string(), json),
        None => error("404 Not Found", unknown(kind, name), json),
    }
}

/// Why there is nothing to say about `name`, as the CLI says it of manifests.
fn unknown(kind: &str, name: &str) -> String {
    match kind {
        "pod" => format!(
            "{name} is not a pending pod (a pod bound to a node, a DaemonSet pod or a mirror pod is not provisioned for)"
        ),
        "node" => format!(
            "{name} is not a node any NodePool manages (a registered Node labelled karpenter.sh/nodepool with its NodePool)"
        ),
        _ => format!("{name} is not a launch the engine plans now"),
    }
}

fn render<E: Serialize>(
    e: &E,
    text: fn(&E) -> String,
    json: bool,
) -> Result<String, serde_json::Error> {
    if json {
        Ok(format!("{}\n", serde_json::to_string_pretty(e)?))
    } else {
        Ok(text(e))
    }
}

fn error(status: &'static str, message: String, json: bool) -> Answer {
    if json {
        Answer {
            status,
            content_type: "application/json",
            body: format!("{}\n", serde_json::json!({ "error": message })),
        }
    } else {
        Answer {
            status,
            content_type: "text/plain; charset=utf-8",
            body: format!("{message}\n"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_dataflow::scheduling_reasons::{PoolRejection, Unschedulable};

    #[test]
    fn explain_is_503_until_on_then_404_for_an_unknown_object() {
        let e = Explained::default();
        let a = e.answer("/explain/pod/team/web", false, 0);
        assert_eq!(a.status, "503 Service Unavailable");
        assert!(a.body.contains("--explain"), "{}", a.body);
        e.on();
        let a = e.answer("/explain/pod/team/web", false, 0);
        assert_eq!(a.status, "404 Not Found");
        assert!(
            a.body.contains("team/web is not a pending pod"),
            "{}",
            a.body
        );
        e.standby(true);
        let a = e.answer("/explain/pod/team/web", false, 0);
        assert_eq!(a.status, "503 Service Unavailable");
        assert!(a.body.contains("standby"), "{}", a.body);
        e.standby(false);
        let a = e.answer("/explain/node/ip-10-0-0-1", true, 0);
        assert_eq!(a.status, "404 Not Found");
        assert_eq!(a.content_type, "application/json");
        let v: serde_json::Value = serde_json::from_str(&a.body).expect("JSON");
        assert!(v["error"]
            .as_str()
            .is_some_and(|m| m.contains("ip-10-0-0-1")));
        for bad in [
            "/explain/pod/web",
            "/explain/",
            "/explain/cat/x",
            "/explain/node/a/b",
        ] {
            assert_eq!(e.answer(bad, false, 0).status, "404 Not Found", "{bad}");
        }
    }

    #[test]
    fn an_unschedulable_pod_is_explained_from_the_diffs() {
        let e = Explained::default();
        e.on();
        let verdict = dovetail_dataflow::provisioning_verdicts::PodVerdict {
            class: 7,
            pods: vec!["team/huge".into()],
            requests: Default::default(),
            levels: vec![dovetail_dataflow::provisioning_verdicts::Level {
                requirements: Default::default(),
                dropped_preference: false,
            }],
            chosen: 0,
            pools: vec![dovetail_dataflow::provisioning_verdicts::PoolVerdict {
                nodepool: "general".into(),
                weight: 0,
                levels: vec![Err(PoolRejection::NoInstanceTypes)],
            }],
            unit_cost: Vec::new(),
        };
        let unschedulable = Decision::Unschedulable {
            pod: "team/huge".into(),
            reason: Unschedulable::NodePools {
                rejections: vec![("general".into(), PoolRejection::NoInstanceTypes)],
            },
        };
        e.apply(&[
            (Decision::PodVerdict(Box::new(verdict)), 1),
            (unschedulable.clone(), 1),
        ]);
        // A request holding the snapshot while the loop moves on sees the old one whole.
        let held = e.lock().clone();
        let a = e.answer("/explain/pod/team/huge", false, 0);
        assert_eq!(a.status, "200 OK", "{}", a.body);
        assert!(
            a.body.contains("unschedulable: NodePool general"),
            "{}",
            a.body
        );
        assert!(
            a.body
                .contains("would change with: widening NodePool general's requirements"),
            "{}",
            a.body
        );
        let a = e.answer("/explain/pod/team/huge", true, 0);
        let v: serde_json::Value = serde_json::from_str(&a.body).expect("JSON");
        assert_eq!(v["outcome"], "unschedulable");
        assert_eq!(v["nodepools"][0]["blocker"], "no_instance_types");

        e.apply(&[(unschedulable, -1)]);
        assert_eq!(
            e.answer("/explain/pod/team/huge", false, 0).status,
            "404 Not Found"
        );
        let held = held.expect("explain is on");
        assert!(pod::explain("team/huge", &held).is_some());
    }
}
