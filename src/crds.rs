//! `dovetail crds`: the CustomResourceDefinitions of Karpenter's v1 APIs for a fresh install
//! (`deploy/crds/`, checked by `deploy/check_crds.py`), printed as one YAML stream for
//! `kubectl apply -f -`. On a cluster that has Karpenter's own CRDs, keep those.

/// The CRDs, by file name.
pub const CRDS: &[(&str, &str)] = &[
    (
        "karpenter.sh_nodepools.yaml",
        include_str!("../deploy/crds/karpenter.sh_nodepools.yaml"),
    ),
    (
        "karpenter.sh_nodeclaims.yaml",
        include_str!("../deploy/crds/karpenter.sh_nodeclaims.yaml"),
    ),
    (
        "karpenter.k8s.aws_ec2nodeclasses.yaml",
        include_str!("../deploy/crds/karpenter.k8s.aws_ec2nodeclasses.yaml"),
    ),
    (
        "karpenter.sh_nodeoverlays.yaml",
        include_str!("../deploy/crds/karpenter.sh_nodeoverlays.yaml"),
    ),
];

/// Every CRD as one multi-document YAML stream.
pub fn stream() -> String {
    let mut out = String::new();
    for (name, text) in CRDS {
        out.push_str(&format!("---\n# {name}\n"));
        out.push_str(text.trim_start_matches("---\n"));
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}
