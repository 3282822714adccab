//! The control loop driven with a scripted `Cloud` (and the simulated cluster as its `Cluster`):
//! capacity errors and the engine's relaunch, a cloud that answers epochs late, and restarts
//! in each crash window between creating a NodeClaim and recording its instance.

mod common;
use common::{catalogue, control_loop, m5_pool, pod};
use dovetail_actuate::ControlLoop;
use dovetail_dataflow::backend::{
    Cloud, CloudEvent, CloudReply, Cluster, FleetRequest, Instance, InstanceState, LaunchError,
    OfferingKey,
};
use dovetail_dataflow::catalog::{embedded, ResolveOptions};
use dovetail_dataflow::decisions::Decision;
use dovetail_dataflow::facts::Fact;
use dovetail_dataflow::model::EC2NodeClass;
use dovetail_sim::SimCluster;
use std::collections::{BTreeMap, BTreeSet};

/// What the scripted cloud does with a CreateFleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Script {
    /// Carry it out; the answer arrives after `delay` polls.
    Answer { delay: usize },
    /// The process died before the call left: nothing happens.
    NeverSent,
    /// The call was carried out but its answer never reached the caller.
    AnswerLost,
    /// The first call is carried out and hangs (no answer, ever); later ones answer at once.
    HangFirst,
}

/// EC2 as a script: offerings in `ice` have no capacity; every request is recorded.
struct ScriptedCloud {
    script: Script,
    ice: BTreeSet<OfferingKey>,
    requests: Vec<FleetRequest>,
    instances: BTreeMap<String, Instance>,
    by_token: BTreeMap<String, String>,
    /// Answers held back, with the polls each still waits.
    held: Vec<(usize, CloudReply)>,
}

impl ScriptedCloud {
    fn new(script: Script) -> ScriptedCloud {
        ScriptedCloud {
            script,
            ice: BTreeSet::new(),
            requests: Vec::new(),
            instances: BTreeMap::new(),
            by_token: BTreeMap::new(),
            held: Vec::new(),
        }
    }

    fn launch(&mut self, now_ms: i64, r: &FleetRequest) -> Result<Instance, LaunchError> {
        if let Some(i) = self.by_token.get(&r.client_token) {
            return Ok(self.instances[i].clone());
        }
        let mut tried = Vec::new();
        for o in &r.overrides {
            if self.ice.contains(&o.key) {
                tried.push(o.key.clone());
                continue;
            }
            let id = format!("i-{:017x}", self.instances.len() + 1);
            let instance = Instance {
                id: id.clone(),
                launch: r.nodeclaim.clone(),
                nodepool: r.nodepool.clone(),
                instance_type: o.key.instance_type.clone(),
                zone: o.key.zone.clone(),
                zone_id: o.zone_id.clone(),
                region: "us-east-1".into(),
                capacity_type: o.key.capacity_type.clone(),
                price: o.price,
                launched_ms: now_ms,
                running_ms: now_ms,
                state: InstanceState::Running,
                interruption_warning_ms: None,
                stopped_ms: None,
                fleet_errors: tried,
                capacity_reservation_id: None,
                capacity_reservation_type: None,
            };
            self.by_token.insert(r.client_token.clone(), id.clone());
            self.instances.insert(id, instance.clone());
            return Ok(instance);
        }
        Err(LaunchError::InsufficientCapacity { tried })
    }
}

impl Cloud for ScriptedCloud {
    fn create_fleet(&mut self, now_ms: i64, request: FleetRequest) {
        self.requests.push(request.clone());
        let delay = match self.script {
            Script::NeverSent => return,
            Script::AnswerLost => {
                let _ = self.launch(now_ms, &request);
                return;
            }
            Script::HangFirst if self.requests.len() == 1 => {
                let _ = self.launch(now_ms, &request);
                return;
            }
            Script::HangFirst => 0,
            Script::Answer { delay } => delay,
        };
        let result = self.launch(now_ms, &request).map(Box::new);
        self.held.push((
            delay,
            CloudReply::Launched {
                nodeclaim: request.nodeclaim,
                result,
            },
        ));
    }

