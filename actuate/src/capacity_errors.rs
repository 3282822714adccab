//! Karpenter's unavailable-offerings cache: an offering that returned InsufficientInstanceCapacity
//! (or whose spot instance was interrupted) is not offered to the engine until its time-to-live
//! ends (3 minutes by default, `unavailableOfferingsTTLSeconds`), after which it is tried again.

use dovetail_dataflow::backend::OfferingKey;
use std::collections::BTreeMap;

/// The shortest time an offering stays unavailable, whatever TTL is configured: with a zero
/// TTL the failed offering is offered again in the same instant, and a cloud with no capacity
/// anywhere is retried without end.
pub const MIN_CAPACITY_ERROR_TTL_MS: i64 = 1_000;

#[derive(Debug, Clone, Default)]
pub struct UnavailableOfferings {
    until: BTreeMap<OfferingKey, i64>,
}

impl UnavailableOfferings {
    /// Marks `key` unavailable from `now_ms` for `ttl_ms`.
    pub fn mark(&mut self, key: OfferingKey, now_ms: i64, ttl_ms: i64) {
        self.until.insert(key, now_ms.saturating_add(ttl_ms));
    }

    pub fn contains(&self, key: &OfferingKey) -> bool {
        self.until.contains_key(key)
    }

    /// Forgets what has expired by `now_ms`, and returns it.
    pub fn expire(&mut self, now_ms: i64) -> Vec<OfferingKey> {
        let expired: Vec<OfferingKey> = self
            .until
            .iter()
            .filter(|(_, until)| **until <= now_ms)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &expired {
            self.until.remove(k);
        }
        expired
    }

    /// When the next entry expires.
    pub fn next_expiry_ms(&self) -> Option<i64> {
        self.until.values().min().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offering_is_unavailable_for_its_ttl_only() {
        let k = OfferingKey::new("m5.large", "us-east-1a", "spot");
        let mut u = UnavailableOfferings::default();
        u.mark(k.clone(), 1_000, 180_000);
        assert!(u.contains(&k));
        assert_eq!(u.next_expiry_ms(), Some(181_000));
        assert!(u.expire(180_999).is_empty());
        assert!(u.contains(&k));
        assert_eq!(u.expire(181_000), vec![k.clone()]);
        assert!(!u.contains(&k));
        assert_eq!(u.next_expiry_ms(), None);
    }
}
