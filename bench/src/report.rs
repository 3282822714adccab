//! Tables (markdown, printed and written to `report.md`), `summary.json` and an SVG chart
//! (`dovetail-charts`).

use crate::measure::{Changes, Percentiles, Results, Settings};
use anyhow::{Context, Result};
use dovetail_charts::{bar_charts, tick_label, Bar, BarChart, BarGroup, Reference, Scale};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;

/// Karpenter's published figure (kubernetes-sigs/karpenter PR #1950): its scheduling benchmark
/// over its sizes.
pub const KARPENTER_PODS_PER_SEC: f64 = 781.6;
pub const KARPENTER_PODS: u64 = 40_151;
pub const KARPENTER_SECONDS: f64 = 51.4;

#[derive(Debug, Serialize)]
struct Karpenter {
    source: &'static str,
    pods_per_sec: f64,
    pods: u64,
    seconds: f64,
}

#[derive(Debug, Serialize)]
struct Summary<'a> {
    command: &'a str,
    settings: &'a Settings,
    mix: &'static str,
    karpenter: Karpenter,
    results: &'a Results,
    notes: &'a [String],
}

const MIX: &str = "one NodePool; 400 fake instance types (type i: i+1 vCPU, 2(i+1) GiB, 10(i+1) pods; \
on-demand in 3 zones, spot in 2, all priced 0.1/vCPU + 0.1/GB; zero overhead); pods in five equal groups \
(generic; zone spread maxSkew 1; hostname spread maxSkew 1; zone self-affinity; hostname self \
anti-affinity), CPU from {100,250,500,1000,1500}m, memory from {100,256,512,1024,2048,4096}Mi, drawn \
uniformly with a seeded generator";

fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1e3)
}

/// The markdown tables.
pub fn tables(settings: &Settings, results: &Results, notes: &[String]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## Cold solve (facts sent to decisions returned)\n");
    let _ = writeln!(
        s,
        "| workers | pods | seconds | pods/s | vs Karpenter ({KARPENTER_PODS_PER_SEC} pods/s) | launches | bound | unschedulable | unaccounted | launch $/h |"
    );
    let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for c in &results.cold {
        let _ = writeln!(
            s,
            "| {} | {} | {:.3} | {:.0} | {:.2}x | {} | {} | {} | {} | {:.2} |",
            c.workers,
            c.pods,
            c.seconds,
            c.pods_per_sec,
            c.pods_per_sec / KARPENTER_PODS_PER_SEC,
            c.tally.launches,
            c.tally.bound,
            c.tally.unschedulable,
            c.tally.unaccounted,
            c.tally.launch_price_per_hour
        );
    }
    let _ = writeln!(
        s,
        "\nKarpenter (PR #1950): {KARPENTER_PODS_PER_SEC} pods/s over its benchmark sizes ({KARPENTER_PODS} pods in {KARPENTER_SECONDS} s), measured on other hardware with its six-group mix.\n"
    );
    if !results.changes.is_empty() {
        let pods = results.changes.first().map(|c| c.pods).unwrap_or(0);
        let _ = writeln!(
            s,
            "## One change at {pods} pods (alternately add a pod, remove a pod; milliseconds)\n"
        );
        let _ = writeln!(s, "| workers | kind | n | p50 | p90 | p99 | max | mean |");
        let _ = writeln!(s, "|---:|---|---:|---:|---:|---:|---:|---:|");
        for c in &results.changes {
            let rows: [(&str, &Percentiles); 4] = [
                ("incremental", &c.incremental),
                ("incremental: add", &c.incremental_add),
                ("incremental: remove", &c.incremental_remove),
                ("from scratch", &c.from_scratch),
            ];
            for (kind, p) in rows {
                let _ = writeln!(
                    s,
                    "| {} | {kind} | {} | {} | {} | {} | {} | {:.2} |",
                    c.workers,
                    p.count,
                    ms(p.p50_us),
                    ms(p.p90_us),
                    ms(p.p99_us),
                    ms(p.max_us),
                    p.mean_us / 1e3
                );
            }
        }
        let _ = writeln!(s, "\n| workers | from-scratch p50 / incremental p50 | samples sound | cost vs from scratch: mean (max) | decision diffs per change: mean (launches, bindings), max | packing runs carried on | final: bound / unschedulable / unaccounted |");
        let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---|");
        for c in &results.changes {
            let _ = writeln!(
                s,
                "| {} | {:.1}x | {}/{} | {:.3}x ({:.3}x) | {:.1} ({:.1}, {:.1}), {} | {} | {} / {} / {} |",
                c.workers,
                c.ratio_p50,
                c.sound,
                c.checks,
                c.mean_cost_vs_scratch,
                c.max_cost_vs_scratch,
                c.mean_decision_diffs,
                c.mean_launch_diffs,
                c.mean_binding_diffs,
                c.max_decision_diffs,
                c.carried_on,
                c.final_tally.bound,
                c.final_tally.unschedulable,
                c.final_tally.unaccounted
            );
        }
        for c in &results.changes {
            for d in &c.disagreements {
                let _ = writeln!(s, "\n- {} worker(s), UNSOUND {d}", c.workers);
            }
        }
        let _ = writeln!(
            s,
            "\nFrom scratch: a fresh engine computes the state reached after every {} changes from nothing (engine start excluded).",
            settings.effective_sample_every()
        );
    }
    for n in notes {
        let _ = writeln!(s, "\n{n}");
    }
    s
}

