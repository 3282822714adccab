//! Turns loaded manifests into engine facts, resolving each EC2NodeClass's instance types from
//! the catalogue it is given (embedded, or discovered from EC2).

use crate::Manifests;
use dovetail_dataflow::catalog::{RegionCatalog, ResolveOptions};
use dovetail_dataflow::facts::Fact;

/// Everything the manifests say, as facts, with instance types for every EC2NodeClass.
pub fn manifest_facts(m: &Manifests, catalog: &RegionCatalog) -> Vec<Fact> {
    let mut facts = Vec::new();
    for c in &m.nodeclasses {
        let opts = ResolveOptions::for_node_class(c);
        for it in catalog.instance_types(&opts) {
            facts.push(Fact::InstanceType {
                node_class: c.name.clone(),
                instance_type: it,
            });
        }
        facts.push(Fact::NodeClass(c.clone()));
    }
    facts.extend(m.pods.iter().cloned().map(|p| Fact::Pod(p.into())));
    facts.extend(m.nodes.iter().cloned().map(Fact::Node));
    facts.extend(m.nodepools.iter().cloned().map(Fact::NodePool));
    facts.extend(m.overlays.iter().cloned().map(Fact::Overlay));
    facts.extend(m.daemonsets.iter().cloned().map(Fact::DaemonSet));
    facts.extend(m.pdbs.iter().cloned().map(Fact::Pdb));
    facts.extend(m.interruptions.iter().cloned().map(Fact::Interruption));
    facts
}
