//! `dovetail explain launch NAME`: a planned NodeClaim's pods, the types it may take in price
//! order, and the lower bound of its own pods beside its price — how much of what it costs the
//! pods themselves need.

use super::decided::Decided;
use super::pod::Offer;
use super::{Format, Source};
use anyhow::{bail, Result};
use clap::Args;
use dovetail_dataflow::decisions::Launch;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

#[derive(Args)]
pub struct LaunchArgs {
    /// The launch's name, as `plan` lists it.
    pub name: String,
    #[command(flatten)]
    pub source: Source,
}

#[derive(Debug, Serialize)]
pub struct LaunchExplanation {
    pub launch: String,
    pub nodepool: String,
    pub price_per_hour: f64,
    pub zones: Vec<String>,
    pub capacity_types: Vec<String>,
    pub requirements: String,
    /// The pending pods it holds, `namespace/name`.
    pub pods: Vec<String>,
    /// Cheapest first, each at the cheapest offering the launch allows.
    pub instance_types: Vec<Offer>,
    /// The least any packing could pay per hour for these pods alone: per resource, each pod's
    /// request at the cheapest price per unit among its compatible types; the largest sum.
    pub lower_bound_per_hour: f64,
}

pub fn run(args: LaunchArgs, wall_clock_ms: u64) -> Result<()> {
    let now_ms = args.source.now.unwrap_or(wall_clock_ms);
    let (decisions, _notes) = crate::plan::decide(
        &args.source.paths,
        &args.source.options(now_ms),
        dovetail_queries::standing_queries_explained,
    )?;
    let Some(e) = explain(&args.name, &Decided::of(&decisions)) else {
        bail!(
            "{} is not a launch planned for these manifests (`dovetail plan` lists the launches)",
            args.name
        );
    };
    let text = match args.source.output {
        Format::Json => format!("{}\n", serde_json::to_string_pretty(&e)?),
        Format::Text => text(&e),
    };
    crate::output::emit("explanation", &text)
}

/// The launch's explanation from the engine's decisions; `None` when there is no such launch.
pub fn explain(name: &str, decided: &Decided) -> Option<LaunchExplanation> {
    let l = decided.launch(name)?;
    Some(LaunchExplanation {
        launch: l.name.clone(),
        nodepool: l.nodepool.clone(),
        price_per_hour: l.price.dollars(),
        zones: l.zones.clone(),
        capacity_types: l.capacity_types.clone(),
        requirements: l.requirements.to_string(),
        pods: decided.bound_to(name).into_iter().cloned().collect(),
        instance_types: decided
            .launch_verdict(name)
            .map(|v| v.offers.iter().map(Offer::from).collect())
            .unwrap_or_default(),
        lower_bound_per_hour: own_lower_bound(l, decided),
    })
}

/// The lower bound of the launch's own pods in dollars per hour, as the engine's lower bound
/// charges them (`queries/src/lower_bound.rs`).
fn own_lower_bound(l: &Launch, decided: &Decided) -> f64 {
    let mut sums: BTreeMap<&str, f64> = BTreeMap::new();
    for (class, count) in &l.pods_by_class {
        let Some(v) = decided.class_verdict(*class) else {
            continue;
        };
        for (resource, cost) in &v.unit_cost {
            if cost.get() >= f64::MAX {
                continue;
            }
            let need = v.requests.get(resource) as f64;
            *sums.entry(resource.as_str()).or_insert(0.0) += need * cost.get() * *count as f64;
        }
    }
    sums.values().copied().fold(0.0, f64::max) / 1_000_000.0
}

/// The explanation in words, for a person.
pub fn text(e: &LaunchExplanation) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Launch {} of NodePool {}: ${:.4}/h; its own pods' lower bound ${:.4}/h ({:.2} × the bound)",
        e.launch,
        e.nodepool,
        e.price_per_hour,
        e.lower_bound_per_hour,
        if e.lower_bound_per_hour > 0.0 {
            e.price_per_hour / e.lower_bound_per_hour
        } else {
            0.0
        }
    );
    let _ = writeln!(
        s,
        "  zones {}; capacity types {}",
        e.zones.join(", "),
        e.capacity_types.join(", ")
    );
    let _ = writeln!(s, "  requirements {}", e.requirements);
    let _ = writeln!(s, "  holds {} pods: {}", e.pods.len(), e.pods.join(", "));
    let _ = writeln!(s, "  instance types, cheapest first:");
    for o in &e.instance_types {
        let _ = writeln!(
            s,
            "    {:<16} {:<10} {:<12} ${:.4}/h",
            o.instance_type, o.capacity_type, o.zone, o.price_per_hour
        );
    }
    s
}
