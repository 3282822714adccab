//! `dovetail plan`: manifests in, one engine epoch, the decisions out in the shape other tools
//! read (keep the field names).

use anyhow::{Context, Result};
use dovetail_dataflow::decisions::Decision;
use dovetail_dataflow::engine::Engine;
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
}

#[derive(Debug, Serialize)]
pub struct BindingOut {
    pub pod: String,
    pub node: String,
}

#[derive(Debug, Serialize)]
pub struct UnschedulableOut {
    pub pod: String,
    pub reason: String,
}

#[derive(Debug, Serialize)]
pub struct Summary {
    pub pods_pending: usize,
    pub launches: usize,
    pub cost_per_hour: f64,
    pub lower_bound_per_hour: f64,
}

#[derive(Debug, Serialize)]
pub struct PlanOutput {
    pub launches: Vec<LaunchOut>,
    pub bindings: Vec<BindingOut>,
    pub unschedulable: Vec<UnschedulableOut>,
    pub disruptions: Vec<serde_json::Value>,
    pub summary: Summary,
    /// What the loader skipped or could not honour, for the reader.
    pub notes: Vec<String>,
}

/// Rounds a dollar amount to micro-dollars so JSON does not show float noise.
fn dollars(micros: i64) -> f64 {
    micros as f64 / 1_000_000.0
}

pub fn plan(paths: &[PathBuf], region: &str, workers: usize) -> Result<PlanOutput> {
    let manifests = dovetail_ingest::load_paths(paths)?;
    let facts = dovetail_ingest::facts::manifest_facts(&manifests, region)?;
    let mut engine =
        Engine::start(workers, dovetail_queries::provisioning).context("starting the engine")?;
    engine.advance(1, facts.into_iter().map(|f| (f, 1)).collect())?;
    Ok(assemble(engine.decisions(), manifests.notes))
}

/// Shapes the engine's decisions into the plan output.
pub fn assemble(decisions: Vec<Decision>, notes: Vec<String>) -> PlanOutput {
    let mut launches = Vec::new();
    let mut bindings = Vec::new();
    let mut unschedulable = Vec::new();
    let mut lower_bound = 0;
    for d in decisions {
        match d {
            Decision::Launch(l) => launches.push(l),
            Decision::Binding { pod, target } => bindings.push(BindingOut { pod, node: target }),
            Decision::Unschedulable { pod, reason } => {
                unschedulable.push(UnschedulableOut { pod, reason })
            }
            Decision::LowerBound(p) => lower_bound += p.0,
            Decision::ClusterLowerBound(_) | Decision::Disruption(_) | Decision::Adopt { .. } => {}
        }
    }
    let mut pods_of: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for b in &bindings {
        pods_of
            .entry(b.node.as_str())
            .or_default()
            .push(b.pod.clone());
    }
    let launches: Vec<LaunchOut> = launches
        .into_iter()
        .map(|l| LaunchOut {
            pods: pods_of.get(l.name.as_str()).cloned().unwrap_or_default(),
            price_per_hour: dollars(l.price.0),
            name: l.name,
            nodepool: l.nodepool,
            instance_types: l.instance_types,
            zones: l.zones,
            capacity_types: l.capacity_types,
        })
        .collect();
    let cost: i64 = launches
        .iter()
        .map(|l| (l.price_per_hour * 1_000_000.0).round() as i64)
        .sum();
    let summary = Summary {
        pods_pending: bindings.len() + unschedulable.len(),
        launches: launches.len(),
        cost_per_hour: dollars(cost),
        lower_bound_per_hour: dollars(lower_bound),
    };
    PlanOutput {
        launches,
        bindings,
        unschedulable,
        disruptions: Vec::new(),
        summary,
        notes,
    }
}
