//! `dovetail replay`: the command-line edge of the replay driver (`dovetail::replay`).

use anyhow::{Context, Result};
use clap::Args;
use dovetail::replay::{replay, write_report, Progress, ReplayOptions, ReplaySummary};
use dovetail_actuate::BatchWindow;
use dovetail_sim::SimConfig;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
pub struct ReplayArgs {
    /// The trace (dovetail trace format, JSON lines).
    trace: PathBuf,
    /// NodePools, EC2NodeClasses (and overlays, DaemonSets, PDBs) applied at time 0.
    #[arg(long)]
    nodepools: Vec<PathBuf>,
    /// Simulation settings (JSON or YAML): capacity per offering, boot delays, interruptions.
    #[arg(long)]
    sim_config: Option<PathBuf>,
    /// Seed for every random draw (overrides the sim config's).
    #[arg(long)]
    seed: Option<u64>,
    /// Run at this multiple of real time instead of as fast as possible (finite, above 0).
    #[arg(long, value_parser = crate::cli_ranges::parse_speed)]
    speed: Option<f64>,
    /// Write summary.json, timeline.csv, charts and index.html here.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Count malformed trace lines and continue instead of stopping at the first.
    #[arg(long)]
    skip_bad: bool,
    /// Timely worker threads (1 to 256).
    #[arg(short = 'w', long, default_value = "1", value_parser = crate::cli_ranges::parse_workers)]
    pub(crate) workers: usize,
    /// Print the summary as JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Provisioning batch window, Karpenter's (`1s-10s`: a batch of new pending pods closes
    /// after 1 s without a new one, or 10 s after it opened), another `IDLE-MAX` in
    /// milliseconds or with `s`, or `off` (provisioning reacts at once).
    #[arg(long, default_value = "off", value_parser = parse_batch_window)]
    batch_window: BatchWindow,
}

/// `off`, or `IDLE-MAX` with each a number of milliseconds or of seconds (`1s-10s`).
fn parse_batch_window(text: &str) -> Result<BatchWindow, String> {
    if text == "off" {
        return Ok(BatchWindow::OFF);
    }
    let ms = |part: &str| -> Result<i64, String> {
        let (number, scale) = match part.strip_suffix("ms") {
            Some(n) => (n, 1),
            None => match part.strip_suffix('s') {
                Some(n) => (n, 1_000),
                None => (part, 1),
            },
        };
        number
            .parse::<i64>()
            .ok()
            .filter(|n| *n > 0)
            .and_then(|n| n.checked_mul(scale))
            .ok_or_else(|| format!("{part:?} is not a positive duration (e.g. 1s, 500ms)"))
    };
    let (idle, max) = text
        .split_once('-')
        .ok_or_else(|| format!("{text:?}: expected off or IDLE-MAX, e.g. 1s-10s"))?;
    let (idle, max) = (ms(idle)?, ms(max)?);
    if max < idle {
        return Err(format!(
            "{text:?}: the maximum is shorter than the idle time"
        ));
    }
    Ok(BatchWindow {
        idle_ms: idle,
        max_ms: max,
    })
}

fn progress_printer() -> impl FnMut(Progress) {
    let tty = std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut last_line = Instant::now();
    move |p: Progress| {
        let frac = if p.end_ms > 0 {
            p.now_ms as f64 / p.end_ms as f64
        } else {
            1.0
        };
        let text = format!(
            "{:5.1}% simulated {:.1} h of {:.1} h, {} nodes, {} pods pending, {:.1} s",
            frac * 100.0,
            p.now_ms as f64 / 3.6e6,
            p.end_ms as f64 / 3.6e6,
            p.nodes,
            p.pods_pending,
            started.elapsed().as_secs_f64()
        );
        let mut err = std::io::stderr();
        if tty {
            let filled = (frac * 30.0).round() as usize;
            let _ = write!(
                err,
                "\r[{}{}] {text}",
                "#".repeat(filled.min(30)),
                " ".repeat(30 - filled.min(30))
            );
            if p.now_ms >= p.end_ms {
                let _ = writeln!(err);
            }
        } else if last_line.elapsed().as_secs() >= 5 || p.now_ms >= p.end_ms {
            let _ = writeln!(err, "replay: {text}");
            last_line = Instant::now();
        }
    }
}

