//! `karpenter.k8s.aws/v1` EC2NodeClasses: the kubelet settings that change allocatable, the
//! root volume, and the resolved subnets, security groups and AMIs.

use crate::error::FieldResult;
use crate::fields::At;
use crate::meta::meta;
use crate::notes::Notes;
use crate::time::parse_rfc3339_ms;
use dovetail_dataflow::model::{
    CapacityReservation, EC2NodeClass, KubeletConfig, Milli, NodeClassStatus, Threshold,
};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Milli-units in one GiB.
const GIB_MILLI: i128 = 1024 * 1024 * 1024 * 1000;

/// Reads an EC2NodeClass.
pub(crate) fn nodeclass(root: &At, notes: &mut Notes) -> FieldResult<EC2NodeClass> {
    let m = meta(root)?;
    let spec = root.obj("spec")?;
    let (kubelet, enclaves_enabled, root_volume_gib) = match &spec {
        Some(s) => (
            kubelet(s)?,
            match s.obj("enclaveOptions")? {
                Some(e) => e.bool("enabled")?.unwrap_or(false),
                None => false,
            },
            root_volume_gib(s)?,
        ),
        None => (KubeletConfig::default(), false, None),
    };
    let spec_json = canonical(spec.map(|s| s.value()).unwrap_or(&Value::Null)).to_string();
    Ok(EC2NodeClass {
        name: m.name,
        kubelet,
        enclaves_enabled,
        root_volume_gib,
        status: status(root, notes)?,
        spec_json,
    })
}

fn kubelet(spec: &At) -> FieldResult<KubeletConfig> {
    let Some(k) = spec.obj("kubelet")? else {
        return Ok(KubeletConfig::default());
    };
    Ok(KubeletConfig {
        max_pods: k.i64("maxPods")?,
        pods_per_core: k.i64("podsPerCore")?,
        kube_reserved: k.quantity_map("kubeReserved")?,
        system_reserved: k.quantity_map("systemReserved")?,
        eviction_hard: thresholds(&k, "evictionHard")?,
        eviction_soft: thresholds(&k, "evictionSoft")?,
    })
}

/// Eviction thresholds: `"100Mi"` or `"10%"` (`"2.5%"` allowed, to hundredths of a percent).
fn thresholds(k: &At, key: &str) -> FieldResult<BTreeMap<String, Threshold>> {
    let mut out = BTreeMap::new();
    for (signal, v) in k.entries(key)? {
        let text = v.as_string()?;
        let threshold = match text.trim().strip_suffix('%') {
            Some(pct) => {
                Threshold::PercentHundredths(percent_hundredths(pct).ok_or_else(|| {
                    v.err(format!(
                        "{text:?} is not a percentage between 0% and 100% (at most two decimals)"
                    ))
                })?)
            }
            None => Threshold::Quantity(v.as_quantity()?),
        };
        out.insert(signal, threshold);
    }
    Ok(out)
}

/// `"10"` -> 1000, `"2.5"` -> 250. Exact decimal arithmetic: no float rounding.
fn percent_hundredths(text: &str) -> Option<i64> {
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let digits_ok = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if !digits_ok(int) || !digits_ok(frac) || frac.len() > 2 || int.len() > 3 {
        return None;
    }
    let whole: i64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut hundredths: i64 = 0;
    for (i, c) in frac.chars().enumerate() {
        let d = i64::from(c.to_digit(10)?);
        hundredths += if i == 0 { d * 10 } else { d };
    }
    let value = whole * 100 + hundredths;
    (value <= 10_000).then_some(value)
}

/// The root volume's size: the mapping marked `rootVolume: true`, else the first one.
fn root_volume_gib(spec: &At) -> FieldResult<Option<i64>> {
    let mappings = spec.list("blockDeviceMappings")?;
    let mut chosen = None;
    for bdm in &mappings {
        if bdm.bool("rootVolume")? == Some(true) {
            chosen = Some(bdm);
            break;
        }
    }
    let Some(bdm) = chosen.or(mappings.first()) else {
        return Ok(None);
    };
    let Some(ebs) = bdm.obj("ebs")? else {
        return Ok(None);
    };
    let Some(size) = ebs.get("volumeSize")? else {
        return Ok(None);
    };
    let milli: Milli = size.as_quantity()?;
    // Whole GiB, rounded up: EBS sizes are whole GiB, and "100G" needs 94 GiB of them (93.13).
    let gib = (i128::from(milli) + GIB_MILLI - 1) / GIB_MILLI;
    Ok(Some(gib as i64))
}

/// The lists of a status that Karpenter resolves from selector terms: (field, what it is, what
/// dovetail assumes while it is absent).
const RESOLVED: &[(&str, &str, &str)] = &[
    ("subnets", "subnet", "every zone of the region"),
    (
        "securityGroups",
        "security group",
        "its security groups resolve",
    ),
    ("amis", "AMI", "an AMI for every architecture"),
];