    fn terminate(&mut self, _now_ms: i64, instance_id: &str) {
        if let Some(i) = self.instances.get_mut(instance_id) {
            i.state = InstanceState::Terminated;
        }
    }

    fn poll_replies(&mut self, _now_ms: i64) -> Vec<CloudReply> {
        let mut due = Vec::new();
        let mut later = Vec::new();
        for (wait, reply) in std::mem::take(&mut self.held) {
            if wait == 0 {
                due.push(reply);
            } else {
                later.push((wait - 1, reply));
            }
        }
        self.held = later;
        due
    }

    fn poll_events(&mut self, _now_ms: i64) -> Vec<CloudEvent> {
        Vec::new()
    }

    fn instance(&self, id: &str) -> Option<&Instance> {
        self.instances.get(id)
    }

    fn instance_for_nodeclaim(&self, nodeclaim: &str) -> Option<&Instance> {
        self.instances
            .values()
            .find(|i| i.launch == nodeclaim && i.state.is_alive())
    }

    fn instances(&self) -> Vec<&Instance> {
        self.instances.values().collect()
    }
}

/// The loop, the scripted cloud, the simulated cluster as the `Cluster`, and a source that
/// tells the engine what the cluster lists (pods, NodeClaims launched) and the instance types.
struct Harness {
    control: ControlLoop,
    cloud: ScriptedCloud,
    cluster: SimCluster,
    classes: Vec<EC2NodeClass>,
    node_facts: BTreeSet<String>,
    now: i64,
}

impl Harness {
    fn new(cloud: ScriptedCloud, cluster: SimCluster, now: i64) -> Harness {
        let manifests = m5_pool("spot, on-demand");
        let mut control = control_loop();
        for p in manifests.nodepools {
            control.set_fact(Fact::NodePool(p));
        }
        for c in &manifests.nodeclasses {
            control.set_fact(Fact::NodeClass(c.clone()));
        }
        Harness {
            control,
            cloud,
            cluster,
            classes: manifests.nodeclasses,
            node_facts: BTreeSet::new(),
            now,
        }
    }

    fn add_pod(&mut self, name: &str) {
        self.cluster.add_pod(self.now, pod(name)).expect("new pod");
    }

    /// What the engine is told, read only from the backends' listings (capacity errors reach it
    /// from the actuator, as facts).
    fn sync(&mut self) {
        let pods: Vec<_> = self.cluster.pods().cloned().collect();
        for p in pods {
            self.control.set_fact(Fact::Pod(p.into()));
        }
        let nodes: Vec<_> = Cluster::nodeclaims(&self.cluster)
            .into_iter()
            .filter_map(|c| c.status.clone())
            .collect();
        let names: BTreeSet<String> = nodes.iter().map(|n| n.name.clone()).collect();
        for gone in self.node_facts.difference(&names) {
            self.control.remove_fact(&format!("Node {gone}"));
        }
        for n in nodes {
            self.control.set_fact(Fact::Node(n));
        }
        self.node_facts = names;
        for class in &self.classes {
            for it in embedded("us-east-1")
                .expect("catalogue")
                .instance_types(&ResolveOptions::for_node_class(class))
            {
                self.control.set_fact(Fact::InstanceType {
                    node_class: class.name.clone(),
                    instance_type: it,
                });
            }
        }
    }

    /// Closes one epoch a second after the last and acts on it; returns its diffs.
    fn epoch(&mut self) -> Vec<(Decision, isize)> {
        self.now += 1_000;
        self.sync();
        let diffs = self.control.advance(self.now).expect("engine advances");
        self.control
            .act(self.now, &diffs, &mut self.cloud, &mut self.cluster);
        diffs
    }

    /// `n` more epochs: what an answer or a capacity error changed reaches the engine one
    /// epoch after the act.
    fn settle(&mut self, n: usize) {
        for _ in 0..n {
            self.epoch();
        }
    }

    fn launches(&self) -> usize {
        self.control
            .engine()
            .decisions()
            .iter()
            .filter(|d| matches!(d, Decision::Launch(_)))
            .count()
    }
}

