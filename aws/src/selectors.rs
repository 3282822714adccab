//! An EC2NodeClass's selector terms resolved as Karpenter resolves them, into the `status` the
//! engine reads (and CreateFleet needs): subnets by `tags` / `id` (DescribeSubnets; per zone, the
//! one with most free addresses), security groups by `tags` / `id` / `name`
//! (DescribeSecurityGroups), AMIs by `id` / `name` / `owner` / `tags` (DescribeImages; the newest
//! per architecture). Terms are ORed, the fields of one term ANDed; a tag value `*` matches any
//! value. An `alias` (`al2023@latest`) is read from the SSM public parameters for the cluster's
//! Kubernetes version, one per architecture and accelerator variant ([`crate::ami_alias`]); an `ssmParameter` term from
//! the parameter it names; either way DescribeImages then gives each image's architecture.
//! Capacity reservations by `id` / `ownerID` / `tags` (DescribeCapacityReservations).

use crate::ami_alias::alias_parameters;
use crate::calls::Calls;
use crate::error::{from_sdk, AwsError};
use crate::sdk::Clients;
use aws_sdk_ec2::types::Filter;
use dovetail_dataflow::model::{CapacityReservation, NodeClassStatus};
use serde_json::Value;
use std::collections::BTreeMap;

/// One selector term's filters, and its `id` (sent as an id list, not a filter).
#[derive(Debug, Clone, Default, PartialEq)]
struct Term {
    id: Option<String>,
    filters: Vec<Filter>,
    owner: Option<String>,
    alias: Option<String>,
    ssm_parameter: Option<String>,
}

fn terms(
    class: &str,
    spec: &Value,
    field: &str,
    name_filter: Option<&str>,
) -> Result<Vec<Term>, AwsError> {
    let error = |i: usize, f: &str, reason: String| AwsError::NodeClass {
        name: class.to_string(),
        field: format!(
            "spec.{field}[{i}]{}",
            if f.is_empty() {
                String::new()
            } else {
                format!(".{f}")
            }
        ),
        reason,
    };
    let Some(list) = spec.get(field) else {
        return Ok(Vec::new());
    };
    let list = list
        .as_array()
        .ok_or_else(|| error(0, "", "must be a list".into()))?;
    let mut out = Vec::new();
    for (i, t) in list.iter().enumerate() {
        let obj = t
            .as_object()
            .ok_or_else(|| error(i, "", "must be an object".into()))?;
        let mut term = Term::default();
        for (k, v) in obj {
            match k.as_str() {
                "id" => {
                    term.id = Some(
                        v.as_str()
                            .ok_or_else(|| error(i, "id", "must be a string".into()))?
                            .to_string(),
                    )
                }
                "tags" => {
                    let tags = v
                        .as_object()
                        .ok_or_else(|| error(i, "tags", "must be a map".into()))?;
                    for (key, value) in tags {
                        let value = value
                            .as_str()
                            .ok_or_else(|| error(i, "tags", format!("{key}: must be a string")))?;
                        term.filters.push(if value == "*" {
                            Filter::builder().name("tag-key").values(key).build()
                        } else {
                            Filter::builder()
                                .name(format!("tag:{key}"))
                                .values(value)
                                .build()
                        });
                    }
                }
                "name" if name_filter.is_some() => {
                    let name = v
                        .as_str()
                        .ok_or_else(|| error(i, "name", "must be a string".into()))?;
                    term.filters.push(
                        Filter::builder()
                            .name(name_filter.unwrap_or("name"))
                            .values(name)
                            .build(),
                    );
                }
                "ownerID" if field == "capacityReservationSelectorTerms" => {
                    let owner = v
                        .as_str()
                        .ok_or_else(|| error(i, "ownerID", "must be a string".into()))?;
                    term.filters
                        .push(Filter::builder().name("owner-id").values(owner).build());
                }
                "owner" if field == "amiSelectorTerms" => {
                    term.owner = Some(
                        v.as_str()
                            .ok_or_else(|| error(i, "owner", "must be a string".into()))?
                            .to_string(),
                    );
                }
                "alias" | "ssmParameter" if field == "amiSelectorTerms" => {
                    let text = v
                        .as_str()
                        .ok_or_else(|| error(i, k, "must be a string".into()))?
                        .to_string();
                    if k == "alias" {
                        if obj.len() > 1 || list.len() > 1 {
                            return Err(error(i, k, "an alias is the only AMI selector term, with no other field (as Karpenter's validation requires)".into()));
                        }
                        term.alias = Some(text);
                    } else {
                        term.ssm_parameter = Some(text);
                    }
                }
                other => return Err(error(i, other, "unknown selector field".into())),
            }
        }
        if term.id.is_none()
            && term.filters.is_empty()
            && term.owner.is_none()
            && term.alias.is_none()
            && term.ssm_parameter.is_none()
        {
            return Err(error(
                i,
                "",
                "an empty term selects everything; give tags, id or name".into(),
            ));
        }
        out.push(term);
    }
    Ok(out)
}

