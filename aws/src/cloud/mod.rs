//! [`Ec2Cloud`]: the `Cloud` interface on EC2. Calls are submitted to a tokio runtime and return
//! at once; their answers come back through a channel and are handed out by `poll_replies`. The
//! cache of this cluster's instances is kept from DescribeInstances every `describe_interval`,
//! and the differences between two listings are the lifecycle events (`Running`, `Terminated`).
//!
//! Never launch twice: the ClientToken hashes the NodeClaim's identity and the overrides
//! ([`crate::client_token`]); the first listing is made before the loop starts, so recovery
//! finds an instance already tagged for a NodeClaim before it would relaunch it. A launch whose
//! call keeps failing with throttling or transient errors is retried until it gets an answer: its
//! decision stays pending rather than being dropped.

mod launching;
mod listing;

use crate::calls::Calls;
use crate::error::AwsError;
use crate::sdk::Clients;
use crate::settings::AwsSettings;
use crossbeam_channel::{Receiver, Sender};
use dovetail_dataflow::backend::{
    Cloud, CloudEvent, CloudReply, FleetRequest, Instance, InstanceState, LaunchError, OfferingKey,
};
use dovetail_dataflow::catalog::RegionCatalog;
use dovetail_dataflow::model::{EC2NodeClass, Price};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// What decides the AMI of an instance type: its architecture and its accelerator variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AmiKind {
    pub arch: String,
    pub variant: &'static str,
}

/// TerminateInstances takes this many ids per call.
const TERMINATE_BATCH: usize = 500;

enum Completion {
    Launched {
        nodeclaim: String,
        result: Result<Box<Instance>, LaunchError>,
    },
    Terminated {
        ids: Vec<String>,
        error: Option<String>,
    },
    Described {
        started_ms: i64,
        result: Result<crate::instances::Listed, AwsError>,
    },
}

struct Shared {
    clients: Clients,
    calls: Arc<Calls>,
    settings: AwsSettings,
    /// Launch templates known to exist (by name): checked once per process, not per launch.
    templates: std::sync::Mutex<BTreeSet<String>>,
    /// Instance profiles known to exist with their role, likewise.
    profiles: std::sync::Mutex<BTreeSet<String>>,
}

/// EC2 behind the `Cloud` interface.
pub struct Ec2Cloud {
    runtime: tokio::runtime::Handle,
    shared: Arc<Shared>,
    sender: Sender<Completion>,
    completions: Receiver<Completion>,
    instances: BTreeMap<String, Instance>,
    by_nodeclaim: BTreeMap<String, String>,
    /// Instances this process asked to terminate (their end is `Requested`).
    requested: BTreeSet<String>,
    /// Asked to terminate since the last flush.
    to_terminate: Vec<String>,
    replies: Vec<CloudReply>,
    events: Vec<CloudEvent>,
    describing: bool,
    last_describe_ms: Option<i64>,
    /// Each instance type's `kubernetes.io/arch` and AMI variant (`standard`, `nvidia`, `neuron`).
    arch_of_type: Arc<BTreeMap<String, AmiKind>>,
    prices: Arc<BTreeMap<OfferingKey, Price>>,
    nodeclasses: BTreeMap<String, EC2NodeClass>,
    launches_in_flight: u64,
    terminations_in_flight: u64,
    /// Instances a listing lacked, since when: EC2's listings are eventually consistent, so one
    /// absence is not an end.
    missing_since: BTreeMap<String, i64>,
    /// Instance profiles this cluster's live instances run with (from the last listing).
    profiles_in_use: BTreeSet<String>,
}

/// Each type's architecture and AMI variant, and each offering's price, from the catalogue.
fn catalog_maps(
    catalog: &RegionCatalog,
) -> (BTreeMap<String, AmiKind>, BTreeMap<OfferingKey, Price>) {
    let arch_of_type = catalog
        .entries
        .iter()
        .filter_map(|e| {
            Some((
                e.name.clone(),
                AmiKind {
                    arch: e.kube_arch()?.to_string(),
                    variant: e.ami_variant(),
                },
            ))
        })
        .collect();
    let mut prices = BTreeMap::new();
    for (name, t) in &catalog.offerings {
        let spot_supported = catalog.entry(name).is_some_and(|e| e.spot_supported);
        for o in t.offerings(spot_supported, None) {
            prices.insert(OfferingKey::new(name, &o.zone, &o.capacity_type), o.price);
        }
    }
    (arch_of_type, prices)
}

fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Ec2Cloud {
    /// Connects: lists this cluster's instances once (so recovery sees them) and starts taking
    /// calls, paced and counted by `calls` (shared with discovery and the queue). `runtime` runs
    /// the calls; this must not be called from one of its threads.
    pub fn connect(
        runtime: tokio::runtime::Handle,
        clients: Clients,
        settings: AwsSettings,
        catalog: &RegionCatalog,
        calls: Arc<Calls>,
    ) -> Result<Ec2Cloud, AwsError> {
        let (sender, completions) = crossbeam_channel::unbounded();
        let (arch_of_type, prices) = catalog_maps(catalog);
        let mut cloud = Ec2Cloud {
            runtime,
            shared: Arc::new(Shared {
                clients,
                calls,
                settings,
                templates: Default::default(),
                profiles: Default::default(),
            }),
            sender,
            completions,
            instances: BTreeMap::new(),
            by_nodeclaim: BTreeMap::new(),
            requested: BTreeSet::new(),
            to_terminate: Vec::new(),
            replies: Vec::new(),
            events: Vec::new(),
            describing: false,
            last_describe_ms: None,
            arch_of_type: Arc::new(arch_of_type),
            prices: Arc::new(prices),
            nodeclasses: BTreeMap::new(),
            launches_in_flight: 0,
            terminations_in_flight: 0,
            missing_since: BTreeMap::new(),
            profiles_in_use: BTreeSet::new(),
        };
        let now = wall_ms();
        let listed = cloud.runtime.block_on(cloud.describe_future(now))?;
        cloud.last_describe_ms = Some(now);
        cloud.reconcile(now, now, listed);
        cloud.events.clear();
        Ok(cloud)
    }

    /// A catalogue discovered again (Karpenter: every 12 h): the types' architectures and the
    /// prices instances are recorded at come from it from now on.
    pub fn set_catalog(&mut self, catalog: &RegionCatalog) {
        let (arch_of_type, prices) = catalog_maps(catalog);
        self.arch_of_type = Arc::new(arch_of_type);
        self.prices = Arc::new(prices);
    }

    /// The EC2NodeClass launches are made with (its status resolved: subnets per zone, AMIs
    /// per architecture, security groups).
    pub fn set_nodeclass(&mut self, class: EC2NodeClass) {
        self.nodeclasses.insert(class.name.clone(), class);
    }

    /// An EC2NodeClass deleted: nothing launches with it any more, and its launch templates
    /// and instance profile become unused.
    pub fn remove_nodeclass(&mut self, name: &str) {
        self.nodeclasses.remove(name);
    }

    /// Calls made so far, by action and result code.
    pub fn calls(&self) -> &Calls {
        &self.shared.calls
    }

    pub fn settings(&self) -> &AwsSettings {
        &self.shared.settings
    }

    fn drain(&mut self, now_ms: i64) {
        while let Ok(c) = self.completions.try_recv() {
            self.handle(now_ms, c);
        }
    }

    fn handle(&mut self, now_ms: i64, completion: Completion) {
        match completion {
            Completion::Launched { nodeclaim, result } => {
                self.launches_in_flight = self.launches_in_flight.saturating_sub(1);
                if let Ok(instance) = &result {
                    self.by_nodeclaim
                        .insert(nodeclaim.clone(), instance.id.clone());
                    self.instances
                        .entry(instance.id.clone())
                        .or_insert_with(|| (**instance).clone());
                }
                self.replies
                    .push(CloudReply::Launched { nodeclaim, result });
            }
            Completion::Terminated { ids, error } => {
                self.terminations_in_flight = self.terminations_in_flight.saturating_sub(1);
                self.on_terminated(now_ms, ids, error);
            }
            Completion::Described { started_ms, result } => {
                self.describing = false;
                match result {
                    Ok(listed) => self.reconcile(now_ms, started_ms, listed),
                    Err(e) => tracing::warn!(
                        error = %e,
                        "listing this cluster's instances failed; the cache is kept"
                    ),
                }
            }
        }
    }

    /// TerminateInstances answered: the instances shut down, or the call failed and whoever
    /// asked is told (it asks again).
    fn on_terminated(&mut self, now_ms: i64, ids: Vec<String>, error: Option<String>) {
        match error {
            None => {
                for id in ids {
                    if let Some(i) = self.instances.get_mut(&id) {
                        if i.state.is_alive() {
                            i.state = InstanceState::ShuttingDown;
                            i.stopped_ms = Some(now_ms);
                        }
                    }
                }
            }
            Some(error) => {
                for id in ids {
                    self.requested.remove(&id);
                    if let Some(i) = self.instances.get_mut(&id) {
                        if i.state == InstanceState::ShuttingDown {
                            i.state = InstanceState::Running;
                            i.stopped_ms = None;
                        }
                    }
                    self.replies.push(CloudReply::TerminateFailed {
                        instance_id: id,
                        error: error.clone(),
                    });
                }
            }
        }
    }

    fn flush_terminations(&mut self) {
        if self.to_terminate.is_empty() {
            return;
        }
        let ids = std::mem::take(&mut self.to_terminate);
        for batch in ids.chunks(TERMINATE_BATCH) {
            self.terminations_in_flight += 1;
            let batch = batch.to_vec();
            let shared = Arc::clone(&self.shared);
            let sender = self.sender.clone();
            self.runtime.spawn(async move {
                const ACTION: &str = "TerminateInstances";
                let result = shared
                    .calls
                    .run(ACTION, || async {
                        shared
                            .clients
                            .ec2
                            .terminate_instances()
                            .set_instance_ids(Some(batch.clone()))
                            .send()
                            .await
                            .map_err(|e| crate::error::from_sdk(ACTION, e))
                    })
                    .await;
                let _ = sender.send(Completion::Terminated {
                    ids: batch,
                    error: result.err().map(|e| e.to_string()),
                });
            });
        }
    }

    /// Deletes this cluster's launch templates whose EC2NodeClass is gone or no longer resolves
    /// their AMI or capacity reservation, and waits for it (a few calls; `run` does it when it resolves selector terms
    /// again). Returns the names deleted.
    pub fn delete_unused_launch_templates(&mut self) -> Result<Vec<String>, AwsError> {
        let in_use: BTreeMap<String, BTreeSet<String>> = self
            .nodeclasses
            .values()
            .map(|c| {
                let mut ids = c.status.ami_ids.clone();
                ids.extend(c.status.capacity_reservations.iter().map(|r| r.id.clone()));
                (c.name.clone(), ids)
            })
            .collect();
        let tag = self.shared.settings.cluster_tag_key();
        let deleted = self
            .runtime
            .block_on(crate::launch_template::delete_unused(
                &self.shared.clients.ec2,
                &self.shared.calls,
                &tag,
                &in_use,
            ))?;
        if let Ok(mut known) = self.shared.templates.lock() {
            for name in &deleted {
                known.remove(name);
            }
        }
        Ok(deleted)
    }

    /// The instance profile `class`'s instances launch with: `spec.instanceProfile`, or the
    /// one made for `spec.role`; `None` when the spec names neither.
    pub fn instance_profile_of(&self, class: &EC2NodeClass) -> Option<String> {
        let spec: serde_json::Value = serde_json::from_str(&class.spec_json).ok()?;
        let source = crate::instance_profile::ProfileSource::from_spec(&spec)?;
        Some(source.name(
            &self.shared.settings.cluster_name,
            &self.shared.clients.region,
            &class.name,
        ))
    }

    /// Deletes the instance profiles made for this cluster that no EC2NodeClass launches with
    /// any more and no live instance runs with (by the last listing), and waits for it (`run`
    /// does it when it resolves selector terms again). Returns the names deleted.
    pub fn delete_unused_instance_profiles(&mut self) -> Result<Vec<String>, AwsError> {
        let in_use: BTreeSet<String> = self
            .nodeclasses
            .values()
            .filter_map(|c| self.instance_profile_of(c))
            .collect();
        let path = crate::instance_profile::path(&self.shared.settings.cluster_name);
        let deleted = self
            .runtime
            .block_on(crate::instance_profile::delete_unused(
                &self.shared.clients.iam,
                &self.shared.calls,
                &path,
                &in_use,
                &self.profiles_in_use,
            ))?;
        if let Ok(mut known) = self.shared.profiles.lock() {
            for name in &deleted {
                known.remove(name);
            }
        }
        Ok(deleted)
    }

    /// Lists this cluster's instances now and waits for the answer (tests, shutdown summaries).
    pub fn refresh(&mut self) -> Result<(), AwsError> {
        let now = wall_ms();
        let listed = self.runtime.block_on(self.describe_future(now))?;
        self.last_describe_ms = Some(now);
        self.drain(now);
        self.reconcile(now, now, listed);
        Ok(())
    }

    /// Waits up to `timeout` for every call out to be answered.
    pub fn settle(&mut self, timeout: Duration) {
        let deadline = std::time::Instant::now() + timeout;
        self.flush_terminations();
        while self.launches_in_flight > 0 || self.terminations_in_flight > 0 || self.describing {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return;
            }
            let Ok(c) = self.completions.recv_timeout(left) else {
                return;
            };
            self.handle(wall_ms(), c);
        }
    }
}

