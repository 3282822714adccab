//! One launch: the launch templates of the request's EC2NodeClass (made if missing), then
//! CreateFleet under the ClientToken, retried while it is throttled or fails transiently.

use super::{AmiKind, Ec2Cloud, Shared};
use crate::client_token::client_token;
use crate::error::AwsError;
use crate::fleet::{fleet_call, read_answer, LaunchContext};
use crate::instance_profile::{self, ProfileSource};
use crate::launch_template::{ensure, TemplateSpec, IMAGE_ID_TAG, RESERVATION_TAG};
use crate::user_data::{user_data, AmiFamily, Bootstrap};
use dovetail_dataflow::backend::{FleetRequest, Instance, LaunchError};
use dovetail_dataflow::model::NodeClassStatus;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// What one launch needs to exist before its CreateFleet, and the call's context.
pub(super) struct LaunchPlan {
    /// One launch template per architecture the EC2NodeClass has an AMI for (keyed by the
    /// architecture), and one per capacity reservation (keyed by its id).
    templates: Vec<(String, TemplateSpec)>,
    context: LaunchContext,
    /// The instance profile and its name, when the EC2NodeClass names a role or a profile.
    profile: Option<(ProfileSource, String)>,
    /// The EC2NodeClass's status: which AMI (template) each type boots.
    status: NodeClassStatus,
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
        let template = |ami: &str, reservation: Option<(String, bool)>| TemplateSpec {
            cluster_name: settings.cluster_name.clone(),
            node_class: name.clone(),
            image_id: ami.to_string(),
            security_group_ids: class.status.security_group_ids.iter().cloned().collect(),
            user_data: text.clone(),
            http_tokens_required,
            http_put_response_hop_limit: hop_limit,
            instance_profile: profile.as_ref().map(|(_, n)| n.clone()),
            tags: {
                let mut t = tags.clone();
                t.insert(IMAGE_ID_TAG.into(), ami.to_string());
                if let Some((id, _)) = &reservation {
                    t.insert(RESERVATION_TAG.into(), id.clone());
                }
                t
            },
            capacity_reservation: reservation,
        };
        // One template per architecture, and one per capacity reservation (its target), as
        // Karpenter makes them.
        let mut templates: Vec<(String, TemplateSpec)> = class
            .status
            .ami_by_arch
            .iter()
            .map(|(arch, ami)| (arch.clone(), template(ami, None)))
            .collect();
        let mut template_by_reservation = BTreeMap::new();
        for r in &class.status.capacity_reservations {
            let Some(ami) = self
                .arch_of_type
                .get(&r.instance_type)
                .and_then(|k| class.status.ami_for(&k.arch, k.variant))
            else {
                continue;
            };
            let spec = template(
                ami,
                Some((r.id.clone(), r.reservation_type == "capacity-block")),
            );
            template_by_reservation.insert(r.id.clone(), spec.name());
            templates.push((r.id.clone(), spec));
        }
        let context = LaunchContext {
            subnet_by_zone: class.status.subnet_by_zone.clone(),
            template_by_arch: templates
                .iter()
                .filter(|(key, _)| class.status.ami_by_arch.contains_key(key))
                .map(|(arch, t)| (arch.clone(), t.name()))
                .collect(),
            tags,
            reservations: class.status.capacity_reservations.clone(),
            template_by_reservation,
        };
        Ok(LaunchPlan {
            status: class.status.clone(),
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
    arch_of_type: Arc<BTreeMap<String, AmiKind>>,
    now_ms: i64,
) -> Result<Instance, LaunchError> {
    let failed = |e: AwsError| LaunchError::Failed(e.to_string());
    let LaunchPlan {
        status,
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
            let path = instance_profile::path(&shared.settings.cluster_name);
            retrying(|| {
                instance_profile::ensure(
                    &shared.clients.iam,
                    &shared.calls,
                    source,
                    name,
                    (&tag, &path),
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
    let ami_key = |t: &str| {
        let kind = arch_of_type.get(t)?;
        status.ami_key(&kind.arch, kind.variant)
    };
    let call = fleet_call(&request, &context, ami_key).map_err(failed)?;
    // Only the templates the call names.
    let needed: BTreeSet<String> = call.template_names().into_iter().collect();
    for (_, spec) in &templates {
        let name = spec.name();
        if !needed.contains(&name) {
            continue;
        }
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
