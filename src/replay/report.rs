//! The replay report: `summary.json`, `timeline.csv`, SVG charts (`dovetail-charts`) and an
//! `index.html` that shows them together; it needs nothing to view but a browser.

use super::run::ReplayOutcome;
use super::summary::TimelineRow;
use std::fmt::Write as _;
use std::path::Path;

// Under the name the replay has always exported.
use dovetail_charts::{bar_charts, Bar, BarChart, BarGroup, ChartError, Colour, Scale};
pub use dovetail_charts::{line_chart as svg_line_chart, Series};

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn points(rows: &[TimelineRow], f: impl Fn(&TimelineRow) -> f64) -> Vec<(f64, f64)> {
    rows.iter()
        .map(|r| (r.minute as f64 / 60.0, f(r)))
        .collect()
}

/// The four timeline charts and their file names.
fn timeline_charts(rows: &[TimelineRow]) -> Result<[(&'static str, String); 4], ChartError> {
    let nodes = svg_line_chart(
        "Nodes and pods running",
        "simulated hours",
        "count",
        &[
            Series {
                name: "nodes",
                colour: Colour(0x1f77b4),
                points: points(rows, |r| r.nodes as f64),
            },
            Series {
                name: "pods running",
                colour: Colour(0x2ca02c),
                points: points(rows, |r| r.pods_running as f64),
            },
        ],
    )?;
    let pending = svg_line_chart(
        "Pending pods",
        "simulated hours",
        "pods",
        &[Series {
            name: "pods pending",
            colour: Colour(0xd62728),
            points: points(rows, |r| r.pods_pending as f64),
        }],
    )?;
    let cost = svg_line_chart(
        "Cost rate vs lower bound",
        "simulated hours",
        "$ per hour",
        &[
            Series {
                name: "cost rate",
                colour: Colour(0xff7f0e),
                points: points(rows, |r| r.cost_rate),
            },
            Series {
                name: "lower bound",
                colour: Colour(0x7f7f7f),
                points: points(rows, |r| r.lower_bound_rate),
            },
        ],
    )?;
    let disruption = svg_line_chart(
        "Disruption",
        "simulated hours",
        "nodes",
        &[
            Series {
                name: "terminated by disruption (total)",
                colour: Colour(0x9467bd),
                points: points(rows, |r| r.nodes_disrupted as f64),
            },
            Series {
                name: "disrupting now",
                colour: Colour(0x8c564b),
                points: points(rows, |r| r.nodes_disrupting as f64),
            },
        ],
    )?;
    Ok([
        ("nodes.svg", nodes),
        ("disruption.svg", disruption),
        ("pending.svg", pending),
        ("cost.svg", cost),
    ])
}

/// The gap between cost and lower bound as bars, one per part (see `breakdown.rs`).
fn breakdown_chart(b: &super::summary::CostBreakdown) -> Result<String, ChartError> {
    let groups: Vec<BarGroup> = b
        .parts()
        .iter()
        .map(|(name, usd)| BarGroup {
            label: (*name).to_string(),
            bars: vec![Bar {
                series: 0,
                value: *usd,
                label: format!("${usd:.0}"),
            }],
        })
        .collect();
    let series = [format!("$ above the lower bound (gap ${:.0})", b.gap_usd)];
    bar_charts(
        820,
        360,
        &[BarChart {
            title: "Where the cost above the lower bound went",
            y_label: "$",
            series: &series,
            groups: &groups,
            scale: Scale::Linear,
            reference: None,
        }],
    )
}

/// Writes the report files into `dir` (created if missing).
pub fn write_report(dir: &Path, outcome: &ReplayOutcome) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let s = &outcome.summary;
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string_pretty(s).map_err(std::io::Error::other)?,
    )?;
    let mut csv = String::from(
        "minute,nodes,pods_pending,pods_running,cost_rate,lower_bound_rate,nodes_disrupting,nodes_disrupted\n",
    );
    for r in &outcome.timeline {
        let _ = writeln!(
            csv,
            "{},{},{},{},{:.6},{:.6},{},{}",
            r.minute,
            r.nodes,
            r.pods_pending,
            r.pods_running,
            r.cost_rate,
            r.lower_bound_rate,
            r.nodes_disrupting,
            r.nodes_disrupted
        );
    }
    std::fs::write(dir.join("timeline.csv"), csv)?;
    for (file, svg) in timeline_charts(&outcome.timeline).map_err(std::io::Error::other)? {
        std::fs::write(dir.join(file), svg)?;
    }
    std::fs::write(
        dir.join("cost_breakdown.svg"),
        breakdown_chart(&s.cost_breakdown).map_err(std::io::Error::other)?,
    )?;
    let mut table = String::new();
    let json = serde_json::to_value(s).map_err(std::io::Error::other)?;
    if let Some(obj) = json.as_object() {
        for (k, v) in obj {
            let _ = write!(
                table,
                "<tr><th>{}</th><td>{}</td></tr>",
                escape(k),
                escape(&v.to_string())
            );
        }
    }
    let disruptions = disruption_table(s);
    let html = format!(
        r#"<!doctype html><html><head><meta charset="utf-8"><title>dovetail replay: {title}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:820px}}table{{border-collapse:collapse}}th,td{{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px}}</style></head>
<body><h1>dovetail replay: {title}</h1>
<p>Total cost ${cost:.2} over {hours:.1} simulated hours; lower bound ${lb:.2} (ratio {ratio:.2}).</p>
<img src="nodes.svg" alt="nodes over time"><img src="pending.svg" alt="pending pods over time"><img src="cost.svg" alt="cost vs lower bound"><img src="disruption.svg" alt="nodes disrupted over time">
<h2>Cost above the lower bound</h2><img src="cost_breakdown.svg" alt="cost above the lower bound by part">
<h2>Disruption</h2>{disruptions}
<h2>Summary</h2><table>{table}</table><p>Per-minute data: <a href="timeline.csv">timeline.csv</a>; all figures: <a href="summary.json">summary.json</a>.</p></body></html>
"#,
        title = escape(&s.trace),
        cost = s.total_cost_usd,
        hours = s.simulated_hours,
        lb = s.lower_bound_usd,
        ratio = s.cost_over_lower_bound,
    );
    std::fs::write(dir.join("index.html"), html)
}

