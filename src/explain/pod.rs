//! `dovetail explain pod NS/NAME`: where a pending pod may go and what it got. For each
//! NodePool, nearest first, the first thing that rules it out and the one change that would
//! remove it; the preferences relaxed and why; and the binding or launch the engine decided, the
//! launch's types in price order with the offering that makes the cheapest.

use super::decided::Decided;
use super::{Format, Source};
use anyhow::{bail, Result};
use clap::Args;
use dovetail_dataflow::decisions::Launch;
use dovetail_dataflow::provisioning_verdicts::{LaunchVerdict, TypeOffer};
use dovetail_dataflow::scheduling_reasons::{requests_text, PoolRejection, Unschedulable};
use serde::Serialize;
use std::fmt::Write as _;

#[derive(Args)]
pub struct PodArgs {
    /// The pending pod, `namespace/name`.
    pub pod: String,
    #[command(flatten)]
    pub source: Source,
}

/// An instance type's offering, as explain shows it.
#[derive(Debug, Serialize)]
pub struct Offer {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    pub price_per_hour: f64,
}

impl From<&TypeOffer> for Offer {
    fn from(o: &TypeOffer) -> Offer {
        Offer {
            instance_type: o.instance_type.clone(),
            zone: o.zone.clone(),
            capacity_type: o.capacity_type.clone(),
            price_per_hour: o.price.dollars(),
        }
    }
}

/// The NodeClaim the pod waits for.
#[derive(Debug, Serialize)]
pub struct LaunchOut {
    pub name: String,
    pub nodepool: String,
    pub price_per_hour: f64,
    /// Every type the NodeClaim may take, cheapest first, each at the cheapest offering its
    /// requirements allow.
    pub instance_types: Vec<Offer>,
    /// Why the first of them is the price: in words.
    pub why: String,
}

/// What the engine decided for the pod.
#[derive(Debug, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// An existing node or in-flight NodeClaim has room: kube-scheduler binds it there.
    Node {
        node: String,
    },
    /// A new NodeClaim.
    Launch(LaunchOut),
    Unschedulable {
        reason: Unschedulable,
    },
}

/// One NodePool's verdict for the pod.
#[derive(Debug, Serialize)]
pub struct PoolOut {
    pub nodepool: String,
    pub weight: i32,
    /// How many instance types fit (at the level the pod is scheduled with); 0 when ruled out.
    pub instance_types: u32,
    /// The cheapest fitting types.
    pub cheapest: Vec<Offer>,
    /// The first thing that rules it out (`None`: it can take the pod).
    pub blocker: Option<PoolRejection>,
    pub text: String,
    /// The one change that would remove the blocker.
    pub remedy: Option<String>,
}

