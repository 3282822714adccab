//! Launch templates, one per distinct (EC2NodeClass, AMI, user data, security groups, metadata
//! options, block devices, capacity reservation): the name is a hash of what goes into it, so an unchanged template is
//! reused across restarts and a change makes a new one. Created on demand (a template that exists
//! already is found by name), tagged as this cluster's.

use crate::calls::Calls;
use crate::error::{from_sdk, AwsError};
use aws_sdk_ec2::types::{
    CapacityReservationTarget, LaunchTemplateCapacityReservationSpecificationRequest,
    LaunchTemplateHttpTokensState, LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMarketOptionsRequest, LaunchTemplateInstanceMetadataEndpointState,
    LaunchTemplateInstanceMetadataOptionsRequest, MarketType, RequestLaunchTemplateData,
    ResourceType, Tag, TagSpecification,
};
use base64::Engine as _;
use dovetail_dataflow::stable_hash::stable_hash;
use std::collections::{BTreeMap, BTreeSet};

/// What goes into one launch template.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TemplateSpec {
    pub cluster_name: String,
    pub node_class: String,
    pub image_id: String,
    pub security_group_ids: Vec<String>,
    /// Plain text; base64-encoded when sent.
    pub user_data: String,
    /// `spec.metadataOptions` (Karpenter's defaults: tokens required, hop limit 1).
    pub http_tokens_required: bool,
    pub http_put_response_hop_limit: i32,
    /// The instance profile (IAM role) instances get.
    pub instance_profile: Option<String>,
    /// Tags of the template itself (the cluster's, the EC2NodeClass's).
    pub tags: BTreeMap<String, String>,
    /// The capacity reservation instances launch into (`CapacityReservationTarget`), and
    /// whether it is a capacity block (market type `capacity-block`), as Karpenter makes one
    /// template per reservation.
    pub capacity_reservation: Option<(String, bool)>,
}

impl TemplateSpec {
    /// `dovetail/CLUSTER/HASH`: found again by name while its content is unchanged.
    pub fn name(&self) -> String {
        format!("dovetail/{}/{:016x}", self.cluster_name, stable_hash(self))
    }
}

/// The tag a template carries naming its AMI, so one whose AMI is no longer resolved is found.
pub const IMAGE_ID_TAG: &str = "dovetail/image-id";
/// The tag a reservation's template carries naming it, so one whose reservation is no longer
/// selected is found.
pub const RESERVATION_TAG: &str = "dovetail/capacity-reservation-id";
const NODECLASS_TAG: &str = "karpenter.k8s.aws/ec2nodeclass";

/// Deletes this cluster's launch templates no launch would use again: their EC2NodeClass is
/// gone, or what it resolves (`in_use`: EC2NodeClass → AMI ids and capacity reservation ids) no
/// longer includes their AMI or their reservation. Returns the names deleted.
pub async fn delete_unused(
    ec2: &aws_sdk_ec2::Client,
    calls: &Calls,
    cluster_tag: &str,
    in_use: &BTreeMap<String, BTreeSet<String>>,
) -> Result<Vec<String>, AwsError> {
    const DESCRIBE: &str = "DescribeLaunchTemplates";
    let pages = calls
        .pages(
            DESCRIBE,
            usize::MAX,
            |token| async move {
                ec2.describe_launch_templates()
                    .filters(
                        aws_sdk_ec2::types::Filter::builder()
                            .name("tag-key")
                            .values(cluster_tag)
                            .build(),
                    )
                    .set_next_token(token)
                    .send()
                    .await
                    .map_err(|e| from_sdk(DESCRIBE, e))
            },
            |p| p.next_token(),
        )
        .await?;
    let mut deleted = Vec::new();
    for t in pages.iter().flat_map(|p| p.launch_templates()) {
        let Some(name) = t.launch_template_name() else {
            continue;
        };
        let tag = |k: &str| {
            t.tags()
                .iter()
                .find(|x| x.key() == Some(k))
                .and_then(|x| x.value())
        };
        let used = match (tag(NODECLASS_TAG), tag(IMAGE_ID_TAG)) {
            (Some(class), Some(image)) => in_use.get(class).is_some_and(|ids| {
                ids.contains(image) && tag(RESERVATION_TAG).is_none_or(|r| ids.contains(r))
            }),
            // Not one dovetail made with these tags: left alone.
            _ => true,
        };
        if used {
            continue;
        }
        const DELETE: &str = "DeleteLaunchTemplate";
        calls
            .run(DELETE, || async {
                ec2.delete_launch_template()
                    .launch_template_name(name)
                    .send()
                    .await
                    .map_err(|e| from_sdk(DELETE, e))
            })
            .await?;
        deleted.push(name.to_string());
    }
    Ok(deleted)
}

