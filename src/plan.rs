//! `dovetail plan`: manifests in, one engine epoch at the given time, the decisions out in the
//! shape other tools read (keep the field names).

use crate::feature_gates::FeatureGate;
use anyhow::{Context, Result};
use dovetail_dataflow::decisions::{Decision, Disruption};
use dovetail_dataflow::engine::{Engine, Epoch, QueryBuilder};
use dovetail_dataflow::facts::Fact;
use dovetail_dataflow::scheduling_reasons::Unschedulable;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Serialize)]
pub struct LaunchOut {
    pub name: String,
    pub nodepool: String,
    pub instance_types: Vec<String>,
    pub zones: Vec<String>,
    pub capacity_types: Vec<String>,
    pub price_per_hour: f64,
    pub pods: Vec<String>,
    /// The nodes a replacement launch takes the pods of (empty for a launch for pending pods).
    pub replaces: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct BindingOut {
    pub pod: String,
    pub node: String,
}

#[derive(Debug, Serialize)]
pub struct UnschedulableOut {
    pub pod: String,
    /// The reason in words.
    pub reason: String,
    /// The same reason as data: each NodePool ruled out and the first thing that does.
    pub why: Unschedulable,
}

#[derive(Debug, Serialize)]
pub struct DisruptionOut {
    pub node: String,
    pub nodeclaim: Option<String>,
    pub nodepool: String,
    /// Karpenter's reason: Empty, Underutilized, Drifted, Expired or Interrupted.
    pub reason: &'static str,
    /// Shared by the nodes disrupted together; `null` for a blocked candidate.
    pub command: Option<String>,
    /// Names of the launches that replace it (listed in `launches`).
    pub replacements: Vec<String>,
    /// What the whole command saves per hour.
    pub savings_per_hour: f64,
    /// Why it is not disrupted now; `null` when it is.
    pub blocked_by: Option<String>,
}

/// A NodeClaim to annotate with dovetail's drift hashes.
#[derive(Debug, Serialize)]
pub struct AdoptionOut {
    pub nodeclaim: String,
    pub nodepool_hash: String,
    pub nodeclass_hash: String,
}

#[derive(Debug, Serialize)]
pub struct Summary {
    pub pods_pending: usize,
    /// Launches for pending pods, and their cost (replacements are counted below, so that the
    /// lower bound, which is over pending pods, compares with like).
    pub launches: usize,
    pub cost_per_hour: f64,
    pub lower_bound_per_hour: f64,
    /// Nodes disrupted now (blocked candidates not counted).
    pub nodes_to_disrupt: usize,
    /// Launches replacing disrupted nodes, and their cost.
    pub replacement_launches: usize,
    pub replacement_cost_per_hour: f64,
    /// What the disruption commands save per hour together, each command counted once
    /// (replacements already deducted).
    pub savings_per_hour: f64,
}

#[derive(Debug, Serialize)]
pub struct PlanOutput {
    pub launches: Vec<LaunchOut>,
    pub bindings: Vec<BindingOut>,
    pub unschedulable: Vec<UnschedulableOut>,
    pub disruptions: Vec<DisruptionOut>,
    pub adoptions: Vec<AdoptionOut>,
    pub summary: Summary,
    /// What the loader skipped or could not honour, for the reader.
    pub notes: Vec<String>,
}

/// Rounds a dollar amount to micro-dollars so JSON does not show float noise.
fn dollars(micros: i64) -> f64 {
    micros as f64 / 1_000_000.0
}

/// Why a `--now` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NowError {
    #[error("{text:?} is not an RFC 3339 time (e.g. 2026-11-30T09:00:00Z)")]
    NotRfc3339 { text: String },
    /// The engine's clock starts at the Unix epoch; 0 and before are not a time it can hold.
    #[error("{text:?} is not after 1970-01-01T00:00:00Z")]
    NotAfterEpoch { text: String },
}

/// `--now`: an RFC 3339 time after the Unix epoch, as the engine's logical clock in ms.
pub fn parse_now(text: &str) -> Result<Epoch, NowError> {
    let ms = dovetail_ingest::parse_rfc3339_ms(text).ok_or_else(|| NowError::NotRfc3339 {
        text: text.to_string(),
    })?;
    Epoch::try_from(ms)
        .ok()
        .filter(|ms| *ms > 0)
        .ok_or_else(|| NowError::NotAfterEpoch {
            text: text.to_string(),
        })
}

/// What a plan is asked for besides the manifests.
pub struct PlanOptions<'a> {
    pub region: &'a str,
    pub workers: usize,
    /// The logical clock, in ms since the epoch (must be above 0).
    pub now_ms: Epoch,
    pub gates: &'a [FeatureGate],
    /// Files or folders of interruption message bodies (EventBridge events, as the SQS queue
    /// delivers them).
    pub interruptions: &'a [PathBuf],
}

pub fn plan(paths: &[PathBuf], o: &PlanOptions) -> Result<PlanOutput> {
    let (decisions, notes) = decide(paths, o, dovetail_queries::standing_queries)?;
    Ok(assemble(decisions, notes))
}

