//! One launch: the launch templates of the request's EC2NodeClass (made if missing), then
//! CreateFleet under the ClientToken, retried while it is throttled or fails transiently.

use super::{Ec2Cloud, Shared};
use crate::client_token::client_token;
use crate::error::AwsError;
use crate::fleet::{fleet_call, read_answer, LaunchContext};
use crate::instance_profile::{self, ProfileSource};
use crate::launch_template::{ensure, TemplateSpec, IMAGE_ID_TAG};
use crate::user_data::{user_data, AmiFamily, Bootstrap};
use dovetail_dataflow::backend::{FleetRequest, Instance, LaunchError};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// What one launch needs to exist before its CreateFleet, and the call's context.
pub(super) struct LaunchPlan {
    /// One launch template per architecture the EC2NodeClass has an AMI for.
    templates: Vec<(String, TemplateSpec)>,
    context: LaunchContext,
    /// The instance profile and its name, when the EC2NodeClass names a role or a profile.
    profile: Option<(ProfileSource, String)>,
    node_class: String,
}

impl Ec2Cloud {
    /// The instance profile, launch templates and subnets of the request's EC2NodeClass.
    pub(super) fn launch_plan(&self, request: &FleetRequest) -> Result<LaunchPlan, AwsError> {
        let name = request.node_class.clone().unwrap_or_default();
        let class = self
            .nodeclasses
            .get(&name)
            .ok_or_else(|| AwsError::NodeClass {
                name: name.clone(),
                field: "metadata.name".into(),
                reason: format!(
                    "NodePool {} refers to an EC2NodeClass that does not exist or is not resolved",
                    request.nodepool
                ),
            })?;
        let spec: serde_json::Value = serde_json::from_str(&class.spec_json).unwrap_or_default();
        let settings = &self.shared.settings;
        let family = AmiFamily::from_spec(&spec);
        let mut tags: BTreeMap<String, String> = spec
            .get("tags")
            .and_then(|t| t.as_object())
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        tags.insert(settings.cluster_tag_key(), "owned".into());
        tags.insert("karpenter.k8s.aws/ec2nodeclass".into(), name.clone());
        let mut labels = request.labels.clone();
        labels
            .entry("karpenter.sh/nodepool".to_string())
            .or_insert_with(|| request.nodepool.clone());
        let text = user_data(
            family,
            &Bootstrap {
                cluster_name: &settings.cluster_name,
                endpoint: settings.cluster_endpoint.as_deref(),
                ca_bundle: settings.cluster_ca_bundle.as_deref(),
                dns_ip: settings.cluster_dns_ip.as_deref(),
                kubelet: Some(&class.kubelet),
                labels,
                taints: request.taints.clone(),
                user_data: spec.get("userData").and_then(|u| u.as_str()),
            },
        );
        let metadata = spec.get("metadataOptions");
        let http_tokens_required = metadata
            .and_then(|m| m.get("httpTokens"))
            .and_then(|v| v.as_str())
            .is_none_or(|v| v == "required");
        let hop_limit = metadata
            .and_then(|m| m.get("httpPutResponseHopLimit"))
            .and_then(|v| v.as_i64())
            .unwrap_or(1) as i32;
        let profile = ProfileSource::from_spec(&spec).map(|source| {
            let profile_name =
                source.name(&settings.cluster_name, &self.shared.clients.region, &name);
            (source, profile_name)
        });
        let templates = class
            .status
            .ami_by_arch
            .iter()
            .map(|(arch, ami)| {
                (
                    arch.clone(),
                    TemplateSpec {
                        cluster_name: settings.cluster_name.clone(),
                        node_class: name.clone(),
                        image_id: ami.clone(),
                        security_group_ids: class
                            .status
                            .security_group_ids
                            .iter()
                            .cloned()
                            .collect(),
                        user_data: text.clone(),
                        http_tokens_required,
                        http_put_response_hop_limit: hop_limit,
                        instance_profile: profile.as_ref().map(|(_, n)| n.clone()),
                        tags: {
                            let mut t = tags.clone();
                            t.insert(IMAGE_ID_TAG.into(), ami.clone());
                            t
                        },
                    },
                )
            })
            .collect::<Vec<_>>();
        let context = LaunchContext {
            subnet_by_zone: class.status.subnet_by_zone.clone(),
            template_by_arch: templates
                .iter()
                .map(|(arch, t)| (arch.clone(), t.name()))
                .collect(),
            tags,
        };
        Ok(LaunchPlan {
            templates,
            context,
            profile,
            node_class: name,
        })
    }
}