/// The resolved status of one EC2NodeClass (`spec` as JSON).
/// `kubernetes_version` (`1.33`) is what `alias` terms resolve for.
pub async fn resolve(
    clients: &Clients,
    calls: &Calls,
    class: &str,
    spec: &Value,
    kubernetes_version: Option<&str>,
) -> Result<NodeClassStatus, AwsError> {
    let ec2 = &clients.ec2;
    let mut status = NodeClassStatus::default();
    // Subnets: per zone the one with most free addresses.
    let mut best: BTreeMap<String, (i32, String)> = BTreeMap::new();
    for term in terms(class, spec, "subnetSelectorTerms", None)? {
        const ACTION: &str = "DescribeSubnets";
        let out = calls
            .run(ACTION, || async {
                ec2.describe_subnets()
                    .set_subnet_ids(term.id.clone().map(|i| vec![i]))
                    .set_filters(Some(term.filters.clone()).filter(|f| !f.is_empty()))
                    .send()
                    .await
                    .map_err(|e| from_sdk(ACTION, e))
            })
            .await?;
        for s in out.subnets() {
            let (Some(id), Some(zone)) = (s.subnet_id(), s.availability_zone()) else {
                continue;
            };
            let free = s.available_ip_address_count().unwrap_or(0);
            status.subnet_ids.insert(id.to_string());
            status.subnet_zones.insert(zone.to_string());
            let e = best
                .entry(zone.to_string())
                .or_insert((free, id.to_string()));
            if free > e.0 || (free == e.0 && id < e.1.as_str()) {
                *e = (free, id.to_string());
            }
        }
    }
    status.subnet_by_zone = best.into_iter().map(|(z, (_, id))| (z, id)).collect();

    for term in terms(
        class,
        spec,
        "securityGroupSelectorTerms",
        Some("group-name"),
    )? {
        const ACTION: &str = "DescribeSecurityGroups";
        let out = calls
            .run(ACTION, || async {
                ec2.describe_security_groups()
                    .set_group_ids(term.id.clone().map(|i| vec![i]))
                    .set_filters(Some(term.filters.clone()).filter(|f| !f.is_empty()))
                    .send()
                    .await
                    .map_err(|e| from_sdk(ACTION, e))
            })
            .await?;
        for g in out.security_groups() {
            if let Some(id) = g.group_id() {
                status.security_group_ids.insert(id.to_string());
            }
        }
    }

    // AMIs: the newest per architecture (and per variant, for an alias's accelerated images).
    let mut newest: BTreeMap<String, (String, String)> = BTreeMap::new();
    // An alias's images fill the key of the parameter they came from.
    let mut keys_of_image: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (i, term) in terms(class, spec, "amiSelectorTerms", Some("name"))?
        .into_iter()
        .enumerate()
    {
        let field_error = |field: &str, reason: String| AwsError::NodeClass {
            name: class.to_string(),
            field: format!("spec.amiSelectorTerms[{i}].{field}"),
            reason,
        };
        let ids = if let Some(alias) = &term.alias {
            let version = kubernetes_version.ok_or_else(|| {
                field_error(
                    "alias",
                    "resolving an alias needs the cluster's Kubernetes version (--kubernetes-version)".into(),
                )
            })?;
            let mut ids = Vec::new();
            for (key, name) in
                alias_parameters(alias, version).map_err(|r| field_error("alias", r.to_string()))?
            {
                match ssm_parameter(clients, calls, &name).await? {
                    Some(id) => {
                        keys_of_image.entry(id.clone()).or_default().push(key);
                        ids.push(id);
                    }
                    None if key.contains('/') => {
                        status.ami_variants_missing.insert(key);
                    }
                    None => {}
                }
            }
            ids.sort();
            ids.dedup();
            if ids.is_empty() {
                return Err(field_error(
                    "alias",
                    format!("no SSM parameter of {alias} for Kubernetes {version} exists"),
                ));
            }
            Some(ids)
        } else if let Some(name) = &term.ssm_parameter {
            match ssm_parameter(clients, calls, name).await? {
                Some(id) => Some(vec![id]),
                None => {
                    return Err(field_error(
                        "ssmParameter",
                        format!("SSM parameter {name} does not exist"),
                    ))
                }
            }
        } else {
            term.id.clone().map(|i| vec![i])
        };
        const ACTION: &str = "DescribeImages";
        let out = calls
            .run(ACTION, || async {
                ec2.describe_images()
                    .set_image_ids(ids.clone())
                    .set_owners(term.owner.clone().map(|o| vec![o]))
                    .set_filters(Some(term.filters.clone()).filter(|f| !f.is_empty()))
                    .send()
                    .await
                    .map_err(|e| from_sdk(ACTION, e))
            })
            .await?;
        for image in out.images() {
            let (Some(id), Some(arch)) = (
                image.image_id(),
                image.architecture().and_then(|a| kube_arch(a.as_str())),
            ) else {
                continue;
            };
            let created = image.creation_date().unwrap_or_default().to_string();
            status.ami_ids.insert(id.to_string());
            let keys = keys_of_image
                .get(id)
                .cloned()
                .unwrap_or_else(|| vec![arch.to_string()]);
            for key in keys {
                let e = newest
                    .entry(key)
                    .or_insert((created.clone(), id.to_string()));
                if created > e.0 {
                    *e = (created.clone(), id.to_string());
                }
            }
        }
    }
    status.ami_by_arch = newest.into_iter().map(|(key, (_, id))| (key, id)).collect();
    status
        .ami_variants_missing
        .retain(|k| !status.ami_by_arch.contains_key(k));
    status.capacity_reservations = capacity_reservations(clients, calls, class, spec).await?;
    if status.subnet_by_zone.is_empty() {
        return Err(AwsError::NodeClass {
            name: class.to_string(),
            field: "spec.subnetSelectorTerms".into(),
            reason: "selects no subnet".into(),
        });
    }
    if !status.ami_by_arch.keys().any(|k| !k.contains('/')) {
        return Err(AwsError::NodeClass {
            name: class.to_string(),
            field: "spec.amiSelectorTerms".into(),
            reason: "selects no AMI of a supported architecture (x86_64, arm64)".into(),
        });
    }
    Ok(status)
}

