//! CreateFleet `Type=instant` for one NodeClaim: the request (one launch template config per
//! launch template — one per architecture the overrides span — with the overrides in actuate's
//! order as priorities, the subnet of each override's zone, the tags Karpenter puts at launch) and
//! its answer read back into an [`Instance`] or a [`LaunchError`]. Errors[] entries with a
//! capacity code become the offerings the engine is told are unavailable.

use crate::error::AwsError;
use aws_sdk_ec2::operation::create_fleet::CreateFleetOutput;
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest,
    FleetOnDemandAllocationStrategy, InstanceType, OnDemandOptionsRequest, ResourceType,
    SpotAllocationStrategy, SpotOptionsRequest, Tag, TagSpecification,
    TargetCapacitySpecificationRequest,
};
use dovetail_dataflow::backend::{FleetRequest, Instance, InstanceState, LaunchError, OfferingKey};
use dovetail_dataflow::model::CapacityReservation;
use std::collections::BTreeMap;

const ACTION: &str = "CreateFleet";

/// Error codes that mean "this offering cannot be had now" (Karpenter's unfulfillable-capacity
/// codes): the offering is cached as unavailable for the TTL and the engine replans.
pub const CAPACITY_ERROR_CODES: &[&str] = &[
    "InsufficientInstanceCapacity",
    "InsufficientCapacity",
    "UnfulfillableCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "InsufficientFreeAddressesInSubnet",
    "ReservationCapacityExceeded",
    "Unsupported",
];

/// What a CreateFleet for an EC2NodeClass needs, resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchContext {
    /// The subnet to launch into in each zone.
    pub subnet_by_zone: BTreeMap<String, String>,
    /// The launch template (name) for each key of the status's `ami_by_arch`: an architecture
    /// (`amd64`) or an accelerator variant of one (`amd64/nvidia`).
    pub template_by_arch: BTreeMap<String, String>,
    /// Tags every launched instance gets (the EC2NodeClass's `spec.tags` and this cluster's).
    pub tags: BTreeMap<String, String>,
    /// The EC2NodeClass's capacity reservations, for `reserved` launches.
    pub reservations: Vec<CapacityReservation>,
    /// The launch template (name) of each reservation (by id).
    pub template_by_reservation: BTreeMap<String, String>,
}

impl LaunchContext {
    /// The reservation a `reserved` offering launches into: of those holding the type in the
    /// zone, the one with most instances left (unknown counts last).
    fn reservation_for(&self, instance_type: &str, zone: &str) -> Option<&CapacityReservation> {
        self.reservations
            .iter()
            .filter(|r| r.instance_type == instance_type && r.zone == zone)
            .filter(|r| r.available != Some(0))
            .max_by_key(|r| (r.available.unwrap_or(0), std::cmp::Reverse(r.id.as_str())))
    }
}

const CAPACITY_BLOCK: &str = "capacity-block";

/// The parts of a CreateFleet request.
#[derive(Debug, Clone)]
pub struct FleetCall {
    pub configs: Vec<FleetLaunchTemplateConfigRequest>,
    pub capacity: TargetCapacitySpecificationRequest,
    pub spot: Option<SpotOptionsRequest>,
    pub on_demand: Option<OnDemandOptionsRequest>,
    pub tags: Vec<TagSpecification>,
    /// Subnet → zone of the overrides sent, to read answers that name only the subnet.
    pub zone_of_subnet: BTreeMap<String, String>,
    /// (instance type, zone) → the capacity reservation it was sent for (`reserved` launches).
    pub reservation_of: BTreeMap<(String, String), CapacityReservation>,
}

impl FleetCall {
    /// The launch templates the call names.
    pub fn template_names(&self) -> Vec<String> {
        self.configs
            .iter()
            .filter_map(|c| c.launch_template_specification()?.launch_template_name())
            .map(str::to_string)
            .collect()
    }
}

