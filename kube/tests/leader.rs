//! Leader election against the Kubernetes API test peer (kmock behind `kube_peer.py`, which
//! answers a write with a stale resourceVersion with 409, so two candidates cannot both win):
//! the first candidate leads and the second waits; when the leader stops renewing, the standby
//! takes over once the Lease has gone unrenewed for its duration; a candidate does not lead while
//! Karpenter's controller renews its own Lease, and does once Karpenter stops.

use dovetail_kube::leader::{self, Election, Elector, Role, KARPENTER_LEASE};
use dovetail_kube::test_peer::KubePeer;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::{Api, PostParams};
use std::time::{Duration, Instant};

fn election(identity: &str, karpenter: bool) -> Election {
    Election {
        namespace: "kube-system".into(),
        lease_name: "dovetail-leader-election".into(),
        identity: identity.into(),
        lease_duration: Duration::from_secs(2),
        retry: Duration::from_millis(100),
        karpenter_namespace: karpenter.then(|| "kube-system".to_string()),
    }
}

/// Waits until `elector` is in `role` (or fails after 20 s); returns how long it took.
fn until(elector: &Elector, role: Role) -> Duration {
    let started = Instant::now();
    while elector.state.role() != role {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "still {:?}, waiting for {role:?}",
            elector.state.role()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    started.elapsed()
}

fn holder(rt: &tokio::runtime::Runtime, leases: &Api<Lease>) -> Option<String> {
    rt.block_on(leases.get("dovetail-leader-election"))
        .ok()?
        .spec?
        .holder_identity
}

#[test]
fn one_leads_the_other_takes_over_when_it_stops() {
    let peer = KubePeer::start();
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let client = {
        let _in = rt.enter();
        peer.client()
    };
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let a = leader::start(rt.handle(), client.clone(), election("a", false));
    until(&a, Role::Leader);
    let b = leader::start(rt.handle(), client.clone(), election("b", false));
    // b sees a renewing and stays a standby for longer than a lease lasts.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(b.state.role(), Role::Standby);
    assert_eq!(a.state.role(), Role::Leader);
    assert_eq!(holder(&rt, &leases).as_deref(), Some("a"));

    drop(a);
    let took = until(&b, Role::Leader);
    assert!(
        took >= Duration::from_secs(1),
        "b waited for the lease to run out: {took:?}"
    );
    let lease = rt
        .block_on(leases.get("dovetail-leader-election"))
        .expect("the Lease");
    let spec = lease.spec.expect("a spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(1));
}

#[test]
fn no_replica_leads_while_karpenter_holds_its_lease() {
    let peer = KubePeer::start();
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let client = {
        let _in = rt.enter();
        peer.client()
    };
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let karpenter_lease = |renewals: i32| Lease {
        metadata: kube::api::ObjectMeta {
            name: Some(KARPENTER_LEASE.into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("karpenter-7d9f8-abcde".into()),
            lease_duration_seconds: Some(15),
            lease_transitions: Some(renewals),
            ..Default::default()
        }),
    };
    rt.block_on(leases.create(&PostParams::default(), &karpenter_lease(0)))
        .expect("Karpenter's Lease");
    let d = leader::start(rt.handle(), client.clone(), election("d", true));
    until(&d, Role::KarpenterActive);
    // Karpenter keeps renewing for longer than a lease lasts: dovetail keeps out.
    for i in 1..=6 {
        std::thread::sleep(Duration::from_millis(500));
        let mut l = rt
            .block_on(leases.get(KARPENTER_LEASE))
            .expect("Karpenter's Lease");
        l.spec = karpenter_lease(i).spec;
        rt.block_on(leases.replace(KARPENTER_LEASE, &PostParams::default(), &l))
            .expect("Karpenter renews");
        assert_eq!(d.state.role(), Role::KarpenterActive);
    }
    assert!(
        holder(&rt, &leases).is_none(),
        "dovetail never took its own Lease"
    );
    // Karpenter scaled to zero: its Lease goes unrenewed, and dovetail leads.
    until(&d, Role::Leader);
    assert_eq!(holder(&rt, &leases).as_deref(), Some("d"));
}
