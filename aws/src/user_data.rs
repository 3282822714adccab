//! Node bootstrap user data per AMI family, so a launched instance joins the cluster as the
//! engine assumed: the cluster's name, endpoint, CA and DNS; the kubelet's max pods, reserved
//! resources and eviction thresholds from the EC2NodeClass; the NodeClaim's labels and taints plus
//! `karpenter.sh/unregistered:NoExecute`. The user's own user data is merged as Karpenter does:
//! for AL2023 it is kept as MIME parts before the generated NodeConfig (nodeadm merges them in
//! order); for Bottlerocket the user's TOML comes first and the generated settings after it.

use dovetail_dataflow::model::{KubeletConfig, Milli, Taint, Threshold};
use std::collections::BTreeMap;
use std::fmt::Write;

/// The AMI families dovetail writes user data for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AmiFamily {
    Al2023,
    Bottlerocket,
    /// `Custom`: the user's user data as given, nothing generated.
    Custom,
}

impl AmiFamily {
    /// From `spec.amiFamily`, or the family of the first `alias` term (`al2023@latest`).
    pub fn from_spec(spec: &serde_json::Value) -> AmiFamily {
        let alias = spec
            .get("amiSelectorTerms")
            .and_then(|t| t.as_array())
            .and_then(|terms| terms.iter().find_map(|t| t.get("alias")?.as_str()))
            .and_then(|a| a.split('@').next());
        match spec.get("amiFamily").and_then(|f| f.as_str()).or(alias) {
            Some(f) if f.eq_ignore_ascii_case("bottlerocket") => AmiFamily::Bottlerocket,
            Some(f) if f.eq_ignore_ascii_case("custom") => AmiFamily::Custom,
            _ => AmiFamily::Al2023,
        }
    }
}

/// What the node needs to join.
#[derive(Debug, Clone, Default)]
pub struct Bootstrap<'a> {
    pub cluster_name: &'a str,
    pub endpoint: Option<&'a str>,
    /// Base64, as EKS gives it.
    pub ca_bundle: Option<&'a str>,
    pub dns_ip: Option<&'a str>,
    pub kubelet: Option<&'a KubeletConfig>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// `spec.userData`.
    pub user_data: Option<&'a str>,
}

const BOUNDARY: &str = "//";
const UNREGISTERED: &str = "karpenter.sh/unregistered";

/// The user data text (the caller base64-encodes it for the launch template).
pub fn user_data(family: AmiFamily, b: &Bootstrap<'_>) -> String {
    match family {
        AmiFamily::Al2023 => al2023(b),
        AmiFamily::Bottlerocket => bottlerocket(b),
        AmiFamily::Custom => b.user_data.unwrap_or_default().to_string(),
    }
}

fn quantity(resource: &str, milli: Milli) -> String {
    if resource == "cpu" {
        format!("{milli}m")
    } else if milli % 1000 == 0 && (milli / 1000) % (1024 * 1024) == 0 {
        format!("{}Mi", milli / 1000 / (1024 * 1024))
    } else {
        format!("{}", milli / 1000)
    }
}

fn threshold(t: &Threshold) -> String {
    match t {
        Threshold::Quantity(m) => quantity("memory", *m),
        Threshold::PercentHundredths(p) if p % 100 == 0 => format!("{}%", p / 100),
        Threshold::PercentHundredths(p) => format!("{}.{:02}%", p / 100, p % 100),
    }
}

fn taints_with_unregistered(b: &Bootstrap<'_>) -> Vec<(String, String, String)> {
    let mut taints: Vec<(String, String, String)> = b
        .taints
        .iter()
        .map(|t| (t.key.clone(), t.value.clone(), format!("{:?}", t.effect)))
        .collect();
    if !taints.iter().any(|t| t.0 == UNREGISTERED) {
        taints.push((UNREGISTERED.into(), String::new(), "NoExecute".into()));
    }
    taints
}

fn yaml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

