//! An EC2NodeClass's status as Karpenter writes it, from what the cloud resolved of its
//! selector terms: `subnets` (the one an instance in each zone launches into, with its zone),
//! `securityGroups`, `amis` (with the `kubernetes.io/arch` requirement each serves),
//! `capacityReservations`, `instanceProfile` (given, or the one made for `spec.role`), and the
//! conditions `SubnetsReady`, `SecurityGroupsReady`, `AMIsReady`, `InstanceProfileReady`,
//! `CapacityReservationsReady` and `Ready` (all of them). A profile made for a role is made at
//! the class's first launch, so `InstanceProfileReady` says it is named, not yet that IAM has it.

use dovetail_dataflow::model::EC2NodeClass;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The status subresource's merge patch for `class` launching with `instance_profile`, its
/// conditions stamped `now_rfc3339`.
pub fn nodeclass_status(
    class: &EC2NodeClass,
    instance_profile: Option<&str>,
    now_rfc3339: &str,
) -> Value {
    let s = &class.status;
    let subnets: Vec<Value> = s
        .subnet_by_zone
        .iter()
        .map(|(zone, id)| json!({"id": id, "zone": zone}))
        .collect();
    let security_groups: Vec<Value> = s
        .security_group_ids
        .iter()
        .map(|id| json!({"id": id}))
        .collect();
    // `amd64/nvidia` is a variant of amd64: the image serves that architecture.
    let mut arches_of: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (variant, id) in &s.ami_by_arch {
        let arch = variant.split('/').next().unwrap_or(variant);
        let arches = arches_of.entry(id.as_str()).or_default();
        if !arches.contains(&arch) {
            arches.push(arch);
        }
    }
    let amis: Vec<Value> = arches_of
        .iter()
        .map(|(id, arches)| {
            json!({"id": id, "requirements": [
                {"key": "kubernetes.io/arch", "operator": "In", "values": arches}]})
        })
        .collect();
    let reservations: Vec<Value> = s
        .capacity_reservations
        .iter()
        .map(|r| {
            let mut v = json!({"id": r.id, "instanceType": r.instance_type,
                "availabilityZone": r.zone, "reservationType": r.reservation_type});
            if let Some(end) = r.end_ms {
                v["endTime"] = json!(dovetail_ingest::format_rfc3339_ms(end));
            }
            v
        })
        .collect();
    let condition = |kind: &str, ready: bool, missing: &str| {
        json!({"type": kind, "status": if ready { "True" } else { "False" },
            "reason": if ready { kind.to_string() } else { format!("{missing}NotFound") },
            "message": if ready { String::new() } else {
                format!("no {} matches the selector terms", missing.to_lowercase())
            },
            "lastTransitionTime": now_rfc3339})
    };
    let ready = [
        !subnets.is_empty(),
        !security_groups.is_empty(),
        !amis.is_empty(),
        instance_profile.is_some(),
    ];
    // Reservations are optional: none selected is as ready as some.
    let mut status = json!({
        "subnets": subnets,
        "securityGroups": security_groups,
        "amis": amis,
        "capacityReservations": reservations,
        "conditions": [
            condition("SubnetsReady", ready[0], "Subnets"),
            condition("SecurityGroupsReady", ready[1], "SecurityGroups"),
            condition("AMIsReady", ready[2], "AMIs"),
            condition("InstanceProfileReady", ready[3], "InstanceProfile"),
            condition("CapacityReservationsReady", true, "CapacityReservations"),
            condition("Ready", ready.iter().all(|r| *r), "ResolvedSelectors"),
        ],
    });
    if let Some(profile) = instance_profile {
        status["instanceProfile"] = json!(profile);
    }
    json!({ "status": status })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_dataflow::model::CapacityReservation;

    #[test]
    fn resolved_selectors_become_karpenters_status() {
        let mut class = EC2NodeClass {
            name: "default".into(),
            ..EC2NodeClass::default()
        };
        class.status.subnet_by_zone = BTreeMap::from([
            ("us-east-1a".into(), "subnet-a".into()),
            ("us-east-1b".into(), "subnet-b".into()),
        ]);
        class.status.security_group_ids = ["sg-1".to_string()].into();
        class.status.ami_by_arch = BTreeMap::from([
            ("amd64".into(), "ami-x86".into()),
            ("amd64/nvidia".into(), "ami-x86".into()),
            ("arm64".into(), "ami-arm".into()),
        ]);
        class.status.capacity_reservations = vec![CapacityReservation {
            id: "cr-1".into(),
            instance_type: "p5.48xlarge".into(),
            zone: "us-east-1a".into(),
            reservation_type: "capacity-block".into(),
            available: Some(1),
            end_ms: Some(1_796_256_000_000),
        }];
        let v = nodeclass_status(&class, Some("prod_0123"), "2026-12-03T00:00:00Z");
        assert_eq!(v["status"]["instanceProfile"], "prod_0123");
        assert_eq!(
            v["status"]["capacityReservations"],
            json!([{"id": "cr-1", "instanceType": "p5.48xlarge", "availabilityZone": "us-east-1a",
                "reservationType": "capacity-block", "endTime": "2026-12-03T00:00:00.000Z"}])
        );
        assert_eq!(
            v["status"]["subnets"],
            json!([{"id": "subnet-a", "zone": "us-east-1a"}, {"id": "subnet-b", "zone": "us-east-1b"}])
        );
        assert_eq!(v["status"]["securityGroups"], json!([{"id": "sg-1"}]));
        assert_eq!(
            v["status"]["amis"],
            json!([
                {"id": "ami-arm", "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]},
                {"id": "ami-x86", "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]},
            ])
        );
        assert_eq!(status_of(&v, "Ready").map(|s| s.0), Some(json!("True")));

        let v = nodeclass_status(&class, None, "2026-12-03T00:00:00Z");
        assert_eq!(
            status_of(&v, "InstanceProfileReady"),
            Some((json!("False"), json!("InstanceProfileNotFound")))
        );
        assert_eq!(status_of(&v, "Ready").map(|s| s.0), Some(json!("False")));
        assert!(v["status"].get("instanceProfile").is_none());

        class.status.security_group_ids.clear();
        let v = nodeclass_status(&class, Some("prod_0123"), "2026-12-03T00:00:00Z");
        assert_eq!(
            status_of(&v, "SecurityGroupsReady"),
            Some((json!("False"), json!("SecurityGroupsNotFound")))
        );
        assert_eq!(status_of(&v, "Ready").map(|s| s.0), Some(json!("False")));
        assert_eq!(
            status_of(&v, "SubnetsReady").map(|s| s.0),
            Some(json!("True"))
        );
    }

    /// A condition's status and reason.
    fn status_of(v: &Value, kind: &str) -> Option<(Value, Value)> {
        v["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == kind)
            .map(|c| (c["status"].clone(), c["reason"].clone()))
    }
}
