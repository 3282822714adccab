//! The disruption benchmark's report: a Markdown table, an SVG chart, and the raw summary.

use super::measure::{Results, Settings};
use crate::measure::Percentiles;
use anyhow::{Context, Result};
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

/// Horizontal bars of p50 and p99 per change kind and from scratch, on a log scale (the
/// from-scratch bar would flatten the others on a linear one).
pub fn chart(r: &Results) -> String {
    let mut rows: Vec<(String, &Percentiles)> =
        r.changes.iter().map(|(k, p)| (k.clone(), p)).collect();
    rows.push(("from scratch".into(), &r.from_scratch));
    let (w, left, bar_h) = (760.0, 170.0, 14.0);
    let h = 50.0 + rows.len() as f64 * 44.0;
    let max_us = rows
        .iter()
        .map(|(_, p)| p.p99_us.max(p.max_us))
        .max()
        .unwrap_or(1)
        .max(10) as f64;
    let x = |us: u64| left + (w - left - 90.0) * ((us.max(1) as f64).log10() / max_us.log10());
    let mut svg = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">
<text x="10" y="20" font-size="14">Disruption outputs after one change, {} nodes / {} pods (log scale)</text>
"##,
        r.nodes, r.pods
    );
    for (i, (name, p)) in rows.iter().enumerate() {
        let y = 40.0 + i as f64 * 44.0;
        let _ = writeln!(svg, r##"<text x="10" y="{}">{name}</text>"##, y + bar_h);
        for (j, (label, us, color)) in [("p50", p.p50_us, "#4e79a7"), ("p99", p.p99_us, "#f28e2b")]
            .iter()
            .enumerate()
        {
            let yy = y + j as f64 * (bar_h + 2.0);
            let _ = writeln!(
                svg,
                r##"<rect x="{left}" y="{yy}" width="{:.1}" height="{bar_h}" fill="{color}"/><text x="{:.1}" y="{:.1}">{label} {} ms</text>"##,
                (x(*us) - left).max(1.0),
                x(*us) + 4.0,
                yy + bar_h - 3.0,
                ms(*us)
            );
        }
    }
    svg.push_str("</svg>\n");
    svg
}

pub fn write_all(dir: &Path, summary: &Summary) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = serde_json::to_string_pretty(summary).context("serialising the summary")?;
    std::fs::write(dir.join("summary.json"), json).context("writing summary.json")?;
    std::fs::write(dir.join("report.md"), markdown(summary)).context("writing report.md")?;
    std::fs::write(dir.join("chart.svg"), chart(&summary.results)).context("writing chart.svg")?;
    Ok(())
}
