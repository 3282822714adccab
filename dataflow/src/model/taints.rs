//! Taints and tolerations with Kubernetes' matching rules.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Effect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl Effect {
    pub fn parse(s: &str) -> Option<Effect> {
        Some(match s {
            "NoSchedule" => Effect::NoSchedule,
            "PreferNoSchedule" => Effect::PreferNoSchedule,
            "NoExecute" => Effect::NoExecute,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: Effect,
}

impl fmt::Display for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{:?}", self.key, self.effect)
        } else {
            write!(f, "{}={}:{:?}", self.key, self.value, self.effect)
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TolerationOperator {
    Equal,
    Exists,
}

/// A pod's toleration. An empty key with `Exists` tolerates every taint; no effect matches every
/// effect.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Toleration {
    pub key: String,
    pub operator: TolerationOperator,
    pub value: String,
    pub effect: Option<Effect>,
}

impl Toleration {
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if self.key.is_empty() {
            return self.operator == TolerationOperator::Exists;
        }
        if self.key != taint.key {
            return false;
        }
        match self.operator {
            TolerationOperator::Exists => true,
            TolerationOperator::Equal => self.value == taint.value,
        }
    }
}

/// The first taint that blocks scheduling (NoSchedule or NoExecute) and is not tolerated.
/// PreferNoSchedule never blocks: Karpenter tolerates it as a last relaxation, and
/// kube-scheduler only scores it.
pub fn first_untolerated<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints.iter().find(|t| {
        t.effect != Effect::PreferNoSchedule && !tolerations.iter().any(|tol| tol.tolerates(t))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(k: &str, v: &str, e: Effect) -> Taint {
        Taint {
            key: k.into(),
            value: v.into(),
            effect: e,
        }
    }

    fn tol(k: &str, op: TolerationOperator, v: &str, e: Option<Effect>) -> Toleration {
        Toleration {
            key: k.into(),
            operator: op,
            value: v.into(),
            effect: e,
        }
    }

    #[test]
    fn matching_rules() {
        let gpu = taint("nvidia.com/gpu", "true", Effect::NoSchedule);
        assert!(tol("nvidia.com/gpu", TolerationOperator::Exists, "", None).tolerates(&gpu));
        assert!(tol("nvidia.com/gpu", TolerationOperator::Equal, "true", None).tolerates(&gpu));
        assert!(!tol("nvidia.com/gpu", TolerationOperator::Equal, "false", None).tolerates(&gpu));
        assert!(!tol(
            "nvidia.com/gpu",
            TolerationOperator::Exists,
            "",
            Some(Effect::NoExecute)
        )
        .tolerates(&gpu));
        assert!(tol("", TolerationOperator::Exists, "", None).tolerates(&gpu));
        assert!(!tol("", TolerationOperator::Equal, "", None).tolerates(&gpu));
    }

    #[test]
    fn prefer_no_schedule_does_not_block() {
        let taints = vec![
            taint("soft", "", Effect::PreferNoSchedule),
            taint("hard", "", Effect::NoExecute),
        ];
        assert_eq!(
            first_untolerated(&taints, &[]).map(|t| t.key.as_str()),
            Some("hard")
        );
        let tols = vec![tol("hard", TolerationOperator::Exists, "", None)];
        assert!(first_untolerated(&taints, &tols).is_none());
    }
}
