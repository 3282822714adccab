//! The validation layer: what Karpenter's CRDs and the API server refuse is refused with an
//! error naming file, document, object and field; what they accept but is odd is noted;
//! EC2NodeClass readiness; the YAML reader's limits.

use dovetail_ingest::{load_str, Manifests, MAX_DEPTH};

fn load(text: &str) -> Manifests {
    match load_str("test.yaml", text) {
        Ok(m) => m,
        Err(e) => panic!("load failed: {e}"),
    }
}

/// The error loading `text`, which must fail.
fn refused(text: &str) -> String {
    match load_str("test.yaml", text) {
        Ok(m) => panic!("accepted, with notes {:?}", m.notes),
        Err(e) => e.to_string(),
    }
}

/// A NodePool with `spec_extra` added to its spec and `template_extra` to its template's spec.
fn nodepool(spec_extra: &str, template_extra: &str) -> String {
    format!(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: general}}\nspec:\n{spec_extra}  template:\n    spec:\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n{template_extra}"
    )
}

fn budget(fields: &str) -> String {
    nodepool(
        &format!("  disruption:\n    budgets:\n    - {fields}\n"),
        "",
    )
}

/// The error names the file, document, object and field path.
fn assert_names(err: &str, object: &str, field: &str) {
    let prefix = format!("test.yaml: document 1: {object}: {field}: ");
    assert!(
        err.starts_with(&prefix),
        "expected {prefix:?}..., got {err}"
    );
}

#[test]
fn a_valid_nodepool_is_accepted() {
    let m = load(&budget(
        "{nodes: \"10%\", schedule: \"0 9 * * 1-5\", duration: 8h, reasons: [Drifted]}",
    ));
    assert_eq!(m.nodepools.len(), 1);
}

#[test]
fn nodepool_weight_outside_1_to_100_is_refused() {
    for weight in ["0", "101", "-5"] {
        let err = refused(&nodepool(&format!("  weight: {weight}\n"), ""));
        assert_names(&err, "NodePool general", "spec.weight");
    }
    assert_eq!(
        load(&nodepool("  weight: 100\n", "")).nodepools[0].weight,
        100
    );
    let err = refused(&nodepool("  weight: 1.5\n", ""));
    assert!(err.contains("expected an integer"), "{err}");
}

#[test]
fn negative_or_garbage_durations_are_refused() {
    for value in ["-5m", "10 minutes", "1d", "\"\""] {
        let err = refused(&nodepool("", &format!("      expireAfter: {value}\n")));
        assert_names(&err, "NodePool general", "spec.template.spec.expireAfter");
        let err = refused(&nodepool(
            &format!("  disruption:\n    consolidateAfter: {value}\n"),
            "",
        ));
        assert_names(&err, "NodePool general", "spec.disruption.consolidateAfter");
    }
    load(&nodepool(
        "  disruption:\n    consolidateAfter: Never\n",
        "      expireAfter: 1h30m\n",
    ));
}

#[test]
fn negative_budget_nodes_are_refused() {
    for nodes in ["\"-1\"", "-1", "\"101%\"", "\"ten\""] {
        let err = refused(&budget(&format!("{{nodes: {nodes}}}")));
        assert_names(&err, "NodePool general", "spec.disruption.budgets[0].nodes");
    }
}

#[test]
fn an_invalid_cron_schedule_is_refused() {
    // The CRD's pattern lets five fields through; Karpenter's parser does not take minute 99.
    for schedule in ["\"99 * * * *\"", "\"every day\"", "\"@fortnightly\""] {
        let err = refused(&budget(&format!(
            "{{nodes: \"0\", schedule: {schedule}, duration: 1h}}"
        )));
        assert_names(
            &err,
            "NodePool general",
            "spec.disruption.budgets[0].schedule",
        );
    }
}

#[test]
fn schedule_and_duration_go_together() {
    let err = refused(&budget("{nodes: \"0\", schedule: \"@daily\"}"));
    assert_names(
        &err,
        "NodePool general",
        "spec.disruption.budgets[0].schedule",
    );
    let err = refused(&budget("{nodes: \"0\", duration: 1h}"));
    assert_names(
        &err,
        "NodePool general",
        "spec.disruption.budgets[0].duration",
    );
}

