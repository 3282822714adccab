//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leader election does it:
//! the holder renews the Lease every `retry`; a standby takes it once the record has not changed
//! for `lease_duration` *as the standby observed it* (its own clock, never the holder's
//! timestamps, so clock skew cannot hand the lease over early); every write is guarded by the
//! Lease's resourceVersion, so of two candidates only one wins (the other gets 409 Conflict).
//!
//! Beside it, the controller refuses to lead while Karpenter's own controller holds its leader
//! Lease (`karpenter-leader-election`): two autoscalers acting on the same NodePools would launch
//! twice and disrupt each other's nodes.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::Client;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Karpenter's leader Lease, in the namespace it runs in.
pub const KARPENTER_LEASE: &str = "karpenter-leader-election";

/// Where this replica stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Waiting for the Lease (another replica holds it, or none was tried yet).
    Standby = 0,
    /// Holds the Lease: may act.
    Leader = 1,
    /// Karpenter's controller holds its Lease: not acting, not trying to lead.
    KarpenterActive = 2,
    /// Held the Lease and lost it: must stop acting (the process exits and restarts as a
    /// standby, as controller-runtime's managers do).
    Lost = 3,
}

impl Role {
    fn from_u8(v: u8) -> Role {
        match v {
            1 => Role::Leader,
            2 => Role::KarpenterActive,
            3 => Role::Lost,
            _ => Role::Standby,
        }
    }
}

/// The election's settings.
#[derive(Debug, Clone)]
pub struct Election {
    pub namespace: String,
    pub lease_name: String,
    /// This replica's identity (`POD_NAME`, else host name and process id).
    pub identity: String,
    /// How long a Lease unrenewed is held (controller-runtime: 15 s).
    pub lease_duration: Duration,
    /// How often the holder renews and a standby tries (controller-runtime: 2 s).
    pub retry: Duration,
    /// Where Karpenter's Lease is looked for; `None`: not looked for.
    pub karpenter_namespace: Option<String>,
}

/// The role, shared between the election task and the control loop.
#[derive(Debug, Clone)]
pub struct LeaderState(Arc<AtomicU8>);

impl LeaderState {
    pub fn role(&self) -> Role {
        Role::from_u8(self.0.load(Ordering::Acquire))
    }

    fn set(&self, role: Role) {
        let old = Role::from_u8(self.0.swap(role as u8, Ordering::AcqRel));
        if old != role {
            tracing::info!(from = ?old, to = ?role, "leader election");
        }
    }
}

/// A running election: its state, and the task (stopped when this is dropped, as when the
/// process dies: the Lease is then left to expire).
pub struct Elector {
    pub state: LeaderState,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Elector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the election on `runtime`; the returned state says whether this replica leads.
pub fn start(runtime: &tokio::runtime::Handle, client: Client, election: Election) -> Elector {
    let state = LeaderState(Arc::new(AtomicU8::new(Role::Standby as u8)));
    let shared = state.clone();
    let task = runtime.spawn(async move { run(client, election, shared).await });
    Elector { state, task }
}

/// What a standby last observed of the Lease, and when.
struct Observed {
    resource_version: Option<String>,
    at: Instant,
}

async fn run(client: Client, e: Election, state: LeaderState) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), &e.namespace);
    let karpenter: Option<Api<Lease>> = e
        .karpenter_namespace
        .as_deref()
        .map(|ns| Api::namespaced(client.clone(), ns));
    let mut observed: Option<Observed> = None;
    let mut karpenter_seen: Option<Observed> = None;
    loop {
        if state.role() == Role::Lost {
            return;
        }
        let leading = state.role() == Role::Leader;
        if !leading {
            if let Some(api) = &karpenter {
                if karpenter_holds(api, &mut karpenter_seen, e.lease_duration).await {
                    state.set(Role::KarpenterActive);
                    tokio::time::sleep(e.retry).await;
                    continue;
                }
            }
        }
        match try_acquire_or_renew(&leases, &e, &mut observed).await {
            Ok(true) => state.set(Role::Leader),
            Ok(false) if leading => {
                tracing::error!(lease = %e.lease_name, "lost the leader Lease");
                state.set(Role::Lost);
                return;
            }
            Ok(false) => state.set(Role::Standby),
            Err(err) => {
                tracing::warn!(lease = %e.lease_name, error = %err, "leader election call failed");
                if leading {
                    // A holder that cannot renew within the lease's duration must assume it
                    // lost it: a standby will have taken over.
                    let renewed = observed.as_ref().map(|o| o.at);
                    if renewed.is_some_and(|at| at.elapsed() >= e.lease_duration) {
                        state.set(Role::Lost);
                        return;
                    }
                } else if state.role() == Role::KarpenterActive {
                    state.set(Role::Standby);
                }
            }
        }
        tokio::time::sleep(e.retry).await;
    }
}

