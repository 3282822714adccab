//! Trace events, in two forms: [`RawEvent`] is a line as written (embedded objects are JSON
//! manifests), [`TraceEvent`] is a line as read (embedded objects parsed into the domain model).
//! The small events (deletions, prices, capacity, interruptions) are the same in both.

use super::reason::{InterruptReason, LineReason};
use dovetail_dataflow::model::{
    DaemonSet, EC2NodeClass, NodeOverlay, NodePool, Pod, PodDisruptionBudget, Price,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `karpenter.sh/capacity-type` of an offering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum CapacityType {
    #[serde(rename = "on-demand")]
    OnDemand,
    #[serde(rename = "spot")]
    Spot,
    #[serde(rename = "reserved")]
    Reserved,
}

impl CapacityType {
    /// The label value (`on-demand`, `spot`, `reserved`), as in [`dovetail_dataflow::model::Offering`].
    pub fn as_str(self) -> &'static str {
        match self {
            CapacityType::OnDemand => "on-demand",
            CapacityType::Spot => "spot",
            CapacityType::Reserved => "reserved",
        }
    }
}

fn default_namespace() -> String {
    "default".to_string()
}

/// `pod_deleted`: the pod `namespace/name` goes away (`namespace` defaults to `default`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodRef {
    #[serde(default = "default_namespace")]
    pub namespace: String,
    pub name: String,
}

impl PodRef {
    /// `namespace/name`, as [`Pod::key`].
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The kinds a trace can `apply` and `delete`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ObjectKind {
    NodePool,
    EC2NodeClass,
    NodeOverlay,
    DaemonSet,
    PodDisruptionBudget,
    PriorityClass,
}

impl ObjectKind {
    pub const ALL: [ObjectKind; 6] = [
        ObjectKind::NodePool,
        ObjectKind::EC2NodeClass,
        ObjectKind::NodeOverlay,
        ObjectKind::DaemonSet,
        ObjectKind::PodDisruptionBudget,
        ObjectKind::PriorityClass,
    ];

    /// The Kubernetes `kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::NodePool => "NodePool",
            ObjectKind::EC2NodeClass => "EC2NodeClass",
            ObjectKind::NodeOverlay => "NodeOverlay",
            ObjectKind::DaemonSet => "DaemonSet",
            ObjectKind::PodDisruptionBudget => "PodDisruptionBudget",
            ObjectKind::PriorityClass => "PriorityClass",
        }
    }

    /// The kind named `kind`, if a trace can apply it.
    pub fn from_kind(kind: &str) -> Option<ObjectKind> {
        ObjectKind::ALL.into_iter().find(|k| k.as_str() == kind)
    }

    /// DaemonSets and PodDisruptionBudgets live in a namespace; the others are cluster-scoped.
    pub fn namespaced(self) -> bool {
        matches!(
            self,
            ObjectKind::DaemonSet | ObjectKind::PodDisruptionBudget
        )
    }
}

/// `delete`: an applied object goes away. `namespace` is for namespaced kinds only (default
/// `default`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectRef {
    pub kind: ObjectKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

/// `price`: from now on an offering costs `price_per_hour` (dollars, or the region's currency).
/// Without `zone`, every zone of the instance type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceChange {
    pub instance_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    pub capacity_type: CapacityType,
    pub price_per_hour: f64,
}

impl PriceChange {
    /// The price in micro-dollars per hour, as the engine holds prices.
    pub fn price(&self) -> Price {
        Price::from_dollars(self.price_per_hour)
    }
}

/// `capacity`: from now on the simulated cloud holds at most `instances` running instances of the
/// offering; launches beyond that fail as insufficient capacity (0: none at all). Instances
/// already running above the new limit keep running. Without `zone`, the limit applies to each
/// zone of the instance type separately. Offerings no `capacity` event names are unlimited.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacityChange {
    pub instance_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    pub capacity_type: CapacityType,
    pub instances: u32,
}

/// What an interruption is, as the EC2 / AWS Health message Karpenter reacts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InterruptKind {
    /// EC2 Spot Instance Interruption Warning: the instance is reclaimed two minutes later.
    Spot,
    /// EC2 Instance Rebalance Recommendation (Karpenter only records it).
    Rebalance,
    /// AWS Health scheduled change (maintenance): Karpenter replaces the node.
    ScheduledChange,
    /// EC2 instance state change to stopping / terminated: the instance is gone now.
    Terminate,
}

/// Which instances an interruption hits.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InterruptTarget {
    /// One node, by its Node (or NodeClaim) name.
    Node(String),
    /// Every running instance of the type, optionally only in one zone and one capacity type.
    Offering {
        instance_type: String,
        zone: Option<String>,
        capacity_type: Option<CapacityType>,
    },
}

