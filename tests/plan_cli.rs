//! `dovetail plan` end to end, through the binary, on the manifests in `examples/`.

use serde_json::Value;
use std::process::Command;

fn dovetail(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_dovetail"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("dovetail runs")
}

fn plan_json(args: &[&str]) -> Value {
    let mut all = vec!["plan", "-o", "json"];
    all.extend_from_slice(args);
    let out = dovetail(&all);
    assert!(
        out.status.success(),
        "dovetail plan failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("plan prints JSON")
}

#[test]
fn plans_the_example_cluster() {
    let plan = plan_json(&["-f", "examples/cluster"]);
    let launches = plan["launches"].as_array().expect("launches");
    let bindings = plan["bindings"].as_array().expect("bindings");
    let unschedulable = plan["unschedulable"].as_array().expect("unschedulable");
    assert!(plan["disruptions"].as_array().is_some_and(|d| d.is_empty()));

    // 6 web + 3 cache + 2 train pods are placed; the s390x pod is not.
    assert_eq!(bindings.len(), 11, "{plan:#}");
    assert_eq!(unschedulable.len(), 1);
    assert_eq!(unschedulable[0]["pod"], "legacy/mainframe");
    let reason = unschedulable[0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("kubernetes.io/arch"), "{reason}");

    // Every launch's fields are there, types at most 60, price positive, pods listed.
    let mut pods_in_launches = 0;
    for l in launches {
        let types = l["instance_types"].as_array().expect("types");
        assert!(!types.is_empty() && types.len() <= 60);
        assert!(l["price_per_hour"].as_f64().unwrap_or(0.0) > 0.0);
        assert!(!l["zones"].as_array().expect("zones").is_empty());
        assert!(!l["capacity_types"]
            .as_array()
            .expect("capacity types")
            .is_empty());
        pods_in_launches += l["pods"].as_array().expect("pods").len();
    }
    assert_eq!(pods_in_launches, 11);

    // GPU pods land on the gpu NodePool, on-demand only.
    let gpu: Vec<&Value> = launches.iter().filter(|l| l["nodepool"] == "gpu").collect();
    assert!(!gpu.is_empty());
    for l in gpu {
        assert_eq!(l["capacity_types"], serde_json::json!(["on-demand"]));
    }

    // The web pods are spread over three zones, two per zone.
    let mut per_zone = std::collections::BTreeMap::new();
    for l in launches {
        let zones = l["zones"].as_array().expect("zones");
        let webs = l["pods"]
            .as_array()
            .expect("pods")
            .iter()
            .filter(|p| p.as_str().is_some_and(|p| p.starts_with("shop/web-")))
            .count();
        if webs > 0 {
            assert_eq!(
                zones.len(),
                1,
                "a launch holding spread pods is pinned to one zone"
            );
            *per_zone
                .entry(zones[0].as_str().unwrap_or_default().to_string())
                .or_insert(0) += webs;
        }
    }
    assert_eq!(per_zone.len(), 3, "{per_zone:?}");
    assert!(per_zone.values().all(|n| *n == 2), "{per_zone:?}");

    // The summary adds up.
    let sum: f64 = launches
        .iter()
        .map(|l| l["price_per_hour"].as_f64().unwrap_or(0.0))
        .sum();
    let cost = plan["summary"]["cost_per_hour"].as_f64().expect("cost");
    assert!((sum - cost).abs() < 1e-6);
    let bound = plan["summary"]["lower_bound_per_hour"]
        .as_f64()
        .expect("bound");
    assert!(
        bound > 0.0 && bound <= cost + 1e-9,
        "bound {bound} cost {cost}"
    );
    assert_eq!(plan["summary"]["pods_pending"], 12);
    assert_eq!(
        plan["summary"]["launches"].as_u64(),
        Some(launches.len() as u64)
    );
}

#[test]
fn same_input_same_plan() {
    let a = plan_json(&["-f", "examples/cluster"]);
    let b = plan_json(&[
        "-f",
        "examples/cluster/workloads.yaml",
        "examples/cluster/nodepools.yaml",
        "-w",
        "2",
    ]);
    assert_eq!(a["launches"], b["launches"]);
    assert_eq!(a["bindings"], b["bindings"]);
}

#[test]
fn malformed_manifest_is_a_clear_error() {
    let out = dovetail(&["plan", "-f", "tests/fixtures/bad-quantity.yaml"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for part in [
        "bad-quantity.yaml",
        "document 2",
        "default/broken",
        "spec.containers[0].resources.requests.cpu",
    ] {
        assert!(err.contains(part), "error should name {part}: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn unknown_region_is_a_clear_error() {
    let out = dovetail(&["plan", "-f", "examples/cluster", "--region", "mars-north-1"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("mars-north-1") && err.contains("us-east-1"),
        "{err}"
    );
}

#[test]
fn table_output_names_launches_and_reasons() {
    let out = dovetail(&["plan", "-f", "examples/cluster"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("LAUNCH")
            && text.contains("UNSCHEDULABLE")
            && text.contains("legacy/mainframe"),
        "{text}"
    );
}
