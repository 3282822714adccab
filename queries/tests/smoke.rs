mod common;
use common::*;

#[test]
fn one_pod_gets_the_cheapest_type_that_fits() {
    let out = plan(&(default_pool() + &pod("p", "1", "1Gi", "", "")));
    assert_eq!(out.launches.len(), 1, "{out:?}");
    let l = &out.launches[0];
    // Independent expectation: cheapest on-demand offering among types with room for the pod.
    let cheapest = catalogue()
        .into_iter()
        .filter(|it| {
            let a = it.allocatable();
            a.cpu >= 1000 && a.memory >= 1024 * 1024 * 1024 * 1000 && a.pods >= 1000
        })
        .filter_map(|it| {
            let p = it
                .offerings
                .iter()
                .filter(|o| {
                    o.capacity_type == "on-demand"
                        && ["us-east-1a", "us-east-1b", "us-east-1c"].contains(&o.zone.as_str())
                })
                .map(|o| o.price.0)
                .min()?;
            Some(p)
        })
        .min()
        .expect("some type fits");
    assert_eq!(l.price.0, cheapest);
    assert_eq!(out.bindings.get("default/p"), Some(&l.name));
}