impl Cloud for Ec2Cloud {
    fn create_fleet(&mut self, now_ms: i64, request: FleetRequest) {
        self.launches_in_flight += 1;
        let nodeclaim = request.nodeclaim.clone();
        let sender = self.sender.clone();
        let plan = self.launch_plan(&request);
        let shared = Arc::clone(&self.shared);
        let arch_of_type = Arc::clone(&self.arch_of_type);
        self.runtime.spawn(async move {
            let result = match plan {
                Ok(plan) => launching::launch(shared, request, plan, arch_of_type, now_ms).await,
                Err(e) => Err(LaunchError::Failed(e.to_string())),
            };
            let _ = sender.send(Completion::Launched {
                nodeclaim,
                result: result.map(Box::new),
            });
        });
    }

    fn terminate(&mut self, now_ms: i64, instance_id: &str) {
        match self.instances.get(instance_id) {
            None => self.replies.push(CloudReply::TerminateFailed {
                instance_id: instance_id.to_string(),
                error: format!(
                    "not tagged {}: dovetail terminates only this cluster's instances",
                    self.shared.settings.cluster_tag_key()
                ),
            }),
            Some(i) if !i.state.is_alive() => {}
            Some(_) => {
                // Asked to terminate is no longer alive (as EC2 answers `shutting-down`); a
                // failed call makes it alive again.
                if let Some(i) = self.instances.get_mut(instance_id) {
                    i.state = InstanceState::ShuttingDown;
                    i.stopped_ms = Some(now_ms);
                }
                if self.requested.insert(instance_id.to_string()) {
                    self.to_terminate.push(instance_id.to_string());
                }
            }
        }
    }

    fn poll_replies(&mut self, now_ms: i64) -> Vec<CloudReply> {
        self.flush_terminations();
        self.drain(now_ms);
        std::mem::take(&mut self.replies)
    }

    fn poll_events(&mut self, now_ms: i64) -> Vec<CloudEvent> {
        self.flush_terminations();
        self.drain(now_ms);
        self.maybe_describe(now_ms);
        std::mem::take(&mut self.events)
    }

    fn instance(&self, id: &str) -> Option<&Instance> {
        self.instances.get(id)
    }

    fn instance_for_nodeclaim(&self, nodeclaim: &str) -> Option<&Instance> {
        self.by_nodeclaim
            .get(nodeclaim)
            .and_then(|id| self.instances.get(id))
            .filter(|i| i.state.is_alive())
    }

    fn instances(&self) -> Vec<&Instance> {
        self.instances.values().collect()
    }
}
