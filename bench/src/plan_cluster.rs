//! The `dovetail plan` row of issue 20 as manifests: `nodes` registered nodes of three instance
//! types over three zones, each with the NodeClaim that launched it, filled 60–95 % (by CPU or
//! memory, whichever comes first) with pods of 50 deployments, and `pending` pods more that no
//! node holds yet. Deterministic for a seed, so anyone can rebuild the same input.

use crate::workload::Rng;
use std::io::{self, Write};

/// The instance types nodes run: (name, family, size, vCPUs, memory GiB, max pods).
const TYPES: [(&str, &str, &str, i64, i64, i64); 3] = [
    ("m5.2xlarge", "m5", "2xlarge", 8, 32, 58),
    ("c5.4xlarge", "c5", "4xlarge", 16, 32, 234),
    ("r5.2xlarge", "r5", "2xlarge", 8, 64, 58),
];
const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
const DEPLOYMENTS: u64 = 50;

/// The NodePool and EC2NodeClass the nodes belong to.
pub const NODEPOOL_YAML: &str = r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: general
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: ["c", "m", "r"]}
        - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["4"]}
        - {key: kubernetes.io/arch, operator: In, values: ["amd64"]}
      expireAfter: 720h
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 10m
    budgets:
      - nodes: "10%"
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiSelectorTerms:
    - alias: al2023@v20261115
  role: KarpenterNodeRole
  subnetSelectorTerms:
    - tags: {karpenter.sh/discovery: bench}
  securityGroupSelectorTerms:
    - tags: {karpenter.sh/discovery: bench}
status:
  amis:
    - id: ami-0bench
      name: amazon-eks-node-al2023-x86_64-standard-1.31-v20261115
"#;

/// The plan workload.
pub struct PlanCluster {
    pub nodes: usize,
    pub pending: usize,
    pub seed: u64,
}

/// What was written.
#[derive(Debug, Default, Clone, Copy)]
pub struct Written {
    pub nodes: usize,
    pub bound: usize,
    pub pending: usize,
}

/// A deployment's requests: (millicores, MiB), 70m–700m CPU and 128 MiB–2.1 GiB, so that
/// 10,000 nodes hold about the issue's 167,000 pods.
fn requests(d: usize) -> (i64, i64) {
    let cpu = 70 + (d * 37 % 15) as i64 * 45;
    let memory = 128 + (d * 53 % 24) as i64 * 88;
    (cpu, memory)
}

