//! `--feature-gates`, in Karpenter's format: `Name=bool` pairs separated by commas.

use dovetail_dataflow::facts::Fact;
use dovetail_queries::disruption::commands::SPOT_TO_SPOT_GATE;

/// The gates dovetail implements. Karpenter's other gates are refused rather than ignored, so
/// a plan never silently differs from what the flag asked for.
pub const KNOWN: &[&str] = &[SPOT_TO_SPOT_GATE];

/// One gate as given on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureGate {
    pub name: String,
    pub enabled: bool,
}

impl FeatureGate {
    pub fn fact(&self) -> Fact {
        Fact::FeatureGate {
            name: self.name.clone(),
            enabled: self.enabled,
        }
    }
}

/// The gates of one `--feature-gates` flag.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureGates(pub Vec<FeatureGate>);

/// Why a `--feature-gates` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    #[error("{entry:?} has no value; expected Name=true or Name=false")]
    NoValue { entry: String },
    #[error("unknown feature gate {name:?}; known gates: {}", KNOWN.join(", "))]
    Unknown { name: String },
    #[error("{name}: {value:?} is not a boolean; expected true or false")]
    NotABoolean { name: String, value: String },
}

/// Parses `A=true,B=false`. Booleans are read as Go's `strconv.ParseBool` reads them, since
/// Karpenter's flag does; a name given twice keeps its last value, as there.
pub fn parse(text: &str) -> Result<FeatureGates, FeatureGateError> {
    let mut gates: Vec<FeatureGate> = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((name, value)) = entry.split_once('=') else {
            return Err(FeatureGateError::NoValue {
                entry: entry.to_string(),
            });
        };
        let name = name.trim();
        if !KNOWN.contains(&name) {
            return Err(FeatureGateError::Unknown {
                name: name.to_string(),
            });
        }
        let enabled = parse_bool(value.trim()).ok_or_else(|| FeatureGateError::NotABoolean {
            name: name.to_string(),
            value: value.trim().to_string(),
        })?;
        gates.retain(|g| g.name != name);
        gates.push(FeatureGate {
            name: name.to_string(),
            enabled,
        });
    }
    Ok(FeatureGates(gates))
}

fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_read_and_the_last_value_wins() {
        let gates = parse(" SpotToSpotConsolidation=false , SpotToSpotConsolidation=True,")
            .unwrap_or_default();
        assert_eq!(
            gates.0,
            [FeatureGate {
                name: SPOT_TO_SPOT_GATE.to_string(),
                enabled: true
            }]
        );
        assert_eq!(parse(""), Ok(FeatureGates::default()));
    }

    #[test]
    fn unknown_names_missing_and_bad_values_are_errors() {
        let unknown = parse("NodeRepair=true").unwrap_err();
        assert_eq!(
            unknown,
            FeatureGateError::Unknown {
                name: "NodeRepair".to_string()
            }
        );
        let words = unknown.to_string();
        assert!(
            words.contains("NodeRepair") && words.contains(SPOT_TO_SPOT_GATE),
            "{words}"
        );
        let bad = parse("SpotToSpotConsolidation=yes").unwrap_err();
        assert_eq!(
            bad,
            FeatureGateError::NotABoolean {
                name: SPOT_TO_SPOT_GATE.to_string(),
                value: "yes".to_string()
            }
        );
        assert!(bad.to_string().contains("\"yes\""), "{bad}");
        let missing = parse("SpotToSpotConsolidation").unwrap_err();
        assert!(
            matches!(missing, FeatureGateError::NoValue { .. }),
            "{missing:?}"
        );
        assert!(missing.to_string().contains("no value"), "{missing}");
    }
}
