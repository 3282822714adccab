//! The scenarios: a cold solve at each size, then, at the largest size, single-pod changes
//! applied incrementally and, for a sample of the states they reach, the same state computed by a
//! fresh engine from nothing. Packing is sticky (a change starts from the last plan), so the two
//! need not agree: a sample checks that every pod still has exactly one decision, and compares
//! what the two plans cost.

use crate::processes::{self, Layout, Started};
use crate::workload::{infrastructure, Workload};
use anyhow::{Context, Result};
use dovetail_dataflow::decisions::Decision;
use dovetail_dataflow::facts::Fact;
use dovetail_dataflow::model::SharedPod;
use dovetail_dataflow::stable_hash::stable_hash;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// What to run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settings {
    pub sizes: Vec<usize>,
    pub changes: usize,
    pub workers: Vec<usize>,
    pub seed: u64,
    /// Compute the state from scratch after every this many changes (lowered so that there are
    /// at least five samples when there are at least five changes).
    pub sample_every: usize,
    /// NodePools the pods are split over (1: Karpenter's benchmark).
    #[serde(default = "one")]
    pub nodepools: usize,
    /// Process counts to run everything with, each process with each of `workers` threads.
    #[serde(default = "just_one")]
    pub processes: Vec<usize>,
}

fn one() -> usize {
    1
}

fn just_one() -> Vec<usize> {
    vec![1]
}

impl Settings {
    /// 0 when from-scratch samples are off (`--sample-every 0`, for profiling the changes alone).
    pub fn effective_sample_every(&self) -> usize {
        if self.sample_every == 0 {
            return 0;
        }
        self.sample_every.clamp(1, (self.changes / 5).max(1))
    }
}

/// The sanity counts of one set of decisions.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Tally {
    pub launches: usize,
    pub bound: usize,
    pub unschedulable: usize,
    /// Pods with neither a binding nor an unschedulable decision.
    pub unaccounted: usize,
    /// Pods with more than one such decision.
    pub duplicated: usize,
    /// The sum of the launches' cheapest prices, dollars per hour.
    pub launch_price_per_hour: f64,
    /// The engine's lower bound on that cost, dollars per hour.
    pub lower_bound_per_hour: f64,
    /// The engine's lower bound on the cost of running every pod, dollars per hour.
    pub cluster_lower_bound_per_hour: f64,
    /// Unschedulable pods by reason, most frequent first (at most five).
    pub unschedulable_reasons: Vec<(String, usize)>,
}

impl Tally {
    pub fn of<'d>(decisions: impl IntoIterator<Item = &'d Decision>, pods: &[SharedPod]) -> Tally {
        let mut tally = Tally::default();
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        for d in decisions {
            match d {
                Decision::Launch(l) => {
                    tally.launches += 1;
                    tally.launch_price_per_hour += l.price.dollars();
                }
                Decision::Binding { pod, .. } => {
                    tally.bound += 1;
                    *seen.entry(pod.as_str()).or_insert(0) += 1;
                }
                Decision::Unschedulable { pod, reason } => {
                    tally.unschedulable += 1;
                    *seen.entry(pod.as_str()).or_insert(0) += 1;
                    *reasons.entry(reason.to_string()).or_insert(0) += 1;
                }
                Decision::LowerBound(p) => tally.lower_bound_per_hour += p.dollars(),
                Decision::ClusterLowerBound(p) => tally.cluster_lower_bound_per_hour += p.dollars(),
                Decision::Disruption(_)
                | Decision::Adopt { .. }
                | Decision::NodeVerdict(_)
                | Decision::PodVerdict(_)
                | Decision::LaunchVerdict(_) => {}
            }
        }
        for p in pods {
            match seen.get(p.key().as_str()) {
                None => tally.unaccounted += 1,
                Some(&n) if n > 1 => tally.duplicated += 1,
                Some(_) => {}
            }
        }
        let mut reasons: Vec<(String, usize)> = reasons.into_iter().collect();
        reasons.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        reasons.truncate(5);
        tally.unschedulable_reasons = reasons;
        tally
    }
}

