//! The simulator's settings: how much capacity EC2 has, how long an instance takes to become a
//! Ready node, whether spot instances are interrupted, and the seed.
//!
//! Every field has a default (see [`SimConfig::default`] and `sim/README.md` for where each
//! number comes from), so a YAML or JSON file need only name what it changes. Field names are
//! the Rust ones (`launch_to_running_ms`); unknown fields are rejected so a typo is not silently
//! ignored. The caller loads the file (e.g. `serde_yaml::from_str`) and then calls
//! [`SimConfig::validate`]; [`SimConfig::from_json`] does both for JSON.

use dovetail_dataflow::backend::{OfferingKey, OfferingKeyError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// EC2 gives a spot instance two minutes' warning before it reclaims it (the "Spot Instance
/// interruption notice"); a Capacity Reservation interruption warning gives the same.
pub const INTERRUPTION_WARNING_MS: i64 = 120_000;

/// Karpenter's unavailable-offerings cache TTL (`UnavailableOfferingsTTL`, 3 minutes; the
/// `unavailableOfferingsTTLSeconds` setting's default).
pub const DEFAULT_ICE_TTL_MS: i64 = 180_000;

/// The shortest `ice_ttl_ms` accepted (the actuator's floor, `MIN_CAPACITY_ERROR_TTL_MS`, is
/// the same): with a shorter one an offering that has no capacity is offered again at once,
/// and a cloud with no capacity anywhere is retried in a storm (a zero TTL grew a replay past
/// 4 GB).
pub const MIN_ICE_TTL_MS: i64 = 1_000;

/// Why a configuration was rejected.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("simulator configuration: {0}")]
    Json(#[from] serde_json::Error),
    #[error(
        "simulator configuration is not a mapping of settings (e.g. {{\"seed\": 7}}), found {0}"
    )]
    NotAMapping(&'static str),
    #[error("simulator configuration, {field}: {reason}")]
    Field { field: String, reason: String },
    #[error("simulator configuration, ice_ttl_ms: {0} is below the minimum of {MIN_ICE_TTL_MS} ms (a shorter TTL retries an offering with no capacity at once)")]
    IceTtl(i64),
    #[error("simulator configuration, capacity_overrides: {0}")]
    OverrideKey(#[from] OfferingKeyError),
    #[error("simulator configuration, {field}: {value} is negative")]
    Negative { field: &'static str, value: i64 },
    #[error("simulator configuration, interruption_rate_scale: {0} is not a finite number >= 0")]
    RateScale(f64),
    #[error("simulator configuration, region: empty")]
    Region,
}

/// Settings of the simulated cloud.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimConfig {
    /// Seed of the generator behind instance ids and spot interruption times. Same seed, same
    /// calls → same run.
    pub seed: u64,
    /// The region instances are launched in (node names, provider ids, spot advisor rows).
    pub region: String,
    /// How many instances each offering (type × zone × capacity type) can hold at once;
    /// `None` (the default) is unlimited. A launch into a full offering fails with
    /// InsufficientInstanceCapacity for that offering.
    pub capacity_per_offering: Option<u32>,
    /// Per-offering capacity, keyed `type/zone/capacity-type`, overriding
    /// `capacity_per_offering` (`0` makes an offering always ICE).
    pub capacity_overrides: BTreeMap<String, u32>,
    /// CreateFleet → instance `running` (EC2 `pending` state). Default 30 s.
    pub launch_to_running_ms: i64,
    /// `running` → the kubelet registers the Node (boot, nodeadm/bootstrap, kubelet start,
    /// TLS bootstrap). Default 40 s.
    pub running_to_registered_ms: i64,
    /// Registered → initialised (Ready: CNI up, startup taints removed). Default 15 s.
    pub registered_to_initialized_ms: i64,
    /// TerminateInstances → `terminated` (the `shutting-down` state). Billing and capacity stop
    /// at the call, and the node was drained before it, so this only delays when the empty Node
    /// leaves (Karpenter waits for the instance to leave `shutting-down` before it removes the
    /// Node's finalizer). Default 0.
    pub shutdown_ms: i64,
    /// Draw spot interruptions from the spot advisor's interruption buckets. Default true.
    pub spot_interruptions: bool,
    /// Multiplies every spot interruption rate (0 disables them, 1000 makes them frequent enough
    /// to test). Default 1.
    pub interruption_rate_scale: f64,
    /// How long a caller should treat an offering that returned InsufficientInstanceCapacity
    /// (or was spot-interrupted) as unavailable: Karpenter's 3-minute cache. The simulated EC2
    /// does not read it; the replay driver does when it turns errors into facts.
    pub ice_ttl_ms: i64,
    /// How long after a call (CreateFleet, TerminateInstances) its answer reaches the caller.
    /// The call takes effect at once; only the answer waits, as a real API's response does.
    /// Default 0.
    pub call_latency_ms: i64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            region: "us-east-1".to_string(),
            capacity_per_offering: None,
            capacity_overrides: BTreeMap::new(),
            launch_to_running_ms: 30_000,
            running_to_registered_ms: 40_000,
            registered_to_initialized_ms: 15_000,
            shutdown_ms: 0,
            spot_interruptions: true,
            interruption_rate_scale: 1.0,
            ice_ttl_ms: DEFAULT_ICE_TTL_MS,
            call_latency_ms: 0,
        }
    }
}

