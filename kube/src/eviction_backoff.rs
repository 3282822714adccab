//! How often a draining node's pod is asked to leave. The drain steps every loop turn, but an
//! eviction is one API call that either starts the pod's graceful termination (which takes as
//! long as the pod's grace period) or is refused by a PodDisruptionBudget (429) until other pods
//! are ready. Asking again on every turn would only load the API server, so each pod is asked
//! again after a delay that doubles from 100 ms to 10 s, as Karpenter's eviction queue does.

use std::collections::BTreeMap;

/// The first delay before a pod is asked again.
pub const FIRST_DELAY_MS: i64 = 100;

/// The longest delay between two evictions of one pod.
pub const MAX_DELAY_MS: i64 = 10_000;

/// When each pod may be asked again, and the delay after that.
#[derive(Debug, Default)]
pub struct EvictionBackoff {
    next: BTreeMap<String, (i64, i64)>,
}

impl EvictionBackoff {
    /// Whether `pod` may be evicted now; if so, the next time is set.
    pub fn due(&mut self, now_ms: i64, pod: &str) -> bool {
        let (at, delay) = self
            .next
            .get(pod)
            .copied()
            .unwrap_or((i64::MIN, FIRST_DELAY_MS));
        if now_ms < at {
            return false;
        }
        self.next.insert(
            pod.to_string(),
            (
                now_ms.saturating_add(delay),
                delay.saturating_mul(2).min(MAX_DELAY_MS),
            ),
        );
        true
    }

    /// The pod is gone: nothing to ask again.
    pub fn forget(&mut self, pod: &str) {
        self.next.remove(pod);
    }

    /// Pods with an eviction pending a retry.
    pub fn len(&self) -> usize {
        self.next.len()
    }

    pub fn is_empty(&self) -> bool {
        self.next.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_is_asked_again_after_a_doubling_delay_capped_at_ten_seconds() {
        let mut b = EvictionBackoff::default();
        let mut asked = Vec::new();
        // A loop turning every 50 ms for 40 s.
        for now in (0..40_000).step_by(50) {
            if b.due(now, "team/web") {
                asked.push(now);
            }
        }
        assert_eq!(
            &asked[..9],
            &[0, 100, 300, 700, 1500, 3100, 6300, 12_700, 22_700]
        );
        assert_eq!(asked.last(), Some(&32_700));
        // Another pod has its own clock.
        assert!(b.due(32_750, "team/db"));
        // A pod that left and came back (a new pod of the same name) starts over.
        b.forget("team/web");
        assert!(b.due(32_750, "team/web"));
        assert!(!b.due(32_800, "team/web"));
        assert_eq!(b.len(), 2);
    }
}
