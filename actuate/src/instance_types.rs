//! The instance-type facts: each EC2NodeClass's types as the catalogue resolves them for it
//! (its zones, AMI variants, capacity reservations), priced as the cloud sells them now. Every
//! driver (replay, `run` with a simulated or a real cluster) tells the engine the same facts.

use crate::control_loop::ControlLoop;
use dovetail_dataflow::catalog::{RegionCatalog, ResolveOptions};
use dovetail_dataflow::facts::Fact;

impl ControlLoop {
    /// Makes the instance-type facts what `catalog` resolves for each EC2NodeClass now, with
    /// the actuator's current prices; types a class no longer resolves (its zones shrank, the
    /// catalogue lost them) are retracted.
    pub fn refresh_instance_types(&mut self, catalog: &RegionCatalog) {
        let actuator = self.actuator();
        let mut types = Vec::new();
        for class in actuator.nodeclasses().values() {
            let opts = ResolveOptions::for_node_class(class);
            for mut it in catalog.instance_types(&opts) {
                let sold = actuator.instance_types().get(&it.name);
                for o in it.offerings.iter_mut() {
                    if let Some(s) = sold.and_then(|s| {
                        s.offerings
                            .iter()
                            .find(|so| so.zone == o.zone && so.capacity_type == o.capacity_type)
                    }) {
                        o.price = s.price;
                    }
                }
                types.push(Fact::InstanceType {
                    node_class: class.name.clone(),
                    instance_type: it,
                });
            }
        }
        self.replace_facts(|f| matches!(f, Fact::InstanceType { .. }), types);
    }
}