/// Reads the manifests (and interruption messages), runs `queries` on them at `o.now_ms` to a
/// fixed point, and returns the decisions and what the loader noted. `plan` and `explain`
/// share it.
pub fn decide(
    paths: &[PathBuf],
    o: &PlanOptions,
    queries: impl QueryBuilder,
) -> Result<(Vec<Decision>, Vec<String>)> {
    let manifests = dovetail_ingest::load_paths(paths)?;
    let catalog = dovetail_dataflow::catalog::embedded(o.region)?;
    let mut facts = dovetail_ingest::facts::manifest_facts(&manifests, catalog);
    facts.extend(o.gates.iter().map(FeatureGate::fact));
    let messages = dovetail_ingest::load_messages(o.interruptions)?;
    facts.extend(messages.interruptions.into_iter().map(Fact::Interruption));
    let mut engine = Engine::start(o.workers, queries).context("starting the engine")?;
    // The clock reaches `now` first, so the facts arrive at that epoch and every timer due by
    // then (expireAfter, consolidateAfter, do-not-disrupt windows, budget schedules) has fired
    // once the epoch closes.
    engine.advance(o.now_ms, Vec::new())?;
    engine.advance(o.now_ms + 1, facts.into_iter().map(|f| (f, 1)).collect())?;
    let mut notes = manifests.notes;
    notes.extend(messages.notes);
    Ok((engine.decisions(), notes))
}

/// Shapes the engine's decisions into the plan output.
pub fn assemble(decisions: Vec<Decision>, notes: Vec<String>) -> PlanOutput {
    let mut launches = Vec::new();
    let mut bindings = Vec::new();
    let mut unschedulable = Vec::new();
    let mut lower_bound = 0;
    let mut disruptions = Vec::new();
    let mut adoptions = Vec::new();
    // The nodes of one command all carry the command's savings.
    let mut savings: BTreeMap<String, i64> = BTreeMap::new();
    for d in decisions {
        match d {
            Decision::Launch(l) => launches.push(l),
            Decision::Binding { pod, target } => bindings.push(BindingOut { pod, node: target }),
            Decision::Unschedulable { pod, reason } => unschedulable.push(UnschedulableOut {
                pod,
                reason: reason.to_string(),
                why: reason,
            }),
            Decision::LowerBound(p) => lower_bound += p.0,
            Decision::Disruption(d) => {
                if let Some(command) = &d.command {
                    savings.insert(command.clone(), d.savings_per_hour.0);
                }
                disruptions.push(disruption_out(d));
            }
            Decision::Adopt {
                nodeclaim,
                nodepool_hash,
                nodeclass_hash,
            } => adoptions.push(AdoptionOut {
                nodeclaim,
                nodepool_hash,
                nodeclass_hash,
            }),
            Decision::ClusterLowerBound(_)
            | Decision::NodeVerdict(_)
            | Decision::PodVerdict(_)
            | Decision::LaunchVerdict(_) => {}
        }
    }
    disruptions.sort_by(|a, b| (&a.node, a.reason).cmp(&(&b.node, b.reason)));
    adoptions.sort_by(|a, b| a.nodeclaim.cmp(&b.nodeclaim));
    let mut pods_of: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for b in &bindings {
        pods_of
            .entry(b.node.as_str())
            .or_default()
            .push(b.pod.clone());
    }
    let mut replaced: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for d in &disruptions {
        for r in &d.replacements {
            replaced.entry(r.as_str()).or_default().push(d.node.clone());
        }
    }
    let launches: Vec<LaunchOut> = launches
        .into_iter()
        .map(|l| LaunchOut {
            pods: pods_of.get(l.name.as_str()).cloned().unwrap_or_default(),
            replaces: replaced.get(l.name.as_str()).cloned().unwrap_or_default(),
            price_per_hour: dollars(l.price.0),
            name: l.name,
            nodepool: l.nodepool,
            instance_types: l.instance_types,
            zones: l.zones,
            capacity_types: l.capacity_types,
        })
        .collect();
    let (replacements, new): (Vec<&LaunchOut>, Vec<&LaunchOut>) =
        launches.iter().partition(|l| !l.replaces.is_empty());
    let cost = |ls: &[&LaunchOut]| -> f64 {
        dollars(
            ls.iter()
                .map(|l| (l.price_per_hour * 1_000_000.0).round() as i64)
                .sum(),
        )
    };
    let summary = Summary {
        pods_pending: bindings.len() + unschedulable.len(),
        launches: new.len(),
        cost_per_hour: cost(&new),
        lower_bound_per_hour: dollars(lower_bound),
        nodes_to_disrupt: disruptions.iter().filter(|d| d.command.is_some()).count(),
        replacement_launches: replacements.len(),
        replacement_cost_per_hour: cost(&replacements),
        savings_per_hour: dollars(savings.values().sum()),
    };
    PlanOutput {
        launches,
        bindings,
        unschedulable,
        disruptions,
        adoptions,
        summary,
        notes,
    }
}

fn disruption_out(d: Disruption) -> DisruptionOut {
    DisruptionOut {
        node: d.node,
        nodeclaim: d.nodeclaim,
        nodepool: d.nodepool,
        reason: d.reason.as_str(),
        command: d.command,
        replacements: d.replacements,
        savings_per_hour: dollars(d.savings_per_hour.0),
        blocked_by: d.blocked_by.map(|b| b.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_an_rfc3339_time_after_the_epoch() {
        assert!(parse_now("2026-11-30T09:00:00Z").is_ok_and(|ms| ms > 0));
        assert_eq!(
            parse_now("tomorrow"),
            Err(NowError::NotRfc3339 {
                text: "tomorrow".to_string()
            })
        );
        let epoch = parse_now("1970-01-01T00:00:00Z");
        assert!(
            matches!(epoch, Err(NowError::NotAfterEpoch { .. })),
            "{epoch:?}"
        );
        assert!(epoch.is_err_and(|e| e.to_string().contains("not after 1970")));
    }
}
