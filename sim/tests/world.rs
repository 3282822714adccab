//! The cloud and the cluster driven together, as `dovetail replay` drives them: cloud events add,
//! ready and remove nodes; the scheduler binds pending pods.

use dovetail_dataflow::backend::CloudEventKind;
use dovetail_dataflow::catalog::{embedded, ResolveOptions};
use dovetail_dataflow::decisions::Launch;
use dovetail_dataflow::model::quantity::{mib, units};
use dovetail_dataflow::model::{InstanceType, NodePool, Pod, Price, Requirements, Resources};
use dovetail_sim::{InterruptionKind, SimCloud, SimCluster, SimConfig};
use std::collections::BTreeMap;

mod support;
use support::LaunchExt;

struct World {
    cloud: SimCloud,
    cluster: SimCluster,
    types: BTreeMap<String, InstanceType>,
    pool: NodePool,
    log: Vec<String>,
}

impl World {
    fn new(seed: u64) -> World {
        let catalog = embedded("us-east-1").expect("embedded catalogue");
        let types = catalog
            .instance_types(&ResolveOptions::default())
            .into_iter()
            .map(|t| (t.name.clone(), t))
            .collect();
        let config = SimConfig {
            seed,
            interruption_rate_scale: 20_000.0,
            ..SimConfig::default()
        };
        World {
            cloud: SimCloud::new(config).expect("config"),
            cluster: SimCluster::new(),
            types,
            pool: NodePool {
                name: "default".into(),
                ..NodePool::default()
            },
            log: Vec::new(),
        }
    }

    /// Applies the cloud's events up to `now` to the cluster, then schedules.
    fn step(&mut self, now: i64) {
        for e in self.cloud.poll(now) {
            let Some(instance) = self.cloud.instance(&e.instance_id).cloned() else {
                continue;
            };
            let name = instance.node_name();
            self.log
                .push(format!("{} {} {:?}", e.at_ms, e.instance_id, e.kind));
            match e.kind {
                CloudEventKind::NodeRegistered => {
                    let (node, startup) = support::node_for_instance(
                        &instance,
                        &self.types[&instance.instance_type],
                        &self.pool,
                        e.at_ms,
                    );
                    self.cluster.add_node(node, startup).expect("new node");
                }
                CloudEventKind::NodeInitialized => {
                    self.cluster.mark_ready(&name).expect("known node");
                }
                CloudEventKind::SpotInterruptionWarning { .. }
                    if self.cluster.node(&name).is_some() =>
                {
                    self.cluster
                        .evict_for_drain(e.at_ms, &name, &[])
                        .expect("known node");
                }
                CloudEventKind::Terminated { .. } if self.cluster.node(&name).is_some() => {
                    self.cluster
                        .remove_node(e.at_ms, &name)
                        .expect("known node");
                }
                _ => {}
            }
        }
        for (pod, node) in self.cluster.schedule(now) {
            self.log.push(format!("{now} bind {pod} {node}"));
        }
    }
}

fn pod(name: &str) -> Pod {
    let mut p = Pod {
        namespace: "default".into(),
        name: name.into(),
        ..Default::default()
    };
    p.scheduling.requests = Resources {
        cpu: units(1),
        memory: mib(1024),
        pods: units(1),
        ..Default::default()
    };
    p
}

fn launch(name: &str, capacity_types: &[&str]) -> Launch {
    Launch {
        name: name.into(),
        nodepool: "default".into(),
        instance_types: vec!["m5.xlarge".into(), "m5a.xlarge".into()],
        zones: vec!["us-east-1a".into()],
        capacity_types: capacity_types.iter().map(|s| s.to_string()).collect(),
        price: Price(0),
        requirements: Requirements::new(),
        pods_by_class: vec![],
    }
}

fn run(seed: u64) -> (Vec<String>, Vec<i64>, usize) {
    let mut w = World::new(seed);
    for n in 0..6 {
        w.cluster.add_pod(0, pod(&format!("p{n}"))).unwrap();
    }
    let od = w
        .cloud
        .create_fleet(0, &launch("od", &["on-demand"]), &w.types)
        .unwrap();
    let spot = w
        .cloud
        .create_fleet(0, &launch("sp", &["spot"]), &w.types)
        .unwrap();
    assert_eq!(od.capacity_type, "on-demand");
    assert_eq!(spot.capacity_type, "spot");
    let mut t = 0;
    while let Some(next) = w.cloud.next_event_ms() {
        if next > 6 * 3600 * 1000 {
            break;
        }
        t = next;
        w.step(t);
    }
    // A trace-driven advisory for the on-demand instance: reported, nothing else changes.
    w.cloud
        .forced_interrupt(t, &od.id, InterruptionKind::RebalanceRecommendation)
        .unwrap();
    w.step(t);
    let pending = w.cluster.pending().len();
    (w.log, w.cluster.pending_durations().to_vec(), pending)
}

#[test]
fn pods_wait_for_nodes_then_bind_and_the_run_is_reproducible() {
    let (log, waits, pending) = run(3);
    // Pods bind when the first node is initialised: 85 s after the launch at 0.
    assert!(
        log.iter().any(|l| l.starts_with("85000 bind default/p0")),
        "{log:#?}"
    );
    assert!(waits.iter().take(6).all(|w| *w == 85_000), "{waits:?}");
    assert!(log
        .last()
        .is_some_and(|l| l.ends_with("RebalanceRecommendation")));
    // At this rate the spot instance is reclaimed within the six hours: its warning drains it
    // (three pods pending again, with no room on the on-demand node) two minutes before the end.
    let warning = log
        .iter()
        .position(|l| l.contains("SpotInterruptionWarning"))
        .expect("interrupted");
    let end = log
        .iter()
        .position(|l| l.contains("Terminated { cause: SpotInterruption }"))
        .expect("reclaimed");
    assert!(warning < end);
    assert_eq!(pending, 3);
    let (again, waits_again, pending_again) = run(3);
    assert_eq!(log, again);
    assert_eq!(waits, waits_again);
    assert_eq!(pending, pending_again);
}
