//! The Kubernetes Events users look for, from the engine's decisions as they change:
//! - `Nominated` on a pod the engine places (Karpenter: "Pod should schedule on: nodeclaim/X");
//! - `FailedScheduling` (Warning) on a pod it cannot place, with the engine's reason;
//! - `DisruptionBlocked` on a candidate Node and its NodeClaim, with the blocker (a pod's
//!   do-not-disrupt annotation, a PodDisruptionBudget, a NodePool's budget, no replacement);
//! - `Unconsolidatable` on one whose NodePool rules consolidation out (`consolidateAfter:
//!   Never`, `consolidationPolicy: WhenEmpty` for a node that is not empty).
//!
//! Objects the watches skipped for failing validation get a `FailedValidation` Event (Warning)
//! through the same gate ([`DecisionEvents::admit`]).
//!
//! Only added decisions make events, so an unchanged decision says nothing again. The same
//! event (object, reason, message) is not repeated within [`DEDUPE_MS`], as Karpenter's
//! recorder dedupes, and at most [`MAX_PER_TURN`] are written per call (a loop turn): a re-plan that
//! moves thousands of bindings must not flood the API server (the rest are counted, not sent).

use dovetail_dataflow::backend::ClusterEvent;
use dovetail_dataflow::decisions::{Decision, DisruptionReason};
use dovetail_dataflow::disruption_reasons::Blocker;
use dovetail_dataflow::scheduling_reasons::Unschedulable;
use std::collections::HashMap;

/// How long an event is not repeated.
pub const DEDUPE_MS: i64 = 120_000;

/// The most events written per loop turn.
pub const MAX_PER_TURN: usize = 100;

/// See the module documentation.
#[derive(Debug, Default)]
pub struct DecisionEvents {
    /// When each (object, reason, message) was last written.
    written: HashMap<(String, String, String), i64>,
    last_prune_ms: i64,
    /// Events written, and dropped for the per-turn limit.
    pub recorded: u64,
    pub dropped: u64,
}

impl DecisionEvents {
    /// The events the decisions `diffs` make at `now_ms`; `is_node` tells a binding's target
    /// that is an existing Node from one that is a launch.
    pub fn from_diffs(
        &mut self,
        now_ms: i64,
        diffs: &[(Decision, isize)],
        is_node: impl Fn(&str) -> bool,
    ) -> Vec<ClusterEvent> {
        let candidates = diffs
            .iter()
            .filter(|(_, diff)| *diff > 0)
            .flat_map(|(decision, _)| events_of(decision, &is_node))
            .collect();
        self.admit(now_ms, candidates)
    }

    /// Of `candidates`, the events to write at `now_ms`: not one written within
    /// [`DEDUPE_MS`], and at most [`MAX_PER_TURN`] (the rest counted as dropped).
    pub fn admit(&mut self, now_ms: i64, candidates: Vec<ClusterEvent>) -> Vec<ClusterEvent> {
        if now_ms.saturating_sub(self.last_prune_ms) >= DEDUPE_MS {
            self.last_prune_ms = now_ms;
            self.written
                .retain(|_, at| now_ms.saturating_sub(*at) < DEDUPE_MS);
        }
        let mut out = Vec::new();
        for event in candidates {
            let key = (
                event.object.clone(),
                event.reason.clone(),
                event.message.clone(),
            );
            if self
                .written
                .get(&key)
                .is_some_and(|at| now_ms.saturating_sub(*at) < DEDUPE_MS)
            {
                continue;
            }
            if out.len() >= MAX_PER_TURN {
                self.dropped += 1;
                continue;
            }
            self.written.insert(key, now_ms);
            out.push(event);
        }
        self.recorded += out.len() as u64;
        out
    }
}

fn event(object: String, reason: &str, message: String) -> ClusterEvent {
    ClusterEvent {
        object,
        reason: reason.to_string(),
        message,
    }
}