/// Nodes whose disruption started and nodes terminated, by reason, and the commands.
fn disruption_table(s: &super::summary::ReplaySummary) -> String {
    let mut reasons: Vec<&String> = s
        .disruptions_by_reason
        .keys()
        .chain(s.nodes_terminated_by_disruption.keys())
        .collect();
    reasons.sort();
    reasons.dedup();
    let mut t = String::from(
        "<table><tr><th>reason</th><th>nodes disrupted</th><th>nodes terminated</th></tr>",
    );
    for r in reasons {
        let _ = write!(
            t,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(r),
            s.disruptions_by_reason.get(r).copied().unwrap_or(0),
            s.nodes_terminated_by_disruption
                .get(r)
                .copied()
                .unwrap_or(0)
        );
    }
    let _ = write!(
        t,
        "</table><p>{} commands started, {} abandoned (a replacement failed); {} replacements launched.</p>",
        s.disruption_commands, s.disruption_commands_abandoned, s.disruption_replacements_launched
    );
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(minute: u64, nodes: u64, cost_rate: f64) -> TimelineRow {
        TimelineRow {
            minute,
            nodes,
            pods_pending: 0,
            pods_running: nodes * 10,
            cost_rate,
            lower_bound_rate: cost_rate * 0.8,
            nodes_disrupting: 0,
            nodes_disrupted: 0,
        }
    }

    #[test]
    fn the_breakdown_chart_has_a_bar_per_part() {
        let b = crate::replay::CostBreakdown {
            gap_usd: 100.0,
            boot_usd: 11.0,
            idle_usd: 22.0,
            disruption_lag_usd: 33.0,
            packing_waste_usd: 44.0,
            too_large_usd: 7.0,
            spot_premium_usd: 5.0,
            other_usd: -22.0,
        };
        let svg = breakdown_chart(&b).expect("drawn");
        for (name, usd) in b.parts() {
            assert!(svg.contains(&format!(">\n{name}\n<")), "no {name} in {svg}");
            if usd > 0.0 {
                assert!(svg.contains(&format!("${usd:.0}")), "no {usd} in {svg}");
            }
        }
    }

    #[test]
    fn the_timeline_charts_show_every_series_over_simulated_hours() {
        let rows = [row(0, 0, 0.0), row(60, 4, 1.5), row(120, 2, 0.75)];
        let charts = timeline_charts(&rows).expect("drawn");
        let files: Vec<&str> = charts.iter().map(|c| c.0).collect();
        assert_eq!(
            files,
            ["nodes.svg", "disruption.svg", "pending.svg", "cost.svg"]
        );
        let text = |file: &str| {
            charts
                .iter()
                .find(|c| c.0 == file)
                .map(|c| c.1.clone())
                .unwrap_or_default()
        };
        let cost = text("cost.svg");
        for want in [
            "Cost rate vs lower bound",
            "simulated hours",
            "$ per hour",
            ">\ncost rate\n<",
            ">\nlower bound\n<",
        ] {
            assert!(cost.contains(want), "no {want:?} in {cost}");
        }
        // One line per series, three points each (minutes 0, 60 and 120 are hours 0, 1, 2).
        for colour in ["#FF7F0E", "#7F7F7F"] {
            let line = cost
                .split("<polyline ")
                .find(|e| e.contains(&format!("stroke=\"{colour}\" stroke-width=\"2\"")))
                .unwrap_or_else(|| panic!("no line in {colour}: {cost}"));
            let points = line.split("points=\"").nth(1).unwrap_or("");
            let points = points.split('"').next().unwrap_or("");
            assert_eq!(points.split_whitespace().count(), 3, "{line}");
        }
        let nodes = text("nodes.svg");
        assert!(
            nodes.contains(">\nnodes\n<") && nodes.contains(">\npods running\n<"),
            "{nodes}"
        );
        assert!(text("pending.svg").contains(">\npods pending\n<"));
        assert!(text("disruption.svg").contains(">\nterminated by disruption (total)\n<"));
    }
}
