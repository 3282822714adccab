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
    if !p.disruptions.is_empty() {
        let _ = writeln!(
            s,
            "{} nodes to disrupt with {} replacement launches at ${:.4}/h, saving ${:.4}/h; {} candidates blocked",
            p.summary.nodes_to_disrupt,
            p.summary.replacement_launches,
            p.summary.replacement_cost_per_hour,
            p.summary.savings_per_hour,
            p.disruptions.iter().filter(|d| d.blocked_by.is_some()).count()
        );
    }
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
            if !l.replaces.is_empty() {
                let _ = write!(types, "  (replaces {})", l.replaces.join(", "));
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
    if !p.disruptions.is_empty() {
        let _ = writeln!(
            s,
            "\nDISRUPT NODE                 REASON         COMMAND          SAVES $/H  REPLACEMENTS          BLOCKED BY"
        );
        for d in &p.disruptions {
            let replacements = if d.replacements.is_empty() {
                "-".to_string()
            } else {
                d.replacements.join(",")
            };
            let _ = writeln!(
                s,
                "{:<28} {:<14} {:<16} {:>9.4}  {:<21} {}",
                d.node,
                d.reason,
                d.command.as_deref().unwrap_or("-"),
                d.savings_per_hour,
                replacements,
                d.blocked_by.as_deref().unwrap_or("-")
            );
        }
    }
    if !p.adoptions.is_empty() {
        let _ = writeln!(
            s,
            "\nADOPT NODECLAIM (write dovetail's drift hashes)  NODEPOOL HASH     NODECLASS HASH"
        );
        for a in &p.adoptions {
            let _ = writeln!(
                s,
                "{:<48} {:<17} {}",
                a.nodeclaim, a.nodepool_hash, a.nodeclass_hash
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