/// The template's name, after making sure it exists.
pub async fn ensure(
    ec2: &aws_sdk_ec2::Client,
    calls: &Calls,
    spec: &TemplateSpec,
) -> Result<String, AwsError> {
    let name = spec.name();
    const DESCRIBE: &str = "DescribeLaunchTemplates";
    let found = calls
        .run(DESCRIBE, || async {
            match ec2
                .describe_launch_templates()
                .launch_template_names(&name)
                .send()
                .await
            {
                Ok(out) => Ok(!out.launch_templates().is_empty()),
                Err(e) => {
                    let e = from_sdk(DESCRIBE, e);
                    if e.code().is_some_and(|c| c.contains("NotFound")) {
                        Ok(false)
                    } else {
                        Err(e)
                    }
                }
            }
        })
        .await?;
    if found {
        return Ok(name);
    }
    const CREATE: &str = "CreateLaunchTemplate";
    let tags: Vec<Tag> = spec
        .tags
        .iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect();
    let data = RequestLaunchTemplateData::builder()
        .image_id(&spec.image_id)
        .set_security_group_ids(Some(spec.security_group_ids.clone()))
        .user_data(base64::engine::general_purpose::STANDARD.encode(spec.user_data.as_bytes()))
        .set_iam_instance_profile(spec.instance_profile.as_ref().map(|name| {
            LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                .name(name)
                .build()
        }))
        .metadata_options(
            LaunchTemplateInstanceMetadataOptionsRequest::builder()
                .http_endpoint(LaunchTemplateInstanceMetadataEndpointState::Enabled)
                .http_tokens(if spec.http_tokens_required {
                    LaunchTemplateHttpTokensState::Required
                } else {
                    LaunchTemplateHttpTokensState::Optional
                })
                .http_put_response_hop_limit(spec.http_put_response_hop_limit)
                .build(),
        )
        .set_capacity_reservation_specification(spec.capacity_reservation.as_ref().map(
            |(id, _)| {
                LaunchTemplateCapacityReservationSpecificationRequest::builder()
                    .capacity_reservation_target(
                        CapacityReservationTarget::builder()
                            .capacity_reservation_id(id)
                            .build(),
                    )
                    .build()
            },
        ))
        .set_instance_market_options(
            spec.capacity_reservation
                .as_ref()
                .filter(|(_, block)| *block)
                .map(|_| {
                    LaunchTemplateInstanceMarketOptionsRequest::builder()
                        .market_type(MarketType::CapacityBlock)
                        .build()
                }),
        )
        .build();
    let created = calls
        .run(CREATE, || async {
            ec2.create_launch_template()
                .launch_template_name(&name)
                .launch_template_data(data.clone())
                .tag_specifications(
                    TagSpecification::builder()
                        .resource_type(ResourceType::LaunchTemplate)
                        .set_tags(Some(tags.clone()))
                        .build(),
                )
                .send()
                .await
                .map_err(|e| from_sdk(CREATE, e))
        })
        .await;
    match created {
        Ok(_) => Ok(name),
        // Made by a concurrent launch meanwhile.
        Err(e) if e.code().is_some_and(|c| c.contains("AlreadyExists")) => Ok(name),
        Err(e) => Err(e),
    }
}