/// The events one added decision makes, in Karpenter's words.
fn events_of(decision: &Decision, is_node: &impl Fn(&str) -> bool) -> Vec<ClusterEvent> {
    match decision {
        Decision::Binding { pod, target } => {
            let on = if is_node(target) {
                format!("node/{target}")
            } else {
                format!("nodeclaim/{target}")
            };
            vec![event(
                format!("Pod/{pod}"),
                "Nominated",
                format!("Pod should schedule on: {on}"),
            )]
        }
        Decision::Unschedulable { pod, reason } => vec![event(
            format!("Pod/{pod}"),
            "FailedScheduling",
            format!("Failed to schedule pod, {}", unschedulable_words(reason)),
        )],
        Decision::Disruption(d) => {
            let Some(why) = &d.blocked_by else {
                return Vec::new();
            };
            // The loop waiting its turn is not a reason to tell anyone.
            if **why == Blocker::Waiting {
                return Vec::new();
            }
            let consolidation = matches!(
                d.reason,
                DisruptionReason::Empty | DisruptionReason::Underutilized
            );
            let policy = matches!(
                **why,
                Blocker::ConsolidateNever { .. }
                    | Blocker::WhenEmpty { .. }
                    | Blocker::Balanced { .. }
            );
            let (reason, message) = if consolidation && policy {
                (
                    "Unconsolidatable",
                    format!("NodePool {} rules it out: {why}", d.nodepool),
                )
            } else {
                (
                    "DisruptionBlocked",
                    format!("Cannot disrupt Node ({}): {why}", d.reason.as_str()),
                )
            };
            let mut out = vec![event(format!("Node/{}", d.node), reason, message.clone())];
            if let Some(claim) = &d.nodeclaim {
                out.push(event(format!("NodeClaim/{claim}"), reason, message));
            }
            out
        }
        _ => Vec::new(),
    }
}

