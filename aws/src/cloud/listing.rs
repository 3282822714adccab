//! This cluster's instances as the listings show them: DescribeInstances every
//! `describe_interval`, and the differences between two listings as the lifecycle events
//! (`Running`, `Terminated`).

use super::{Completion, Ec2Cloud};
use crate::error::AwsError;
use crate::instances::{describe_cluster_instances, Listed};
use dovetail_dataflow::backend::{
    CloudEvent, CloudEventKind, InstanceState, OfferingKey, TerminationCause,
};
use std::collections::BTreeSet;
use std::sync::Arc;

/// How long an instance this process did not terminate must be missing from the listings
/// before it counts as gone (EC2 lists terminated instances for about an hour, so a real end
/// shows as `terminated` long before this).
const MISSING_GRACE_MS: i64 = 60_000;

impl Ec2Cloud {
    pub(super) fn describe_future(
        &self,
        now_ms: i64,
    ) -> impl std::future::Future<Output = Result<Listed, AwsError>> + Send + 'static {
        let shared = Arc::clone(&self.shared);
        let prices = Arc::clone(&self.prices);
        async move {
            let tag = shared.settings.cluster_tag_key();
            let price = move |k: &OfferingKey| prices.get(k).copied();
            describe_cluster_instances(
                &shared.clients.ec2,
                &shared.calls,
                &tag,
                &shared.clients.region,
                now_ms,
                &price,
            )
            .await
        }
    }

    pub(super) fn maybe_describe(&mut self, now_ms: i64) {
        let interval = self.shared.settings.describe_interval.as_millis() as i64;
        if self.describing || self.last_describe_ms.is_some_and(|t| now_ms - t < interval) {
            return;
        }
        self.describing = true;
        self.last_describe_ms = Some(now_ms);
        let future = self.describe_future(now_ms);
        let sender = self.sender.clone();
        self.runtime.spawn(async move {
            let result = future.await;
            let _ = sender.send(Completion::Described {
                started_ms: now_ms,
                result,
            });
        });
    }

    /// A new listing: state changes become events; an instance the listing lacks that was
    /// launched before it started is gone (at once if this process terminated it, after
    /// [`MISSING_GRACE_MS`] otherwise).
    pub(super) fn reconcile(&mut self, now_ms: i64, started_ms: i64, listed: Listed) {
        self.profiles_in_use = listed.profiles;
        let mut seen = BTreeSet::new();
        for mut fresh in listed.instances {
            seen.insert(fresh.id.clone());
            match self.instances.get_mut(&fresh.id) {
                Some(known) => {
                    let before = known.state;
                    let after = fresh.state;
                    if before == InstanceState::Pending && after == InstanceState::Running {
                        known.state = InstanceState::Running;
                        known.running_ms = now_ms;
                        self.events.push(CloudEvent {
                            at_ms: now_ms,
                            instance_id: fresh.id.clone(),
                            kind: CloudEventKind::Running,
                        });
                    } else if after == InstanceState::Terminated
                        && before != InstanceState::Terminated
                    {
                        self.end(now_ms, &fresh.id);
                    } else if after == InstanceState::ShuttingDown && before.is_alive() {
                        known.state = InstanceState::ShuttingDown;
                        known.stopped_ms.get_or_insert(now_ms);
                    }
                }
                None => {
                    if !fresh.launch.is_empty() && fresh.state.is_alive() {
                        self.by_nodeclaim
                            .insert(fresh.launch.clone(), fresh.id.clone());
                    }
                    if !fresh.state.is_alive() {
                        fresh.stopped_ms = Some(now_ms);
                    }
                    // Launched by a call whose answer this process never had (a restart).
                    if fresh.state == InstanceState::Running {
                        self.events.push(CloudEvent {
                            at_ms: now_ms,
                            instance_id: fresh.id.clone(),
                            kind: CloudEventKind::Running,
                        });
                    }
                    self.instances.insert(fresh.id.clone(), fresh);
                }
            }
        }
        for id in &seen {
            self.missing_since.remove(id);
        }
        let missing: Vec<String> = self
            .instances
            .values()
            .filter(|i| {
                !seen.contains(&i.id)
                    && i.state != InstanceState::Terminated
                    && i.launched_ms < started_ms
            })
            .map(|i| i.id.clone())
            .collect();
        for id in missing {
            let since = *self.missing_since.entry(id.clone()).or_insert(now_ms);
            // One this process terminated is expected to go; any other must stay missing.
            if self.requested.contains(&id) || now_ms - since >= MISSING_GRACE_MS {
                self.missing_since.remove(&id);
                self.end(now_ms, &id);
            }
        }
    }

    fn end(&mut self, now_ms: i64, id: &str) {
        let Some(i) = self.instances.get_mut(id) else {
            return;
        };
        i.state = InstanceState::Terminated;
        i.stopped_ms.get_or_insert(now_ms);
        if self.by_nodeclaim.get(&i.launch).is_some_and(|x| x == id) {
            self.by_nodeclaim.remove(&i.launch);
        }
        let cause = if self.requested.remove(id) {
            TerminationCause::Requested
        } else {
            TerminationCause::StateChange
        };
        self.events.push(CloudEvent {
            at_ms: now_ms,
            instance_id: id.to_string(),
            kind: CloudEventKind::Terminated { cause },
        });
    }
}