/// Builds the call. `ami_key_of` gives an instance type's key in `template_by_arch` (its
/// architecture, or its accelerator variant). Overrides whose zone has no subnet, or whose type
/// has no template, are left out; when none is left the launch cannot be made with this
/// EC2NodeClass.
///
/// A `reserved` request launches into capacity reservations, one launch template per
/// reservation (its target): each override goes to the reservation holding its type in its
/// zone. Capacity blocks and ordinary reservations are bought differently (target capacity type
/// `capacity-block` vs `on-demand`), so one call takes only the kind of its first override.
pub fn fleet_call(
    request: &FleetRequest,
    context: &LaunchContext,
    ami_key_of: impl Fn(&str) -> Option<String>,
) -> Result<FleetCall, AwsError> {
    let reserved = request.capacity_type == "reserved";
    let mut blocks: Option<bool> = None;
    let mut reservation_of = BTreeMap::new();
    let mut by_template: BTreeMap<&str, Vec<FleetLaunchTemplateOverridesRequest>> = BTreeMap::new();
    let mut zone_of_subnet = BTreeMap::new();
    for (priority, o) in request.overrides.iter().enumerate() {
        let Some(subnet) = context.subnet_by_zone.get(&o.key.zone) else {
            continue;
        };
        let template = if reserved {
            let Some(r) = context.reservation_for(&o.key.instance_type, &o.key.zone) else {
                continue;
            };
            let block = r.reservation_type == CAPACITY_BLOCK;
            if *blocks.get_or_insert(block) != block {
                continue;
            }
            reservation_of.insert((o.key.instance_type.clone(), o.key.zone.clone()), r.clone());
            context.template_by_reservation.get(&r.id)
        } else {
            ami_key_of(&o.key.instance_type).and_then(|a| context.template_by_arch.get(&a))
        };
        let Some(template) = template else {
            continue;
        };
        zone_of_subnet.insert(subnet.clone(), o.key.zone.clone());
        by_template.entry(template).or_default().push(
            FleetLaunchTemplateOverridesRequest::builder()
                .instance_type(InstanceType::from(o.key.instance_type.as_str()))
                .subnet_id(subnet)
                .availability_zone(&o.key.zone)
                .priority(priority as f64)
                .build(),
        );
    }
    if by_template.is_empty() {
        return Err(AwsError::NodeClass {
            name: request.node_class.clone().unwrap_or_default(),
            field: if reserved {
                "status.subnets / status.amis / status.capacityReservations"
            } else {
                "status.subnets / status.amis"
            }
            .to_string(),
            reason: format!(
                "no subnet or AMI for any of the {} offerings of NodeClaim {}",
                request.overrides.len(),
                request.nodeclaim
            ),
        });
    }
    let configs = by_template
        .into_iter()
        .map(|(template, overrides)| {
            FleetLaunchTemplateConfigRequest::builder()
                .launch_template_specification(
                    FleetLaunchTemplateSpecificationRequest::builder()
                        .launch_template_name(template)
                        .version("$Latest")
                        .build(),
                )
                .set_overrides(Some(overrides))
                .build()
        })
        .collect();
    let spot = request.capacity_type == "spot";
    let capacity = TargetCapacitySpecificationRequest::builder()
        .total_target_capacity(1)
        .default_target_capacity_type(if spot {
            DefaultTargetCapacityType::Spot
        } else if blocks == Some(true) {
            DefaultTargetCapacityType::CapacityBlock
        } else {
            DefaultTargetCapacityType::OnDemand
        })
        .build();
    let mut tags = context.tags.clone();
    tags.insert("karpenter.sh/nodepool".into(), request.nodepool.clone());
    tags.insert("karpenter.sh/nodeclaim".into(), request.nodeclaim.clone());
    if let Some(class) = &request.node_class {
        tags.insert("karpenter.k8s.aws/ec2nodeclass".into(), class.clone());
    }
    tags.insert(
        "Name".into(),
        format!("{}/{}", request.nodepool, request.nodeclaim),
    );
    let tag_list: Vec<Tag> = tags
        .iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect();
    let tag_specs = [
        ResourceType::Instance,
        ResourceType::Volume,
        ResourceType::Fleet,
    ]
    .into_iter()
    .map(|r| {
        TagSpecification::builder()
            .resource_type(r)
            .set_tags(Some(tag_list.clone()))
            .build()
    })
    .collect();
    Ok(FleetCall {
        configs,
        capacity,
        spot: spot.then(|| {
            SpotOptionsRequest::builder()
                .allocation_strategy(SpotAllocationStrategy::PriceCapacityOptimized)
                .build()
        }),
        on_demand: (!spot).then(|| {
            OnDemandOptionsRequest::builder()
                .allocation_strategy(FleetOnDemandAllocationStrategy::LowestPrice)
                .build()
        }),
        tags: tag_specs,
        zone_of_subnet,
        reservation_of,
    })
}