/// Why a pod is unschedulable, in `dovetail explain pod`'s words: when NodePools rule it out,
/// the nearest one's blocker and the one change that would remove it (a list of every
/// NodePool's reason tells a user less than what to change first); the rest is counted.
/// Nearest is `PoolRejection::distance`, ties by name (the reason does not carry weights).
fn unschedulable_words(reason: &Unschedulable) -> String {
    let rejections = reason.rejections();
    let Some((pool, blocker)) = rejections
        .iter()
        .min_by(|a, b| (a.1.distance(), &a.0).cmp(&(b.1.distance(), &b.0)))
    else {
        return reason.to_string();
    };
    let mut words = format!(
        "nearest NodePool {pool} ruled out: {blocker}; would change with: {}",
        blocker.remedy(pool)
    );
    match rejections.len() - 1 {
        0 => {}
        1 => words.push_str(" (1 more NodePool ruled out)"),
        n => words.push_str(&format!(" ({n} more NodePools ruled out)")),
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use dovetail_dataflow::decisions::Disruption;
    use dovetail_dataflow::model::Price;
    use dovetail_dataflow::scheduling_reasons::PoolRejection;

    fn blocked(node: &str, reason: DisruptionReason, why: Blocker) -> Decision {
        Decision::Disruption(Disruption {
            node: node.into(),
            nodeclaim: Some(format!("{node}-claim")),
            nodepool: "general".into(),
            reason,
            command: None,
            replacements: Vec::new(),
            savings_per_hour: Price(0),
            blocked_by: Some(Box::new(why)),
        })
    }

    fn bind(pod: &str, target: &str) -> Decision {
        Decision::Binding {
            pod: pod.into(),
            target: target.into(),
        }
    }

    #[test]
    fn decisions_become_karpenters_events() {
        let mut e = DecisionEvents::default();
        let diffs = vec![
            (bind("team/web", "general-abc12"), 1),
            (bind("team/db", "ip-10-0-0-1"), 1),
            (bind("team/gone", "general-abc12"), -1),
            (
                Decision::Unschedulable {
                    pod: "team/huge".into(),
                    reason: Unschedulable::Other {
                        reason: "no instance type has enough cpu".into(),
                    },
                },
                1,
            ),
            (
                blocked(
                    "ip-10-0-0-1",
                    DisruptionReason::Drifted,
                    Blocker::Pdb {
                        pdb: "team/db".into(),
                        pod: "team/db".into(),
                    },
                ),
                1,
            ),
            (
                blocked(
                    "ip-10-0-0-2",
                    DisruptionReason::Underutilized,
                    Blocker::ConsolidateNever {
                        nodepool: "general".into(),
                    },
                ),
                1,
            ),
            (
                blocked(
                    "ip-10-0-0-3",
                    DisruptionReason::Underutilized,
                    Blocker::Waiting,
                ),
                1,
            ),
        ];
        let events = e.from_diffs(0, &diffs, |n| n.starts_with("ip-"));
        let seen: Vec<(&str, &str, &str)> = events
            .iter()
            .map(|e| (e.object.as_str(), e.reason.as_str(), e.message.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                ("Pod/team/web", "Nominated", "Pod should schedule on: nodeclaim/general-abc12"),
                ("Pod/team/db", "Nominated", "Pod should schedule on: node/ip-10-0-0-1"),
                ("Pod/team/huge", "FailedScheduling", "Failed to schedule pod, no instance type has enough cpu"),
                ("Node/ip-10-0-0-1", "DisruptionBlocked", "Cannot disrupt Node (Drifted): PodDisruptionBudget team/db allows no disruption of pod team/db"),
                ("NodeClaim/ip-10-0-0-1-claim", "DisruptionBlocked", "Cannot disrupt Node (Drifted): PodDisruptionBudget team/db allows no disruption of pod team/db"),
                ("Node/ip-10-0-0-2", "Unconsolidatable", "NodePool general rules it out: consolidateAfter: Never"),
                ("NodeClaim/ip-10-0-0-2-claim", "Unconsolidatable", "NodePool general rules it out: consolidateAfter: Never"),
            ]
        );
    }

    #[test]
    fn the_same_event_waits_two_minutes_and_a_turn_writes_at_most_a_hundred() {
        let mut e = DecisionEvents::default();
        let once = vec![(bind("team/web", "general-abc12"), 1)];
        assert_eq!(e.from_diffs(0, &once, |_| false).len(), 1);
        // Retracted and added again (a re-plan): not repeated within the dedupe time.
        assert!(e.from_diffs(60_000, &once, |_| false).is_empty());
        assert_eq!(e.from_diffs(DEDUPE_MS, &once, |_| false).len(), 1);
        // Another target is another message: said at once.
        let moved = vec![(bind("team/web", "general-def34"), 1)];
        assert_eq!(e.from_diffs(DEDUPE_MS + 1, &moved, |_| false).len(), 1);

        let many: Vec<(Decision, isize)> = (0..250)
            .map(|i| (bind(&format!("team/p{i}"), "general-abc12"), 1))
            .collect();
        let t = 10 * DEDUPE_MS;
        assert_eq!(e.from_diffs(t, &many, |_| false).len(), MAX_PER_TURN);
        assert_eq!(e.dropped, 150);
        // The dropped ones were never written: the next turn may say them.
        assert_eq!(e.from_diffs(t + 1, &many, |_| false).len(), MAX_PER_TURN);
        assert_eq!(e.recorded, 3 + 2 * MAX_PER_TURN as u64);
    }

    #[test]
    fn an_unschedulable_pod_is_told_the_nearest_nodepools_blocker_and_remedy() {
        let reason = Unschedulable::NodePools {
            rejections: vec![
                (
                    "arm".into(),
                    PoolRejection::LabelUndefined {
                        key: "example.com/team".into(),
                    },
                ),
                (
                    "general".into(),
                    PoolRejection::Limits {
                        resource: "cpu".into(),
                        limit: 4_000,
                        used: 4_000,
                        needs: 2_000,
                    },
                ),
            ],
        };
        let diffs = vec![(
            Decision::Unschedulable {
                pod: "team/web".into(),
                reason,
            },
            1,
        )];
        let events = DecisionEvents::default().from_diffs(0, &diffs, |_| false);
        assert_eq!(
            events[0].message,
            "Failed to schedule pod, nearest NodePool general ruled out: limits reached (cpu: 4 of 4 used, the smallest fitting type needs 2); would change with: raising NodePool general's limits.cpu to at least 6 (1 more NodePool ruled out)"
        );
    }
}