fn alive(cloud: &ScriptedCloud) -> usize {
    cloud
        .instances
        .values()
        .filter(|i| i.state.is_alive())
        .count()
}

#[test]
fn a_capacity_error_makes_the_engine_relaunch_on_another_offering() {
    let mut cloud = ScriptedCloud::new(Script::Answer { delay: 0 });
    // No spot m5 anywhere: the spot-first request fails, as Karpenter's would.
    for t in catalogue().iter().filter(|t| t.name.starts_with("m5.")) {
        for o in t.offerings.iter().filter(|o| o.capacity_type == "spot") {
            cloud
                .ice
                .insert(OfferingKey::new(&t.name, &o.zone, &o.capacity_type));
        }
    }
    let mut h = Harness::new(cloud, SimCluster::new(), 0);
    h.add_pod("a");
    h.settle(10);

    let requests = &h.cloud.requests;
    assert_eq!(
        requests.len(),
        2,
        "{requests:#?} {:#?}",
        h.control.engine().decisions()
    );
    assert_eq!(requests[0].capacity_type, "spot");
    assert_eq!(requests[1].capacity_type, "on-demand");
    assert!(requests[1]
        .overrides
        .iter()
        .all(|o| !h.cloud.ice.contains(&o.key)));
    assert_eq!(alive(&h.cloud), 1);
    let first = &requests[0].overrides[0].key;
    assert!(h.control.actuator().offering_unavailable(first));
    assert_eq!(
        h.control.actuator().stats().capacity_errors as usize,
        requests[0].overrides.len()
    );
    // The failed NodeClaim is gone; the one launched holds the pod.
    let claims = Cluster::nodeclaims(&h.cluster);
    assert_eq!(claims.len(), 1);
    assert_eq!(
        claims[0]
            .status
            .as_ref()
            .map(|n| n.labels["karpenter.sh/capacity-type"].as_str()),
        Some("on-demand")
    );
    assert_eq!(
        h.launches(),
        0,
        "the pod is bound to the in-flight NodeClaim"
    );
}

#[test]
fn a_cloud_answering_three_epochs_late_does_not_stall_the_loop_or_launch_twice() {
    let mut h = Harness::new(
        ScriptedCloud::new(Script::Answer { delay: 3 }),
        SimCluster::new(),
        0,
    );
    h.add_pod("a");
    h.epoch();
    assert_eq!(h.cloud.requests.len(), 1);
    let claim = h.cloud.requests[0].nodeclaim.clone();
    // The NodeClaim records the intent before the answer; epochs keep closing meanwhile. The
    // answer is held for three polls of the loop, one per epoch: the call's own and the next two.
    for _ in 0..2 {
        let before = h.control.engine().epoch();
        h.epoch();
        assert!(h.control.engine().epoch() > before, "an epoch closed");
        let c = h.cluster.nodeclaim(&claim).expect("the NodeClaim exists");
        assert!(c.status.is_none(), "no answer yet");
        assert_eq!(h.cloud.requests.len(), 1, "nothing launched twice");
        assert_eq!(h.launches(), 1, "the launch is still the engine's decision");
    }
    // A pod arriving while the call is out changes the plan, not the call already made.
    h.add_pod("b");
    h.epoch();
    let c = h.cluster.nodeclaim(&claim).expect("the NodeClaim exists");
    assert!(
        c.status.is_some(),
        "the answer arrived three epochs after the call"
    );
    h.settle(5);
    assert_eq!(h.launches(), 0, "{:?}", h.control.engine().decisions());
    assert_eq!(
        h.cloud.requests.len(),
        Cluster::nodeclaims(&h.cluster).len(),
        "one CreateFleet per NodeClaim"
    );
}