pub fn run(args: ReplayArgs) -> Result<()> {
    let file = args.trace.display().to_string();
    let reader =
        std::fs::File::open(&args.trace).with_context(|| format!("opening trace {file}"))?;
    let trace =
        dovetail_ingest::trace::read_trace(&file, std::io::BufReader::new(reader), args.skip_bad)?;
    let initial = if args.nodepools.is_empty() {
        dovetail_ingest::Manifests::default()
    } else {
        dovetail_ingest::load_paths(&args.nodepools)?
    };
    let mut sim = match &args.sim_config {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            let value = dovetail_ingest::yaml_value(&p.display().to_string(), &text)?;
            SimConfig::from_json(&value.to_string()).with_context(|| format!("{}", p.display()))?
        }
        None => SimConfig::default(),
    };
    if let Some(seed) = args.seed {
        sim.seed = seed;
    }
    let opts = ReplayOptions {
        sim,
        workers: args.workers,
        speed: args.speed,
        trace_name: file.clone(),
        batch_window: args.batch_window,
        ..ReplayOptions::default()
    };
    let mut outcome = replay(&trace.events, &initial, &opts, progress_printer())?;
    if trace.skipped > 0 {
        outcome.summary.notes.push(format!(
            "{} malformed trace lines were skipped (--skip-bad)",
            trace.skipped
        ));
    }
    if let Some(dir) = &args.report {
        write_report(dir, &outcome)
            .with_context(|| format!("writing the report to {}", dir.display()))?;
    }
    if args.json {
        crate::output::emit(
            "summary",
            &format!("{}\n", serde_json::to_string_pretty(&outcome.summary)?),
        )?;
    } else {
        crate::output::emit("summary", &summary_text(&outcome.summary))?;
        if let Some(dir) = &args.report {
            let line = format!("report: {}\n", dir.join("index.html").display());
            crate::output::emit("report's path", &line)?;
        }
    }
    Ok(())
}

fn summary_text(s: &ReplaySummary) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "replayed {} ({:.1} simulated hours) in {:.1} s",
        s.trace, s.simulated_hours, s.wall_seconds
    );
    let _ = writeln!(
        out,
        "cost            ${:.2} (lower bound ${:.2}, ratio {:.2})",
        s.total_cost_usd, s.lower_bound_usd, s.cost_over_lower_bound
    );
    for (ct, u) in &s.by_capacity_type {
        let _ = writeln!(
            out,
            "  {ct:<13} ${:.2}, {:.1} node-hours, {} instances",
            u.usd, u.node_hours, u.instances
        );
    }
    let parts: Vec<String> = s
        .cost_breakdown
        .parts()
        .iter()
        .map(|(name, usd)| format!("{name} ${usd:.2}"))
        .collect();
    let _ = writeln!(
        out,
        "  above bound   ${:.2}: {}",
        s.cost_breakdown.gap_usd,
        parts.join(", ")
    );
    let by_disruption: u64 = s.nodes_terminated_by_disruption.values().sum();
    let _ = writeln!(
        out,
        "nodes           {} launched, {} terminated ({} by disruption), peak {}",
        s.nodes_launched, s.nodes_terminated, by_disruption, s.peak_nodes
    );
    let reasons: Vec<String> = s
        .disruptions_by_reason
        .iter()
        .map(|(k, v)| {
            let gone = s
                .nodes_terminated_by_disruption
                .get(k)
                .copied()
                .unwrap_or(0);
            format!("{k} {v} ({gone} terminated)")
        })
        .collect();
    if reasons.is_empty() {
        let _ = writeln!(out, "disruptions     none");
    } else {
        let _ = writeln!(
            out,
            "disruptions     {}; {} commands, {} abandoned, {} replacements launched",
            reasons.join(", "),
            s.disruption_commands,
            s.disruption_commands_abandoned,
            s.disruption_replacements_launched
        );
    }
    let _ = writeln!(
        out,
        "capacity errors {}, interruptions handled {}",
        s.capacity_errors, s.interruptions_handled
    );
    let _ = writeln!(
        out,
        "pods            {} created; pending p50 {} s, p99 {} s, max {} s; {} never scheduled",
        s.pods_created,
        s.pod_pending_seconds.p50,
        s.pod_pending_seconds.p99,
        s.pod_pending_seconds.max,
        s.pods_never_scheduled
    );
    if s.settle_cap_hit {
        let _ = writeln!(
            out,
            "                stopped at the settle cap: {} pods still waiting for a node on its way",
            s.pods_waiting_for_node
        );
    }
    let _ = writeln!(
        out,
        "engine          {} epochs; update p50 {} µs, p99 {} µs, max {} µs",
        s.engine_epochs,
        s.engine_update_micros.p50,
        s.engine_update_micros.p99,
        s.engine_update_micros.max
    );
    for n in &s.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_windows_parse_as_karpenter_writes_them() {
        assert_eq!(parse_batch_window("off"), Ok(BatchWindow::OFF));
        assert_eq!(parse_batch_window("1s-10s"), Ok(BatchWindow::KARPENTER));
        assert_eq!(
            parse_batch_window("500ms-2000"),
            Ok(BatchWindow {
                idle_ms: 500,
                max_ms: 2_000
            })
        );
        assert!(parse_batch_window("10s-1s").is_err());
        assert!(parse_batch_window("1s").is_err());
        assert!(parse_batch_window("-1s-10s").is_err());
        assert!(parse_batch_window("0s-10s").is_err());
    }
}