fn al2023(b: &Bootstrap<'_>) -> String {
    let mut parts = Vec::new();
    if let Some(user) = b.user_data.filter(|u| !u.trim().is_empty()) {
        parts.extend(mime_parts(user));
    }
    let mut config = String::new();
    let _ = writeln!(
        config,
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:"
    );
    let _ = writeln!(config, "    name: {}", yaml_string(b.cluster_name));
    if let Some(e) = b.endpoint {
        let _ = writeln!(config, "    apiServerEndpoint: {}", yaml_string(e));
    }
    if let Some(ca) = b.ca_bundle {
        let _ = writeln!(config, "    certificateAuthority: {}", yaml_string(ca));
    }
    let _ = writeln!(config, "  kubelet:\n    config:");
    if let Some(k) = b.kubelet {
        if let Some(max) = k.max_pods {
            let _ = writeln!(config, "      maxPods: {max}");
        }
        for (name, map) in [
            ("kubeReserved", &k.kube_reserved),
            ("systemReserved", &k.system_reserved),
        ] {
            if !map.is_empty() {
                let _ = writeln!(config, "      {name}:");
                for (r, v) in map {
                    let _ = writeln!(config, "        {r}: {}", yaml_string(&quantity(r, *v)));
                }
            }
        }
        for (name, map) in [
            ("evictionHard", &k.eviction_hard),
            ("evictionSoft", &k.eviction_soft),
        ] {
            if !map.is_empty() {
                let _ = writeln!(config, "      {name}:");
                for (r, t) in map {
                    let _ = writeln!(config, "        {r}: {}", yaml_string(&threshold(t)));
                }
            }
        }
    }
    if let Some(dns) = b.dns_ip {
        let _ = writeln!(config, "      clusterDNS:\n      - {}", yaml_string(dns));
    }
    let labels: Vec<String> = b.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let taints: Vec<String> = taints_with_unregistered(b)
        .into_iter()
        .map(|(k, v, e)| {
            if v.is_empty() {
                format!("{k}:{e}")
            } else {
                format!("{k}={v}:{e}")
            }
        })
        .collect();
    let _ = writeln!(config, "    flags:");
    if !labels.is_empty() {
        let _ = writeln!(
            config,
            "    - {}",
            yaml_string(&format!("--node-labels={}", labels.join(",")))
        );
    }
    let _ = writeln!(
        config,
        "    - {}",
        yaml_string(&format!("--register-with-taints={}", taints.join(",")))
    );
    parts.push(("application/node.eks.aws".to_string(), config));
    let mut out =
        format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n");
    for (content_type, body) in parts {
        let _ = write!(out, "--{BOUNDARY}\nContent-Type: {content_type}\n\n{body}");
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    let _ = writeln!(out, "--{BOUNDARY}--");
    out
}

/// The parts of the user's user data: a MIME multipart document's parts, or the whole of it
/// as one part (a shell script, or a NodeConfig).
fn mime_parts(user: &str) -> Vec<(String, String)> {
    let boundary = user.lines().find_map(|l| {
        let l = l.trim();
        if !l
            .to_ascii_lowercase()
            .starts_with("content-type: multipart/")
        {
            return None;
        }
        let b = l.split("boundary=").nth(1)?;
        Some(b.trim_matches('"').to_string())
    });
    let Some(boundary) = boundary else {
        let content_type = if user.contains("kind: NodeConfig") {
            "application/node.eks.aws"
        } else {
            "text/x-shellscript; charset=\"us-ascii\""
        };
        return vec![(content_type.to_string(), user.to_string())];
    };
    let delimiter = format!("--{boundary}");
    let mut parts = Vec::new();
    for chunk in user.split(&delimiter).skip(1) {
        if chunk.starts_with("--") {
            break;
        }
        let chunk = chunk.trim_start_matches(['\r', '\n']);
        let (headers, body) = chunk
            .split_once("\n\n")
            .or_else(|| chunk.split_once("\r\n\r\n"))
            .unwrap_or((chunk, ""));
        let content_type = headers
            .lines()
            .find_map(|h| {
                let (k, v) = h.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("content-type")
                    .then(|| v.trim().to_string())
            })
            .unwrap_or_else(|| "text/x-shellscript".to_string());
        parts.push((content_type, body.to_string()));
    }
    parts
}

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

fn bottlerocket(b: &Bootstrap<'_>) -> String {
    let mut out = String::new();
    if let Some(user) = b.user_data.filter(|u| !u.trim().is_empty()) {
        out.push_str(user.trim_end());
        out.push_str("\n\n");
    }
    let _ = writeln!(out, "[settings.kubernetes]");
    let _ = writeln!(out, "cluster-name = {}", toml_string(b.cluster_name));
    if let Some(e) = b.endpoint {
        let _ = writeln!(out, "api-server = {}", toml_string(e));
    }
    if let Some(ca) = b.ca_bundle {
        let _ = writeln!(out, "cluster-certificate = {}", toml_string(ca));
    }
    if let Some(dns) = b.dns_ip {
        let _ = writeln!(out, "cluster-dns-ip = {}", toml_string(dns));
    }
    if let Some(max) = b.kubelet.and_then(|k| k.max_pods) {
        let _ = writeln!(out, "max-pods = {max}");
    }
    if let Some(k) = b.kubelet {
        if !k.kube_reserved.is_empty() {
            let _ = writeln!(out, "\n[settings.kubernetes.kube-reserved]");
            for (r, v) in &k.kube_reserved {
                let _ = writeln!(
                    out,
                    "{} = {}",
                    toml_string(r),
                    toml_string(&quantity(r, *v))
                );
            }
        }
        if !k.eviction_hard.is_empty() {
            let _ = writeln!(out, "\n[settings.kubernetes.eviction-hard]");
            for (r, t) in &k.eviction_hard {
                let _ = writeln!(out, "{} = {}", toml_string(r), toml_string(&threshold(t)));
            }
        }
    }
    if !b.labels.is_empty() {
        let _ = writeln!(out, "\n[settings.kubernetes.node-labels]");
        for (k, v) in &b.labels {
            let _ = writeln!(out, "{} = {}", toml_string(k), toml_string(v));
        }
    }
    let _ = writeln!(out, "\n[settings.kubernetes.node-taints]");
    let mut by_key: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, v, e) in taints_with_unregistered(b) {
        by_key
            .entry(k)
            .or_default()
            .push(if v.is_empty() { e } else { format!("{v}:{e}") });
    }
    for (k, values) in by_key {
        let list: Vec<String> = values.iter().map(|v| toml_string(v)).collect();
        let _ = writeln!(out, "{} = [{}]", toml_string(&k), list.join(", "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bootstrap<'a>(user: Option<&'a str>) -> Bootstrap<'a> {
        Bootstrap {
            cluster_name: "prod",
            endpoint: Some("https://ABC.gr7.us-east-1.eks.amazonaws.com"),
            ca_bundle: Some("Q0E="),
            dns_ip: Some("10.100.0.10"),
            labels: [("karpenter.sh/nodepool".to_string(), "default".to_string())].into(),
            user_data: user,
            ..Bootstrap::default()
        }
    }

    #[test]
    fn al2023_joins_tainted_unregistered_with_the_cluster_settings() {
        let text = user_data(AmiFamily::Al2023, &bootstrap(None));
        assert!(text.contains("kind: NodeConfig"));
        assert!(text.contains("name: \"prod\""));
        assert!(text.contains("apiServerEndpoint: \"https://ABC.gr7.us-east-1.eks.amazonaws.com\""));
        assert!(text.contains("--register-with-taints=karpenter.sh/unregistered:NoExecute"));
        assert!(text.contains("--node-labels=karpenter.sh/nodepool=default"));
        assert!(text.trim_end().ends_with("--//--"));
    }

    #[test]
    fn al2023_keeps_the_users_script_before_the_generated_config() {
        let text = user_data(
            AmiFamily::Al2023,
            &bootstrap(Some("#!/bin/bash\necho hi\n")),
        );
        let script = text.find("echo hi").unwrap_or(usize::MAX);
        let config = text.find("kind: NodeConfig").unwrap_or(0);
        assert!(script < config, "{text}");
        assert!(text.contains("text/x-shellscript"));
    }

    #[test]
    fn bottlerocket_is_toml_with_the_unregistered_taint() {
        let text = user_data(
            AmiFamily::Bottlerocket,
            &bootstrap(Some("[settings.host-containers.admin]\nenabled = true")),
        );
        assert!(text.starts_with("[settings.host-containers.admin]"));
        assert!(text.contains("cluster-name = \"prod\""));
        assert!(text.contains("\"karpenter.sh/unregistered\" = [\"NoExecute\"]"));
    }

    #[test]
    fn the_family_comes_from_amifamily_or_the_alias() {
        let spec = serde_json::json!({"amiSelectorTerms": [{"alias": "bottlerocket@latest"}]});
        assert_eq!(AmiFamily::from_spec(&spec), AmiFamily::Bottlerocket);
        let spec = serde_json::json!({"amiFamily": "Custom"});
        assert_eq!(AmiFamily::from_spec(&spec), AmiFamily::Custom);
        assert_eq!(
            AmiFamily::from_spec(&serde_json::json!({})),
            AmiFamily::Al2023
        );
    }
}
