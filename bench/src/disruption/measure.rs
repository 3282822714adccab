//! Runs the disruption benchmark: cold evaluation, single changes, from-scratch evaluations.

use super::cluster::Cluster;
use crate::measure::{histogram, micros, Percentiles};
use anyhow::{Context, Result};
use dovetail_dataflow::decisions::Decision;
use dovetail_dataflow::engine::Engine;
use dovetail_dataflow::facts::Fact;
use dovetail_dataflow::model::Price;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settings {
    pub nodes: usize,
    /// Changes of each kind.
    pub changes: usize,
    pub workers: usize,
    pub scratch_samples: usize,
    pub seed: u64,
}

/// What the disruption outputs say, counted.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Outcome {
    /// Disruptions per reason (commands), and blocked candidates per reason.
    pub commands_by_reason: BTreeMap<String, usize>,
    pub blocked_by_reason: BTreeMap<String, usize>,
    pub replacement_launches: usize,
    pub savings_per_hour: f64,
}

impl Outcome {
    fn of(decisions: &[Decision]) -> Outcome {
        let mut o = Outcome::default();
        let mut commands: BTreeMap<String, Price> = BTreeMap::new();
        for d in decisions {
            if let Decision::Disruption(d) = d {
                let reason = d.reason.as_str().to_string();
                match &d.command {
                    Some(c) if d.blocked_by.is_none() => {
                        *o.commands_by_reason.entry(reason).or_insert(0) += 1;
                        commands.insert(c.clone(), d.savings_per_hour);
                    }
                    _ => *o.blocked_by_reason.entry(reason).or_insert(0) += 1,
                }
            }
        }
        o.replacement_launches = decisions
            .iter()
            .filter(|d| matches!(d, Decision::Launch(l) if is_replacement(l, decisions)))
            .count();
        o.savings_per_hour = commands.values().map(|p| p.dollars()).sum();
        o
    }
}

fn is_replacement(l: &dovetail_dataflow::decisions::Launch, decisions: &[Decision]) -> bool {
    decisions
        .iter()
        .any(|d| matches!(d, Decision::Disruption(x) if x.replacements.contains(&l.name)))
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    pub nodes: usize,
    pub pods: usize,
    pub cold_seconds: f64,
    pub cold_outcome: Outcome,
    /// Per change kind: latency of the disruption outputs after it.
    pub changes: BTreeMap<String, Percentiles>,
    pub all_changes: Percentiles,
    pub from_scratch: Percentiles,
    /// From-scratch median over the incremental median of all changes.
    pub ratio_p50: f64,
    pub final_outcome: Outcome,
    /// Whether the incremental engine's final decisions equal the last from-scratch run's.
    pub agrees_with_scratch: bool,
}

fn evaluate(workers: usize, state: Vec<Fact>, now: u64) -> Result<(Engine, u64)> {
    let mut engine = Engine::start(workers, dovetail_queries::standing_queries)
        .context("starting the engine")?;
    engine.advance(now, Vec::new())?;
    let t = Instant::now();
    engine.advance(now + 1, state.into_iter().map(|f| (f, 1)).collect())?;
    Ok((engine, micros(t)))
}

