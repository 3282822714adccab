//! The loop driven from a channel of fact changes on a clock, with the simulated cloud and
//! cluster as its backends: the batch window holds a burst, and ticks close epochs with nothing
//! arriving.

use crossbeam_channel::{unbounded, Receiver, Sender};
use dovetail_actuate::driver::{drive, Clock, DriveSettings, FactChange};
use dovetail_actuate::{ActuationSettings, BatchWindow, ControlLoop};
use dovetail_dataflow::backend::Cluster;
use dovetail_dataflow::catalog::{embedded, ResolveOptions};
use dovetail_dataflow::facts::Fact;
use dovetail_sim::{SimCloud, SimCluster, SimConfig};

/// Virtual time: a wait returns a change already sent, else jumps to the time asked for.
struct ManualClock {
    now: i64,
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now
    }

    fn wait(&mut self, until_ms: i64, sources: &Receiver<FactChange>) -> Option<FactChange> {
        match sources.try_recv() {
            Ok(change) => Some(change),
            Err(_) => {
                self.now = self.now.max(until_ms);
                None
            }
        }
    }
}

const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec: {}
status:
  subnets: [{id: subnet-a, zone: us-east-1a}]
"#;

/// A source's first sync: the NodePool, its EC2NodeClass and the types it resolves.
fn send_infrastructure(tx: &Sender<FactChange>) {
    let m = dovetail_ingest::load_str("pool.yaml", POOL).expect("pool parses");
    for p in m.nodepools {
        tx.send(FactChange::Set(Box::new(Fact::NodePool(p))))
            .expect("send");
    }
    for c in m.nodeclasses {
        for it in embedded("us-east-1")
            .expect("catalogue")
            .instance_types(&ResolveOptions::for_node_class(&c))
        {
            tx.send(FactChange::Set(Box::new(Fact::InstanceType {
                node_class: c.name.clone(),
                instance_type: it,
            })))
            .expect("send");
        }
        tx.send(FactChange::Set(Box::new(Fact::NodeClass(c))))
            .expect("send");
    }
}

fn send_pod(tx: &Sender<FactChange>, name: &str) {
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  containers:\n  - name: c\n    image: i\n    resources: {{requests: {{cpu: '1', memory: 1Gi}}}}\n"
    );
    for p in dovetail_ingest::load_str("pod.yaml", &yaml)
        .expect("pod parses")
        .pods
    {
        tx.send(FactChange::Set(Box::new(Fact::Pod(p))))
            .expect("send");
    }
}

fn control(window: BatchWindow) -> ControlLoop {
    let mut control = ControlLoop::start(
        dovetail_queries::standing_queries,
        1,
        ActuationSettings::default(),
    )
    .expect("engine starts");
    control.actuator_mut().set_instance_types(
        embedded("us-east-1")
            .expect("catalogue")
            .instance_types(&ResolveOptions::default())
            .into_iter()
            .map(|t| (t.name.clone(), t))
            .collect(),
    );
    control.set_batch_window(window);
    control
}

#[test]
fn a_burst_from_the_sources_is_launched_when_its_batch_closes() {
    let (tx, rx) = unbounded();
    send_infrastructure(&tx);
    for p in ["a", "b", "c"] {
        send_pod(&tx, p);
    }
    let mut control = control(BatchWindow::KARPENTER);
    let mut cloud = SimCloud::new(SimConfig {
        spot_interruptions: false,
        ..SimConfig::default()
    })
    .expect("cloud");
    let mut cluster = SimCluster::new();
    let mut clock = ManualClock { now: 0 };
    drive(
        &mut control,
        &mut cloud,
        &mut cluster,
        &rx,
        &mut clock,
        DriveSettings::default(),
        |_, _, cluster: &SimCluster| !Cluster::nodeclaims(cluster).is_empty(),
    )
    .expect("the loop runs");
    let claims = Cluster::nodeclaims(&cluster);
    assert_eq!(
        claims.len(),
        1,
        "one launch for the whole batch: {claims:#?}"
    );
    assert_eq!(claims[0].created_ms, 1_000, "launched as the batch closed");
    assert!(claims[0].status.is_some(), "the simulated cloud answered");
}

#[test]
fn with_nothing_arriving_ticks_still_close_epochs() {
    let (tx, rx) = unbounded();
    send_infrastructure(&tx);
    drop(tx);
    let mut control = control(BatchWindow::OFF);
    let mut cloud = SimCloud::new(SimConfig::default()).expect("cloud");
    let mut cluster = SimCluster::new();
    let mut clock = ManualClock { now: 0 };
    let mut epochs = 0;
    drive(
        &mut control,
        &mut cloud,
        &mut cluster,
        &rx,
        &mut clock,
        DriveSettings { tick_ms: 10_000 },
        |_, _, _| {
            epochs += 1;
            epochs == 4
        },
    )
    .expect("the loop runs");
    assert_eq!(clock.now, 30_000, "woken by the tick alone");
    assert!(control.engine().epoch() > 30_000);
    assert!(Cluster::nodeclaims(&cluster).is_empty());
}