#[test]
fn a_hung_createfleet_is_asked_again_under_its_token_and_launches_once() {
    let mut h = Harness::new(ScriptedCloud::new(Script::HangFirst), SimCluster::new(), 0);
    h.add_pod("a");
    h.epoch();
    let sent = h.now;
    let claim = h.cloud.requests[0].nodeclaim.clone();
    h.settle(3);
    assert!(h
        .cluster
        .nodeclaim(&claim)
        .is_some_and(|c| c.status.is_none()));
    // Not yet past the timeout: nothing is asked again.
    let asked = h.control.actuator_mut().retry_hung_launches(
        h.now,
        h.now - sent + 1,
        &mut h.cloud,
        &mut h.cluster,
    );
    assert!(asked.is_empty());
    // Past it: the same request again, under the same token.
    let asked = h.control.actuator_mut().retry_hung_launches(
        h.now,
        h.now - sent,
        &mut h.cloud,
        &mut h.cluster,
    );
    assert_eq!(asked, std::slice::from_ref(&claim));
    h.settle(5);
    assert_eq!(h.cloud.requests.len(), 2);
    assert_eq!(
        h.cloud.requests[0].client_token,
        h.cloud.requests[1].client_token
    );
    assert_eq!(
        alive(&h.cloud),
        1,
        "the first call's instance, returned again"
    );
    let c = h.cluster.nodeclaim(&claim).expect("the NodeClaim stays");
    assert_eq!(
        c.instance_id(),
        h.cloud.instances.keys().next().map(String::as_str)
    );
    assert_eq!(h.control.actuator().stats().launches_retried, 1);
    assert_eq!(h.control.actuator().stats().nodes_launched, 1);
    assert_eq!(h.launches(), 0, "the pod is on the NodeClaim");
}

#[test]
fn a_late_answer_after_asking_again_is_a_duplicate_and_changes_nothing() {
    let mut h = Harness::new(
        ScriptedCloud::new(Script::Answer { delay: 3 }),
        SimCluster::new(),
        0,
    );
    h.add_pod("a");
    h.epoch();
    let claim = h.cloud.requests[0].nodeclaim.clone();
    h.epoch();
    // Asked again while the first answer is on its way: both answers arrive, in turn.
    let asked =
        h.control
            .actuator_mut()
            .retry_hung_launches(h.now, 1_000, &mut h.cloud, &mut h.cluster);
    assert_eq!(asked.len(), 1);
    h.settle(8);
    assert_eq!(h.cloud.requests.len(), 2);
    assert_eq!(alive(&h.cloud), 1);
    assert_eq!(
        h.control.actuator().stats().nodes_launched,
        1,
        "one answer recorded"
    );
    assert!(h
        .cluster
        .nodeclaim(&claim)
        .is_some_and(|c| c.instance_id().is_some()));
    // Nothing is in flight any more: nothing to ask again, however long it waits.
    let asked = h.control.actuator_mut().retry_hung_launches(
        h.now + 3_600_000,
        1_000,
        &mut h.cloud,
        &mut h.cluster,
    );
    assert!(asked.is_empty());
}

/// Runs a loop until its first CreateFleet under `script`, stops it, and starts a new loop on
/// the same cloud and cluster (what they list is all it knows) with a cloud that answers.
fn restart_after(script: Script) -> Harness {
    let mut h = Harness::new(ScriptedCloud::new(script), SimCluster::new(), 0);
    h.add_pod("a");
    h.add_pod("b");
    h.epoch();
    assert_eq!(h.cloud.requests.len(), 1);
    let claims = Cluster::nodeclaims(&h.cluster).len();
    assert_eq!(claims, 1, "the NodeClaim was created before the call");
    let Harness {
        mut cloud,
        cluster,
        now,
        ..
    } = h;
    cloud.script = Script::Answer { delay: 0 };
    let mut h = Harness::new(cloud, cluster, now);
    h.control.recover(h.now, &mut h.cloud, &mut h.cluster);
    h.settle(10);
    h
}

#[test]
fn a_restart_after_the_nodeclaim_and_before_the_call_launches_it_once() {
    let h = restart_after(Script::NeverSent);
    assert_eq!(alive(&h.cloud), 1, "{:#?}", h.cloud.requests);
    assert_eq!(Cluster::nodeclaims(&h.cluster).len(), 1);
    assert_eq!(
        h.cloud.requests[0].client_token, h.cloud.requests[1].client_token,
        "resubmitted under the same token"
    );
    assert_eq!(h.launches(), 0, "both pods are on the one NodeClaim");
}