impl SimConfig {
    /// Parses JSON (missing fields take their defaults) and validates it. An error names the
    /// setting it is about.
    pub fn from_json(text: &str) -> Result<SimConfig, ConfigError> {
        let value: serde_json::Value = serde_json::from_str(text)?;
        let serde_json::Value::Object(settings) = &value else {
            return Err(ConfigError::NotAMapping(json_kind(&value)));
        };
        let config: SimConfig = match serde_json::from_value(value.clone()) {
            Ok(c) => c,
            Err(whole) => {
                // serde's message names the type it expected, not the setting: read the
                // settings one at a time to find the one that is wrong.
                for (field, setting) in settings {
                    let alone = serde_json::Value::Object(
                        [(field.clone(), setting.clone())].into_iter().collect(),
                    );
                    if let Err(e) = serde_json::from_value::<SimConfig>(alone) {
                        return Err(ConfigError::Field {
                            field: field.clone(),
                            reason: e.to_string(),
                        });
                    }
                }
                return Err(ConfigError::Json(whole));
            }
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks what serde cannot: durations not negative, a finite non-negative rate scale,
    /// a region, and override keys that parse.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (field, value) in [
            ("launch_to_running_ms", self.launch_to_running_ms),
            ("running_to_registered_ms", self.running_to_registered_ms),
            (
                "registered_to_initialized_ms",
                self.registered_to_initialized_ms,
            ),
            ("shutdown_ms", self.shutdown_ms),
            ("ice_ttl_ms", self.ice_ttl_ms),
            ("call_latency_ms", self.call_latency_ms),
        ] {
            if value < 0 {
                return Err(ConfigError::Negative { field, value });
            }
        }
        if self.ice_ttl_ms < MIN_ICE_TTL_MS {
            return Err(ConfigError::IceTtl(self.ice_ttl_ms));
        }
        if !(self.interruption_rate_scale.is_finite() && self.interruption_rate_scale >= 0.0) {
            return Err(ConfigError::RateScale(self.interruption_rate_scale));
        }
        if self.region.is_empty() {
            return Err(ConfigError::Region);
        }
        self.overrides()?;
        Ok(())
    }

    /// The capacity overrides with parsed keys.
    pub fn overrides(&self) -> Result<BTreeMap<OfferingKey, u32>, ConfigError> {
        self.capacity_overrides
            .iter()
            .map(|(k, n)| Ok((k.parse::<OfferingKey>()?, *n)))
            .collect()
    }

    /// Milliseconds from CreateFleet to a Ready node.
    pub fn launch_to_ready_ms(&self) -> i64 {
        self.launch_to_running_ms
            .saturating_add(self.running_to_registered_ms)
            .saturating_add(self.registered_to_initialized_ms)
    }
}

/// What kind of JSON value `v` is, for messages.
fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "nothing (null)",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_in_missing_fields() {
        let c = SimConfig::from_json(
            r#"{"seed": 9, "capacity_overrides": {"m5.large/us-east-1a/spot": 0}}"#,
        )
        .unwrap();
        assert_eq!(c.seed, 9);
        assert_eq!(c.launch_to_running_ms, 30_000);
        assert_eq!(c.launch_to_ready_ms(), 85_000);
        assert_eq!(c.ice_ttl_ms, 180_000);
        assert!(c.spot_interruptions);
        assert_eq!(c.capacity_per_offering, None);
        assert_eq!(
            c.overrides().unwrap().into_iter().collect::<Vec<_>>(),
            vec![(OfferingKey::new("m5.large", "us-east-1a", "spot"), 0)]
        );
    }

    #[test]
    fn rejects_typos_and_bad_values() {
        let err = SimConfig::from_json(r#"{"seed": 3, "launch_to_runing_ms": 1}"#).unwrap_err();
        assert!(
            matches!(&err, ConfigError::Field { field, .. } if field == "launch_to_runing_ms"),
            "{err}"
        );
        let err = SimConfig::from_json(r#"{"seed": 3, "ice_ttl_ms": "3m"}"#).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("simulator configuration, ice_ttl_ms: invalid type"),
            "{err}"
        );
        let err =
            SimConfig::from_json(r#"{"capacity_overrides": {"m5.large/us-east-1a/spot": -1}}"#)
                .unwrap_err();
        assert!(err.to_string().contains("capacity_overrides"), "{err}");
        assert!(matches!(
            SimConfig::from_json("[1, 2]"),
            Err(ConfigError::NotAMapping("a list"))
        ));
        assert!(matches!(
            SimConfig::from_json("{"),
            Err(ConfigError::Json(_))
        ));
        for ttl in [0, 999] {
            assert!(matches!(
                SimConfig::from_json(&format!(r#"{{"ice_ttl_ms": {ttl}}}"#)),
                Err(ConfigError::IceTtl(t)) if t == ttl
            ));
        }
        assert!(SimConfig::from_json(r#"{"ice_ttl_ms": 1000}"#).is_ok());
        assert!(matches!(
            SimConfig::from_json(r#"{"shutdown_ms": -1}"#),
            Err(ConfigError::Negative {
                field: "shutdown_ms",
                ..
            })
        ));
        assert!(matches!(
            SimConfig::from_json(r#"{"interruption_rate_scale": -2.0}"#),
            Err(ConfigError::RateScale(_))
        ));
        assert!(matches!(
            SimConfig::from_json(r#"{"capacity_overrides": {"m5.large": 1}}"#),
            Err(ConfigError::OverrideKey(_))
        ));
    }
}
