//! The replay report: `summary.json`, `timeline.csv`, SVG charts and an `index.html` that shows
//! them together. Charts are hand-written SVG so the report needs nothing to view but a browser.

use super::run::ReplayOutcome;
use super::summary::TimelineRow;
use std::fmt::Write as _;
use std::path::Path;

/// One line of a chart.
pub struct Series<'a> {
    pub name: &'a str,
    pub colour: &'a str,
    pub points: Vec<(f64, f64)>,
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A line chart with axes, ticks and a legend.
pub fn svg_line_chart(title: &str, x_label: &str, y_label: &str, series: &[Series<'_>]) -> String {
    let (w, h, left, right, top, bottom) = (760.0, 320.0, 70.0, 20.0, 40.0, 50.0);
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let x_max = xs.fold(0.0f64, f64::max).max(1e-9);
    let y_max = ys.fold(0.0f64, f64::max).max(1e-9) * 1.05;
    let px = |x: f64| left + (w - left - right) * x / x_max;
    let py = |y: f64| h - bottom - (h - top - bottom) * y / y_max;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(svg, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = write!(
        svg,
        r#"<text x="{}" y="22" font-size="15" font-weight="bold">{}</text>"#,
        left,
        escape(title)
    );
    for i in 0..=4 {
        let y = y_max * i as f64 / 4.0;
        let _ = write!(
            svg,
            r##"<line x1="{left}" x2="{}" y1="{py}" y2="{py}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
            w - right,
            left - 6.0,
            py(y) + 4.0,
            format_tick(y),
            py = py(y)
        );
        let x = x_max * i as f64 / 4.0;
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            px(x),
            h - bottom + 16.0,
            format_tick(x)
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        (left + w - right) / 2.0,
        h - 10.0,
        escape(x_label)
    );
    let _ = write!(
        svg,
        r#"<text x="16" y="{}" text-anchor="middle" transform="rotate(-90 16 {})">{}</text>"#,
        (top + h - bottom) / 2.0,
        (top + h - bottom) / 2.0,
        escape(y_label)
    );
    for (i, s) in series.iter().enumerate() {
        let mut d = String::new();
        for (j, (x, y)) in s.points.iter().enumerate() {
            let _ = write!(
                d,
                "{}{:.1},{:.1} ",
                if j == 0 { "M" } else { "L" },
                px(*x),
                py(*y)
            );
        }
        let _ = write!(
            svg,
            r#"<path d="{}" fill="none" stroke="{}" stroke-width="1.8"/>"#,
            d.trim_end(),
            s.colour
        );
        let lx = w - right - 200.0;
        let ly = top + 14.0 * i as f64;
        let _ = write!(
            svg,
            r#"<rect x="{lx}" y="{}" width="12" height="3" fill="{}"/><text x="{}" y="{}">{}</text>"#,
            ly - 4.0,
            s.colour,
            lx + 16.0,
            ly,
            escape(s.name)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn format_tick(v: f64) -> String {
    if v >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn points(rows: &[TimelineRow], f: impl Fn(&TimelineRow) -> f64) -> Vec<(f64, f64)> {
    rows.iter()
        .map(|r| (r.minute as f64 / 60.0, f(r)))
        .collect()
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
    let rows = &outcome.timeline;
    let nodes = svg_line_chart(
        "Nodes and pods running",
        "simulated hours",
        "count",
        &[
            Series {
                name: "nodes",
                colour: "#1f77b4",
                points: points(rows, |r| r.nodes as f64),
            },
            Series {
                name: "pods running",
                colour: "#2ca02c",
                points: points(rows, |r| r.pods_running as f64),
            },
        ],
    );
    let pending = svg_line_chart(
        "Pending pods",
        "simulated hours",
        "pods",
        &[Series {
            name: "pods pending",
            colour: "#d62728",
            points: points(rows, |r| r.pods_pending as f64),
        }],
    );
    let cost = svg_line_chart(
        "Cost rate vs lower bound",
        "simulated hours",
        "$ per hour",
        &[
            Series {
                name: "cost rate",
                colour: "#ff7f0e",
                points: points(rows, |r| r.cost_rate),
            },
            Series {
                name: "lower bound",
                colour: "#7f7f7f",
                points: points(rows, |r| r.lower_bound_rate),
            },
        ],
    );
    let disruption = svg_line_chart(
        "Disruption",
        "simulated hours",
        "nodes",
        &[
            Series {
                name: "terminated by disruption (total)",
                colour: "#9467bd",
                points: points(rows, |r| r.nodes_disrupted as f64),
            },
            Series {
                name: "disrupting now",
                colour: "#8c564b",
                points: points(rows, |r| r.nodes_disrupting as f64),
            },
        ],
    );
    std::fs::write(dir.join("nodes.svg"), &nodes)?;
    std::fs::write(dir.join("disruption.svg"), &disruption)?;
    std::fs::write(dir.join("pending.svg"), &pending)?;
    std::fs::write(dir.join("cost.svg"), &cost)?;
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