/// `capacityReservationSelectorTerms` by `id`, `ownerID` and `tags` (DescribeCapacityReservations):
/// the active reservations, each with the instances it can still take, sorted by id. Karpenter
/// does not use open matching: a reservation is used only when a term selects it.
async fn capacity_reservations(
    clients: &Clients,
    calls: &Calls,
    class: &str,
    spec: &Value,
) -> Result<Vec<CapacityReservation>, AwsError> {
    const ACTION: &str = "DescribeCapacityReservations";
    let mut found: BTreeMap<String, CapacityReservation> = BTreeMap::new();
    for term in terms(class, spec, "capacityReservationSelectorTerms", None)? {
        let term = &term;
        let pages = calls
            .pages(
                ACTION,
                usize::MAX,
                |token| async move {
                    clients
                        .ec2
                        .describe_capacity_reservations()
                        .set_capacity_reservation_ids(term.id.clone().map(|i| vec![i]))
                        .set_filters(Some(term.filters.clone()).filter(|f| !f.is_empty()))
                        .set_next_token(token)
                        .send()
                        .await
                        .map_err(|e| from_sdk(ACTION, e))
                },
                |p| p.next_token(),
            )
            .await?;
        for r in pages.iter().flat_map(|p| p.capacity_reservations()) {
            let Some(id) = r.capacity_reservation_id() else {
                continue;
            };
            if r.state().map(|s| s.as_str()) != Some("active") {
                continue;
            }
            let object = format!("capacity reservation {id}");
            let (Some(instance_type), Some(zone)) = (r.instance_type(), r.availability_zone())
            else {
                return Err(AwsError::response(
                    ACTION,
                    object,
                    "InstanceType/AvailabilityZone",
                    "missing",
                ));
            };
            found.insert(
                id.to_string(),
                CapacityReservation {
                    id: id.to_string(),
                    instance_type: instance_type.to_string(),
                    zone: zone.to_string(),
                    reservation_type: r
                        .reservation_type()
                        .map(|t| t.as_str().to_string())
                        .unwrap_or_else(|| "default".to_string()),
                    available: r.available_instance_count().map(i64::from),
                    end_ms: r.end_date().and_then(|d| d.to_millis().ok()),
                },
            );
        }
    }
    Ok(found.into_values().collect())
}

/// The value of an SSM parameter (an AMI id), `None` when it does not exist.
async fn ssm_parameter(
    clients: &Clients,
    calls: &Calls,
    name: &str,
) -> Result<Option<String>, AwsError> {
    const ACTION: &str = "GetParameter";
    let answer = calls
        .run(ACTION, || async {
            match clients.ssm.get_parameter().name(name).send().await {
                Ok(out) => Ok(out.parameter().and_then(|p| p.value()).map(str::to_string)),
                Err(e) => {
                    let e = from_sdk(ACTION, e);
                    if e.code() == Some("ParameterNotFound") {
                        Ok(None)
                    } else {
                        Err(e)
                    }
                }
            }
        })
        .await?;
    Ok(answer)
}

/// EC2's architecture names as `kubernetes.io/arch` values.
pub fn kube_arch(ec2_arch: &str) -> Option<&'static str> {
    match ec2_arch {
        "x86_64" => Some("amd64"),
        "arm64" => Some("arm64"),
        _ => None,
    }
}
