//! `dovetail crds`: the four CRDs of Karpenter's v1 APIs, as `deploy/crds/` has them, which
//! `deploy/check_crds.py` finds well-formed and structural and covering every example object
//! of the repository (and whose self-test shows it refuses bad objects and schemas).

use std::process::Command;

fn python(args: &[&str]) -> (bool, String) {
    let python = std::env::var("DOVETAIL_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let out = Command::new(python)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/check_crds.py"))
        .args(args)
        .output()
        .expect("run deploy/check_crds.py");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn dovetail_crds_prints_the_four_crds() {
    let out = Command::new(env!("CARGO_BIN_EXE_dovetail"))
        .arg("crds")
        .output()
        .expect("run dovetail crds");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let mut names = Vec::new();
    for v in dovetail_ingest::yaml_stream("crds", &text).expect("YAML documents") {
        assert_eq!(v["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(v["kind"], "CustomResourceDefinition");
        assert_eq!(v["spec"]["scope"], "Cluster");
        let versions = v["spec"]["versions"].as_array().expect("versions");
        assert!(versions
            .iter()
            .all(|ver| ver["subresources"]["status"].is_object()));
        names.push(v["metadata"]["name"].as_str().expect("a name").to_string());
    }
    names.sort();
    assert_eq!(
        names,
        [
            "ec2nodeclasses.karpenter.k8s.aws",
            "nodeclaims.karpenter.sh",
            "nodeoverlays.karpenter.sh",
            "nodepools.karpenter.sh"
        ]
    );
}

#[test]
fn the_crds_are_structural_and_cover_the_example_objects() {
    let (ok, text) = python(&[]);
    assert!(ok && text.contains("check_crds: OK"), "{text}");
}

#[test]
fn the_crd_check_refuses_bad_objects_and_schemas() {
    let (ok, text) = python(&["--self-test"]);
    assert!(ok && text.contains("--self-test: OK"), "{text}");
}