impl PlanCluster {
    /// Writes the nodes with their NodeClaims to `nodes`, and the pods to `pods`.
    pub fn write(&self, nodes: &mut impl Write, pods: &mut impl Write) -> io::Result<Written> {
        let mut rng = Rng::new(self.seed);
        let mut written = Written::default();
        let mut pod_index = 0u64;
        for i in 0..self.nodes {
            let (it, family, size, vcpu, gib, max_pods) = TYPES[i % TYPES.len()];
            let zone = ZONES[(i / TYPES.len()) % ZONES.len()];
            let name = format!(
                "ip-10-{}-{}-{}.ec2.internal",
                i / 65536,
                (i / 256) % 256,
                i % 256
            );
            // Karpenter's kube-reserved and eviction threshold, roughly: what the plan reads is
            // the Node's allocatable, whatever it came from.
            let alloc_cpu = vcpu * 1000 - 80 - vcpu * 5;
            let alloc_mem = gib * 1024 - (11 * max_pods + 255) - 100;
            let category = &family[..1];
            let generation = &family[1..];
            writeln!(
                nodes,
                "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  creationTimestamp: \"2026-11-20T10:00:00Z\"\n  labels: {{karpenter.sh/nodepool: general, karpenter.sh/capacity-type: on-demand, karpenter.k8s.aws/ec2nodeclass: default, karpenter.k8s.aws/instance-category: {category}, karpenter.k8s.aws/instance-family: {family}, karpenter.k8s.aws/instance-generation: \"{generation}\", karpenter.k8s.aws/instance-size: {size}, node.kubernetes.io/instance-type: {it}, topology.kubernetes.io/zone: {zone}, kubernetes.io/arch: amd64, kubernetes.io/os: linux, kubernetes.io/hostname: {name}}}\nspec:\n  providerID: aws:///{zone}/i-{i:017x}\nstatus:\n  capacity: {{cpu: \"{vcpu}\", memory: {gib}Gi, pods: \"{max_pods}\"}}\n  allocatable: {{cpu: {alloc_cpu}m, memory: {alloc_mem}Mi, pods: \"{max_pods}\"}}\n  conditions:\n    - {{type: Ready, status: \"True\"}}"
            )?;
            writeln!(
                nodes,
                "---\napiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata:\n  name: general-{i:06x}\n  creationTimestamp: \"2026-11-20T10:00:00Z\"\n  labels: {{karpenter.sh/nodepool: general}}\nspec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n  requirements:\n    - {{key: node.kubernetes.io/instance-type, operator: In, values: [\"{it}\"]}}\nstatus:\n  nodeName: {name}\n  providerID: aws:///{zone}/i-{i:017x}\n  imageID: ami-0bench\n  lastPodEventTime: \"2026-11-30T07:30:00Z\"\n  capacity: {{cpu: \"{vcpu}\", memory: {gib}Gi, pods: \"{max_pods}\"}}\n  allocatable: {{cpu: {alloc_cpu}m, memory: {alloc_mem}Mi, pods: \"{max_pods}\"}}"
            )?;
            written.nodes += 1;
            // Each node is filled to its own target between 60 and 95 %.
            let target = 60 + (rng.next_u64() % 36) as i64;
            let (mut cpu, mut memory, mut count) = (0i64, 0i64, 0i64);
            loop {
                let d = (rng.next_u64() % DEPLOYMENTS) as usize;
                let (c, m) = requests(d);
                if (cpu + c) * 100 > alloc_cpu * target
                    || (memory + m) * 100 > alloc_mem * target
                    || count + 1 > max_pods
                {
                    break;
                }
                (cpu, memory, count) = (cpu + c, memory + m, count + 1);
                write_pod(pods, pod_index, d, Some(&name))?;
                pod_index += 1;
                written.bound += 1;
            }
        }
        for _ in 0..self.pending {
            let d = (rng.next_u64() % DEPLOYMENTS) as usize;
            write_pod(pods, pod_index, d, None)?;
            pod_index += 1;
            written.pending += 1;
        }
        Ok(written)
    }
}

fn write_pod(out: &mut impl Write, i: u64, d: usize, node: Option<&str>) -> io::Result<()> {
    let (cpu, memory) = requests(d);
    let node = node.map_or(String::new(), |n| format!("\n  nodeName: {n}"));
    writeln!(
        out,
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: app-{d}-{i:07x}\n  namespace: default\n  labels: {{app: app-{d}}}\n  ownerReferences:\n    - {{apiVersion: apps/v1, kind: ReplicaSet, name: app-{d}-rs, uid: rs{d}, controller: true}}\nspec:{node}\n  containers:\n    - name: main\n      image: app:{d}\n      resources:\n        requests: {{cpu: {cpu}m, memory: {memory}Mi}}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_are_filled_between_their_targets_and_pending_pods_follow() {
        let cluster = PlanCluster {
            nodes: 30,
            pending: 7,
            seed: 3,
        };
        let (mut nodes, mut pods) = (Vec::new(), Vec::new());
        let written = cluster.write(&mut nodes, &mut pods).expect("in memory");
        let text = String::from_utf8(pods).expect("utf-8");
        assert_eq!(written.nodes, 30);
        assert_eq!(written.pending, 7);
        assert_eq!(text.matches("kind: Pod").count(), written.bound + 7);
        assert_eq!(text.matches("nodeName:").count(), written.bound);
        // Every node holds at least a few pods: a 60 % target of 8 vCPUs takes more than three.
        assert!(written.bound > 30 * 3, "{} bound", written.bound);
        let nodes = String::from_utf8(nodes).expect("utf-8");
        assert_eq!(nodes.matches("kind: NodeClaim").count(), 30);
    }
}