/// `interrupt`: {"node": ...} or {"instance_type": ..., "zone"?: ..., "capacity_type"?: ...},
/// plus `kind`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "InterruptWire", into = "InterruptWire")]
pub struct Interruption {
    pub target: InterruptTarget,
    pub kind: InterruptKind,
}

/// The flat JSON form of [`Interruption`].
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct InterruptWire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    instance_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    capacity_type: Option<CapacityType>,
    kind: InterruptKind,
}

impl TryFrom<InterruptWire> for Interruption {
    type Error = InterruptReason;

    fn try_from(w: InterruptWire) -> Result<Self, InterruptReason> {
        let target = match (w.node, w.instance_type) {
            (Some(node), None) => {
                if w.zone.is_some() || w.capacity_type.is_some() {
                    return Err(InterruptReason::OfferingFieldsWithNode);
                }
                if node.is_empty() {
                    return Err(InterruptReason::EmptyTarget { field: "node" });
                }
                InterruptTarget::Node(node)
            }
            (None, Some(instance_type)) => {
                if instance_type.is_empty() {
                    return Err(InterruptReason::EmptyTarget {
                        field: "instance_type",
                    });
                }
                InterruptTarget::Offering {
                    instance_type,
                    zone: w.zone,
                    capacity_type: w.capacity_type,
                }
            }
            (Some(_), Some(_)) => return Err(InterruptReason::BothTargets),
            (None, None) => return Err(InterruptReason::NoTarget),
        };
        Ok(Interruption {
            target,
            kind: w.kind,
        })
    }
}

impl From<Interruption> for InterruptWire {
    fn from(i: Interruption) -> InterruptWire {
        match i.target {
            InterruptTarget::Node(node) => InterruptWire {
                node: Some(node),
                instance_type: None,
                zone: None,
                capacity_type: None,
                kind: i.kind,
            },
            InterruptTarget::Offering {
                instance_type,
                zone,
                capacity_type,
            } => InterruptWire {
                node: None,
                instance_type: Some(instance_type),
                zone,
                capacity_type,
                kind: i.kind,
            },
        }
    }
}

/// One event as written: pods and applied objects are Kubernetes manifests (JSON objects).
#[derive(Debug, Clone, PartialEq)]
pub enum RawEvent {
    /// `pod_created`: a Pod manifest.
    PodCreated {
        pod: Value,
    },
    PodDeleted(PodRef),
    /// `apply`: a NodePool, EC2NodeClass, NodeOverlay, DaemonSet, PodDisruptionBudget or
    /// PriorityClass manifest, created or replaced.
    Apply {
        object: Value,
    },
    Delete(ObjectRef),
    Price(PriceChange),
    Capacity(CapacityChange),
    Interrupt(Interruption),
}

/// Every event name (`event` field), in the order of the format document.
pub(crate) const EVENT_NAMES: [&str; 7] = [
    "pod_created",
    "pod_deleted",
    "apply",
    "delete",
    "price",
    "capacity",
    "interrupt",
];

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PodBody {
    pod: Value,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApplyBody {
    object: Value,
}

impl RawEvent {
    /// The `event` name of the line.
    pub fn name(&self) -> &'static str {
        match self {
            RawEvent::PodCreated { .. } => "pod_created",
            RawEvent::PodDeleted(_) => "pod_deleted",
            RawEvent::Apply { .. } => "apply",
            RawEvent::Delete(_) => "delete",
            RawEvent::Price(_) => "price",
            RawEvent::Capacity(_) => "capacity",
            RawEvent::Interrupt(_) => "interrupt",
        }
    }

    /// The fields of the line other than `t` and `event`.
    pub(crate) fn body(&self) -> Result<Map<String, Value>, serde_json::Error> {
        let value = match self {
            RawEvent::PodCreated { pod } => {
                let mut m = Map::new();
                m.insert("pod".to_string(), pod.clone());
                return Ok(m);
            }
            RawEvent::Apply { object } => {
                let mut m = Map::new();
                m.insert("object".to_string(), object.clone());
                return Ok(m);
            }
            RawEvent::PodDeleted(r) => serde_json::to_value(r)?,
            RawEvent::Delete(r) => serde_json::to_value(r)?,
            RawEvent::Price(p) => serde_json::to_value(p)?,
            RawEvent::Capacity(c) => serde_json::to_value(c)?,
            RawEvent::Interrupt(i) => serde_json::to_value(i)?,
        };
        match value {
            Value::Object(m) => Ok(m),
            // Every body type above is a struct, hence an object.
            _ => Err(serde::ser::Error::custom("event body is not a JSON object")),
        }
    }

    /// Reads the fields of a line other than `t` and `event`, for event `name`. The error says
    /// what is wrong, without the line number.
    pub(crate) fn from_body(name: &str, body: Map<String, Value>) -> Result<RawEvent, LineReason> {
        let Some(event) = EVENT_NAMES.into_iter().find(|e| *e == name) else {
            return Err(LineReason::UnknownEvent {
                name: name.to_string(),
            });
        };
        let body = Value::Object(body);
        let err = |error: serde_json::Error| LineReason::Body { event, error };
        Ok(match event {
            "pod_created" => {
                let b: PodBody = serde_json::from_value(body).map_err(err)?;
                if !b.pod.is_object() {
                    return Err(LineReason::NotAManifest {
                        event,
                        field: "pod",
                        expected: "a Pod manifest",
                    });
                }
                RawEvent::PodCreated { pod: b.pod }
            }
            "pod_deleted" => RawEvent::PodDeleted(serde_json::from_value(body).map_err(err)?),
            "apply" => {
                let b: ApplyBody = serde_json::from_value(body).map_err(err)?;
                if !b.object.is_object() {
                    return Err(LineReason::NotAManifest {
                        event,
                        field: "object",
                        expected: "a manifest",
                    });
                }
                RawEvent::Apply { object: b.object }
            }
            "delete" => RawEvent::Delete(serde_json::from_value(body).map_err(err)?),
            "price" => RawEvent::Price(serde_json::from_value(body).map_err(err)?),
            "capacity" => RawEvent::Capacity(serde_json::from_value(body).map_err(err)?),
            // Read the wire form first, so that a target named twice over (or not at all) is
            // a typed reason rather than serde's words.
            "interrupt" => {
                let wire: InterruptWire = serde_json::from_value(body).map_err(err)?;
                RawEvent::Interrupt(Interruption::try_from(wire).map_err(LineReason::Interrupt)?)
            }
            other => {
                return Err(LineReason::UnknownEvent {
                    name: other.to_string(),
                })
            }
        })
    }
}

