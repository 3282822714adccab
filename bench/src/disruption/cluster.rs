//! A synthetic cluster built from the real us-east-1 catalogue: one NodePool over a few general
//! purpose families, nodes of five sizes in three zones, and deployments whose pods fill most
//! nodes to 70–95 % and a fifth of them to 15–45 % (the underutilised ones consolidation should
//! find). A few pods carry `karpenter.sh/do-not-disrupt` and one deployment has a PDB, so
//! blocked candidates are part of the work. Nodes are launched in the simulated cloud
//! (`SimCloud`) and carry what actuation's registration gives a launched instance, as in a
//! replay.

use crate::workload::Rng;
use anyhow::{Context, Result};
use dovetail_actuate::registration::node_for_instance;
use dovetail_dataflow::backend::{FleetOverride, FleetRequest, OfferingKey};
use dovetail_dataflow::catalog::{RegionCatalog, ResolveOptions};
use dovetail_dataflow::facts::Fact;
use dovetail_dataflow::model::labels::{CAPACITY_TYPE, INSTANCE_FAMILY};
use dovetail_dataflow::model::quantity::mib;
use dovetail_dataflow::model::{
    EC2NodeClass, InstanceType, LabelSelector, Node, NodePool, Pod, PodDisruptionBudget,
    PodScheduling, Requirement, Requirements, Resources, SharedPod,
};
use dovetail_sim::{SimCloud, SimConfig};
use std::collections::BTreeMap;

pub const FAMILIES: [&str; 4] = ["m5", "c5", "r5", "m6i"];
pub const NODE_TYPES: [&str; 5] = [
    "m5.xlarge",
    "m5.2xlarge",
    "c5.2xlarge",
    "r5.xlarge",
    "m5.4xlarge",
];
pub const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
const DEPLOYMENTS: usize = 40;
const CPU_MILLIS: [i64; 4] = [100, 250, 500, 1000];
const MEMORY_MIB: [i64; 4] = [256, 512, 1024, 2048];

/// The cluster as facts, with the indices the change driver needs.
pub struct Cluster {
    pub facts: Vec<Fact>,
    pub nodes: BTreeMap<String, Node>,
    /// Shared with the facts of every engine the bench feeds (see [`Cluster::state`]).
    pub pods: Vec<SharedPod>,
    /// Instance types the NodePool may launch (for price changes).
    pub types: Vec<InstanceType>,
    pub rng: Rng,
    /// Where the nodes are launched.
    cloud: SimCloud,
    next_node: usize,
}

fn nodepool() -> NodePool {
    let mut requirements = Requirements::new();
    requirements.add(CAPACITY_TYPE, Requirement::single("on-demand"));
    requirements.add(
        INSTANCE_FAMILY,
        Requirement::finite(FAMILIES.iter().map(|f| f.to_string()).collect()),
    );
    NodePool {
        name: "default".into(),
        requirements,
        node_class: Some("default".into()),
        ..NodePool::default()
    }
}

fn deployment_requests(d: usize) -> Resources {
    Resources {
        cpu: CPU_MILLIS[d % CPU_MILLIS.len()],
        memory: mib(MEMORY_MIB[(d / CPU_MILLIS.len()) % MEMORY_MIB.len()]),
        pods: 1000,
        ..Resources::default()
    }
}