/// One cold solve.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cold {
    pub workers: usize,
    /// Processes, each with `workers` threads.
    #[serde(default = "one")]
    pub processes: usize,
    pub pods: usize,
    /// From facts sent to decisions returned.
    pub seconds: f64,
    pub pods_per_sec: f64,
    /// Starting the engine's worker threads (not included in `seconds`).
    pub engine_start_ms: f64,
    pub tally: Tally,
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    pub mean_us: f64,
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: h.len(),
            p50_us: h.value_at_quantile(0.50),
            p90_us: h.value_at_quantile(0.90),
            p99_us: h.value_at_quantile(0.99),
            max_us: h.max(),
            mean_us: h.mean(),
        }
    }
}

/// The change scenario at one size and worker count.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Changes {
    pub workers: usize,
    #[serde(default = "one")]
    pub processes: usize,
    pub pods: usize,
    pub changes: usize,
    pub sample_every: usize,
    pub incremental: Percentiles,
    pub incremental_add: Percentiles,
    pub incremental_remove: Percentiles,
    /// Decisions changed per change (each diff counts once).
    pub mean_decision_diffs: f64,
    /// Of those, Launch diffs (a renamed or re-typed launch counts twice: retracted, asserted).
    pub mean_launch_diffs: f64,
    /// Of those, Binding and Unschedulable diffs.
    pub mean_binding_diffs: f64,
    /// The most decisions one change moved.
    #[serde(default)]
    pub max_decision_diffs: usize,
    /// Packing runs during the changes that carried the last run on rather than rebuilding it
    /// from the last plan (`solver::warm`; counted in this process, so not a follower's).
    #[serde(default)]
    pub carried_on: u64,
    pub from_scratch: Percentiles,
    /// From-scratch median over incremental median.
    pub ratio_p50: f64,
    pub checks: usize,
    /// Samples where the incremental engine's decisions equal the fresh engine's.
    pub agreeing: usize,
    /// Samples where the incremental engine gives every pending pod exactly one decision.
    #[serde(default)]
    pub sound: usize,
    /// Per sample, the incremental plan's launch price over the fresh engine's: what sticky
    /// packing costs. The mean and the largest.
    #[serde(default)]
    pub mean_cost_vs_scratch: f64,
    #[serde(default)]
    pub max_cost_vs_scratch: f64,
    /// A description of each unsound sample (at most five).
    pub disagreements: Vec<String>,
    /// The sanity counts of the final state.
    pub final_tally: Tally,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Results {
    pub cold: Vec<Cold>,
    pub changes: Vec<Changes>,
    /// The same on several processes (kept apart so the report's tables by worker count stay
    /// as they are).
    #[serde(default)]
    pub multi_process_cold: Vec<Cold>,
    #[serde(default)]
    pub multi_process_changes: Vec<Changes>,
}

pub fn histogram() -> Result<Histogram<u64>> {
    // 1 µs to 1 hour at three significant figures.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).context("creating a latency histogram")
}

pub fn micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// The facts of `pods` share the pods: the fresh engine's pods are the incremental engine's.
fn facts_for(pods: &[SharedPod], nodepools: usize) -> Vec<(Fact, isize)> {
    let mut facts: Vec<(Fact, isize)> = infrastructure(nodepools)
        .into_iter()
        .map(|f| (f, 1))
        .collect();
    facts.extend(pods.iter().cloned().map(|p| (Fact::Pod(p), 1)));
    facts
}

/// A fresh engine that has computed `pods` from nothing, and how long the computation took
/// (engine start excluded).
fn from_scratch(
    layout: Layout,
    pods: &[SharedPod],
    nodepools: usize,
) -> Result<(Started, f64, u64)> {
    let facts = facts_for(pods, nodepools);
    let started = Instant::now();
    let mut engine = processes::start(layout)?;
    let start_ms = started.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    engine.advance(1, facts).context("advancing the engine")?;
    Ok((engine, start_ms, micros(t)))
}