/// The answer: the instance launched (with the capacity errors met first), or why none was.
/// Errors[] with another code and no instance is a failed launch, retried later.
pub fn read_answer(
    request: &FleetRequest,
    call: &FleetCall,
    output: &CreateFleetOutput,
    region: &str,
    now_ms: i64,
) -> Result<Result<Instance, LaunchError>, AwsError> {
    let mut capacity_errors = Vec::new();
    let mut other_errors = Vec::new();
    for e in output.errors() {
        let code = e.error_code().unwrap_or("unknown");
        let overrides = e
            .launch_template_and_overrides()
            .and_then(|l| l.overrides());
        let instance_type = overrides
            .and_then(|o| o.instance_type())
            .map(|t| t.as_str().to_string());
        let zone = overrides.and_then(|o| {
            o.availability_zone().map(str::to_string).or_else(|| {
                o.subnet_id()
                    .and_then(|s| call.zone_of_subnet.get(s).cloned())
            })
        });
        match (CAPACITY_ERROR_CODES.contains(&code), instance_type, zone) {
            (true, Some(t), Some(z)) => {
                let key = OfferingKey::new(t, z, request.capacity_type.clone());
                if !capacity_errors.contains(&key) {
                    capacity_errors.push(key);
                }
            }
            _ => other_errors.push(format!("{code}: {}", e.error_message().unwrap_or_default())),
        }
    }
    let launched = output.instances().iter().find_map(|i| {
        let id = i.instance_ids().first()?;
        Some((id.clone(), i))
    });
    let Some((id, fleet_instance)) = launched else {
        if !capacity_errors.is_empty() {
            return Ok(Err(LaunchError::InsufficientCapacity {
                tried: capacity_errors,
            }));
        }
        if other_errors.is_empty() {
            other_errors.push("CreateFleet launched nothing and gave no error".to_string());
        }
        return Ok(Err(LaunchError::Failed(other_errors.join("; "))));
    };
    let object = format!("instance {id}");
    let overrides = fleet_instance
        .launch_template_and_overrides()
        .and_then(|l| l.overrides());
    let instance_type = fleet_instance
        .instance_type()
        .map(|t| t.as_str().to_string())
        .or_else(|| {
            overrides
                .and_then(|o| o.instance_type())
                .map(|t| t.as_str().to_string())
        })
        .ok_or_else(|| {
            AwsError::response(
                ACTION,
                object.clone(),
                "Instances[].InstanceType",
                "missing",
            )
        })?;
    let zone = overrides
        .and_then(|o| {
            o.availability_zone().map(str::to_string).or_else(|| {
                o.subnet_id()
                    .and_then(|s| call.zone_of_subnet.get(s).cloned())
            })
        })
        .ok_or_else(|| {
            AwsError::response(
                ACTION,
                object.clone(),
                "Instances[].LaunchTemplateAndOverrides.Overrides.AvailabilityZone",
                "missing",
            )
        })?;
    let capacity_type = match fleet_instance.lifecycle().map(|l| l.as_str()) {
        Some("spot") => "spot",
        // EC2 says on-demand of an instance in a reservation.
        _ if request.capacity_type == "reserved" => "reserved",
        Some(_) => "on-demand",
        None => request.capacity_type.as_str(),
    }
    .to_string();
    let reservation = call
        .reservation_of
        .get(&(instance_type.clone(), zone.clone()))
        .filter(|_| capacity_type == "reserved");
    let key = OfferingKey::new(instance_type.clone(), zone.clone(), capacity_type.clone());
    let requested = request
        .overrides
        .iter()
        .find(|o| o.key.instance_type == key.instance_type && o.key.zone == key.zone);
    let Some(requested) = requested else {
        return Err(AwsError::response(
            ACTION,
            object,
            "Instances[].InstanceType",
            format!("{key} was not among the overrides sent"),
        ));
    };
    // EC2 fills by priority: every override before the one filled that has a capacity error
    // was tried first.
    Ok(Ok(Instance {
        id,
        launch: request.nodeclaim.clone(),
        nodepool: request.nodepool.clone(),
        instance_type,
        zone,
        zone_id: requested.zone_id.clone(),
        region: region.to_string(),
        capacity_type,
        price: requested.price,
        launched_ms: now_ms,
        running_ms: now_ms,
        state: InstanceState::Pending,
        interruption_warning_ms: None,
        stopped_ms: None,
        fleet_errors: capacity_errors,
        capacity_reservation_id: reservation.map(|r| r.id.clone()),
        capacity_reservation_type: reservation.map(|r| r.reservation_type.clone()),
    }))
}
