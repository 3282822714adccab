//! Tables (markdown, printed and written to `report.md`), `summary.json` and a hand-written SVG
//! chart.

use crate::measure::{Changes, Percentiles, Results, Settings};
use anyhow::{Context, Result};
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
        let _ = writeln!(s, "\n| workers | from-scratch p50 / incremental p50 | samples sound | cost vs from scratch: mean (max) | decision diffs per change: mean (launches, bindings), max | final: bound / unschedulable / unaccounted |");
        let _ = writeln!(s, "|---:|---:|---:|---:|---:|---|");
        for c in &results.changes {
            let _ = writeln!(
                s,
                "| {} | {:.1}x | {}/{} | {:.3}x ({:.3}x) | {:.1} ({:.1}, {:.1}), {} | {} / {} / {} |",
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

const COLOURS: [&str; 6] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One bar group: a label and (series index, value, value label) bars.
struct BarGroup {
    label: String,
    bars: Vec<(usize, f64, String)>,
}

/// A bar chart panel at vertical offset `top`. `log` draws the value axis in decades.
#[allow(clippy::too_many_arguments)]
fn panel(
    svg: &mut String,
    top: f64,
    title: &str,
    axis: &str,
    series: &[String],
    groups: &[BarGroup],
    log: bool,
    reference: Option<(f64, &str)>,
) {
    let (left, width, height) = (80.0, 780.0, 260.0);
    let base = top + 40.0 + height;
    let values = groups
        .iter()
        .flat_map(|g| g.bars.iter().map(|b| b.1))
        .chain(reference.map(|r| r.0))
        .filter(|v| *v > 0.0);
    let max = values.clone().fold(0.0f64, f64::max).max(1e-9);
    let min = values.fold(f64::MAX, f64::min);
    let (lo, hi) = if log {
        let lo = 10f64.powf(min.min(max).log10().floor());
        let hi = 10f64.powf(max.log10().ceil().max(lo.log10() + 1.0));
        (lo, hi)
    } else {
        (0.0, max * 1.15)
    };
    let y = |v: f64| {
        let f = if log {
            (v.max(lo).log10() - lo.log10()) / (hi.log10() - lo.log10())
        } else {
            v / hi
        };
        base - f.clamp(0.0, 1.0) * height
    };
    let _ = writeln!(
        svg,
        r#"<text x="{left}" y="{}" font-size="16" font-weight="bold">{}</text>"#,
        top + 22.0,
        esc(title)
    );
    let _ = writeln!(
        svg,
        r#"<text x="18" y="{}" font-size="12" transform="rotate(-90 18 {})" text-anchor="middle">{}</text>"#,
        base - height / 2.0,
        base - height / 2.0,
        esc(axis)
    );
    // Grid lines.
    let ticks: Vec<f64> = if log {
        let mut t = Vec::new();
        let mut v = lo;
        while v <= hi * 1.0001 {
            t.push(v);
            v *= 10.0;
        }
        t
    } else {
        let step = nice_step(hi / 5.0);
        (0..)
            .map(|i| i as f64 * step)
            .take_while(|v| *v <= hi)
            .collect()
    };
    for t in ticks {
        let ty = y(t);
        let _ = writeln!(
            svg,
            r##"<line x1="{left}" y1="{ty:.1}" x2="{}" y2="{ty:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"##,
            left + width,
            left - 6.0,
            ty + 4.0,
            short(t)
        );
    }
    let _ = writeln!(
        svg,
        r##"<line x1="{left}" y1="{base}" x2="{}" y2="{base}" stroke="#333"/>"##,
        left + width
    );
    let group_w = width / groups.len().max(1) as f64;
    for (gi, g) in groups.iter().enumerate() {
        let gx = left + gi as f64 * group_w;
        let n = g.bars.len().max(1) as f64;
        let bar_w = (group_w * 0.8 / n).min(60.0);
        let start = gx + (group_w - bar_w * n) / 2.0;
        for (bi, (s, v, label)) in g.bars.iter().enumerate() {
            let x = start + bi as f64 * bar_w;
            let top_y = y(*v);
            let _ = writeln!(
                svg,
                r#"<rect x="{x:.1}" y="{top_y:.1}" width="{:.1}" height="{:.1}" fill="{}"/><text x="{:.1}" y="{:.1}" font-size="9" text-anchor="middle">{}</text>"#,
                bar_w - 2.0,
                (base - top_y).max(0.0),
                COLOURS[*s % COLOURS.len()],
                x + bar_w / 2.0 - 1.0,
                top_y - 3.0,
                esc(label)
            );
        }
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{}" font-size="12" text-anchor="middle">{}</text>"#,
            gx + group_w / 2.0,
            base + 16.0,
            esc(&g.label)
        );
    }
    if let Some((v, label)) = reference {
        let ry = y(v);
        let _ = writeln!(
            svg,
            r##"<line x1="{left}" y1="{ry:.1}" x2="{}" y2="{ry:.1}" stroke="#c00" stroke-dasharray="6 4"/><text x="{}" y="{:.1}" font-size="11" fill="#c00" text-anchor="end">{}</text>"##,
            left + width,
            left + width,
            ry - 4.0,
            esc(label)
        );
    }
    // Legend.
    for (i, name) in series.iter().enumerate() {
        let lx = left + 10.0 + i as f64 * 190.0;
        let ly = base + 30.0;
        let _ = writeln!(
            svg,
            r#"<rect x="{lx}" y="{ly}" width="12" height="12" fill="{}"/><text x="{}" y="{}" font-size="12">{}</text>"#,
            COLOURS[i % COLOURS.len()],
            lx + 16.0,
            ly + 11.0,
            esc(name)
        );
    }
}

fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    let nice = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * p
}

fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if v == 0.0 || v >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// The two charts: cold pods/s per size and worker count; change latency percentiles,
/// incremental vs from scratch.
pub fn chart(results: &Results) -> String {
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="900" height="780" viewBox="0 0 900 780" font-family="sans-serif">"#
    );
    let _ = writeln!(svg, r#"<rect width="900" height="780" fill="white"/>"#);
    let mut workers: Vec<usize> = results.cold.iter().map(|c| c.workers).collect();
    workers.sort_unstable();
    workers.dedup();
    let mut sizes: Vec<usize> = results.cold.iter().map(|c| c.pods).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let series: Vec<String> = workers.iter().map(|w| format!("{w} worker(s)")).collect();
    let groups: Vec<BarGroup> = sizes
        .iter()
        .map(|&size| BarGroup {
            label: format!("{size} pods"),
            bars: results
                .cold
                .iter()
                .filter(|c| c.pods == size)
                .filter_map(|c| {
                    let s = workers.iter().position(|w| *w == c.workers)?;
                    Some((s, c.pods_per_sec, short(c.pods_per_sec)))
                })
                .collect(),
        })
        .collect();
    let reference = format!("Karpenter PR #1950: {KARPENTER_PODS_PER_SEC} pods/s");
    panel(
        &mut svg,
        0.0,
        "Cold solve throughput (pods/s, higher is better)",
        "pods per second",
        &series,
        &groups,
        false,
        Some((KARPENTER_PODS_PER_SEC, &reference)),
    );
    if !results.changes.is_empty() {
        let pods = results.changes.first().map(|c| c.pods).unwrap_or(0);
        let mut series = Vec::new();
        let mut per_series: Vec<&Percentiles> = Vec::new();
        for c in &results.changes {
            add_series(&mut series, &mut per_series, c);
        }
        let pick: [(&str, Pick); 4] = [
            ("p50", |p| p.p50_us),
            ("p90", |p| p.p90_us),
            ("p99", |p| p.p99_us),
            ("max", |p| p.max_us),
        ];
        let groups: Vec<BarGroup> = pick
            .iter()
            .map(|(label, f)| BarGroup {
                label: label.to_string(),
                bars: per_series
                    .iter()
                    .enumerate()
                    .map(|(i, p)| (i, f(p) as f64 / 1e3, format!("{:.1}", f(p) as f64 / 1e3)))
                    .collect(),
            })
            .collect();
        // A log scale only when the bars span more than a factor of 20; otherwise linear, so
        // that bar heights compare honestly.
        let values: Vec<f64> = groups
            .iter()
            .flat_map(|g| g.bars.iter().map(|b| b.1))
            .filter(|v| *v > 0.0)
            .collect();
        let (lo, hi) = values
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
        let log = hi > 20.0 * lo;
        panel(
            &mut svg,
            390.0,
            &format!(
                "One change at {pods} pods: latency (ms{}, lower is better)",
                if log { ", log scale" } else { "" }
            ),
            "milliseconds",
            &series,
            &groups,
            log,
            None,
        );
    }
    let _ = writeln!(svg, "</svg>");
    svg
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
    std::fs::write(&path, chart(results)).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
