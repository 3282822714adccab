//! The churn workload of issue 20, as a replay trace: `pods` pods of `apps` apps created at
//! t = 0, then one pod created or deleted every second for `minutes` minutes, on one on-demand
//! c/m/r NodePool (`consolidateAfter: 5m`).
//!
//! - App `a` asks for a CPU size from 250m to 4 CPU ([`CPU_MILLIS`], by `a + a / 5`, so the
//!   zone-spread apps take every size too) and 2, 4 or 8 GiB per CPU (by `a / 5`), covering the
//!   c, m and r shapes; every fifth app spreads over zones (`maxSkew: 1`, `DoNotSchedule`), the
//!   others have no topology term.
//! - The pods at t = 0 go round-robin over the apps; each later second creates a pod of a random
//!   app or deletes a random live pod, with equal odds (a deletion when none is live creates).
//!
//! The draws come from a seeded SplitMix64 ([`crate::workload::Rng`]), so a trace is a function of
//! its settings.

use crate::workload::Rng;
use serde_json::{json, Value};
use std::io::{self, Write};

/// CPU requests of the apps, cycled.
pub const CPU_MILLIS: [u64; 5] = [250, 500, 1000, 2000, 4000];
/// Memory per CPU (MiB per vCPU), by `app / 5`, cycled: c, m and r shapes.
pub const MIB_PER_CPU: [u64; 3] = [2048, 4096, 8192];
pub const NAMESPACE: &str = "churn";

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct Churn {
    pub pods: usize,
    pub apps: usize,
    pub minutes: u64,
    pub seed: u64,
}

/// What was written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChurnStats {
    pub created_at_start: u64,
    pub created_later: u64,
    pub deleted: u64,
}

/// The Pod manifest of the `n`th pod, of app `app`.
pub fn pod(app: usize, n: u64) -> Value {
    let cpu = CPU_MILLIS[(app + app / 5) % CPU_MILLIS.len()];
    let memory_mib = cpu * MIB_PER_CPU[(app / CPU_MILLIS.len()) % MIB_PER_CPU.len()] / 1000;
    let name = format!("app-{app}");
    let mut spec = json!({
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": format!("{cpu}m"), "memory": format!("{memory_mib}Mi")}}}],
    });
    if app.is_multiple_of(5) {
        spec["topologySpreadConstraints"] = json!([{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": name}},
        }]);
    }
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{name}-{n}"), "namespace": NAMESPACE,
            "labels": {"app": name},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": name, "controller": true}]},
        "spec": spec})
}

/// Writes the trace (header and events, one per line).
pub fn write_trace(churn: &Churn, out: &mut impl Write) -> io::Result<ChurnStats> {
    let apps = churn.apps.max(1);
    let header = json!({"dovetail_trace": 1, "source": "dovetail-bench-churn", "time_unit": "ms",
        "churn": {"pods": churn.pods, "apps": apps, "minutes": churn.minutes, "seed": churn.seed}});
    writeln!(out, "{header}")?;
    let mut rng = Rng::new(churn.seed);
    let mut stats = ChurnStats::default();
    // Live pods as (app, n), for deleting a random one in O(1).
    let mut live: Vec<(usize, u64)> = Vec::with_capacity(churn.pods);
    let mut next: u64 = 0;
    let mut create = |t: u64, app: usize, live: &mut Vec<(usize, u64)>, out: &mut dyn Write| {
        let n = next;
        next += 1;
        live.push((app, n));
        writeln!(
            out,
            "{}",
            json!({"t": t, "event": "pod_created", "pod": pod(app, n)})
        )
    };
    for i in 0..churn.pods {
        create(0, i % apps, &mut live, out)?;
        stats.created_at_start += 1;
    }
    for second in 1..=churn.minutes * 60 {
        let t = second * 1000;
        if rng.below(2) == 0 && !live.is_empty() {
            let i = rng.below(live.len());
            let (app, n) = live.swap_remove(i);
            writeln!(
                out,
                "{}",
                json!({"t": t, "event": "pod_deleted", "namespace": NAMESPACE, "name": format!("app-{app}-{n}")})
            )?;
            stats.deleted += 1;
        } else {
            create(t, rng.below(apps), &mut live, out)?;
            stats.created_later += 1;
        }
    }
    Ok(stats)
}

/// The NodePool and EC2NodeClass the churn replays on: on-demand, c/m/r of generation 6 and
/// later, amd64, `WhenEmptyOrUnderutilized` after 5 min, three zones.
pub const NODEPOOLS_YAML: &str = r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: churn
spec:
  template:
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand"]
        - key: karpenter.k8s.aws/instance-category
          operator: In
          values: ["c", "m", "r"]
        - key: karpenter.k8s.aws/instance-generation
          operator: Gt
          values: ["5"]
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 5m
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiSelectorTerms:
    - alias: al2023@latest
  role: KarpenterNodeRole-dovetail
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: dovetail
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: dovetail
status:
  subnets:
    - id: subnet-0a1
      zone: us-east-1a
    - id: subnet-0b1
      zone: us-east-1b
    - id: subnet-0c1
      zone: us-east-1c
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn lines(churn: &Churn) -> (Vec<Value>, ChurnStats) {
        let mut out = Vec::new();
        let stats = write_trace(churn, &mut out).expect("write");
        let text = String::from_utf8(out).expect("UTF-8");
        let values = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON"))
            .collect();
        (values, stats)
    }

    #[test]
    fn one_change_a_second_after_the_start_and_only_live_pods_deleted() {
        let churn = Churn {
            pods: 100,
            apps: 50,
            minutes: 2,
            seed: 3,
        };
        let (events, stats) = lines(&churn);
        assert_eq!(events[0]["dovetail_trace"], 1);
        let events = &events[1..];
        assert_eq!(events.len(), 100 + 120);
        assert_eq!(stats.created_at_start, 100);
        assert_eq!(stats.created_later + stats.deleted, 120);
        assert!(stats.deleted > 30 && stats.created_later > 30, "{stats:?}");
        let mut live = BTreeSet::new();
        for (i, e) in events.iter().enumerate() {
            let t = e["t"].as_u64().expect("t");
            assert_eq!(t, (i.saturating_sub(99) as u64) * 1000);
            match e["event"].as_str() {
                Some("pod_created") => {
                    let name = e["pod"]["metadata"]["name"].as_str().expect("name");
                    assert!(live.insert(name.to_string()), "{name} created twice");
                }
                Some("pod_deleted") => {
                    let name = e["name"].as_str().expect("name");
                    assert!(live.remove(name), "{name} deleted but not live");
                }
                other => panic!("{other:?}"),
            }
        }
        // The same settings give the same trace.
        assert_eq!(lines(&churn).0[1..], *events);
    }

    #[test]
    fn apps_cover_the_sizes_and_every_fifth_spreads_over_zones() {
        let cpu =
            |app| pod(app, 0)["spec"]["containers"][0]["resources"]["requests"]["cpu"].clone();
        let sizes: BTreeSet<String> = (0..50)
            .map(|a| cpu(a).as_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(sizes.len(), CPU_MILLIS.len());
        let spread: Vec<usize> = (0..50)
            .filter(|a| pod(*a, 0)["spec"]["topologySpreadConstraints"].is_array())
            .collect();
        assert_eq!(spread, (0..50).step_by(5).collect::<Vec<_>>());
        assert_eq!(
            pod(7, 0)["spec"]["containers"][0]["resources"]["requests"],
            json!({"cpu": "2000m", "memory": "8192Mi"})
        );
    }
}
