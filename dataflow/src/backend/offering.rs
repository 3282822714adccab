//! The name of one capacity pool: an instance type in a zone bought as one capacity type,
//! written `type/zone/capacity-type` (`m5.large/us-east-1a/spot`) in configuration and reports.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The capacity types EC2 sells.
pub const CAPACITY_TYPES: &[&str] = &["on-demand", "spot", "reserved"];

/// One offering (capacity pool): instance type × zone × capacity type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OfferingKey {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
}

impl OfferingKey {
    pub fn new(
        instance_type: impl Into<String>,
        zone: impl Into<String>,
        capacity_type: impl Into<String>,
    ) -> OfferingKey {
        OfferingKey {
            instance_type: instance_type.into(),
            zone: zone.into(),
            capacity_type: capacity_type.into(),
        }
    }
}

impl fmt::Display for OfferingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{}",
            self.instance_type, self.zone, self.capacity_type
        )
    }
}

/// Why a `type/zone/capacity-type` string is not an offering key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OfferingKeyError {
    #[error("offering {0:?} is not type/zone/capacity-type")]
    Shape(String),
    #[error("offering {key:?}: unknown capacity type {capacity_type:?} (expected on-demand, spot or reserved)")]
    CapacityType { key: String, capacity_type: String },
}

impl FromStr for OfferingKey {
    type Err = OfferingKeyError;

    /// Parses `type/zone/capacity-type`; each part non-empty, the capacity type one of
    /// [`CAPACITY_TYPES`].
    fn from_str(s: &str) -> Result<OfferingKey, OfferingKeyError> {
        let parts: Vec<&str> = s.split('/').collect();
        let [t, z, c] = parts.as_slice() else {
            return Err(OfferingKeyError::Shape(s.to_string()));
        };
        if t.is_empty() || z.is_empty() {
            return Err(OfferingKeyError::Shape(s.to_string()));
        }
        if !CAPACITY_TYPES.contains(c) {
            return Err(OfferingKeyError::CapacityType {
                key: s.to_string(),
                capacity_type: c.to_string(),
            });
        }
        Ok(OfferingKey::new(*t, *z, *c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects() {
        let k: OfferingKey = "m5.large/us-east-1a/spot".parse().unwrap();
        assert_eq!(k, OfferingKey::new("m5.large", "us-east-1a", "spot"));
        assert_eq!(k.to_string(), "m5.large/us-east-1a/spot");
        assert!("m5.large/us-east-1a".parse::<OfferingKey>().is_err());
        assert!("m5.large//spot".parse::<OfferingKey>().is_err());
        assert!(matches!(
            "m5.large/us-east-1a/cheap".parse::<OfferingKey>(),
            Err(OfferingKeyError::CapacityType { .. })
        ));
    }
}
