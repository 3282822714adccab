//! The cloud of `dovetail run --cluster kube`, with what the controller needs of it beyond the
//! `Cloud` interface: whether it plays kubelet (the simulated one), how a watched EC2NodeClass
//! becomes what launches need (its selector terms resolved against EC2), its periodic work
//! (selector terms and the catalogue again, unused launch templates and instance profiles), and
//! the interruption queue.

use super::catalog_refresh::CatalogRefresh;
use super::setup::{self, Ec2};
use super::RunArgs;
use anyhow::Result;
use crossbeam_channel::Receiver;
use dovetail_actuate::ControlLoop;
use dovetail_aws::calls::CallCount;
use dovetail_aws::interruption_queue::InterruptionQueue;
use dovetail_aws::Ec2Cloud;
use dovetail_dataflow::backend::{Cloud, CloudEvent, CloudReply, FleetRequest, Instance};
use dovetail_dataflow::catalog::RegionCatalog;
use dovetail_dataflow::facts::{Fact, Interruption};
use dovetail_dataflow::model::EC2NodeClass;
use dovetail_sim::SimCloud;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// See the module documentation.
pub(crate) trait LiveCloud: Cloud {
    /// The cloud registers its instances' Nodes itself (the simulated one).
    fn plays_kubelet(&self) -> bool {
        false
    }
    /// [`LiveCloud::resolve`] resolves selector terms against the cloud, so the EC2NodeClass's
    /// status is this controller's to write (the simulated cloud resolves nothing).
    fn resolves_nodeclasses(&self) -> bool {
        false
    }
    /// The instance profile `class`'s instances launch with, for its status.
    fn instance_profile(&self, _class: &EC2NodeClass) -> Option<String> {
        None
    }
    /// A watched EC2NodeClass as launches need it.
    fn resolve(&mut self, class: EC2NodeClass) -> EC2NodeClass {
        class
    }
    /// An EC2NodeClass deleted.
    fn forget(&mut self, _name: &str) {}
    /// Periodic work; true when the catalogue or a class's status changed (the instance-type
    /// facts must be built again).
    fn tick(
        &mut self,
        _now_ms: i64,
        _control: &mut ControlLoop,
        _catalog: &mut Arc<RegionCatalog>,
    ) -> bool {
        false
    }
    /// Interruptions read from the queue since the last call.
    fn interruptions(&mut self) -> Vec<Interruption> {
        Vec::new()
    }
    /// Takes in the answers to calls already made before the process stops.
    fn settle(&mut self) {}
    /// The region's name.
    fn region(&self) -> String;
    /// Calls not made because of `--dry-run`.
    fn calls_withheld(&self) -> u64 {
        0
    }
    /// API calls made so far, by action and result code.
    fn call_counts(&self) -> Vec<CallCount> {
        Vec::new()
    }
}

/// `--dry-run`: the cloud's reads go on, its writes (CreateFleet, TerminateInstances) are logged
/// and counted, not made; a launch so withheld never answers, so its NodeClaim (itself not
/// written) stays waiting and nothing is decided twice.
pub(crate) struct DryRun<C>(pub(crate) C, u64);

impl<C> DryRun<C> {
    pub(crate) fn new(cloud: C) -> DryRun<C> {
        DryRun(cloud, 0)
    }
}

impl<C: LiveCloud> LiveCloud for DryRun<C> {
    fn plays_kubelet(&self) -> bool {
        self.0.plays_kubelet()
    }
    fn resolves_nodeclasses(&self) -> bool {
        self.0.resolves_nodeclasses()
    }
    fn instance_profile(&self, class: &EC2NodeClass) -> Option<String> {
        self.0.instance_profile(class)
    }
    fn resolve(&mut self, class: EC2NodeClass) -> EC2NodeClass {
        self.0.resolve(class)
    }
    fn forget(&mut self, name: &str) {
        self.0.forget(name)
    }
    fn tick(
        &mut self,
        now_ms: i64,
        control: &mut ControlLoop,
        catalog: &mut Arc<RegionCatalog>,
    ) -> bool {
        self.0.tick(now_ms, control, catalog)
    }
    fn interruptions(&mut self) -> Vec<Interruption> {
        self.0.interruptions()
    }
    fn settle(&mut self) {
        self.0.settle()
    }
    fn region(&self) -> String {
        self.0.region()
    }
    fn calls_withheld(&self) -> u64 {
        self.1
    }
    fn call_counts(&self) -> Vec<CallCount> {
        self.0.call_counts()
    }
}

