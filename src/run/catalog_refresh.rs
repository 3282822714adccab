//! The EC2 catalogue discovered again every `--catalog-refresh` (Karpenter: instance types and
//! prices every 12 h), off the control loop: new types, zones and spot prices reach the engine
//! as changed instance-type facts and the cloud's price list.
//!
//! A discovery pages through every instance type the region sells and takes seconds (about 4 s
//! against the moto peer, 1–2 s against EC2). Run inside the loop it stopped launches, bindings
//! and interruption handling for that long; with a short interval it left the loop one tick in
//! every few seconds. It runs as a task on the run's runtime instead, and the loop takes the
//! result in on the first tick after it finishes.

use dovetail_aws::calls::Calls;
use dovetail_aws::discovery::{discover_catalog, Discovered};
use dovetail_aws::sdk::Clients;
use dovetail_aws::AwsError;
use std::sync::Arc;
use tokio::task::JoinHandle;

/// When the next discovery is due, and the one under way.
pub(crate) struct CatalogRefresh {
    interval_ms: i64,
    /// When the last discovery finished (or the run started): the interval counts from there,
    /// so a discovery slower than the interval never runs back to back with the next.
    last_ms: i64,
    running: Option<JoinHandle<Result<Discovered, AwsError>>>,
}

impl CatalogRefresh {
    pub(crate) fn new(interval_ms: i64, now_ms: i64) -> CatalogRefresh {
        CatalogRefresh {
            interval_ms,
            last_ms: now_ms,
            running: None,
        }
    }

    /// Starts a discovery when one is due and none is under way; returns the catalogue of one
    /// that has finished. A failed discovery is logged and the last catalogue kept.
    pub(crate) fn poll(
        &mut self,
        now_ms: i64,
        runtime: &tokio::runtime::Handle,
        clients: &Clients,
        calls: &Arc<Calls>,
    ) -> Option<Discovered> {
        match self.running.take() {
            Some(task) if task.is_finished() => {
                self.last_ms = now_ms;
                match runtime.block_on(task) {
                    Ok(Ok(found)) => return Some(found),
                    Ok(Err(e)) => tracing::warn!(
                        error = %e,
                        "discovering the catalogue again failed; keeping the last one"
                    ),
                    Err(e) => tracing::warn!(
                        error = %e,
                        "the catalogue discovery task ended abnormally; keeping the last one"
                    ),
                }
            }
            Some(task) => self.running = Some(task),
            None if now_ms.saturating_sub(self.last_ms) >= self.interval_ms => {
                let (ec2, calls, region) = (
                    clients.ec2.clone(),
                    Arc::clone(calls),
                    clients.region.clone(),
                );
                self.running = Some(
                    runtime.spawn(async move { discover_catalog(&ec2, &calls, &region).await }),
                );
            }
            None => {}
        }
        None
    }
}

impl Drop for CatalogRefresh {
    fn drop(&mut self) {
        if let Some(task) = self.running.take() {
            task.abort();
        }
    }
}
