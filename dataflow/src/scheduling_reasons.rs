//! Why a pending pod cannot go somewhere, as data: the NodePool that rules it out and the first
//! thing that does (a requirement with the values on each side, a taint, a limit with its use),
//! put into words only where a person reads it ([`fmt::Display`], for the CLI, JSON and Events).
//! Tools and tests match on the variants; the words are those the free-text reasons had.

use crate::model::quantity::format_milli;
use crate::model::taints::Taint;
use crate::model::{Milli, Requirement, Requirements, Resources};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The first thing that rules a NodePool out for a pod class.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolRejection {
    /// The NodePool cannot launch anything (its EC2NodeClass is missing or not ready).
    NotReady { reason: String },
    /// A taint of the NodePool the pod does not tolerate.
    Taint { taint: Taint },
    /// The pod requires a label that is not well known and the NodePool does not define.
    LabelUndefined { key: String },
    /// The pod's requirement on `key` and the NodePool's share no value.
    /// Boxed sides keep every reason small (a pod class's verdict holds one per NodePool).
    Requirement {
        key: String,
        pod: Box<Requirement>,
        nodepool: Box<Requirement>,
    },
    /// The NodePool's requirements admit no instance type with an available offering.
    NoInstanceTypes,
    /// Requirements of the pod that no instance type of the NodePool meets, each on its own.
    NoTypeHas { unmet: Vec<(String, Requirement)> },
    /// Every requirement is met by some type, but no type meets them all.
    NoTypeMeetsAll { requirements: Requirements },
    /// Types match, but none has room for the requests after DaemonSet overhead; `largest` is
    /// the most CPU any matching type has free.
    TooLarge {
        requests: Resources,
        largest_cpu: Milli,
    },
    /// A type has room, but each such type is larger than what the NodePool's limits leave.
    Limits {
        resource: String,
        limit: Milli,
        used: Milli,
        /// The smallest fitting type's capacity of `resource`.
        needs: Milli,
    },
    /// Types fit, but none has room under the pod's topology spread and anti-affinity.
    NoRoomUnderTopology,
}

impl PoolRejection {
    /// How far the NodePool is from taking the pod: 0 for a limit (raise it), up to 6 for a
    /// NodePool that launches nothing at all. Explanations list NodePools nearest first.
    pub fn distance(&self) -> u8 {
        match self {
            PoolRejection::Limits { .. } => 0,
            PoolRejection::NoRoomUnderTopology => 1,
            PoolRejection::TooLarge { .. } => 2,
            PoolRejection::Requirement { .. }
            | PoolRejection::NoTypeHas { .. }
            | PoolRejection::NoTypeMeetsAll { .. } => 3,
            PoolRejection::LabelUndefined { .. } => 4,
            PoolRejection::Taint { .. } => 5,
            PoolRejection::NotReady { .. } | PoolRejection::NoInstanceTypes => 6,
        }
    }

    /// The one change to NodePool `pool` (or to the pod) that removes this blocker, in words.
    pub fn remedy(&self, pool: &str) -> String {
        match self {
            PoolRejection::NotReady { reason } => {
                format!("making NodePool {pool} ready ({reason})")
            }
            PoolRejection::Taint { taint } => format!(
                "adding a toleration of {taint} to the pod, or removing that taint from NodePool {pool}"
            ),
            PoolRejection::LabelUndefined { key } => format!(
                "adding {key} to NodePool {pool}'s template labels or requirements"
            ),
            PoolRejection::Requirement { key, pod, .. } => match pod.operator() {
                crate::model::requirements::Operator::In => format!(
                    "adding {} to NodePool {pool}'s requirement on {key}",
                    values(pod)
                ),
                _ => format!("removing NodePool {pool}'s requirement on {key}, or the pod's"),
            },
            PoolRejection::NoInstanceTypes => format!(
                "widening NodePool {pool}'s requirements until an instance type with an available offering matches"
            ),
            PoolRejection::NoTypeHas { unmet } => {
                let (key, req) = &unmet[0];
                format!(
                    "allowing instance types with {key} {req} in NodePool {pool}'s requirements"
                )
            }
            PoolRejection::NoTypeMeetsAll { .. } => format!(
                "relaxing one of the pod's node requirements, or widening NodePool {pool}'s instance types"
            ),
            PoolRejection::TooLarge { requests, .. } => format!(
                "allowing larger instance types in NodePool {pool} (the pod asks {}), or lowering the pod's requests",
                requests_text(requests)
            ),
            PoolRejection::Limits {
                resource,
                used,
                needs,
                ..
            } => format!(
                "raising NodePool {pool}'s limits.{resource} to at least {}",
                quantity(resource, used.saturating_add(*needs))
            ),
            PoolRejection::NoRoomUnderTopology => format!(
                "allowing more zones in NodePool {pool}, or a larger maxSkew in the pod's topology spread"
            ),
        }
    }
}

