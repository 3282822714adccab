//! What the loop's tests share: an m5 NodePool in us-east-1a, one-CPU pods, and a loop with the
//! real catalogue as what the cloud sells.
#![allow(dead_code)]

use dovetail_actuate::{ActuationSettings, ControlLoop};
use dovetail_dataflow::catalog::{embedded, ResolveOptions};
use dovetail_dataflow::model::{InstanceType, Pod};
use dovetail_ingest::Manifests;

/// A NodePool `default` of m5 types of `capacity_types` (`spot, on-demand`) and its
/// EC2NodeClass, in us-east-1a only.
pub fn m5_pool(capacity_types: &str) -> Manifests {
    let yaml = format!(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
        - {{key: karpenter.sh/capacity-type, operator: In, values: [{capacity_types}]}}
        - {{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec: {{}}
status:
  subnets: [{{id: subnet-a, zone: us-east-1a}}]
"#
    );
    dovetail_ingest::load_str("pool.yaml", &yaml).expect("pool parses")
}

/// A pending pod `default/NAME` asking for one CPU and 1 GiB.
pub fn pod(name: &str) -> Pod {
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  containers:\n  - name: c\n    image: i\n    resources: {{requests: {{cpu: '1', memory: 1Gi}}}}\n"
    );
    dovetail_ingest::load_str("pod.yaml", &yaml)
        .expect("pod parses")
        .pods
        .pop()
        .expect("one pod")
}

/// Every us-east-1 type as the cloud sells it.
pub fn catalogue() -> Vec<InstanceType> {
    embedded("us-east-1")
        .expect("catalogue")
        .instance_types(&ResolveOptions::default())
}

/// The standing queries on one worker, selling the catalogue.
pub fn control_loop() -> ControlLoop {
    let mut control = ControlLoop::start(
        dovetail_queries::standing_queries,
        1,
        ActuationSettings::default(),
    )
    .expect("engine starts");
    control.actuator_mut().set_instance_types(
        catalogue()
            .into_iter()
            .map(|t| (t.name.clone(), t))
            .collect(),
    );
    control
}