pub fn run(s: &Settings) -> Result<Results> {
    // Monday 2026-11-30 12:00 UTC: inside no budget window of the default NodePool.
    let start: i64 = 1_795_996_800_000 + 12 * 3_600_000;
    let built = Instant::now();
    let catalog = dovetail_dataflow::catalog::embedded("us-east-1")
        .context("loading the us-east-1 catalogue")?;
    let mut cluster = Cluster::build(catalog, s.nodes, s.seed, start)?;
    let pods = cluster.pods.len();
    println!(
        "built {} nodes, {pods} bound pods in {:.1} s",
        cluster.nodes.len(),
        built.elapsed().as_secs_f64()
    );
    let (mut engine, cold_us) = evaluate(s.workers, cluster.state(), start as u64)?;
    let cold_outcome = Outcome::of(&engine.decisions());
    println!(
        "cold: {:.2} s; commands {:?}, blocked {:?}",
        cold_us as f64 / 1e6,
        cold_outcome.commands_by_reason,
        cold_outcome.blocked_by_reason
    );

    let kinds = ["delete a pod", "add a node", "change a price"];
    let mut per_kind: Vec<_> = kinds.iter().map(|_| histogram()).collect::<Result<_>>()?;
    let mut all = histogram()?;
    let mut epoch = engine.epoch();
    let total = s.changes * kinds.len();
    for i in 0..total {
        let kind = i % kinds.len();
        let now = epoch as i64;
        let mut updates: Vec<(Fact, isize)> = Vec::new();
        match kind {
            0 => {
                if !cluster.pods.is_empty() {
                    let k = cluster.rng.below(cluster.pods.len());
                    let pod = cluster.pods.swap_remove(k);
                    if let Some(node) = pod
                        .node_name
                        .as_ref()
                        .and_then(|n| cluster.nodes.get_mut(n))
                    {
                        updates.push((Fact::Node(node.clone()), -1));
                        node.last_pod_event_ms = Some(now);
                        updates.push((Fact::Node(node.clone()), 1));
                    }
                    updates.push((Fact::Pod(pod), -1));
                }
            }
            1 => {
                let node = cluster.new_node(now)?;
                updates.push((Fact::Node(node.clone()), 1));
                cluster.nodes.insert(node.name.clone(), node);
            }
            _ => {
                let k = cluster.rng.below(cluster.types.len());
                let old = cluster.types[k].clone();
                let mut new = old.clone();
                for o in new.offerings.iter_mut() {
                    o.price = Price(o.price.0 * (90 + cluster.rng.below(20) as i64) / 100);
                }
                cluster.types[k] = new.clone();
                let replace = |f: &mut Fact| {
                    if let Fact::InstanceType { instance_type, .. } = f {
                        if instance_type.name == new.name {
                            *instance_type = new.clone();
                        }
                    }
                };
                cluster.facts.iter_mut().for_each(replace);
                updates.push((
                    Fact::InstanceType {
                        node_class: "default".into(),
                        instance_type: old,
                    },
                    -1,
                ));
                updates.push((
                    Fact::InstanceType {
                        node_class: "default".into(),
                        instance_type: new,
                    },
                    1,
                ));
            }
        }
        epoch += 1_000;
        let t = Instant::now();
        engine.advance(epoch, updates)?;
        let us = micros(t);
        per_kind[kind].record(us)?;
        all.record(us)?;
        if (i + 1) % (total / 10).max(1) == 0 {
            println!(
                "changes {}/{total}: last {:.1} ms, p50 so far {:.1} ms",
                i + 1,
                us as f64 / 1e3,
                all.value_at_quantile(0.5) as f64 / 1e3
            );
        }
    }
    let final_outcome = Outcome::of(&engine.decisions());
    let mut scratch = histogram()?;
    let mut agrees = false;
    for k in 0..s.scratch_samples.max(1) {
        // The fresh engine sees the state as the live one saw it in its last epoch.
        let (fresh, us) = evaluate(s.workers, cluster.state(), engine.epoch() - 1_000)?;
        scratch.record(us)?;
        println!(
            "from scratch {}/{}: {:.2} s",
            k + 1,
            s.scratch_samples,
            us as f64 / 1e6
        );
        agrees = fresh.decisions() == engine.decisions();
    }
    let all_p = Percentiles::of(&all);
    let scratch_p = Percentiles::of(&scratch);
    Ok(Results {
        nodes: cluster.nodes.len(),
        pods,
        cold_seconds: cold_us as f64 / 1e6,
        cold_outcome,
        changes: kinds
            .iter()
            .zip(&per_kind)
            .map(|(k, h)| (k.to_string(), Percentiles::of(h)))
            .collect(),
        ratio_p50: scratch_p.p50_us as f64 / all_p.p50_us.max(1) as f64,
        all_changes: all_p,
        from_scratch: scratch_p,
        final_outcome,
        agrees_with_scratch: agrees,
    })
}
