//! The instance profile an EC2NodeClass's instances launch with: `spec.instanceProfile` as
//! given, or one dovetail makes for `spec.role` (as Karpenter does): named after the cluster and
//! the EC2NodeClass, under this cluster's IAM path (`/dovetail/CLUSTER/`), tagged as this
//! cluster's, with the role added. Profiles made so that no EC2NodeClass uses any more, and no
//! instance of the cluster runs with, are deleted ([`delete_unused`]), as Karpenter's
//! instance-profile garbage collection does.

use crate::calls::Calls;
use crate::error::{from_sdk, AwsError};
use dovetail_dataflow::stable_hash::stable_hash;
use std::collections::BTreeSet;

/// What the EC2NodeClass asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ProfileSource {
    /// `spec.instanceProfile`: used as it is.
    Given(String),
    /// `spec.role`: a profile is made for it.
    Role(String),
}

impl ProfileSource {
    /// From the EC2NodeClass's spec; `None` when it names neither.
    pub fn from_spec(spec: &serde_json::Value) -> Option<ProfileSource> {
        if let Some(p) = spec.get("instanceProfile").and_then(|v| v.as_str()) {
            return Some(ProfileSource::Given(p.to_string()));
        }
        spec.get("role")
            .and_then(|v| v.as_str())
            .map(|r| ProfileSource::Role(r.to_string()))
    }

    /// The profile's name: the given one, or `CLUSTER_HASH` for a role (Karpenter's form;
    /// stable across restarts, so the profile is found again).
    pub fn name(&self, cluster: &str, region: &str, node_class: &str) -> String {
        match self {
            ProfileSource::Given(p) => p.clone(),
            ProfileSource::Role(_) => {
                let h = stable_hash(&(region, node_class));
                let mut name = format!("{cluster}_{h:016x}");
                // IAM names are at most 128 characters.
                name.truncate(128);
                name
            }
        }
    }
}

/// The IAM path of the profiles made for this cluster: what [`delete_unused`] lists.
pub fn path(cluster: &str) -> String {
    format!("/dovetail/{cluster}/")
}

/// Makes sure the profile exists and holds the role (for `Role`), made under `path`; returns
/// its name.
pub async fn ensure(
    iam: &aws_sdk_iam::Client,
    calls: &Calls,
    source: &ProfileSource,
    name: &str,
    (cluster_tag, path): (&str, &str),
    node_class: &str,
) -> Result<String, AwsError> {
    let ProfileSource::Role(role) = source else {
        return Ok(name.to_string());
    };
    const GET: &str = "GetInstanceProfile";
    let existing = calls
        .run(GET, || async {
            match iam
                .get_instance_profile()
                .instance_profile_name(name)
                .send()
                .await
            {
                Ok(out) => Ok(Some(
                    out.instance_profile()
                        .map(|p| {
                            p.roles()
                                .iter()
                                .map(|r| r.role_name().to_string())
                                .collect::<Vec<_>>()
                        })
                        .unwrap_or_default(),
                )),
                Err(e) => {
                    let e = from_sdk(GET, e);
                    if e.code() == Some("NoSuchEntity") {
                        Ok(None)
                    } else {
                        Err(e)
                    }
                }
            }
        })
        .await?;
    let roles = match existing {
        Some(roles) => roles,
        None => {
            const CREATE: &str = "CreateInstanceProfile";
            let tag = |k: &str, v: &str| {
                aws_sdk_iam::types::Tag::builder()
                    .key(k)
                    .value(v)
                    .build()
                    .map_err(|e| {
                        AwsError::response(CREATE, name.to_string(), "Tags", e.to_string())
                    })
            };
            let tags = vec![
                tag(cluster_tag, "owned")?,
                tag("karpenter.k8s.aws/ec2nodeclass", node_class)?,
            ];
            calls
                .run(CREATE, || async {
                    iam.create_instance_profile()
                        .instance_profile_name(name)
                        .path(path)
                        .set_tags(Some(tags.clone()))
                        .send()
                        .await
                        .map_err(|e| from_sdk(CREATE, e))
                })
                .await?;
            Vec::new()
        }
    };
    if !roles.iter().any(|r| r == role) {
        const ADD: &str = "AddRoleToInstanceProfile";
        calls
            .run(ADD, || async {
                iam.add_role_to_instance_profile()
                    .instance_profile_name(name)
                    .role_name(role)
                    .send()
                    .await
                    .map_err(|e| from_sdk(ADD, e))
            })
            .await
            .map_err(|e| match e {
                AwsError::Call { code, message, .. } if code == "NoSuchEntity" => {
                    AwsError::NodeClass {
                        name: node_class.to_string(),
                        field: "spec.role".into(),
                        reason: format!("role {role} does not exist: {message}"),
                    }
                }
                other => other,
            })?;
    }
    Ok(name.to_string())
}

/// Deletes the profiles under `path` that neither `in_use` (the names the EC2NodeClasses launch
/// with) nor `attached` (the profiles the cluster's live instances run with, from its instance
/// listing) holds: the roles are taken out, then the profile deleted. Returns the names deleted.
pub async fn delete_unused(
    iam: &aws_sdk_iam::Client,
    calls: &Calls,
    path: &str,
    in_use: &BTreeSet<String>,
    attached: &BTreeSet<String>,
) -> Result<Vec<String>, AwsError> {
    const LIST: &str = "ListInstanceProfiles";
    let pages = calls
        .pages(
            LIST,
            usize::MAX,
            |marker| async move {
                iam.list_instance_profiles()
                    .path_prefix(path)
                    .set_marker(marker)
                    .send()
                    .await
                    .map_err(|e| from_sdk(LIST, e))
            },
            |p| p.marker().filter(|_| p.is_truncated()),
        )
        .await?;
    let unused: Vec<(String, Vec<String>)> = pages
        .iter()
        .flat_map(|p| p.instance_profiles())
        .filter(|p| !in_use.contains(p.instance_profile_name()))
        .map(|p| {
            (
                p.instance_profile_name().to_string(),
                p.roles()
                    .iter()
                    .map(|r| r.role_name().to_string())
                    .collect(),
            )
        })
        .collect();
    let mut deleted = Vec::new();
    for (name, roles) in unused {
        if attached.contains(&name) {
            continue;
        }
        for role in &roles {
            const REMOVE: &str = "RemoveRoleFromInstanceProfile";
            calls
                .run(REMOVE, || async {
                    iam.remove_role_from_instance_profile()
                        .instance_profile_name(&name)
                        .role_name(role)
                        .send()
                        .await
                        .map_err(|e| from_sdk(REMOVE, e))
                })
                .await?;
        }
        const DELETE: &str = "DeleteInstanceProfile";
        calls
            .run(DELETE, || async {
                iam.delete_instance_profile()
                    .instance_profile_name(&name)
                    .send()
                    .await
                    .map_err(|e| from_sdk(DELETE, e))
            })
            .await?;
        deleted.push(name);
    }
    Ok(deleted)
}