/// A stricter set of requirements that was tried first and why no NodePool met it.
#[derive(Debug, Serialize)]
pub struct Relaxed {
    pub requirements: String,
    pub dropped_preference: bool,
    /// Each NodePool's first blocker at that level, in words.
    pub why: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct PodExplanation {
    pub pod: String,
    pub requests: String,
    /// The requirements the pod is scheduled with (after relaxing what could not be met).
    pub requirements: String,
    /// The stricter levels tried before, strictest first.
    pub relaxed: Vec<Relaxed>,
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Nearest first: those that can take it, then by how far each blocker is.
    pub nodepools: Vec<PoolOut>,
}

pub fn run(args: PodArgs, wall_clock_ms: u64) -> Result<()> {
    let now_ms = args.source.now.unwrap_or(wall_clock_ms);
    let (decisions, _notes) = crate::plan::decide(
        &args.source.paths,
        &args.source.options(now_ms),
        dovetail_queries::standing_queries_explained,
    )?;
    let Some(e) = explain(&args.pod, &Decided::of(&decisions)) else {
        bail!(
            "{} is not a pending pod in these manifests (a pod bound to a node, a DaemonSet pod or a mirror pod is not provisioned for)",
            args.pod
        );
    };
    let text = match args.source.output {
        Format::Json => format!("{}\n", serde_json::to_string_pretty(&e)?),
        Format::Text => text(&e),
    };
    crate::output::emit("explanation", &text)
}

/// The pod's explanation from the engine's decisions; `None` when it is not pending.
pub fn explain(pod: &str, decided: &Decided) -> Option<PodExplanation> {
    let v = decided.pod_verdict(pod)?;
    let outcome = match decided.outcome(pod)? {
        Err(reason) => Outcome::Unschedulable {
            reason: reason.clone(),
        },
        Ok(target) => match decided.launch(target) {
            None => Outcome::Node {
                node: target.clone(),
            },
            Some(l) => Outcome::Launch(launch_out(l, decided.launch_verdict(&l.name))),
        },
    };
    let chosen = v.chosen as usize;
    let mut nodepools: Vec<PoolOut> = v
        .pools
        .iter()
        .map(|p| {
            // A NodePool whose types fit may still be ruled out by the solver (limits,
            // topology): the pod's own reason says so.
            let solver = match &outcome {
                Outcome::Unschedulable { reason } => reason
                    .rejections()
                    .iter()
                    .find(|(name, _)| *name == p.nodepool)
                    .map(|(_, r)| r.clone()),
                _ => None,
            };
            let (types, cheapest, blocker) = match p.levels.get(chosen) {
                Some(Ok(f)) => (
                    f.types,
                    f.cheapest.iter().map(Offer::from).collect(),
                    solver,
                ),
                Some(Err(r)) => (0, Vec::new(), Some(r.clone())),
                None => (0, Vec::new(), solver),
            };
            let text = match &blocker {
                Some(b) => format!("ruled out: {b}"),
                None => can_take(types, &cheapest),
            };
            PoolOut {
                nodepool: p.nodepool.clone(),
                weight: p.weight,
                instance_types: types,
                cheapest,
                remedy: blocker.as_ref().map(|b| b.remedy(&p.nodepool)),
                blocker,
                text,
            }
        })
        .collect();
    nodepools.sort_by(|a, b| {
        let distance = |p: &PoolOut| p.blocker.as_ref().map(|r| r.distance());
        distance(a)
            .cmp(&distance(b))
            .then_with(|| b.weight.cmp(&a.weight))
            .then_with(|| a.nodepool.cmp(&b.nodepool))
    });
    let relaxed = v
        .levels
        .iter()
        .take(chosen)
        .enumerate()
        .map(|(l, level)| Relaxed {
            requirements: level.requirements.to_string(),
            dropped_preference: level.dropped_preference,
            why: v
                .pools
                .iter()
                .filter_map(|p| match p.levels.get(l) {
                    Some(Err(r)) => Some(format!("NodePool {}: {r}", p.nodepool)),
                    _ => None,
                })
                .collect(),
        })
        .collect();
    Some(PodExplanation {
        pod: pod.to_string(),
        requests: requests_text(&v.requests),
        requirements: v
            .levels
            .get(chosen)
            .map(|l| l.requirements.to_string())
            .unwrap_or_default(),
        relaxed,
        outcome,
        nodepools,
    })
}

fn can_take(types: u32, cheapest: &[Offer]) -> String {
    match cheapest.first() {
        Some(o) => format!(
            "can take it: {types} instance types, cheapest {} {} in {} at ${:.4}/h",
            o.instance_type, o.capacity_type, o.zone, o.price_per_hour
        ),
        None => format!("can take it: {types} instance types"),
    }
}

fn launch_out(l: &Launch, offers: Option<&LaunchVerdict>) -> LaunchOut {
    let instance_types: Vec<Offer> = offers
        .map(|v| v.offers.iter().map(Offer::from).collect())
        .unwrap_or_default();
    let why = match instance_types.first() {
        Some(o) => format!(
            "the cheapest offering it allows is {} {} in {} at ${:.4}/h; CreateFleet is given all {} types ({}) and may take another when that one has no capacity",
            o.instance_type,
            o.capacity_type,
            o.zone,
            o.price_per_hour,
            instance_types.len(),
            if o.capacity_type == "spot" {
                "price-capacity-optimized, as the NodeClaim allows spot"
            } else {
                "lowest price first"
            }
        ),
        None => "no offering of its types is available now".to_string(),
    };
    LaunchOut {
        name: l.name.clone(),
        nodepool: l.nodepool.clone(),
        price_per_hour: l.price.dollars(),
        instance_types,
        why,
    }
}

/// The explanation in words, for a person.
pub fn text(e: &PodExplanation) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Pod {} (requests {})", e.pod, e.requests);
    match &e.outcome {
        Outcome::Node { node } => {
            let _ = writeln!(
                s,
                "  goes to {node}: an existing node or in-flight NodeClaim has room"
            );
        }
        Outcome::Launch(l) => {
            let _ = writeln!(
                s,
                "  waits for launch {} of NodePool {} (${:.4}/h)",
                l.name, l.nodepool, l.price_per_hour
            );
            let _ = writeln!(s, "    {}", l.why);
            let shown: Vec<String> = l
                .instance_types
                .iter()
                .take(8)
                .map(|o| format!("{} ${:.4}", o.instance_type, o.price_per_hour))
                .collect();
            let more = l.instance_types.len().saturating_sub(shown.len());
            let _ = write!(s, "    types in price order: {}", shown.join(", "));
            if more > 0 {
                let _ = write!(s, " and {more} more");
            }
            s.push('\n');
        }
        Outcome::Unschedulable { reason } => {
            let _ = writeln!(s, "  unschedulable: {reason}");
        }
    }
    let _ = writeln!(
        s,
        "  scheduled with requirements {}",
        if e.requirements.is_empty() {
            "(none of its own)"
        } else {
            &e.requirements
        }
    );
    for r in &e.relaxed {
        let _ = writeln!(
            s,
            "  relaxed{}: {} — {}",
            if r.dropped_preference {
                " (a preferred node affinity term)"
            } else {
                ""
            },
            r.requirements,
            if r.why.is_empty() {
                "no NodePool fits".to_string()
            } else {
                r.why.join("; ")
            }
        );
    }
    let _ = writeln!(s, "  NodePools, nearest first:");
    for p in &e.nodepools {
        let _ = writeln!(s, "    {} (weight {}): {}", p.nodepool, p.weight, p.text);
        if let Some(r) = &p.remedy {
            let _ = writeln!(s, "      would change with: {r}");
        }
    }
    s
}
