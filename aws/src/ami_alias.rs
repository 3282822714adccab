//! `amiSelectorTerms[].alias` (`al2023@latest`, `al2@v20240807`, `bottlerocket@v1.20.3`) as the
//! SSM public parameters Karpenter reads for it: one per architecture, for the cluster's
//! Kubernetes version, with the GPU (NVIDIA) and Neuron variants for accelerated types.

/// The SSM parameter names an alias resolves through, each with the `ami_by_arch` key it fills
/// (`amd64`, or `amd64/nvidia` for a variant: see `NodeClassStatus::ami_for`), as Karpenter's
/// AMI families list them: AL2023 standard, NVIDIA (both architectures) and Neuron (x86_64);
/// AL2 standard and the GPU image (x86_64, for NVIDIA and Neuron); Bottlerocket standard
/// (also for Neuron) and NVIDIA. Or why the alias is not one dovetail knows.
pub fn alias_parameters(
    alias: &str,
    kubernetes_version: &str,
) -> Result<Vec<(String, String)>, AliasError> {
    let (family, version) =
        alias
            .split_once('@')
            .ok_or_else(|| AliasError::NotFamilyAtVersion {
                alias: alias.to_string(),
            })?;
    if version.is_empty() {
        return Err(AliasError::EmptyVersion {
            alias: alias.to_string(),
        });
    }
    let k = kubernetes_version;
    let latest = version == "latest";
    let key = |kube: &str, variant: &str| {
        if variant == "standard" {
            kube.to_string()
        } else {
            format!("{kube}/{variant}")
        }
    };
    let names = match family.to_ascii_lowercase().as_str() {
        "al2023" => [
            ("amd64", "x86_64", "standard"),
            ("amd64", "x86_64", "nvidia"),
            ("amd64", "x86_64", "neuron"),
            ("arm64", "arm64", "standard"),
            ("arm64", "arm64", "nvidia"),
        ]
        .iter()
        .map(|(kube, ec2, variant)| {
            let release = if latest {
                "recommended".to_string()
            } else {
                format!("amazon-eks-node-al2023-{ec2}-{variant}-{k}-{version}")
            };
            (
                key(kube, variant),
                format!("/aws/service/eks/optimized-ami/{k}/amazon-linux-2023/{ec2}/{variant}/{release}/image_id"),
            )
        })
        .collect(),
        "al2" => {
            let release = |prefix: &str| {
                if latest {
                    "recommended".to_string()
                } else {
                    format!("{prefix}-{k}-{version}")
                }
            };
            let standard = format!(
                "/aws/service/eks/optimized-ami/{k}/amazon-linux-2/{}/image_id",
                release("amazon-eks-node")
            );
            let gpu = format!(
                "/aws/service/eks/optimized-ami/{k}/amazon-linux-2-gpu/{}/image_id",
                release("amazon-eks-gpu-node")
            );
            let arm = format!(
                "/aws/service/eks/optimized-ami/{k}/amazon-linux-2-arm64/{}/image_id",
                release("amazon-eks-arm64-node")
            );
            vec![
                (key("amd64", "standard"), standard),
                (key("amd64", "nvidia"), gpu.clone()),
                (key("amd64", "neuron"), gpu),
                (key("arm64", "standard"), arm),
            ]
        }
        "bottlerocket" => {
            let release = if latest {
                "latest"
            } else {
                version.trim_start_matches('v')
            };
            let mut out = Vec::new();
            for (kube, ec2) in [("amd64", "x86_64"), ("arm64", "arm64")] {
                let standard = format!("/aws/service/bottlerocket/aws-k8s-{k}/{ec2}/{release}/image_id");
                out.push((key(kube, "standard"), standard.clone()));
                out.push((key(kube, "neuron"), standard));
                out.push((
                    key(kube, "nvidia"),
                    format!("/aws/service/bottlerocket/aws-k8s-{k}-nvidia/{ec2}/{release}/image_id"),
                ));
            }
            out
        }
        other => {
            return Err(AliasError::UnknownFamily {
                alias: alias.to_string(),
                family: other.to_string(),
            })
        }
    };
    Ok(names)
}

/// Why an `amiSelectorTerms[].alias` names no SSM parameters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AliasError {
    #[error("{alias:?}: expected FAMILY@VERSION, e.g. al2023@latest")]
    NotFamilyAtVersion { alias: String },
    #[error("{alias:?}: the version is empty (use latest)")]
    EmptyVersion { alias: String },
    #[error(
        "{alias:?}: family {family:?} is not one dovetail resolves (al2023, al2, bottlerocket)"
    )]
    UnknownFamily { alias: String, family: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_name_karpenters_ssm_parameters() {
        let get = |p: &[(String, String)], key: &str| {
            p.iter()
                .find(|(k, _)| k == key)
                .map(|(_, name)| name.clone())
                .unwrap_or_else(|| panic!("{key} in {p:?}"))
        };
        let p = alias_parameters("al2023@latest", "1.33").expect("known");
        assert_eq!(
            get(&p, "amd64"),
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id"
        );
        assert_eq!(
            get(&p, "amd64/nvidia"),
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/nvidia/recommended/image_id"
        );
        assert_eq!(
            get(&p, "amd64/neuron"),
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/neuron/recommended/image_id"
        );
        assert!(
            !p.iter().any(|(k, _)| k == "arm64/neuron"),
            "AL2023 has no arm64 Neuron image"
        );
        let p = alias_parameters("al2023@v20250715", "1.33").expect("known");
        assert_eq!(
            get(&p, "arm64"),
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/amazon-eks-node-al2023-arm64-standard-1.33-v20250715/image_id"
        );
        assert_eq!(
            get(&p, "arm64/nvidia"),
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/nvidia/amazon-eks-node-al2023-arm64-nvidia-1.33-v20250715/image_id"
        );
        let p = alias_parameters("bottlerocket@v1.20.3", "1.33").expect("known");
        assert_eq!(
            get(&p, "amd64"),
            "/aws/service/bottlerocket/aws-k8s-1.33/x86_64/1.20.3/image_id"
        );
        assert_eq!(
            get(&p, "arm64/nvidia"),
            "/aws/service/bottlerocket/aws-k8s-1.33-nvidia/arm64/1.20.3/image_id"
        );
        let p = alias_parameters("al2@latest", "1.30").expect("known");
        assert_eq!(
            get(&p, "arm64"),
            "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-arm64/recommended/image_id"
        );
        assert_eq!(
            get(&p, "amd64/nvidia"),
            "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-gpu/recommended/image_id"
        );
        let p = alias_parameters("al2@v20240807", "1.30").expect("known");
        assert_eq!(
            get(&p, "amd64/neuron"),
            "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-gpu/amazon-eks-gpu-node-1.30-v20240807/image_id"
        );
        assert!(matches!(
            alias_parameters("windows2022@latest", "1.33"),
            Err(AliasError::UnknownFamily { family, .. }) if family == "windows2022"
        ));
        assert!(matches!(
            alias_parameters("al2023", "1.33"),
            Err(AliasError::NotFamilyAtVersion { .. })
        ));
        assert!(matches!(
            alias_parameters("al2023@", "1.33"),
            Err(AliasError::EmptyVersion { .. })
        ));
    }
}