/// What a from-scratch baseline reports from its own process: its solve's time, its decisions'
/// tally, and each decision's stable hash, sorted (with repeats), to compare with the
/// incremental engine's without sending the decisions back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScratchReport {
    pub micros: u64,
    pub tally: Tally,
    pub hashes: Vec<u64>,
}

/// Change `i` of the change sequence: a pod added (even changes, or when none is left), else a
/// random one removed. The from-scratch child replays the same sequence to reach the same pods.
fn change(i: usize, workload: &mut Workload, live: &mut Vec<SharedPod>) -> ((Fact, isize), bool) {
    if i.is_multiple_of(2) || live.is_empty() {
        let pod = SharedPod::from(workload.random_pod());
        live.push(pod.clone());
        ((Fact::Pod(pod), 1), true)
    } else {
        let k = workload.below(live.len());
        let pod = live.swap_remove(k);
        ((Fact::Pod(pod), -1), false)
    }
}

/// The from-scratch baseline's side (`dovetail-bench --scratch-after N`): the pods after the
/// first `after` changes at `size` pods, computed by a fresh engine from nothing. It runs in a
/// process of its own so that each engine's peak memory is its own process's, not two engines'
/// in one (2.08 GiB at 100,000 pods when they shared one).
pub fn scratch_child(
    settings: &Settings,
    layout: Layout,
    size: usize,
    after: usize,
) -> Result<ScratchReport> {
    let mut workload = Workload::new(settings.seed, settings.nodepools);
    let mut live: Vec<SharedPod> = workload
        .initial(size)
        .into_iter()
        .map(SharedPod::from)
        .collect();
    for i in 0..after {
        change(i, &mut workload, &mut live);
    }
    let facts = facts_for(&live, settings.nodepools);
    let mut engine = processes::start(layout)?;
    engine.forget_decisions();
    let t = Instant::now();
    let diffs = engine.advance(1, facts).context("advancing the engine")?;
    let micros = micros(t);
    drop(engine);
    let decisions: Vec<&Decision> = diffs
        .iter()
        .flat_map(|(d, r)| std::iter::repeat_n(d, (*r).max(0) as usize))
        .collect();
    let tally = Tally::of(decisions.iter().copied(), &live);
    let mut hashes: Vec<u64> = decisions.iter().map(|d| stable_hash(*d)).collect();
    hashes.sort_unstable();
    Ok(ScratchReport {
        micros,
        tally,
        hashes,
    })
}

/// Runs [`scratch_child`] in a child process of this binary and reads its report.
fn scratch_in_child(
    settings: &Settings,
    layout: Layout,
    size: usize,
    after: usize,
) -> Result<ScratchReport> {
    let me = std::env::current_exe().context("finding dovetail-bench")?;
    let out = std::process::Command::new(me)
        .args(["--scratch-after", &after.to_string()])
        .args(["--sizes", &size.to_string()])
        .args(["--seed", &settings.seed.to_string()])
        .args(["--nodepools", &settings.nodepools.to_string()])
        .args(["--workers", &layout.workers.to_string()])
        .args(["--processes", &layout.processes.to_string()])
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("starting the from-scratch child")?;
    if !out.status.success() {
        anyhow::bail!(
            "the from-scratch child after {after} changes: {}",
            out.status
        );
    }
    serde_json::from_slice(&out.stdout).context("the from-scratch child's report")
}

/// The engine's current decisions, borrowed rather than copied, in no order (the tallies and
/// the sorted hashes need none).
fn held(engine: &Started) -> Vec<&Decision> {
    engine
        .held_decisions()
        .flat_map(|(d, r)| std::iter::repeat_n(d, r.max(0) as usize))
        .collect()
}

