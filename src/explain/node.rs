//! `dovetail explain node NAME`: each disruption method's verdict for one node, in Karpenter's
//! method order, from the commands query's decisions (the command the node is in, or why it is
//! listed as blocked) and the node's verdict (what the methods read of it).

use super::decided::Decided;
use super::{Format, Source};
use anyhow::{bail, Result};
use clap::Args;
use dovetail_dataflow::decisions::{Disruption, DisruptionReason};
use dovetail_dataflow::disruption_reasons::{At, Blocker, DriftReason, NodeVerdict};
use dovetail_dataflow::facts::InterruptionKind;
use serde::Serialize;
use std::fmt::Write as _;

#[derive(Args)]
pub struct NodeArgs {
    /// The Node's name.
    pub name: String,
    #[command(flatten)]
    pub source: Source,
}

/// A replacement launch, as explain shows it.
#[derive(Debug, Serialize)]
pub struct Replacement {
    pub name: String,
    /// Cheapest first.
    pub instance_types: Vec<String>,
    pub price_per_hour: f64,
}

/// What one method does with the node.
#[derive(Debug, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// The method disrupts it now, in this command.
    Disrupted {
        command: String,
        replacements: Vec<Replacement>,
        savings_per_hour: f64,
    },
    /// The method would act, but this holds it back.
    Blocked {
        blocker: Blocker,
    },
    /// Another method's command takes the node first.
    TakenBy {
        reason: DisruptionReason,
    },
    /// Already being disrupted (deleting, or tainted `karpenter.sh/disrupted`).
    Disrupting,
    NotInterrupted,
    /// Not expired yet: it expires at `at_ms` (`None`: `expireAfter: Never`).
    NotExpired {
        at_ms: Option<i64>,
    },
    NotEmpty {
        pods: i64,
    },
    NotDrifted,
    /// Consolidation leaves an empty node to emptiness (its own budget).
    NoPods,
    /// Nothing listed: the commands query passed it over (its pods' classes not known yet).
    NotConsidered,
}