/// A quantity of `resource` as a manifest writes it: memory in Mi, the rest in whole units or
/// milli-units.
fn quantity(resource: &str, v: Milli) -> String {
    if resource == "memory" {
        format!("{}Mi", v / (1024 * 1024 * 1000))
    } else {
        format_milli(v)
    }
}

fn values(r: &Requirement) -> String {
    let s = r.to_string();
    // `In [a, b]` → `a, b`: the remedy names the values, not the operator.
    s.strip_prefix("In [")
        .and_then(|v| v.strip_suffix(']'))
        .map(str::to_string)
        .unwrap_or(s)
}

/// `cpu 1500m, memory 2048Mi, nvidia.com/gpu 1`: the requests as the reasons always gave them.
pub fn requests_text(r: &Resources) -> String {
    format!(
        "cpu {}m, memory {}Mi{}",
        r.cpu,
        r.memory / (1024 * 1024 * 1000),
        r.extended
            .iter()
            .map(|(k, v)| format!(", {k} {}", format_milli(*v)))
            .collect::<String>()
    )
}

impl fmt::Display for PoolRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolRejection::NotReady { reason } => write!(f, "{reason}"),
            PoolRejection::Taint { taint } => write!(f, "taint {taint} is not tolerated"),
            PoolRejection::LabelUndefined { key } => write!(
                f,
                "incompatible requirements: {key}: label is not defined by the NodePool (add it to the template labels or requirements)"
            ),
            PoolRejection::Requirement { key, pod, nodepool } => write!(
                f,
                "incompatible requirements: {key}: {pod} does not intersect {nodepool}"
            ),
            PoolRejection::NoInstanceTypes => write!(
                f,
                "the NodePool's requirements admit no instance type with an available offering"
            ),
            PoolRejection::NoTypeHas { unmet } => {
                for (i, (key, req)) in unmet.iter().enumerate() {
                    if i > 0 {
                        write!(f, "; ")?;
                    }
                    write!(f, "no instance type has {key} {req}")?;
                }
                Ok(())
            }
            PoolRejection::NoTypeMeetsAll { requirements } => write!(
                f,
                "no instance type meets all of {requirements} with an available offering"
            ),
            PoolRejection::TooLarge { requests, .. } => write!(
                f,
                "no instance type has room for the requests ({}) after DaemonSet overhead",
                requests_text(requests)
            ),
            PoolRejection::Limits {
                resource,
                limit,
                used,
                needs,
            } => write!(
                f,
                "limits reached ({resource}: {} of {} used, the smallest fitting type needs {})",
                quantity(resource, *used),
                quantity(resource, *limit),
                quantity(resource, *needs)
            ),
            PoolRejection::NoRoomUnderTopology => write!(
                f,
                "no compatible instance type has room under the pod's topology and requirements"
            ),
        }
    }
}

/// Why copies of a pending pod class were not placed: the solver's failure, and the
/// `Unschedulable` decision's reason.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unschedulable {
    /// There is no NodePool at all.
    NoNodePool,
    /// Every NodePool is ruled out (sorted by NodePool name); empty when none is compatible
    /// and none said why.
    NodePools {
        rejections: Vec<(String, PoolRejection)>,
    },
    /// Topology spread or anti-affinity admits no more pods in any domain.
    Topology,
    /// Required pod affinity on `key` (the class selects itself) and no domain is available.
    NoAffinityDomain { key: String },
    /// Required pod affinity to pods matching `selector`, and none runs in any `key` domain.
    NoAffinityPeer { selector: Requirements, key: String },
    /// A reason from outside the engine (a test, or a peer), kept as given.
    Other { reason: String },
}