/// How the incremental engine's decisions differ from the from-scratch child's, which sent
/// only hashes: how many on each side only, and one of the incremental engine's for a start.
fn describe_difference(incremental: &[&Decision], scratch_hashes: &[u64]) -> String {
    let scratch: BTreeSet<u64> = scratch_hashes.iter().copied().collect();
    let hashed: Vec<(u64, &Decision)> = incremental.iter().map(|d| (stable_hash(*d), *d)).collect();
    let mine: BTreeSet<u64> = hashed.iter().map(|(h, _)| *h).collect();
    let only_a: Vec<&Decision> = hashed
        .iter()
        .filter(|(h, _)| !scratch.contains(h))
        .map(|(_, d)| *d)
        .collect();
    let only_b = scratch.difference(&mine).count();
    let example = only_a
        .first()
        .map(|d| format!("{d:?}").chars().take(200).collect::<String>())
        .unwrap_or_default();
    format!(
        "{} decisions only incremental (e.g. {example}), {only_b} only from scratch; counts {} vs {}",
        only_a.len(),
        incremental.len(),
        scratch_hashes.len()
    )
}

/// Runs every scenario, printing progress.
pub fn run(settings: &Settings) -> Result<Results> {
    let mut results = Results::default();
    let mut sizes = settings.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    let largest = sizes.last().copied().unwrap_or(0);
    let layouts = settings.processes.iter().flat_map(|&processes| {
        settings
            .workers
            .iter()
            .map(move |&workers| Layout { processes, workers })
    });
    for layout in layouts {
        let Layout { processes, workers } = layout;
        for &size in &sizes {
            let mut workload = Workload::new(settings.seed, settings.nodepools);
            let pods: Vec<SharedPod> = workload
                .initial(size)
                .into_iter()
                .map(SharedPod::from)
                .collect();
            let (engine, start_ms, us) = from_scratch(layout, &pods, settings.nodepools)?;
            let seconds = us as f64 / 1e6;
            let tally = Tally::of(held(&engine), &pods);
            println!(
                "cold {size} pods, {layout}: {seconds:.3} s ({:.0} pods/s); {} launches, {} bound, {} unschedulable, {} unaccounted",
                size as f64 / seconds,
                tally.launches,
                tally.bound,
                tally.unschedulable,
                tally.unaccounted
            );
            for (reason, n) in &tally.unschedulable_reasons {
                println!("    unschedulable x{n}: {reason}");
            }
            let (cold, changes) = if processes > 1 {
                (
                    &mut results.multi_process_cold,
                    &mut results.multi_process_changes,
                )
            } else {
                (&mut results.cold, &mut results.changes)
            };
            cold.push(Cold {
                workers,
                processes,
                pods: size,
                seconds,
                pods_per_sec: size as f64 / seconds,
                engine_start_ms: start_ms,
                tally,
            });
            if size == largest && settings.changes > 0 {
                changes.push(run_changes(settings, layout, engine, workload, pods)?);
            }
        }
    }
    Ok(results)
}