impl Cluster {
    /// `nodes` nodes of types from `catalog` at clock `now_ms`, filled with pods.
    pub fn build(catalog: &RegionCatalog, nodes: usize, seed: u64, now_ms: i64) -> Result<Cluster> {
        let class = EC2NodeClass {
            name: "default".into(),
            spec_json: "{}".into(),
            ..EC2NodeClass::default()
        };
        let types: Vec<InstanceType> = catalog
            .instance_types(&ResolveOptions::for_node_class(&class))
            .into_iter()
            .filter(|t| {
                FAMILIES
                    .iter()
                    .any(|f| t.name.split('.').next() == Some(*f))
                    && !t.name.contains("metal")
            })
            .collect();
        let mut facts: Vec<Fact> = types
            .iter()
            .map(|t| Fact::InstanceType {
                node_class: class.name.clone(),
                instance_type: t.clone(),
            })
            .collect();
        facts.push(Fact::NodeClass(class));
        facts.push(Fact::NodePool(nodepool()));
        let mut web_selector = LabelSelector::default();
        web_selector
            .requirements
            .add("app", Requirement::single("app-0"));
        facts.push(Fact::Pdb(PodDisruptionBudget {
            namespace: "default".into(),
            name: "app-0".into(),
            selector: web_selector,
            min_available: Some("100%".into()),
            max_unavailable: None,
        }));
        let mut cluster = Cluster {
            facts,
            nodes: BTreeMap::new(),
            pods: Vec::new(),
            types,
            rng: Rng::new(seed),
            cloud: SimCloud::new(SimConfig {
                seed,
                spot_interruptions: false,
                ..SimConfig::default()
            })
            .context("starting the simulated cloud")?,
            next_node: 0,
        };
        for _ in 0..nodes {
            let mut node = cluster.new_node(now_ms - 3_600_000)?;
            let low = cluster.rng.below(5) == 0;
            let target = if low {
                0.15 + 0.3 * cluster.rng.below(100) as f64 / 100.0
            } else {
                0.70 + 0.25 * cluster.rng.below(100) as f64 / 100.0
            };
            let mut used = Resources::default();
            loop {
                let d = cluster.rng.below(DEPLOYMENTS);
                let req = deployment_requests(d);
                let after = used.add(&req);
                let a = &node.allocatable;
                if after.cpu as f64 > a.cpu as f64 * target
                    || after.memory as f64 > a.memory as f64 * target
                    || after.pods > a.pods
                {
                    break;
                }
                used = after;
                let pod = cluster.pod(d, &node.name, now_ms - 3_600_000);
                cluster.pods.push(pod.into());
            }
            node.last_pod_event_ms = Some(now_ms - 3_600_000);
            cluster.nodes.insert(node.name.clone(), node);
        }
        Ok(cluster)
    }

    /// Every fact of the current state.
    pub fn state(&self) -> Vec<Fact> {
        let mut out = self.facts.clone();
        out.extend(self.nodes.values().cloned().map(Fact::Node));
        out.extend(self.pods.iter().cloned().map(Fact::Pod));
        out
    }

    /// A new registered node of a random size and zone, launched in the simulated cloud at
    /// `created_ms`, with no pods.
    pub fn new_node(&mut self, created_ms: i64) -> Result<Node> {
        let t = NODE_TYPES[self.rng.below(NODE_TYPES.len())];
        let zone = ZONES[self.rng.below(ZONES.len())];
        let it = self
            .types
            .iter()
            .find(|it| it.name == t)
            .with_context(|| format!("{t} in the catalogue"))?;
        let offering = it
            .offerings
            .iter()
            .find(|o| o.zone == zone && o.capacity_type == "on-demand")
            .with_context(|| format!("{t} on demand in {zone}"))?;
        let claim = format!("default-{:05}", self.next_node);
        self.next_node += 1;
        let instance = self
            .cloud
            .create_fleet_now(
                created_ms,
                &FleetRequest {
                    labels: Default::default(),
                    taints: Vec::new(),
                    nodeclaim: claim.clone(),
                    nodepool: "default".into(),
                    node_class: None,
                    client_token: claim,
                    capacity_type: "on-demand".into(),
                    overrides: vec![FleetOverride {
                        key: OfferingKey::new(t, zone, "on-demand"),
                        zone_id: offering.zone_id.clone(),
                        price: offering.price,
                    }],
                },
            )
            .with_context(|| format!("launching {t} in {zone}"))?;
        let (node, _startup) = node_for_instance(&instance, it, &nodepool(), created_ms);
        Ok(node)
    }

    fn pod(&mut self, d: usize, node: &str, created_ms: i64) -> Pod {
        let i = self.pods.len();
        let mut annotations = BTreeMap::new();
        if self.rng.below(500) == 0 {
            annotations.insert(
                "karpenter.sh/do-not-disrupt".to_string(),
                "true".to_string(),
            );
        }
        Pod {
            namespace: "default".into(),
            name: format!("app-{d}-{i}"),
            labels: BTreeMap::from([("app".to_string(), format!("app-{d}"))]),
            annotations,
            scheduling: PodScheduling {
                requests: deployment_requests(d),
                ..PodScheduling::default()
            },
            node_name: Some(node.to_string()),
            owner: Some(("ReplicaSet".into(), format!("app-{d}"))),
            is_daemon: false,
            created_ms: Some(created_ms),
        }
    }
}
