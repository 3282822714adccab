//! The plan as a table for people.

use crate::plan::PlanOutput;
use std::fmt::Write;

pub fn table(p: &PlanOutput) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} pending pods: {} launches at ${:.4}/h (lower bound ${:.4}/h), {} bound to existing capacity, {} unschedulable",
        p.summary.pods_pending,
        p.summary.launches,
        p.summary.cost_per_hour,
        p.summary.lower_bound_per_hour,
        p.bindings
            .iter()
            .filter(|b| !p.launches.iter().any(|l| l.name == b.node))
            .count(),
        p.unschedulable.len()
    );
    if !p.launches.is_empty() {
        let _ = writeln!(s, "\nLAUNCH                     NODEPOOL      $/H      PODS  ZONES                      CAPACITY          INSTANCE TYPES (cheapest first)");
        for l in &p.launches {
            let mut types = l
                .instance_types
                .iter()
                .take(4)
                .cloned()
                .collect::<Vec<_>>()
                .join(",");
            if l.instance_types.len() > 4 {
                let _ = write!(types, ",… ({} in all)", l.instance_types.len());
            }
            let _ = writeln!(
                s,
                "{:<26} {:<12} {:>8.4} {:>5}  {:<26} {:<17} {}",
                l.name,
                l.nodepool,
                l.price_per_hour,
                l.pods.len(),
                l.zones.join(","),
                l.capacity_types.join(","),
                types
            );
        }
    }
    if !p.unschedulable.is_empty() {
        let _ = writeln!(s, "\nUNSCHEDULABLE POD                          REASON");
        for u in &p.unschedulable {
            let _ = writeln!(s, "{:<42} {}", u.pod, u.reason);
        }
    }
    if !p.notes.is_empty() {
        let _ = writeln!(s, "\nNOTES");
        for n in &p.notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}
