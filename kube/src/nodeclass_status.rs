//! An EC2NodeClass's status as Karpenter writes it, from what the cloud resolved of its
//! selector terms: `subnets` (the one an instance in each zone launches into, with its zone),
//! `securityGroups`, `amis` (with the `kubernetes.io/arch` requirement each serves), and the
//! conditions `SubnetsReady`, `SecurityGroupsReady`, `AMIsReady` and `Ready` (all three).
//! Capacity reservations and the instance profile are not written (the fields are left as
//! they are).

use dovetail_dataflow::model::EC2NodeClass;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The status subresource's merge patch for `class`, its conditions stamped `now_rfc3339`.
pub fn nodeclass_status(class: &EC2NodeClass, now_rfc3339: &str) -> Value {
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
    ];
    json!({"status": {
        "subnets": subnets,
        "securityGroups": security_groups,
        "amis": amis,
        "conditions": [
            condition("SubnetsReady", ready[0], "Subnets"),
            condition("SecurityGroupsReady", ready[1], "SecurityGroups"),
            condition("AMIsReady", ready[2], "AMIs"),
            condition("Ready", ready.iter().all(|r| *r), "ResolvedSelectors"),
        ],
    }})
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let v = nodeclass_status(&class, "2026-12-03T00:00:00Z");
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
        let ready = &v["status"]["conditions"][3];
        assert_eq!(
            (ready["type"].as_str(), ready["status"].as_str()),
            (Some("Ready"), Some("True"))
        );

        class.status.security_group_ids.clear();
        let v = nodeclass_status(&class, "2026-12-03T00:00:00Z");
        let conditions = v["status"]["conditions"].as_array().expect("conditions");
        let status_of = |t: &str| {
            conditions
                .iter()
                .find(|c| c["type"] == t)
                .map(|c| (c["status"].clone(), c["reason"].clone()))
        };
        assert_eq!(
            status_of("SecurityGroupsReady"),
            Some((json!("False"), json!("SecurityGroupsNotFound")))
        );
        assert_eq!(status_of("Ready").map(|s| s.0), Some(json!("False")));
        assert_eq!(status_of("SubnetsReady").map(|s| s.0), Some(json!("True")));
    }
}