#[test]
fn a_restart_after_the_call_and_before_the_instance_is_recorded_launches_nothing_more() {
    let h = restart_after(Script::AnswerLost);
    assert_eq!(
        h.cloud.requests.len(),
        1,
        "the instance found, not relaunched"
    );
    assert_eq!(alive(&h.cloud), 1);
    let claims = Cluster::nodeclaims(&h.cluster);
    assert_eq!(claims.len(), 1);
    assert_eq!(
        claims[0].instance_id(),
        h.cloud.instances.keys().next().map(String::as_str)
    );
    assert_eq!(h.launches(), 0);
}

#[test]
fn registration_removes_the_unregistered_taint_and_marks_the_nodeclaim() {
    let mut h = Harness::new(
        ScriptedCloud::new(Script::Answer { delay: 0 }),
        SimCluster::new(),
        0,
    );
    h.add_pod("a");
    h.settle(3);
    let claim = Cluster::nodeclaims(&h.cluster)[0].clone();
    let node = claim.node_name().expect("launched").to_string();
    assert!(h.cluster.register(&node, h.now), "the kubelet joins");
    let tainted = |h: &Harness| {
        Cluster::node(&h.cluster, &node)
            .expect("registered")
            .taints
            .iter()
            .any(|t| t.key == "karpenter.sh/unregistered")
    };
    assert!(tainted(&h), "the kubelet registers it tainted");
    assert!(dovetail_actuate::registration::register_node(
        h.now,
        &node,
        &mut h.cluster
    ));
    assert!(!tainted(&h));
    assert!(h.cluster.nodeclaim(&claim.name).expect("kept").registered);
    assert!(
        !dovetail_actuate::registration::register_node(h.now, &node, &mut h.cluster),
        "registered once"
    );
}

#[test]
fn garbage_collection_terminates_instances_without_a_nodeclaim_after_the_grace_period() {
    let mut h = Harness::new(
        ScriptedCloud::new(Script::Answer { delay: 0 }),
        SimCluster::new(),
        0,
    );
    h.add_pod("a");
    h.settle(3);
    let claim = Cluster::nodeclaims(&h.cluster)[0].clone();
    let kept = claim.instance_id().expect("launched").to_string();
    // An instance tagged as ours whose NodeClaim was never written (a crash, a lost claim).
    let leaked_request = FleetRequest {
        labels: Default::default(),
        taints: Vec::new(),
        nodeclaim: "default-lost1".into(),
        client_token: "default-lost1@0".into(),
        ..h.cloud.requests[0].clone()
    };
    let leaked = h.cloud.launch(h.now, &leaked_request).expect("launched").id;
    let launched_at = h.now;

    let actuator = h.control.actuator_mut();
    let early =
        actuator.collect_garbage(launched_at + 29_999, 30_000, &mut h.cloud, &mut h.cluster);
    assert!(
        early.instances.is_empty(),
        "a launch in its grace period is never collected"
    );
    let collected =
        actuator.collect_garbage(launched_at + 30_000, 30_000, &mut h.cloud, &mut h.cluster);
    assert_eq!(collected.instances, vec![leaked.clone()]);
    assert!(collected.nodeclaims.is_empty());
    assert!(!h.cloud.instances[&leaked].state.is_alive());
    assert!(
        h.cloud.instances[&kept].state.is_alive(),
        "an instance with its NodeClaim stays"
    );

    // The NodeClaim's instance goes (terminated outside dovetail): the NodeClaim is deleted.
    h.cloud.terminate(h.now, &kept);
    let collected = h.control.actuator_mut().collect_garbage(
        launched_at + 40_000,
        30_000,
        &mut h.cloud,
        &mut h.cluster,
    );
    assert_eq!(collected.nodeclaims, vec![claim.name.clone()]);
    assert!(h.cluster.nodeclaim(&claim.name).is_none());
    assert_eq!(h.control.actuator().stats().garbage_instances, 1);
}
