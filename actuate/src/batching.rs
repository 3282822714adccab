//! Karpenter's provisioning batch window: a pending pod that appears is not planned at once; the
//! batch closes when no new pending pod has arrived for `idle_ms` (1 s), or `max_ms` (10 s)
//! after it opened, and the engine then sees the whole batch in one epoch. Pods that are bound
//! or deleted meanwhile never reach it as pending. Zero `idle_ms` turns batching off.

use dovetail_dataflow::model::SharedPod;
use std::collections::BTreeMap;

/// The window's two intervals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchWindow {
    /// The batch closes once no new pending pod arrived for this long (Karpenter's
    /// `BATCH_IDLE_DURATION`, 1 s). 0: no batching.
    pub idle_ms: i64,
    /// …or this long after it opened, whatever keeps arriving (`BATCH_MAX_DURATION`, 10 s).
    pub max_ms: i64,
}

impl BatchWindow {
    /// Karpenter's defaults: 1 s idle, 10 s at most.
    pub const KARPENTER: BatchWindow = BatchWindow {
        idle_ms: 1_000,
        max_ms: 10_000,
    };
    /// No batching: a pending pod reaches the engine in the next epoch.
    pub const OFF: BatchWindow = BatchWindow {
        idle_ms: 0,
        max_ms: 0,
    };

    pub fn is_off(&self) -> bool {
        self.idle_ms <= 0
    }
}

/// New pending pods held until their batch closes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Batch {
    pods: BTreeMap<String, SharedPod>,
    opened_ms: Option<i64>,
    last_ms: i64,
}

impl Batch {
    /// Holds a new pending pod that arrived at `now_ms`.
    pub(crate) fn hold(&mut self, now_ms: i64, pod: SharedPod) {
        self.opened_ms.get_or_insert(now_ms);
        self.last_ms = now_ms;
        self.pods.insert(pod.key(), pod);
    }

    /// Replaces a held pod that is still pending (no new arrival: the window does not move).
    pub(crate) fn update(&mut self, pod: SharedPod) -> Option<SharedPod> {
        match self.pods.get_mut(&pod.key()) {
            Some(held) => {
                *held = pod;
                None
            }
            None => Some(pod),
        }
    }

    /// Drops a held pod (bound or deleted before its batch closed); true if it was held.
    pub(crate) fn forget(&mut self, key: &str) -> bool {
        let held = self.pods.remove(key).is_some();
        if self.pods.is_empty() {
            self.opened_ms = None;
        }
        held
    }

    pub(crate) fn holds(&self, key: &str) -> bool {
        self.pods.contains_key(key)
    }

    /// When the open batch closes under `window`.
    pub(crate) fn closes_at(&self, window: BatchWindow) -> Option<i64> {
        let opened = self.opened_ms?;
        Some(
            (self.last_ms.saturating_add(window.idle_ms)).min(opened.saturating_add(window.max_ms)),
        )
    }

    /// The held pods, if the batch has closed by `now_ms`.
    pub(crate) fn release(&mut self, now_ms: i64, window: BatchWindow) -> Vec<SharedPod> {
        match self.closes_at(window) {
            Some(t) if t <= now_ms => {
                self.opened_ms = None;
                std::mem::take(&mut self.pods).into_values().collect()
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_dataflow::model::Pod;

    fn pod(name: &str) -> SharedPod {
        SharedPod::new(Pod {
            namespace: "default".into(),
            name: name.into(),
            ..Pod::default()
        })
    }

    #[test]
    fn a_batch_closes_when_idle_or_at_its_maximum() {
        let w = BatchWindow::KARPENTER;
        let mut b = Batch::default();
        b.hold(0, pod("a"));
        assert_eq!(b.closes_at(w), Some(1_000));
        b.hold(900, pod("b"));
        assert_eq!(b.closes_at(w), Some(1_900), "a new pod moves the idle end");
        assert!(b.release(1_899, w).is_empty());
        assert_eq!(b.release(1_900, w).len(), 2);
        assert_eq!(b.closes_at(w), None);
        // Arrivals every 0.9 s keep it open only up to the maximum.
        for t in (20_000..40_000).step_by(900) {
            b.hold(t, pod(&format!("p{t}")));
        }
        assert_eq!(b.closes_at(w), Some(30_000));
    }

    #[test]
    fn a_pod_bound_or_deleted_in_the_window_is_forgotten() {
        let mut b = Batch::default();
        b.hold(0, pod("a"));
        assert!(b.forget("default/a"));
        assert!(!b.holds("default/a"));
        assert_eq!(b.closes_at(BatchWindow::KARPENTER), None);
    }
}