fn pod(spec: &str) -> String {
    format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: web}}\nspec:\n{spec}")
}

const CONTAINER: &str = "  containers: [{name: c, resources: {requests: {cpu: 100m}}}]\n";

#[test]
fn min_domains_zero_is_refused_in_pods_and_templates() {
    let spread = "  topologySpreadConstraints:\n  - {maxSkew: 1, minDomains: 0, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}\n";
    let err = refused(&pod(&format!("{CONTAINER}{spread}")));
    assert_names(
        &err,
        "Pod default/web",
        "spec.topologySpreadConstraints[0].minDomains",
    );
    let template = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  replicas: 1\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n{}",
        format!("{CONTAINER}{spread}")
            .lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    );
    let err = refused(&template);
    assert_names(
        &err,
        "Deployment default/web",
        "spec.template.spec.topologySpreadConstraints[0].minDomains",
    );
}

#[test]
fn negative_max_pods_is_refused() {
    let class = "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: default}\nspec:\n  kubelet: {maxPods: -1}\n";
    let err = refused(class);
    assert_names(&err, "EC2NodeClass default", "spec.kubelet.maxPods");
}

#[test]
fn a_non_integer_toleration_seconds_is_refused_and_a_negative_one_noted() {
    let tolerate = |secs: &str| {
        pod(&format!(
            "{CONTAINER}  tolerations: [{{key: k, operator: Exists, effect: NoExecute, tolerationSeconds: {secs}}}]\n"
        ))
    };
    for secs in ["1.5", "\"30\"", ".nan"] {
        let err = refused(&tolerate(secs));
        assert_names(
            &err,
            "Pod default/web",
            "spec.tolerations[0].tolerationSeconds",
        );
    }
    let m = load(&tolerate("-10"));
    assert!(
        m.notes.iter().any(|n| n.starts_with("Pod default/web: ")
            && n.contains("spec.tolerations[0].tolerationSeconds is negative")),
        "{:?}",
        m.notes
    );
    assert!(load(&tolerate("300")).notes.is_empty());
}

#[test]
fn an_overlay_price_adjustment_must_be_a_number_or_percentage() {
    let overlay = |adj: &str| {
        format!("apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {{name: discount}}\nspec:\n  requirements: []\n  priceAdjustment: {adj}\n")
    };
    for adj in ["cheap", "\"10\"", "\"-101%\"", "\"+1e999\""] {
        let err = refused(&overlay(adj));
        assert_names(&err, "NodeOverlay discount", "spec.priceAdjustment");
    }
    for adj in ["\"-10%\"", "\"+0.5\"", "\"-100%\""] {
        load(&overlay(adj));
    }
}

#[test]
fn a_pod_with_no_containers_is_refused() {
    for spec in ["  containers: []\n", "  nodeName: \"\"\n"] {
        let err = refused(&pod(spec));
        assert_names(&err, "Pod default/web", "spec.containers");
    }
}

#[test]
fn two_nodepools_with_one_name_are_refused() {
    let one = nodepool("", "");
    let err = refused(&format!("{one}---\n{one}"));
    assert!(
        err.starts_with("test.yaml: document 2: NodePool general: metadata.name: another NodePool general was read at test.yaml: document 1"),
        "{err}"
    );
    // Different kinds and namespaces may share a name.
    load(&format!(
        "{}---\n{}",
        pod(CONTAINER),
        pod(CONTAINER).replace("{name: web}", "{name: web, namespace: other}")
    ));
}

#[test]
fn list_items_must_be_a_list_of_objects() {
    let err = refused("apiVersion: v1\nkind: List\nitems: {kind: Pod}\n");
    assert_names(&err, "List <unnamed>", "items");
    let err = refused("apiVersion: v1\nkind: PodList\nitems: [3]\n");
    assert_names(&err, "List <unnamed>", "items[0]");
}