/// Reads one percentile.
type Pick = fn(&Percentiles) -> u64;

/// The two charts: cold pods/s per size and worker count; change latency percentiles,
/// incremental vs from scratch.
pub fn chart(results: &Results) -> Result<String> {
    let mut workers: Vec<usize> = results.cold.iter().map(|c| c.workers).collect();
    workers.sort_unstable();
    workers.dedup();
    let mut sizes: Vec<usize> = results.cold.iter().map(|c| c.pods).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let cold_series: Vec<String> = workers.iter().map(|w| format!("{w} worker(s)")).collect();
    let cold_groups: Vec<BarGroup> = sizes
        .iter()
        .map(|&size| BarGroup {
            label: format!("{size} pods"),
            bars: results
                .cold
                .iter()
                .filter(|c| c.pods == size)
                .filter_map(|c| {
                    let series = workers.iter().position(|w| *w == c.workers)?;
                    Some(Bar {
                        series,
                        value: c.pods_per_sec,
                        label: tick_label(c.pods_per_sec),
                    })
                })
                .collect(),
        })
        .collect();
    let reference = format!("Karpenter PR #1950: {KARPENTER_PODS_PER_SEC} pods/s");
    let mut panels = vec![BarChart {
        title: "Cold solve throughput (pods/s, higher is better)",
        y_label: "pods per second",
        series: &cold_series,
        groups: &cold_groups,
        scale: Scale::Linear,
        reference: Some(Reference {
            value: KARPENTER_PODS_PER_SEC,
            label: &reference,
        }),
    }];
    let mut change_series = Vec::new();
    let mut per_series: Vec<&Percentiles> = Vec::new();
    for c in &results.changes {
        add_series(&mut change_series, &mut per_series, c);
    }
    let pick: [(&str, Pick); 4] = [
        ("p50", |p| p.p50_us),
        ("p90", |p| p.p90_us),
        ("p99", |p| p.p99_us),
        ("max", |p| p.max_us),
    ];
    let change_groups: Vec<BarGroup> = pick
        .iter()
        .map(|(label, f)| BarGroup {
            label: label.to_string(),
            bars: per_series
                .iter()
                .enumerate()
                .map(|(series, p)| {
                    let ms = f(p) as f64 / 1e3;
                    Bar {
                        series,
                        value: ms,
                        label: format!("{ms:.1}"),
                    }
                })
                .collect(),
        })
        .collect();
    // A log scale only when the bars span more than a factor of 20; otherwise linear, so that
    // bar heights compare honestly.
    let (lo, hi) = change_groups
        .iter()
        .flat_map(|g| g.bars.iter().map(|b| b.value))
        .filter(|v| *v > 0.0)
        .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let log = hi > 20.0 * lo;
    let pods = results.changes.first().map(|c| c.pods).unwrap_or(0);
    let change_title = format!(
        "One change at {pods} pods: latency (ms{}, lower is better)",
        if log { ", log scale" } else { "" }
    );
    if !results.changes.is_empty() {
        panels.push(BarChart {
            title: &change_title,
            y_label: "milliseconds",
            series: &change_series,
            groups: &change_groups,
            scale: if log { Scale::Log } else { Scale::Linear },
            reference: None,
        });
    }
    Ok(bar_charts(900, 390, &panels)?)
}

fn add_series<'a>(series: &mut Vec<String>, per: &mut Vec<&'a Percentiles>, c: &'a Changes) {
    series.push(format!("incremental, {}w", c.workers));
    per.push(&c.incremental);
    series.push(format!("from scratch, {}w", c.workers));
    per.push(&c.from_scratch);
}

/// What `render` reads back from a `summary.json`.
#[derive(Debug, Deserialize)]
pub struct SavedSummary {
    pub command: String,
    pub settings: Settings,
    pub results: Results,
    #[serde(default)]
    pub notes: Vec<String>,
}

/// Reads a `summary.json` written by [`write_all`].
pub fn read_summary(path: &Path) -> Result<SavedSummary> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Writes `summary.json`, `report.md` and `chart.svg` to `out`.
pub fn write_all(
    out: &Path,
    command: &str,
    settings: &Settings,
    results: &Results,
    notes: &[String],
) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let summary = Summary {
        command,
        settings,
        mix: MIX,
        karpenter: Karpenter {
            source: "kubernetes-sigs/karpenter PR #1950",
            pods_per_sec: KARPENTER_PODS_PER_SEC,
            pods: KARPENTER_PODS,
            seconds: KARPENTER_SECONDS,
        },
        results,
        notes,
    };
    let json = serde_json::to_string_pretty(&summary).context("serialising the summary")?;
    let path = out.join("summary.json");
    std::fs::write(&path, json).with_context(|| format!("writing {}", path.display()))?;
    let md = format!(
        "# dovetail scheduling benchmark\n\nCommand: `{command}`\n\nMix: {MIX}.\n\n{}",
        tables(settings, results, notes)
    );
    let path = out.join("report.md");
    std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))?;
    let path = out.join("chart.svg");
    std::fs::write(&path, chart(results)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