/// Whether Karpenter's Lease has a holder that renewed it within `duration` (as observed here).
async fn karpenter_holds(
    api: &Api<Lease>,
    seen: &mut Option<Observed>,
    duration: Duration,
) -> bool {
    let lease = match api.get_opt(KARPENTER_LEASE).await {
        Ok(Some(l)) => l,
        Ok(None) => return false,
        Err(e) => {
            tracing::warn!(error = %e, "reading Karpenter's Lease failed; assuming it is held");
            return true;
        }
    };
    let held = lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .is_some_and(|h| !h.is_empty());
    if !held {
        return false;
    }
    let rv = lease.metadata.resource_version.clone();
    let fresh = match seen {
        Some(o) if o.resource_version == rv => o.at.elapsed() < duration,
        _ => {
            *seen = Some(Observed {
                resource_version: rv,
                at: Instant::now(),
            });
            true
        }
    };
    if fresh {
        tracing::warn!(
            lease = KARPENTER_LEASE,
            "Karpenter's controller holds its leader Lease: dovetail does not act (scale Karpenter to zero to cut over)"
        );
    }
    fresh
}

/// One round: create, renew or take over the Lease. `Ok(true)`: this replica holds it now.
async fn try_acquire_or_renew(
    leases: &Api<Lease>,
    e: &Election,
    observed: &mut Option<Observed>,
) -> kube::Result<bool> {
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let seconds = i32::try_from(e.lease_duration.as_secs()).unwrap_or(i32::MAX);
    let Some(mut lease) = leases.get_opt(&e.lease_name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(e.lease_name.clone()),
                namespace: Some(e.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(e.identity.clone()),
                lease_duration_seconds: Some(seconds),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        return match leases.create(&PostParams::default(), &lease).await {
            Ok(created) => {
                *observed = Some(Observed {
                    resource_version: created.metadata.resource_version,
                    at: Instant::now(),
                });
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(err) => Err(err),
        };
    };
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    let holder = spec.holder_identity.clone().unwrap_or_default();
    let rv = lease.metadata.resource_version.clone();
    let mine = holder == e.identity;
    if !mine && !holder.is_empty() {
        let expired = match observed {
            Some(o) if o.resource_version == rv => o.at.elapsed() >= e.lease_duration,
            _ => {
                *observed = Some(Observed {
                    resource_version: rv,
                    at: Instant::now(),
                });
                false
            }
        };
        if !expired {
            return Ok(false);
        }
    }
    if !mine {
        spec.holder_identity = Some(e.identity.clone());
        spec.acquire_time = Some(now.clone());
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    spec.renew_time = Some(now);
    spec.lease_duration_seconds = Some(seconds);
    // Guarded by the resourceVersion read: a concurrent writer makes this 409.
    match leases
        .replace(&e.lease_name, &PostParams::default(), &lease)
        .await
    {
        Ok(written) => {
            *observed = Some(Observed {
                resource_version: written.metadata.resource_version,
                at: Instant::now(),
            });
            Ok(true)
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(err) => Err(err),
    }
}