#[test]
fn a_nan_quantity_names_the_object_and_field() {
    let err = refused(&pod(
        "  containers: [{name: c, resources: {requests: {cpu: .nan}}}]\n",
    ));
    assert_names(
        &err,
        "Pod default/web",
        "spec.containers[0].resources.requests.cpu",
    );
}

#[test]
fn annotations_past_256_kib_are_refused() {
    let big = "x".repeat(256 * 1024);
    let err = refused(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  annotations: {{a: {big}}}\nspec:\n{CONTAINER}"
    ));
    assert_names(&err, "Pod default/web", "metadata.annotations");
}

#[test]
fn deep_nesting_is_refused_by_the_parser() {
    let depth = 100_000;
    let yaml = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let err = load_str("deep.yaml", &yaml).unwrap_err().to_string();
    assert!(err.starts_with("deep.yaml: document 1: "), "{err}");
    let json = load_str("deep.json", &yaml).unwrap_err().to_string();
    assert!(json.starts_with("deep.json: document 1: "), "{json}");
    // Block style nests too.
    let block: String = (0..1000)
        .map(|i| format!("{}a:\n", " ".repeat(i)))
        .collect();
    let err = load_str("block.yaml", &block).unwrap_err().to_string();
    assert!(
        err.starts_with("block.yaml: document 1: nested deeper than 128 levels"),
        "{err}"
    );
    // At the limit it still reads (depth counts the document's own mapping).
    let ok = format!(
        "kind: Foo\nx: {}{}\n",
        "[".repeat(MAX_DEPTH - 2),
        "]".repeat(MAX_DEPTH - 2)
    );
    load_str("ok.yaml", &ok).unwrap();
}

const CLASS: &str =
    "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: default}\n";

fn class_with(status: &str) -> Manifests {
    load(&format!("{CLASS}status:\n{status}"))
}

#[test]
fn a_ready_false_condition_makes_the_class_not_ready() {
    let m = class_with(
        "  subnets: [{id: s-1, zone: us-east-1a}]\n  conditions:\n  - {type: Ready, status: \"False\", reason: SecurityGroupsNotFound, message: no security groups}\n",
    );
    let why = m.nodeclasses[0].status.not_ready.as_deref().unwrap_or("");
    assert!(
        why.contains("Ready=False") && why.contains("SecurityGroupsNotFound"),
        "{why}"
    );
    let m = class_with(
        "  subnets: [{id: s-1, zone: us-east-1a}]\n  conditions: [{type: Ready, status: \"True\"}]\n",
    );
    assert_eq!(m.nodeclasses[0].status.not_ready, None);
}

#[test]
fn empty_lists_make_the_class_not_ready_absent_ones_are_assumed() {
    for field in ["subnets", "securityGroups", "amis"] {
        let status = if field == "subnets" {
            "  subnets: []\n".to_string()
        } else {
            format!("  subnets: [{{id: s-1, zone: us-east-1a}}]\n  {field}: []\n")
        };
        let m = class_with(&status);
        let why = m.nodeclasses[0].status.not_ready.as_deref().unwrap_or("");
        assert!(
            why.contains(&format!("status.{field} is empty")),
            "{field}: {why}"
        );
    }
    // Subnets only, as the bundled manifests: ready, with the assumptions noted.
    let m = class_with("  subnets: [{id: s-1, zone: us-east-1a}]\n");
    assert_eq!(m.nodeclasses[0].status.not_ready, None);
    assert!(
        m.notes
            .iter()
            .any(|n| n.starts_with("EC2NodeClass default: ")
                && n.contains("status.amis is absent")
                && n.contains("status.securityGroups is absent")
                && !n.contains("status.subnets")),
        "{:?}",
        m.notes
    );
    let m = load(CLASS);
    assert_eq!(m.nodeclasses[0].status.not_ready, None);
    assert!(
        m.notes.iter().any(|n| n.contains("has no status")),
        "{:?}",
        m.notes
    );
}

#[test]
fn the_readme_shows_the_rules_table() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    let table = dovetail_ingest::validation_rules_table();
    assert!(
        readme.contains(&table),
        "README.md's rules table is out of date; paste this under `### What is refused, what is accepted with a note`:\n{table}"
    );
}
