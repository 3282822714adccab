//! The simulated kube-scheduler ranks the nodes a pod fits as kube-scheduler's default profile
//! does: NodeResourcesFit with the LeastAllocated strategy plus NodeResourcesBalancedAllocation,
//! weight 1 each (kubernetes/kubernetes
//! pkg/scheduler/framework/plugins/noderesources/least_allocated.go and balanced_allocation.go).
//! Each test would bind to a different node under first fit by name.

use dovetail_dataflow::model::quantity::{mib, units};
use dovetail_dataflow::model::{Node, Pod, Resources};
use dovetail_sim::score::{balanced_allocation, least_allocated, CpuMemory};
use dovetail_sim::SimCluster;

const MILLI: i64 = units(1) / 1000;

fn node(name: &str, cpu_milli: i64, memory_mib: i64) -> Node {
    Node {
        name: name.into(),
        allocatable: Resources {
            cpu: cpu_milli * MILLI,
            memory: mib(memory_mib),
            pods: units(110),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn pod(name: &str, cpu_milli: i64, memory_mib: i64, on: Option<&str>) -> Pod {
    let mut p = Pod {
        namespace: "default".into(),
        name: name.into(),
        node_name: on.map(str::to_string),
        ..Default::default()
    };
    p.scheduling.requests = Resources {
        cpu: cpu_milli * MILLI,
        memory: mib(memory_mib),
        ..Default::default()
    };
    p
}

fn ready_cluster(nodes: &[Node]) -> SimCluster {
    let mut c = SimCluster::new();
    for n in nodes {
        c.add_node(n.clone(), vec![]).expect("new node");
        c.mark_ready(&n.name).expect("node exists");
    }
    c
}

fn bound_to(c: &SimCluster, key: &str) -> Option<String> {
    c.pod(key).and_then(|p| p.node_name.clone())
}

#[test]
fn least_allocated_is_the_mean_free_share_in_whole_points() {
    // least_allocated.go: per resource (capacity − requested)·100/capacity in integers, then
    // the weighted sum over the sum of the weights (1 + 1), again in integers.
    let alloc = CpuMemory {
        cpu: 10_000,
        memory: 20_000,
    };
    let req = CpuMemory {
        cpu: 3_000,
        memory: 5_000,
    };
    // cpu 70, memory 75: (70 + 75) / 2 = 72 (not 72.5).
    assert_eq!(least_allocated(req, alloc), 72);
    assert_eq!(least_allocated(CpuMemory::default(), alloc), 100);
    // Requests past the capacity score 0 for that resource.
    let over = CpuMemory {
        cpu: 12_000,
        memory: 0,
    };
    assert_eq!(least_allocated(over, alloc), 50);
    assert_eq!(least_allocated(req, CpuMemory::default()), 0);
}

#[test]
fn balanced_allocation_is_one_minus_half_the_fraction_gap() {
    // balanced_allocation.go: with two resources std = |f_cpu − f_mem| / 2, score
    // ⌊(1 − std)·100⌋, fractions capped at 1.
    let alloc = CpuMemory {
        cpu: 10_000,
        memory: 20_000,
    };
    let req = CpuMemory {
        cpu: 3_000,
        memory: 5_000,
    };
    // 0.3 and 0.25: std 0.025, score 97 (97.5 truncated).
    assert_eq!(balanced_allocation(req, alloc), 97);
    let lopsided = CpuMemory {
        cpu: 20_000,
        memory: 0,
    };
    // cpu capped at 1, memory 0: std 0.5.
    assert_eq!(balanced_allocation(lopsided, alloc), 50);
    // A resource with no allocatable is left out: one fraction, no deviation.
    let no_memory = CpuMemory {
        cpu: 10_000,
        memory: 0,
    };
    assert_eq!(balanced_allocation(req, no_memory), 100);
}

#[test]
fn an_emptier_node_wins_over_an_earlier_fuller_one() {
    let mut c = ready_cluster(&[node("n1", 4000, 4096), node("n2", 4000, 4096)]);
    c.add_pod(0, pod("running", 2000, 2048, Some("n1")))
        .expect("new pod");
    c.add_pod(1, pod("new", 500, 512, None)).expect("new pod");
    c.schedule(2);
    // First fit by name would take n1 (it has room); LeastAllocated prefers the empty n2.
    assert_eq!(bound_to(&c, "default/new").as_deref(), Some("n2"));
}

#[test]
fn pods_spread_over_equal_nodes_one_by_one() {
    let mut c = ready_cluster(&[
        node("n1", 4000, 4096),
        node("n2", 4000, 4096),
        node("n3", 4000, 4096),
    ]);
    for i in 0..3 {
        c.add_pod(i, pod(&format!("p{i}"), 500, 512, None))
            .expect("new pod");
    }
    let bindings = c.schedule(10);
    let nodes: Vec<&str> = bindings.iter().map(|(_, n)| n.as_str()).collect();
    // Each binding makes its node the fuller one: the next pod goes to the next empty node,
    // and among equal scores the first by name.
    assert_eq!(nodes, ["n1", "n2", "n3"]);
}

#[test]
fn balanced_beats_unbalanced_at_equal_least_allocated() {
    let mut c = ready_cluster(&[node("n1", 4000, 4000), node("n2", 4000, 4000)]);
    // After the new pod: n1 at cpu 0.6, memory 0.4; n2 at 0.5 and 0.5. LeastAllocated gives
    // both (40 + 60) / 2 = (50 + 50) / 2 = 50; BalancedAllocation gives n1 90 and n2 100.
    c.add_pod(0, pod("a", 2000, 1200, Some("n1")))
        .expect("new pod");
    c.add_pod(0, pod("b", 1600, 1600, Some("n2")))
        .expect("new pod");
    c.add_pod(1, pod("new", 400, 400, None)).expect("new pod");
    c.schedule(2);
    assert_eq!(bound_to(&c, "default/new").as_deref(), Some("n2"));
}

#[test]
fn pods_without_requests_count_as_the_schedulers_defaults() {
    // kube-scheduler counts a pod without cpu or memory requests as 100m and 200 MiB in
    // LeastAllocated (NonZeroRequested), so best-effort pods still spread out.
    let mut c = ready_cluster(&[node("n1", 4000, 4096), node("n2", 4000, 4096)]);
    for i in 0..3 {
        c.add_pod(0, pod(&format!("running{i}"), 0, 0, Some("n1")))
            .expect("new pod");
    }
    c.add_pod(1, pod("new", 0, 0, None)).expect("new pod");
    c.schedule(2);
    // Counted as zero, n1 and n2 would tie and n1 (first by name) would win.
    assert_eq!(bound_to(&c, "default/new").as_deref(), Some("n2"));
}

#[test]
fn a_fuller_node_is_still_taken_when_the_emptier_does_not_fit() {
    // Scoring ranks only the nodes the pod fits.
    let mut c = ready_cluster(&[node("n1", 4000, 4096), node("n2", 1000, 4096)]);
    c.add_pod(0, pod("running", 2000, 2048, Some("n1")))
        .expect("new pod");
    c.add_pod(1, pod("new", 1500, 512, None)).expect("new pod");
    c.schedule(2);
    assert_eq!(bound_to(&c, "default/new").as_deref(), Some("n1"));
}