impl Unschedulable {
    /// The NodePools ruled out and why, if that is the reason.
    pub fn rejections(&self) -> &[(String, PoolRejection)] {
        match self {
            Unschedulable::NodePools { rejections } => rejections,
            _ => &[],
        }
    }
}

impl fmt::Display for Unschedulable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unschedulable::NoNodePool => write!(f, "no NodePool exists"),
            Unschedulable::NodePools { rejections } if rejections.is_empty() => {
                write!(f, "no NodePool is compatible")
            }
            Unschedulable::NodePools { rejections } => {
                for (i, (pool, r)) in rejections.iter().enumerate() {
                    if i > 0 {
                        write!(f, "; ")?;
                    }
                    write!(f, "NodePool {pool}: {r}")?;
                }
                Ok(())
            }
            Unschedulable::Topology => write!(
                f,
                "topology: no domain admits more pods without exceeding maxSkew or repeating an anti-affine pod"
            ),
            Unschedulable::NoAffinityDomain { key } => {
                write!(f, "pod affinity: no {key} domain is available")
            }
            Unschedulable::NoAffinityPeer { selector, key } => write!(
                f,
                "pod affinity: no pod matching {selector} runs in any {key} domain"
            ),
            Unschedulable::Other { reason } => write!(f, "{reason}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::requirements::Operator;
    use crate::model::taints::Effect;

    #[test]
    fn reasons_cross_processes_as_timely_serialises_them() {
        // Timely exchanges decisions between processes with bincode, which cannot read
        // self-describing representations (an internally tagged enum failed to deserialise).
        let reason = Unschedulable::NodePools {
            rejections: vec![
                (
                    "general".into(),
                    PoolRejection::Requirement {
                        key: "kubernetes.io/arch".into(),
                        pod: Box::new(Requirement::new(Operator::In, ["s390x"])),
                        nodepool: Box::new(Requirement::new(Operator::In, ["amd64", "arm64"])),
                    },
                ),
                ("empty".into(), PoolRejection::NoInstanceTypes),
            ],
        };
        let bytes = bincode::serialize(&reason).expect("serialises");
        let back: Unschedulable = bincode::deserialize(&bytes).expect("deserialises");
        assert_eq!(back, reason);
    }

    #[test]
    fn words_name_the_pool_and_both_sides() {
        let r = Unschedulable::NodePools {
            rejections: vec![
                (
                    "arm".into(),
                    PoolRejection::Requirement {
                        key: "kubernetes.io/arch".into(),
                        pod: Box::new(Requirement::new(Operator::In, ["amd64"])),
                        nodepool: Box::new(Requirement::new(Operator::In, ["arm64"])),
                    },
                ),
                (
                    "gpu".into(),
                    PoolRejection::Taint {
                        taint: Taint {
                            key: "nvidia.com/gpu".into(),
                            value: String::new(),
                            effect: Effect::NoSchedule,
                        },
                    },
                ),
            ],
        };
        let text = r.to_string();
        assert!(text.contains("NodePool arm: incompatible requirements: kubernetes.io/arch"));
        assert!(text.contains("NodePool gpu: taint nvidia.com/gpu:NoSchedule is not tolerated"));
    }

    #[test]
    fn remedies_say_what_to_change() {
        let r = PoolRejection::Requirement {
            key: "kubernetes.io/arch".into(),
            pod: Box::new(Requirement::new(Operator::In, ["arm64"])),
            nodepool: Box::new(Requirement::new(Operator::In, ["amd64"])),
        };
        assert_eq!(
            r.remedy("general"),
            "adding arm64 to NodePool general's requirement on kubernetes.io/arch"
        );
        let l = PoolRejection::Limits {
            resource: "cpu".into(),
            limit: 10_000,
            used: 8_000,
            needs: 4_000,
        };
        assert_eq!(
            l.remedy("general"),
            "raising NodePool general's limits.cpu to at least 12"
        );
        assert!(l.distance() < r.distance());
    }
}