impl<C: Cloud> Cloud for DryRun<C> {
    fn create_fleet(&mut self, _now_ms: i64, request: FleetRequest) {
        self.1 += 1;
        tracing::info!(nodeclaim = %request.nodeclaim, nodepool = %request.nodepool,
            overrides = request.overrides.len(), "dry run: CreateFleet not called");
    }
    fn terminate(&mut self, _now_ms: i64, instance_id: &str) {
        self.1 += 1;
        tracing::info!(instance = %instance_id, "dry run: TerminateInstances not called");
    }
    fn poll_replies(&mut self, now_ms: i64) -> Vec<CloudReply> {
        self.0.poll_replies(now_ms)
    }
    fn poll_events(&mut self, now_ms: i64) -> Vec<CloudEvent> {
        self.0.poll_events(now_ms)
    }
    fn instance(&self, id: &str) -> Option<&Instance> {
        self.0.instance(id)
    }
    fn instance_for_nodeclaim(&self, nodeclaim: &str) -> Option<&Instance> {
        self.0.instance_for_nodeclaim(nodeclaim)
    }
    fn instances(&self) -> Vec<&Instance> {
        self.0.instances()
    }
    fn next_due_ms(&self) -> Option<i64> {
        self.0.next_due_ms()
    }
}

impl LiveCloud for SimCloud {
    fn plays_kubelet(&self) -> bool {
        true
    }

    fn region(&self) -> String {
        self.config().region.clone()
    }
}

/// EC2, with the SDK clients, the interruption queue and the refresh clocks.
pub(crate) struct AwsLive {
    pub(crate) cloud: Ec2Cloud,
    pub(crate) ec2: Ec2,
    runtime: tokio::runtime::Handle,
    kubernetes_version: Option<String>,
    nodeclass_refresh_ms: i64,
    last_resolve_ms: i64,
    catalog_refresh: CatalogRefresh,
    queue: Receiver<Interruption>,
    pub(crate) queue_stats: Option<Arc<InterruptionQueue>>,
    stop: Arc<AtomicBool>,
    /// `--dry-run`: no unused templates or profiles deleted, no queue messages consumed.
    dry_run: bool,
}

impl AwsLive {
    pub(crate) fn start(
        args: &RunArgs,
        runtime: &tokio::runtime::Runtime,
        now_ms: i64,
    ) -> Result<AwsLive> {
        let (ec2, cloud) = setup::connect_ec2(args, runtime)?;
        let stop = Arc::new(AtomicBool::new(false));
        // A dry run beside Karpenter must not take the interruption messages Karpenter reads.
        let (queue, queue_stats) = if args.dry_run {
            (crossbeam_channel::never(), None)
        } else {
            setup::start_queue(&ec2, runtime, &stop)?
        };
        Ok(AwsLive {
            cloud,
            ec2,
            runtime: runtime.handle().clone(),
            kubernetes_version: args.kubernetes_version.clone(),
            nodeclass_refresh_ms: args.nodeclass_refresh_ms,
            last_resolve_ms: now_ms,
            catalog_refresh: CatalogRefresh::new(args.catalog_refresh_ms, now_ms),
            queue,
            queue_stats,
            stop,
            dry_run: args.dry_run,
        })
    }

    fn resolved(&self, class: &EC2NodeClass) -> Result<EC2NodeClass> {
        self.runtime.block_on(setup::resolved(
            &self.ec2.clients,
            &self.ec2.calls,
            class,
            self.kubernetes_version.as_deref(),
        ))
    }
}

