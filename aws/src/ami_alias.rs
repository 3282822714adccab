//! `amiSelectorTerms[].alias` (`al2023@latest`, `al2@v20240807`, `bottlerocket@v1.20.3`) as the
//! SSM public parameters Karpenter reads for it: one per architecture, for the cluster's
//! Kubernetes version. GPU and Neuron variants are not resolved yet (the standard image is).

/// The SSM parameter names an alias resolves through, with the `kubernetes.io/arch` each is
/// for, or why the alias is not one dovetail knows.
pub fn alias_parameters(
    alias: &str,
    kubernetes_version: &str,
) -> Result<Vec<(&'static str, String)>, String> {
    let (family, version) = alias
        .split_once('@')
        .ok_or_else(|| format!("{alias:?}: expected FAMILY@VERSION, e.g. al2023@latest"))?;
    if version.is_empty() {
        return Err(format!("{alias:?}: the version is empty (use latest)"));
    }
    let k = kubernetes_version;
    let latest = version == "latest";
    let arches = [("amd64", "x86_64"), ("arm64", "arm64")];
    let names = match family.to_ascii_lowercase().as_str() {
        "al2023" => arches
            .iter()
            .map(|(kube, ec2)| {
                let release = if latest {
                    "recommended".to_string()
                } else {
                    format!("amazon-eks-node-al2023-{ec2}-standard-{k}-{version}")
                };
                (
                    *kube,
                    format!("/aws/service/eks/optimized-ami/{k}/amazon-linux-2023/{ec2}/standard/{release}/image_id"),
                )
            })
            .collect(),
        "al2" => {
            let release = |arm: bool| match (latest, arm) {
                (true, _) => "recommended".to_string(),
                (false, false) => format!("amazon-eks-node-{k}-{version}"),
                (false, true) => format!("amazon-eks-arm64-node-{k}-{version}"),
            };
            vec![
                (
                    "amd64",
                    format!("/aws/service/eks/optimized-ami/{k}/amazon-linux-2/{}/image_id", release(false)),
                ),
                (
                    "arm64",
                    format!("/aws/service/eks/optimized-ami/{k}/amazon-linux-2-arm64/{}/image_id", release(true)),
                ),
            ]
        }
        "bottlerocket" => {
            let release = if latest {
                "latest"
            } else {
                version.trim_start_matches('v')
            };
            arches
                .iter()
                .map(|(kube, ec2)| {
                    (
                        *kube,
                        format!("/aws/service/bottlerocket/aws-k8s-{k}/{ec2}/{release}/image_id"),
                    )
                })
                .collect()
        }
        other => {
            return Err(format!(
                "{alias:?}: family {other:?} is not one dovetail resolves (al2023, al2, bottlerocket)"
            ))
        }
    };
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_name_karpenters_ssm_parameters() {
        let p = alias_parameters("al2023@latest", "1.33").expect("known");
        assert_eq!(
            p[0],
            (
                "amd64",
                "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id".to_string()
            )
        );
        let p = alias_parameters("al2023@v20250715", "1.33").expect("known");
        assert_eq!(
            p[1].1,
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/amazon-eks-node-al2023-arm64-standard-1.33-v20250715/image_id"
        );
        let p = alias_parameters("bottlerocket@v1.20.3", "1.33").expect("known");
        assert_eq!(
            p[0].1,
            "/aws/service/bottlerocket/aws-k8s-1.33/x86_64/1.20.3/image_id"
        );
        let p = alias_parameters("al2@latest", "1.30").expect("known");
        assert_eq!(
            p[1].1,
            "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-arm64/recommended/image_id"
        );
        assert!(alias_parameters("windows2022@latest", "1.33").is_err());
        assert!(alias_parameters("al2023", "1.33").is_err());
    }
}
