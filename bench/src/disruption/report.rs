//! The disruption benchmark's report: a Markdown table, an SVG chart, and the raw summary.

use super::measure::{Results, Settings};
use crate::measure::Percentiles;
use anyhow::{Context, Result};
use dovetail_charts::{bar_charts, Bar, BarChart, BarGroup, Scale};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;

#[derive(Debug, Serialize, Deserialize)]
pub struct Summary {
    pub command: String,
    pub settings: Settings,
    pub results: Results,
}

fn ms(us: u64) -> String {
    format!("{:.1}", us as f64 / 1e3)
}

fn row(out: &mut String, name: &str, p: &Percentiles) {
    let _ = writeln!(
        out,
        "| {name} | {} | {} | {} | {} | {} |",
        p.count,
        ms(p.p50_us),
        ms(p.p90_us),
        ms(p.p99_us),
        ms(p.max_us)
    );
}

pub fn markdown(s: &Summary) -> String {
    let r = &s.results;
    let mut out = String::new();
    let _ = writeln!(out, "# Disruption benchmark\n");
    let _ = writeln!(out, "Command: `{}`\n", s.command);
    let _ = writeln!(
        out,
        "{} nodes, {} bound pods, {} timely worker(s). Cold evaluation of every candidate: **{:.2} s**.\n",
        r.nodes, r.pods, s.settings.workers, r.cold_seconds
    );
    let _ = writeln!(
        out,
        "Latency of the disruption outputs after one change (ms, hdrhistogram):\n"
    );
    let _ = writeln!(out, "| change | count | p50 | p90 | p99 | max |");
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for (k, p) in &r.changes {
        row(&mut out, k, p);
    }
    row(&mut out, "all changes", &r.all_changes);
    row(&mut out, "from scratch (whole evaluation)", &r.from_scratch);
    let _ = writeln!(
        out,
        "\nFrom scratch p50 / incremental p50: **{:.1}×**. Final decisions equal a from-scratch run: {}.\n",
        r.ratio_p50, r.agrees_with_scratch
    );
    let _ = writeln!(
        out,
        "Cold outcome: commands {:?}, blocked {:?}, {} replacement launches, ${:.2}/h saved.",
        r.cold_outcome.commands_by_reason,
        r.cold_outcome.blocked_by_reason,
        r.cold_outcome.replacement_launches,
        r.cold_outcome.savings_per_hour
    );
    out
}

/// Bars of p50 and p99 per change kind and from scratch, on a log scale (the from-scratch bars
/// would flatten the others on a linear one).
pub fn chart(r: &Results) -> Result<String> {
    let mut rows: Vec<(String, &Percentiles)> =
        r.changes.iter().map(|(k, p)| (k.clone(), p)).collect();
    rows.push(("from scratch".into(), &r.from_scratch));
    let groups: Vec<BarGroup> = rows
        .iter()
        .map(|(name, p)| BarGroup {
            label: name.clone(),
            bars: [p.p50_us, p.p99_us]
                .iter()
                .enumerate()
                .map(|(series, us)| Bar {
                    series,
                    value: *us as f64 / 1e3,
                    label: format!("{} ms", ms(*us)),
                })
                .collect(),
        })
        .collect();
    let title = format!(
        "Disruption outputs after one change, {} nodes / {} pods (log scale)",
        r.nodes, r.pods
    );
    let series = ["p50".to_string(), "p99".to_string()];
    Ok(bar_charts(
        760,
        380,
        &[BarChart {
            title: &title,
            y_label: "milliseconds",
            series: &series,
            groups: &groups,
            scale: Scale::Log,
            reference: None,
        }],
    )?)
}

pub fn write_all(dir: &Path, summary: &Summary) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = serde_json::to_string_pretty(summary).context("serialising the summary")?;
    std::fs::write(dir.join("summary.json"), json).context("writing summary.json")?;
    std::fs::write(dir.join("report.md"), markdown(summary)).context("writing report.md")?;
    std::fs::write(dir.join("chart.svg"), chart(&summary.results)?).context("writing chart.svg")?;
    Ok(())
}
