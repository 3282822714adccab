//! CreateFleet as the tests ask for it: a launch and the types as the cloud sells them, turned
//! into the request actuation sends (its overrides in Karpenter's order).
#![allow(dead_code)]

use dovetail_actuate::overrides::fleet_overrides;
pub use dovetail_actuate::registration::node_for_instance;
use dovetail_dataflow::backend::{FleetRequest, Instance, LaunchError, OfferingKey};
use dovetail_dataflow::decisions::Launch;
use dovetail_dataflow::model::InstanceType;
use dovetail_sim::{CloudError, SimCloud};
use std::collections::BTreeMap;

/// Why CreateFleet launched nothing, with the launch it was for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FleetError {
    InsufficientCapacity {
        launch: String,
        tried: Vec<OfferingKey>,
    },
    NoMatchingOfferings {
        launch: String,
    },
}

pub trait LaunchExt {
    fn create_fleet(
        &mut self,
        now_ms: i64,
        launch: &Launch,
        types: &BTreeMap<String, InstanceType>,
    ) -> Result<Instance, FleetError>;
    fn terminate(&mut self, now_ms: i64, id: &str) -> Result<(), CloudError>;
}

impl LaunchExt for SimCloud {
    fn create_fleet(
        &mut self,
        now_ms: i64,
        launch: &Launch,
        types: &BTreeMap<String, InstanceType>,
    ) -> Result<Instance, FleetError> {
        let overrides = fleet_overrides(launch, types, &|_| false);
        let request = FleetRequest {
            labels: Default::default(),
            taints: Vec::new(),
            nodeclaim: launch.name.clone(),
            nodepool: launch.nodepool.clone(),
            node_class: None,
            client_token: launch.name.clone(),
            capacity_type: overrides
                .first()
                .map(|o| o.key.capacity_type.clone())
                .unwrap_or_default(),
            overrides,
        };
        self.create_fleet_now(now_ms, &request)
            .map_err(|e| match e {
                LaunchError::InsufficientCapacity { tried } => FleetError::InsufficientCapacity {
                    launch: launch.name.clone(),
                    tried,
                },
                _ => FleetError::NoMatchingOfferings {
                    launch: launch.name.clone(),
                },
            })
    }

    fn terminate(&mut self, now_ms: i64, id: &str) -> Result<(), CloudError> {
        self.terminate_instance(now_ms, id)
    }
}