fn run_changes(
    settings: &Settings,
    layout: Layout,
    mut engine: Started,
    mut workload: Workload,
    mut live: Vec<SharedPod>,
) -> Result<Changes> {
    let pods = live.len();
    let sample_every = settings.effective_sample_every();
    let progress_every = (settings.changes / 10).max(1);
    let mut all = histogram()?;
    let mut adds = histogram()?;
    let mut removes = histogram()?;
    let mut scratch = histogram()?;
    let mut diffs_total = 0usize;
    let mut launch_diffs = 0usize;
    let mut binding_diffs = 0usize;
    let mut checks = 0;
    let mut agreeing = 0;
    let mut sound = 0;
    let mut max_diffs = 0usize;
    let mut cost_ratios: Vec<f64> = Vec::new();
    let mut disagreements = Vec::new();
    let mut epoch = engine.epoch();
    let carried_before = dovetail_queries::solver::carried_on_runs();
    for i in 0..settings.changes {
        let (update, is_add) = change(i, &mut workload, &mut live);
        epoch += 1;
        let t = Instant::now();
        let diffs = engine
            .advance(epoch, vec![update])
            .context("advancing the engine")?;
        let us = micros(t);
        diffs_total += diffs.len();
        max_diffs = max_diffs.max(diffs.len());
        for (d, _) in &diffs {
            match d {
                Decision::Launch(_) => launch_diffs += 1,
                Decision::Binding { .. } | Decision::Unschedulable { .. } => binding_diffs += 1,
                _ => {}
            }
        }
        all.saturating_record(us);
        if is_add {
            adds.saturating_record(us);
        } else {
            removes.saturating_record(us);
        }
        if sample_every > 0 && (i + 1) % sample_every == 0 {
            let fresh = scratch_in_child(settings, layout, pods, i + 1)?;
            let scratch_us = fresh.micros;
            scratch.saturating_record(scratch_us);
            checks += 1;
            let a = held(&engine);
            let mut a_hashes: Vec<u64> = a.iter().map(|d| stable_hash(*d)).collect();
            a_hashes.sort_unstable();
            let (ta, tb) = (Tally::of(a.iter().copied(), &live), fresh.tally);
            let identical = a_hashes == fresh.hashes;
            let cost = if tb.launch_price_per_hour > 0.0 {
                ta.launch_price_per_hour / tb.launch_price_per_hour
            } else {
                1.0
            };
            cost_ratios.push(cost);
            if identical {
                agreeing += 1;
            }
            let is_sound = ta.unaccounted == 0 && ta.duplicated == 0;
            if is_sound {
                sound += 1;
            } else if disagreements.len() < 5 {
                disagreements.push(format!(
                    "after change {}: {} pods unaccounted for, {} with two decisions ({})",
                    i + 1,
                    ta.unaccounted,
                    ta.duplicated,
                    describe_difference(&a, &fresh.hashes)
                ));
            }
            println!(
                "    from scratch after change {}: {:.3} s; incremental {}, costs {cost:.3}x from scratch{}",
                i + 1,
                scratch_us as f64 / 1e6,
                if is_sound { "sound" } else { "UNSOUND" },
                if identical { " (identical)" } else { "" }
            );
        }
        if (i + 1) % progress_every == 0 {
            println!(
                "changes ({layout}, {pods} pods): {}/{} (last {:.1} ms, {} decision diffs)",
                i + 1,
                settings.changes,
                us as f64 / 1e3,
                diffs.len()
            );
        }
    }
    let incremental = Percentiles::of(&all);
    let from_scratch = Percentiles::of(&scratch);
    let ratio_p50 = if incremental.p50_us > 0 {
        from_scratch.p50_us as f64 / incremental.p50_us as f64
    } else {
        0.0
    };
    let final_tally = Tally::of(held(&engine), &live);
    let per_change = |n: usize| {
        if settings.changes > 0 {
            n as f64 / settings.changes as f64
        } else {
            0.0
        }
    };
    let mean_cost = if cost_ratios.is_empty() {
        0.0
    } else {
        cost_ratios.iter().sum::<f64>() / cost_ratios.len() as f64
    };
    let max_cost = cost_ratios.iter().copied().fold(0.0f64, f64::max);
    println!(
        "changes ({layout}): incremental p50 {:.1} ms, from scratch p50 {:.1} ms, ratio {ratio_p50:.1}x; {sound}/{checks} samples sound, cost {mean_cost:.3}x from scratch (max {max_cost:.3}x)",
        incremental.p50_us as f64 / 1e3,
        from_scratch.p50_us as f64 / 1e3
    );
    Ok(Changes {
        workers: layout.workers,
        processes: layout.processes,
        pods,
        changes: settings.changes,
        sample_every,
        incremental,
        incremental_add: Percentiles::of(&adds),
        incremental_remove: Percentiles::of(&removes),
        mean_decision_diffs: per_change(diffs_total),
        mean_launch_diffs: per_change(launch_diffs),
        mean_binding_diffs: per_change(binding_diffs),
        max_decision_diffs: max_diffs,
        carried_on: dovetail_queries::solver::carried_on_runs() - carried_before,
        from_scratch,
        ratio_p50,
        checks,
        agreeing,
        sound,
        mean_cost_vs_scratch: mean_cost,
        max_cost_vs_scratch: max_cost,
        disagreements,
        final_tally,
    })
}