impl LiveCloud for AwsLive {
    fn resolves_nodeclasses(&self) -> bool {
        true
    }

    fn instance_profile(&self, class: &EC2NodeClass) -> Option<String> {
        self.cloud.instance_profile_of(class)
    }

    fn resolve(&mut self, class: EC2NodeClass) -> EC2NodeClass {
        match self.resolved(&class) {
            Ok(fresh) => {
                self.cloud.set_nodeclass(fresh.clone());
                fresh
            }
            Err(e) => {
                // Nothing launches with a class whose selector terms do not resolve.
                tracing::warn!(nodeclass = %class.name, error = %e, "resolving selector terms failed");
                class
            }
        }
    }

    fn forget(&mut self, name: &str) {
        self.cloud.remove_nodeclass(name);
    }

    fn tick(
        &mut self,
        now_ms: i64,
        control: &mut ControlLoop,
        catalog: &mut Arc<RegionCatalog>,
    ) -> bool {
        let mut changed = false;
        if now_ms.saturating_sub(self.last_resolve_ms) >= self.nodeclass_refresh_ms {
            self.last_resolve_ms = now_ms;
            let classes: Vec<EC2NodeClass> =
                control.actuator().nodeclasses().values().cloned().collect();
            for class in classes {
                match self.resolved(&class) {
                    Ok(fresh) if fresh.status != class.status => {
                        self.cloud.set_nodeclass(fresh.clone());
                        control.set_fact(Fact::NodeClass(fresh));
                        changed = true;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(nodeclass = %class.name, error = %e, "resolving selector terms failed; keeping the last status")
                    }
                }
            }
            if !self.dry_run {
                if let Err(e) = self.cloud.delete_unused_launch_templates() {
                    tracing::warn!(error = %e, "deleting unused launch templates failed");
                }
                if let Err(e) = self.cloud.delete_unused_instance_profiles() {
                    tracing::warn!(error = %e, "deleting unused instance profiles failed");
                }
            }
        }
        if let Some(found) =
            self.catalog_refresh
                .poll(now_ms, &self.runtime, &self.ec2.clients, &self.ec2.calls)
        {
            self.cloud.set_catalog(&found.catalog);
            control
                .actuator_mut()
                .set_instance_types(crate::replay::world::region_types(&found.catalog));
            *catalog = Arc::new(found.catalog);
            changed = true;
        }
        changed
    }

    fn interruptions(&mut self) -> Vec<Interruption> {
        self.queue.try_iter().collect()
    }

    fn settle(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.cloud.settle(Duration::from_secs(60));
    }

    fn region(&self) -> String {
        self.ec2.clients.region.clone()
    }

    fn call_counts(&self) -> Vec<CallCount> {
        self.ec2.calls.counts()
    }
}

impl Cloud for AwsLive {
    fn create_fleet(&mut self, now_ms: i64, request: FleetRequest) {
        self.cloud.create_fleet(now_ms, request)
    }
    fn terminate(&mut self, now_ms: i64, instance_id: &str) {
        self.cloud.terminate(now_ms, instance_id)
    }
    fn poll_replies(&mut self, now_ms: i64) -> Vec<CloudReply> {
        self.cloud.poll_replies(now_ms)
    }
    fn poll_events(&mut self, now_ms: i64) -> Vec<CloudEvent> {
        self.cloud.poll_events(now_ms)
    }
    fn instance(&self, id: &str) -> Option<&Instance> {
        self.cloud.instance(id)
    }
    fn instance_for_nodeclaim(&self, nodeclaim: &str) -> Option<&Instance> {
        self.cloud.instance_for_nodeclaim(nodeclaim)
    }
    fn instances(&self) -> Vec<&Instance> {
        Cloud::instances(&self.cloud)
    }
    fn next_due_ms(&self) -> Option<i64> {
        self.cloud.next_due_ms()
    }
}