/// An applied object, read by the manifest loader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppliedObject {
    NodePool(NodePool),
    EC2NodeClass(EC2NodeClass),
    NodeOverlay(NodeOverlay),
    DaemonSet(DaemonSet),
    PodDisruptionBudget(PodDisruptionBudget),
    /// Pods created after it (and DaemonSets applied after it) that name the class get its
    /// value as their priority; the reader resolves that.
    PriorityClass {
        name: String,
        value: i32,
        global_default: bool,
    },
}

impl AppliedObject {
    pub fn kind(&self) -> ObjectKind {
        match self {
            AppliedObject::NodePool(_) => ObjectKind::NodePool,
            AppliedObject::EC2NodeClass(_) => ObjectKind::EC2NodeClass,
            AppliedObject::NodeOverlay(_) => ObjectKind::NodeOverlay,
            AppliedObject::DaemonSet(_) => ObjectKind::DaemonSet,
            AppliedObject::PodDisruptionBudget(_) => ObjectKind::PodDisruptionBudget,
            AppliedObject::PriorityClass { .. } => ObjectKind::PriorityClass,
        }
    }

    /// The reference a `delete` of this object would use.
    pub fn object_ref(&self) -> ObjectRef {
        let (namespace, name) = match self {
            AppliedObject::NodePool(o) => (None, o.name.clone()),
            AppliedObject::EC2NodeClass(o) => (None, o.name.clone()),
            AppliedObject::NodeOverlay(o) => (None, o.name.clone()),
            AppliedObject::DaemonSet(o) => (Some(o.namespace.clone()), o.name.clone()),
            AppliedObject::PodDisruptionBudget(o) => (Some(o.namespace.clone()), o.name.clone()),
            AppliedObject::PriorityClass { name, .. } => (None, name.clone()),
        };
        ObjectRef {
            kind: self.kind(),
            namespace,
            name,
        }
    }
}

/// One event as read.
#[derive(Debug, Clone, PartialEq)]
pub enum TraceEvent {
    PodCreated(Box<Pod>),
    PodDeleted(PodRef),
    Apply(Box<AppliedObject>),
    /// For namespaced kinds `namespace` is always set (`default` when the line left it out);
    /// for cluster-scoped kinds it is `None`.
    Delete(ObjectRef),
    /// `price_per_hour` is finite and not negative.
    Price(PriceChange),
    Capacity(CapacityChange),
    Interrupt(Interruption),
}

impl TraceEvent {
    /// The `event` name of the line it was read from.
    pub fn name(&self) -> &'static str {
        match self {
            TraceEvent::PodCreated(_) => "pod_created",
            TraceEvent::PodDeleted(_) => "pod_deleted",
            TraceEvent::Apply(_) => "apply",
            TraceEvent::Delete(_) => "delete",
            TraceEvent::Price(_) => "price",
            TraceEvent::Capacity(_) => "capacity",
            TraceEvent::Interrupt(_) => "interrupt",
        }
    }
}

/// An event with its time and the line it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedEvent {
    /// 1-based line number in the trace (the header is line 1).
    pub line: u64,
    /// Milliseconds since the start of the trace.
    pub t: u64,
    pub event: TraceEvent,
}