pub(super) async fn launch(
    shared: Arc<Shared>,
    request: FleetRequest,
    plan: LaunchPlan,
    arch_of_type: Arc<BTreeMap<String, String>>,
    now_ms: i64,
) -> Result<Instance, LaunchError> {
    let failed = |e: AwsError| LaunchError::Failed(e.to_string());
    let LaunchPlan {
        templates,
        context,
        profile,
        node_class,
    } = plan;
    if let Some((source, name)) = &profile {
        let known = shared
            .profiles
            .lock()
            .map(|p| p.contains(name))
            .unwrap_or(false);
        if !known {
            let tag = shared.settings.cluster_tag_key();
            retrying(|| {
                instance_profile::ensure(
                    &shared.clients.iam,
                    &shared.calls,
                    source,
                    name,
                    &tag,
                    &node_class,
                )
            })
            .await
            .map_err(failed)?;
            if let Ok(mut p) = shared.profiles.lock() {
                p.insert(name.clone());
            }
        }
    }
    // Only the templates of the architectures the overrides need.
    let needed: BTreeSet<&String> = request
        .overrides
        .iter()
        .filter_map(|o| arch_of_type.get(&o.key.instance_type))
        .collect();
    for (_, spec) in templates.iter().filter(|(arch, _)| needed.contains(arch)) {
        let name = spec.name();
        let known = |shared: &Shared| {
            shared
                .templates
                .lock()
                .map(|t| t.contains(&name))
                .unwrap_or(false)
        };
        if known(&shared) {
            continue;
        }
        retrying(|| ensure(&shared.clients.ec2, &shared.calls, spec))
            .await
            .map_err(failed)?;
        if let Ok(mut t) = shared.templates.lock() {
            t.insert(name);
        }
    }
    let call = fleet_call(&request, &context, |t| arch_of_type.get(t).cloned()).map_err(failed)?;
    let token = client_token(&request);
    const ACTION: &str = "CreateFleet";
    let output = retrying(|| {
        shared.calls.run(ACTION, || async {
            let mut builder = shared
                .clients
                .ec2
                .create_fleet()
                .r#type(aws_sdk_ec2::types::FleetType::Instant)
                .client_token(&token)
                .set_launch_template_configs(Some(call.configs.clone()))
                .target_capacity_specification(call.capacity.clone())
                .set_tag_specifications(Some(call.tags.clone()));
            if let Some(s) = &call.spot {
                builder = builder.spot_options(s.clone());
            }
            if let Some(o) = &call.on_demand {
                builder = builder.on_demand_options(o.clone());
            }
            builder
                .send()
                .await
                .map_err(|e| crate::error::from_sdk(ACTION, e))
        })
    })
    .await
    .map_err(failed)?;
    read_answer(&request, &call, &output, &shared.clients.region, now_ms).map_err(failed)?
}

/// Runs `call` again (after [`Calls`] gave up on its own retries) while it fails with
/// throttling or a transient error: the decision waits rather than being dropped.
async fn retrying<T, F, Fut>(mut call: F) -> Result<T, AwsError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, AwsError>>,
{
    loop {
        match call().await {
            Err(e) if e.is_retryable() => {
                tracing::warn!(error = %e, "still failing after retries; trying again in 30 s");
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            other => return other,
        }
    }
}