/// Why the status says the class launches nothing (as Karpenter, which launches only with a
/// Ready class): a `Ready=False` condition, or a resolved list that is empty. Absent lists are
/// unknown, not empty: dovetail assumes them and notes it.
fn readiness(s: &At, notes: &mut Notes) -> FieldResult<Option<String>> {
    let mut why = Vec::new();
    for c in s.list("conditions")? {
        if c.str("type")?.as_deref() != Some("Ready") {
            continue;
        }
        let detail = [c.str("reason")?, c.str("message")?]
            .into_iter()
            .flatten()
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join(": ");
        let detail = if detail.is_empty() {
            String::new()
        } else {
            format!(" ({detail})")
        };
        match c.str("status")?.as_deref() {
            Some("False") => why.push(format!("status.conditions Ready=False{detail}")),
            Some("Unknown") => notes.add(format!(
                "status.conditions Ready=Unknown{detail}; assumed to become ready (Karpenter waits)"
            )),
            _ => {}
        }
    }
    let mut assumed = Vec::new();
    for (field, what, assumption) in RESOLVED {
        match s.get(field)? {
            Some(list) if list.elements()?.is_empty() => why.push(format!(
                "status.{field} is empty (no {what} matches its selector terms)"
            )),
            Some(_) => {}
            None => assumed.push(format!(
                "status.{field} is absent, so dovetail assumes {assumption}"
            )),
        }
    }
    if !assumed.is_empty() && why.is_empty() {
        notes.add(format!(
            "{} (not resolved in this manifest)",
            assumed.join("; ")
        ));
    }
    Ok((!why.is_empty()).then(|| why.join("; ")))
}

fn status(root: &At, notes: &mut Notes) -> FieldResult<NodeClassStatus> {
    let mut out = NodeClassStatus::default();
    let Some(s) = root.obj("status")? else {
        notes.add(
            "has no status, so dovetail assumes every zone of the region, its security groups and an AMI for every architecture (not resolved in this manifest)",
        );
        return Ok(out);
    };
    out.not_ready = readiness(&s, notes)?;
    for subnet in s.list("subnets")? {
        let zone = subnet.str("zone")?;
        let id = subnet.str("id")?;
        if let (Some(zone), Some(id)) = (&zone, &id) {
            out.subnet_by_zone
                .entry(zone.clone())
                .or_insert_with(|| id.clone());
        }
        if let Some(zone) = zone {
            out.subnet_zones.insert(zone);
        }
        if let Some(id) = id {
            out.subnet_ids.insert(id);
        }
    }
    for sg in s.list("securityGroups")? {
        if let Some(id) = sg.str("id")? {
            out.security_group_ids.insert(id);
        }
    }
    for ami in s.list("amis")? {
        let Some(id) = ami.str("id")? else {
            continue;
        };
        for arch in ami_architectures(&ami)? {
            out.ami_by_arch.entry(arch).or_insert_with(|| id.clone());
        }
        out.ami_ids.insert(id);
    }
    for r in s.list("capacityReservations")? {
        let end_ms = match r.get("endTime")? {
            Some(end) => {
                let text = end.as_string()?;
                Some(
                    parse_rfc3339_ms(&text)
                        .ok_or_else(|| end.err(format!("{text:?} is not an RFC 3339 time")))?,
                )
            }
            None => None,
        };
        // Without its type and zone a reservation offers nothing (a capacity block's end is
        // still read, by the interruption reader).
        let (Some(instance_type), Some(zone)) =
            (r.str("instanceType")?, r.str("availabilityZone")?)
        else {
            continue;
        };
        out.capacity_reservations.push(CapacityReservation {
            id: r.req_str("id")?,
            instance_type,
            zone,
            reservation_type: r
                .str("reservationType")?
                .unwrap_or_else(|| "default".to_string()),
            available: None,
            end_ms,
        });
    }
    Ok(out)
}

/// The `kubernetes.io/arch` values a `status.amis[]` entry's requirements allow (`In` only: the
/// form Karpenter writes).
fn ami_architectures(ami: &At) -> FieldResult<Vec<String>> {
    let mut out = Vec::new();
    for req in ami.list("requirements")? {
        if req.str("key")?.as_deref() == Some("kubernetes.io/arch")
            && req.str("operator")?.as_deref() == Some("In")
        {
            for v in req.list("values")? {
                out.push(v.as_string()?);
            }
        }
    }
    Ok(out)
}

/// `value` with every object's keys sorted, so the JSON text is the same however the manifest
/// ordered them (and whichever map type serde_json was built with).
fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let mut out = Map::new();
            for (k, v) in entries {
                out.insert(k.clone(), canonical(v));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_are_exact() {
        assert_eq!(percent_hundredths("10"), Some(1000));
        assert_eq!(percent_hundredths("2.5"), Some(250));
        assert_eq!(percent_hundredths("0.05"), Some(5));
        assert_eq!(percent_hundredths("100"), Some(10_000));
        assert_eq!(percent_hundredths("101"), None);
        assert_eq!(percent_hundredths("1.234"), None);
        assert_eq!(percent_hundredths("x"), None);
        assert_eq!(percent_hundredths(""), None);
    }
}