/// One method's verdict, with what the method found (the drift, the expiry, the interruption)
/// and the verdict in words.
#[derive(Debug, Serialize)]
pub struct MethodVerdict {
    /// Karpenter's reason name: Interrupted, Expired, Empty, Drifted, Underutilized.
    pub method: &'static str,
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The interruption, expiry or drift the method found, when it found one.
    pub found: Option<Found>,
    pub text: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Found {
    Interruption(InterruptionKind),
    ExpiredAt(i64),
    Drift {
        field: &'static str,
        reason: DriftReason,
    },
}

#[derive(Debug, Serialize)]
pub struct NodeExplanation {
    pub node: String,
    pub nodeclaim: Option<String>,
    pub nodepool: String,
    pub instance_type: String,
    pub capacity_type: String,
    pub price_per_hour: Option<f64>,
    pub pods: i64,
    /// When `consolidateAfter` has passed since its last pod event (`None`: Never).
    pub consolidatable_at: Option<String>,
    /// Everything that holds graceful disruption of the node back (do-not-disrupt,
    /// PodDisruptionBudgets), in words.
    pub blockers: Vec<String>,
    /// The method that disrupts it now, if any.
    pub disrupted_by: Option<&'static str>,
    pub methods: Vec<MethodVerdict>,
}

pub fn run(args: NodeArgs, wall_clock_ms: u64) -> Result<()> {
    let now_ms = args.source.now.unwrap_or(wall_clock_ms);
    let (decisions, _notes) = crate::plan::decide(
        &args.source.paths,
        &args.source.options(now_ms),
        dovetail_queries::standing_queries_explained,
    )?;
    let Some(e) = explain(&args.name, &Decided::of(&decisions), now_ms as i64) else {
        bail!(
            "{} is not a node any NodePool manages in these manifests (a registered Node labelled karpenter.sh/nodepool with its NodePool)",
            args.name
        );
    };
    let text = match args.source.output {
        Format::Json => format!("{}\n", serde_json::to_string_pretty(&e)?),
        Format::Text => text(&e),
    };
    crate::output::emit("explanation", &text)
}

/// The node's explanation from the engine's decisions at `now_ms`; `None` when it is no
/// candidate.
pub fn explain(node: &str, decided: &Decided, now_ms: i64) -> Option<NodeExplanation> {
    let v = decided.node_verdict(node)?;
    let disruptions = decided.disruptions(node);
    let command = disruptions.iter().copied().find(|d| d.command.is_some());
    let methods: Vec<MethodVerdict> = [
        DisruptionReason::Interrupted,
        DisruptionReason::Expired,
        DisruptionReason::Empty,
        DisruptionReason::Drifted,
        DisruptionReason::Underutilized,
    ]
    .into_iter()
    .map(|m| method(m, v, command, &disruptions, decided, now_ms))
    .collect();
    Some(NodeExplanation {
        node: v.node.clone(),
        nodeclaim: v.nodeclaim.clone(),
        nodepool: v.nodepool.clone(),
        instance_type: v.instance_type.clone(),
        capacity_type: v.capacity_type.clone(),
        price_per_hour: v.price.map(|p| p.dollars()),
        pods: v.pods,
        consolidatable_at: v.consolidatable_at_ms.map(|t| At(t).to_string()),
        blockers: v.blockers.iter().map(ToString::to_string).collect(),
        disrupted_by: command.map(|d| d.reason.as_str()),
        methods,
    })
}

/// One method's verdict: the command it is in, else its listing, else what the node's verdict
/// says the method found.
fn method(
    m: DisruptionReason,
    v: &NodeVerdict,
    command: Option<&Disruption>,
    listed: &[&Disruption],
    decided: &Decided,
    now_ms: i64,
) -> MethodVerdict {
    let found = match m {
        DisruptionReason::Interrupted => v.interrupted.map(Found::Interruption),
        DisruptionReason::Expired => v
            .expires_at_ms
            .filter(|at| *at <= now_ms)
            .map(Found::ExpiredAt),
        DisruptionReason::Drifted => v.drift.clone().map(|reason| Found::Drift {
            field: reason.field(),
            reason,
        }),
        _ => None,
    };
    let verdict = match command {
        Some(c) if c.reason == m => Verdict::Disrupted {
            command: c.command.clone().unwrap_or_default(),
            replacements: c
                .replacements
                .iter()
                .filter_map(|r| decided.launch(r))
                .map(|l| Replacement {
                    name: l.name.clone(),
                    instance_types: l.instance_types.clone(),
                    price_per_hour: l.price.dollars(),
                })
                .collect(),
            savings_per_hour: c.savings_per_hour.dollars(),
        },
        _ => match listed
            .iter()
            .find(|d| d.reason == m)
            .and_then(|d| d.blocked_by.clone())
        {
            Some(blocker) => Verdict::Blocked { blocker: *blocker },
            None => unlisted(m, v, command, found.is_some(), now_ms),
        },
    };
    let text = words(&verdict, found.as_ref());
    MethodVerdict {
        method: m.as_str(),
        verdict,
        found,
        text,
    }
}

/// The verdict of a method that neither disrupts the node nor lists it as blocked.
fn unlisted(
    m: DisruptionReason,
    v: &NodeVerdict,
    command: Option<&Disruption>,
    found: bool,
    now_ms: i64,
) -> Verdict {
    if v.disrupting {
        return Verdict::Disrupting;
    }
    let graceful = matches!(
        m,
        DisruptionReason::Empty | DisruptionReason::Drifted | DisruptionReason::Underutilized
    );
    let applies = match m {
        DisruptionReason::Interrupted | DisruptionReason::Expired | DisruptionReason::Drifted => {
            found
        }
        DisruptionReason::Empty => v.pods == 0,
        DisruptionReason::Underutilized => v.pods > 0,
    };
    if applies {
        if let Some(c) = command {
            return Verdict::TakenBy { reason: c.reason };
        }
    }
    let consolidation = matches!(m, DisruptionReason::Empty | DisruptionReason::Underutilized);
    if applies && consolidation {
        match v.consolidatable_at_ms {
            None => {
                return Verdict::Blocked {
                    blocker: Blocker::ConsolidateNever {
                        nodepool: v.nodepool.clone(),
                    },
                }
            }
            Some(at) if at > now_ms => {
                return Verdict::Blocked {
                    blocker: Blocker::ConsolidateAfter { until_ms: at },
                }
            }
            Some(_) => {}
        }
    }
    if applies && graceful {
        if let Some(b) = v.blockers.first() {
            return Verdict::Blocked { blocker: b.clone() };
        }
        return Verdict::NotConsidered;
    }
    match m {
        DisruptionReason::Interrupted => Verdict::NotInterrupted,
        DisruptionReason::Expired => Verdict::NotExpired {
            at_ms: v.expires_at_ms,
        },
        DisruptionReason::Empty => Verdict::NotEmpty { pods: v.pods },
        DisruptionReason::Drifted => Verdict::NotDrifted,
        DisruptionReason::Underutilized => Verdict::NoPods,
    }
}

/// A method's verdict in words.
fn words(v: &Verdict, found: Option<&Found>) -> String {
    let mut s = match found {
        Some(Found::Interruption(k)) => format!("interrupted ({k}); "),
        Some(Found::ExpiredAt(t)) => format!("expired at {}; ", At(*t)),
        Some(Found::Drift { field, reason }) => format!("drifted ({field}: {reason}); "),
        None => String::new(),
    };
    match v {
        Verdict::Disrupted {
            command,
            replacements,
            savings_per_hour,
        } => {
            let _ = write!(
                s,
                "disrupted now ({command}), saving ${savings_per_hour:.4}/h"
            );
            if replacements.is_empty() {
                s.push_str(", no replacement");
            }
            for r in replacements {
                let types: Vec<&str> = r
                    .instance_types
                    .iter()
                    .take(3)
                    .map(String::as_str)
                    .collect();
                let more = r.instance_types.len().saturating_sub(types.len());
                let _ = write!(
                    s,
                    ", replaced by {} (${:.4}/h, {}{})",
                    r.name,
                    r.price_per_hour,
                    types.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                );
            }
        }
        Verdict::Blocked { blocker } => {
            let _ = write!(s, "blocked: {blocker}");
        }
        Verdict::TakenBy { reason } => {
            let _ = write!(s, "the node goes as {} first", reason.as_str());
        }
        Verdict::Disrupting => s.push_str("already being disrupted"),
        Verdict::NotInterrupted => s.push_str("no interruption"),
        Verdict::NotExpired { at_ms: Some(t) } => {
            let _ = write!(s, "not expired: expires at {}", At(*t));
        }
        Verdict::NotExpired { at_ms: None } => s.push_str("never expires (expireAfter: Never)"),
        Verdict::NotEmpty { pods } => {
            let _ = write!(s, "not empty: {pods} pods would have to move");
        }
        Verdict::NotDrifted => s.push_str("not drifted"),
        Verdict::NoPods => s.push_str("no pods to consolidate: emptiness decides"),
        Verdict::NotConsidered => s.push_str("not considered (its pods are not known yet)"),
    }
    s
}

/// The explanation as a person reads it.
pub fn text(e: &NodeExplanation) -> String {
    let mut s = String::new();
    let price = e
        .price_per_hour
        .map_or_else(|| "price unknown".to_string(), |p| format!("${p:.4}/h"));
    let _ = writeln!(
        s,
        "node {} (NodePool {}, {} {}, {price}, {} pods)",
        e.node, e.nodepool, e.capacity_type, e.instance_type, e.pods
    );
    if let Some(claim) = &e.nodeclaim {
        let _ = writeln!(s, "  NodeClaim {claim}");
    }
    match &e.consolidatable_at {
        Some(at) => {
            let _ = writeln!(s, "  consolidatable from {at}");
        }
        None => {
            let _ = writeln!(s, "  never consolidated (consolidateAfter: Never)");
        }
    }
    for b in &e.blockers {
        let _ = writeln!(s, "  blocker: {b}");
    }
    for m in &e.methods {
        let _ = writeln!(s, "{:<14} {}", m.method, m.text);
    }
    match e.disrupted_by {
        Some(m) => {
            let _ = writeln!(s, "=> disrupted now: {m}");
        }
        None => s.push_str("=> not disrupted now\n"),
    }
    s
}
