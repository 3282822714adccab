//! `dovetail explain pod` and `explain launch` end to end, through the binary, on
//! examples/cluster. Each answer is compared with what the manifests make true: `legacy/mainframe`
//! asks for s390x, which NodePool general (amd64, arm64) does not offer, and NodePool gpu's taint
//! is not tolerated; the shop pods fit general.

use serde_json::Value;
mod cli;
use cli::dovetail;

fn explain(kind: &str, name: &str) -> Value {
    let out = dovetail(&[
        "explain",
        kind,
        name,
        "-o",
        "json",
        "-f",
        "examples/cluster",
    ]);
    assert!(
        out.status.success(),
        "dovetail explain failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("explain prints JSON")
}

fn pool<'a>(e: &'a Value, name: &str) -> &'a Value {
    e["nodepools"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["nodepool"] == name))
        .unwrap_or_else(|| panic!("NodePool {name} is in {e}"))
}

#[test]
fn an_unschedulable_pod_names_each_nodepools_first_blocker_nearest_first() {
    let e = explain("pod", "legacy/mainframe");
    assert_eq!(e["outcome"], "unschedulable");
    let general = pool(&e, "general");
    let requirement = &general["blocker"]["requirement"];
    assert_eq!(requirement["key"], "kubernetes.io/arch");
    assert!(requirement["pod"]["values"]
        .as_array()
        .is_some_and(|v| v.iter().any(|x| x == "s390x")));
    assert_eq!(
        general["remedy"],
        "adding s390x to NodePool general's requirement on kubernetes.io/arch"
    );
    let gpu = pool(&e, "gpu");
    assert_eq!(gpu["blocker"]["taint"]["taint"]["key"], "nvidia.com/gpu");
    // A requirement is nearer than a taint: general comes first.
    assert_eq!(e["nodepools"][0]["nodepool"], "general");
}

#[test]
fn a_launched_pod_shows_its_launch_types_in_price_order() {
    let plan = dovetail(&["plan", "-f", "examples/cluster", "-o", "json"]);
    let plan: Value = serde_json::from_slice(&plan.stdout).expect("plan prints JSON");
    let target = plan["bindings"]
        .as_array()
        .and_then(|b| b.iter().find(|b| b["pod"] == "shop/cache-0"))
        .map(|b| b["node"].as_str().unwrap_or_default().to_string())
        .expect("plan binds shop/cache-0");
    let e = explain("pod", "shop/cache-0");
    assert_eq!(e["outcome"], "launch");
    assert_eq!(e["name"], target.as_str());
    let prices: Vec<f64> = e["instance_types"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|o| o["price_per_hour"].as_f64())
                .collect()
        })
        .unwrap_or_default();
    assert!(!prices.is_empty());
    assert!(prices.windows(2).all(|w| w[0] <= w[1]), "{prices:?}");
    let price = e["price_per_hour"].as_f64().unwrap_or_default();
    assert!((prices[0] - price).abs() < 1e-9, "{} vs {price}", prices[0]);
    // general can take it, gpu's taint rules gpu out.
    assert!(pool(&e, "general")["blocker"].is_null());
    assert!(pool(&e, "gpu")["blocker"]["taint"].is_object());
}

#[test]
fn a_launch_lists_its_pods_and_their_lower_bound_under_its_price() {
    let e = explain("pod", "shop/cache-0");
    let name = e["name"].as_str().unwrap_or_default().to_string();
    let l = explain("launch", &name);
    assert!(l["pods"]
        .as_array()
        .is_some_and(|p| p.iter().any(|x| x == "shop/cache-0")));
    let bound = l["lower_bound_per_hour"].as_f64().unwrap_or_default();
    let price = l["price_per_hour"].as_f64().unwrap_or_default();
    assert!(
        bound > 0.0 && bound <= price,
        "bound {bound}, price {price}"
    );
}

#[test]
fn an_unknown_pod_or_launch_is_refused_by_name() {
    for (kind, name) in [("pod", "shop/nope"), ("launch", "general-nope")] {
        let out = dovetail(&["explain", kind, name, "-f", "examples/cluster"]);
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains(name));
    }
}

#[test]
fn a_nodepool_at_its_limit_names_the_limit_its_use_and_the_raise_that_would_do() {
    let out = dovetail(&[
        "explain",
        "pod",
        "default/big",
        "-o",
        "json",
        "-f",
        "tests/fixtures/explain-limits.yaml",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let e: Value = serde_json::from_slice(&out.stdout).expect("explain prints JSON");
    assert_eq!(e["outcome"], "unschedulable");
    let capped = pool(&e, "capped");
    let limits = &capped["blocker"]["limits"];
    assert_eq!(limits["resource"], "cpu", "{capped}");
    let remedy = capped["remedy"].as_str().unwrap_or_default();
    let at_least: f64 = remedy
        .strip_prefix("raising NodePool capped's limits.cpu to at least ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("remedy {remedy:?} raises limits.cpu"));
    // The pod asks for 4 CPUs, so no raise below 4 would do, and the limit is 2 today.
    assert!(at_least >= 4.0, "{remedy}");
}
