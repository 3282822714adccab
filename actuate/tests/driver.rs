//! The loop driven from a channel of fact changes on a clock, with the simulated cloud and
//! cluster as its backends: the batch window holds a burst, and ticks close epochs with nothing
//! arriving.

mod common;
use common::{control_loop, m5_pool, pod};
use crossbeam_channel::{unbounded, Receiver, Sender};
use dovetail_actuate::driver::{drive, Clock, DriveSettings, FactChange};
use dovetail_actuate::{BatchWindow, ControlLoop};
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

/// A source's first sync: the NodePool, its EC2NodeClass and the types it resolves.
fn send_infrastructure(tx: &Sender<FactChange>) {
    let m = m5_pool("on-demand");
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
    tx.send(FactChange::Set(Box::new(Fact::Pod(pod(name).into()))))
        .expect("send");
}

fn control(window: BatchWindow) -> ControlLoop {
    let mut control = control_loop();
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
