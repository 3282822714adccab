//! Interruption messages as Karpenter's SQS queue delivers them: the real EventBridge examples in
//! `data/events/`, each routed as Karpenter's parsers route it, and broken ones refused with the
//! message and the field named.

use dovetail_dataflow::facts::{Interruption, InterruptionKind};
use dovetail_ingest::{load_messages, load_str, parse_message, MessageError, Reading};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn events() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/events")
}

fn sample(name: &str) -> String {
    std::fs::read_to_string(events().join(name)).expect("sample message")
}

/// A sample with one field replaced (`path` is a chain of object keys).
fn patched(name: &str, path: &[&str], value: Value) -> String {
    let mut v: Value = serde_json::from_str(&sample(name)).expect("sample is JSON");
    let mut at = &mut v;
    for key in &path[..path.len() - 1] {
        at = at.get_mut(*key).expect("path exists");
    }
    at[path[path.len() - 1]] = value;
    v.to_string()
}

fn read(body: &str) -> Reading {
    parse_message("test", 1, body).expect("message reads")
}

fn one(target: &str, kind: InterruptionKind, time: &str) -> Reading {
    Reading::Interruptions(vec![Interruption {
        target: target.to_string(),
        kind,
        at_ms: dovetail_ingest::parse_rfc3339_ms(time).expect("time"),
    }])
}

#[test]
fn each_sample_is_routed_as_karpenter_routes_it() {
    assert_eq!(
        read(&sample("spot_interruption_warning.json")),
        one(
            "i-0123456789",
            InterruptionKind::SpotInterruption,
            "2022-08-11T14:00:00Z"
        )
    );
    assert_eq!(
        read(&sample("rebalance_recommendation.json")),
        one(
            "i-0b662ef9931388ba0",
            InterruptionKind::RebalanceRecommendation,
            "2020-10-26T14:14:14Z"
        )
    );
    assert_eq!(
        read(&sample("capacity_reservation_interruption_warning.json")),
        one(
            "i-1234567890abcdef0",
            InterruptionKind::CapacityReservationInterruption,
            "2026-01-01T00:00:00Z"
        )
    );
    assert_eq!(
        read(&sample("scheduled_change_aws_health.json")),
        one(
            "i-12345678",
            InterruptionKind::ScheduledChange,
            "2016-06-05T06:27:57Z"
        )
    );
}

#[test]
fn state_changes_count_only_when_the_instance_goes_away() {
    // The sample's state is `pending`: Karpenter ignores it.
    let Reading::Ignored(why) = read(&sample("instance_state_change.json")) else {
        panic!("a pending instance is not an interruption");
    };
    assert!(why.contains("pending"), "{why}");
    for state in [
        "stopping",
        "stopped",
        "shutting-down",
        "terminated",
        "Terminated",
    ] {
        let body = patched(
            "instance_state_change.json",
            &["detail", "state"],
            state.into(),
        );
        assert_eq!(
            read(&body),
            one(
                "i-abcd1111",
                InterruptionKind::StateChange,
                "2015-11-11T21:29:54Z"
            ),
            "{state}"
        );
    }
    let running = patched(
        "instance_state_change.json",
        &["detail", "state"],
        "running".into(),
    );
    assert!(matches!(read(&running), Reading::Ignored(_)));
}

#[test]
fn health_events_count_only_for_ec2_scheduled_changes() {
    let rds = patched(
        "scheduled_change_aws_health.json",
        &["detail", "service"],
        "RDS".into(),
    );
    let Reading::Ignored(why) = read(&rds) else {
        panic!("an RDS health event is not an interruption");
    };
    assert!(why.contains("RDS"), "{why}");
    let issue = patched(
        "scheduled_change_aws_health.json",
        &["detail", "eventTypeCategory"],
        "issue".into(),
    );
    assert!(matches!(read(&issue), Reading::Ignored(_)));
    // Every affected instance is interrupted.
    let two = patched(
        "scheduled_change_aws_health.json",
        &["detail", "affectedEntities"],
        serde_json::json!([{"entityValue": "i-1"}, {"entityValue": "i-2"}]),
    );
    let Reading::Interruptions(got) = read(&two) else {
        panic!("two instances interrupted");
    };
    let targets: Vec<&str> = got.iter().map(|i| i.target.as_str()).collect();
    assert_eq!(targets, ["i-1", "i-2"]);
}

#[test]
fn unknown_events_are_ignored_not_errors() {
    let other = patched(
        "spot_interruption_warning.json",
        &["detail-type"],
        "EC2 Fleet Error".into(),
    );
    let Reading::Ignored(why) = read(&other) else {
        panic!("no parser for a fleet error");
    };
    assert!(why.contains("EC2 Fleet Error"), "{why}");
    let v1 = patched("spot_interruption_warning.json", &["version"], "1".into());
    assert!(matches!(read(&v1), Reading::Ignored(_)));
}

/// The error's text, which must name the message and the field.
fn error(body: &str) -> String {
    match parse_message("queue/interruptions", 7, body) {
        Err(e) => e.to_string(),
        Ok(r) => panic!("expected an error, read {r:?}"),
    }
}

#[test]
fn broken_messages_name_the_message_and_the_field() {
    let e = error("{\"version\": \"0\", \"source\": ");
    assert!(
        e.starts_with("queue/interruptions: message 7: not JSON"),
        "{e}"
    );

    let no_id = patched(
        "spot_interruption_warning.json",
        &["detail", "instance-id"],
        Value::Null,
    );
    let e = error(&no_id);
    assert!(
        e.contains("message 7 (id 1e5527d7-bb36-4607-3370-4164db56a40e)")
            && e.contains("detail.instance-id: required field is missing"),
        "{e}"
    );

    let empty_id = patched(
        "capacity_reservation_interruption_warning.json",
        &["detail", "instance-id"],
        "".into(),
    );
    assert!(
        error(&empty_id).contains("detail.instance-id: must not be empty"),
        "{}",
        error(&empty_id)
    );

    let bad_time = patched("spot_interruption_warning.json", &["time"], "soon".into());
    assert!(
        error(&bad_time).contains("time: \"soon\" is not an RFC 3339 time"),
        "{}",
        error(&bad_time)
    );

    let entities = patched(
        "scheduled_change_aws_health.json",
        &["detail", "affectedEntities"],
        serde_json::json!({"entityValue": "i-1"}),
    );
    assert!(
        error(&entities).contains("detail.affectedEntities: expected a list"),
        "{}",
        error(&entities)
    );

    let not_event = error("{\"hello\": \"world\"}");
    assert!(
        not_event.contains("version: required field is missing"),
        "{not_event}"
    );
}

#[test]
fn files_hold_several_messages_and_folders_are_walked() {
    let dir = std::env::temp_dir().join(format!("dovetail-messages-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // Two bodies on two lines, then an array of two: four messages in one file.
    let spot = patched(
        "spot_interruption_warning.json",
        &["detail", "instance-id"],
        "i-a".into(),
    );
    let pending = serde_json::from_str::<Value>(&sample("instance_state_change.json"))
        .expect("JSON")
        .to_string();
    let array = format!("[{}, {}]", sample("rebalance_recommendation.json"), spot);
    std::fs::write(
        dir.join("queue.jsonl"),
        format!("{spot}\n{pending}\n{array}\n"),
    )
    .expect("write");
    std::fs::write(dir.join("notes.txt"), "not a message").expect("write");

    let loaded = load_messages(std::slice::from_ref(&dir)).expect("folder loads");
    let kinds: Vec<(&str, InterruptionKind)> = loaded
        .interruptions
        .iter()
        .map(|i| (i.target.as_str(), i.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("i-a", InterruptionKind::SpotInterruption),
            (
                "i-0b662ef9931388ba0",
                InterruptionKind::RebalanceRecommendation
            ),
            ("i-a", InterruptionKind::SpotInterruption),
        ]
    );
    assert_eq!(loaded.notes.len(), 1, "{:?}", loaded.notes);
    assert!(
        loaded.notes[0].contains("queue.jsonl: message 2: ignored"),
        "{:?}",
        loaded.notes
    );

    // The fourth message broken: the load stops there, naming file and position.
    let broken = patched(
        "spot_interruption_warning.json",
        &["detail"],
        Value::String("gone".into()),
    );
    std::fs::write(
        dir.join("queue.jsonl"),
        format!("{spot}\n{pending}\n[{spot}, {broken}]\n"),
    )
    .expect("write");
    let e = load_messages(std::slice::from_ref(&dir)).expect_err("broken message");
    assert!(matches!(e, MessageError::Field { position: 4, .. }), "{e}");
    assert!(
        e.to_string().contains("queue.jsonl: message 4")
            && e.to_string().contains("detail: expected an object"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

const CAPACITY_BLOCK: &str = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: gpu}
status:
  capacityReservations:
    - id: cr-block
      reservationType: capacity-block
      endTime: "2026-12-01T12:00:00Z"
    - id: cr-default
      reservationType: default
---
apiVersion: v1
kind: Node
metadata:
  name: in-block
  labels: {karpenter.k8s.aws/capacity-reservation-id: cr-block}
---
apiVersion: v1
kind: Node
metadata:
  name: in-reservation
  labels: {karpenter.k8s.aws/capacity-reservation-id: cr-default}
---
apiVersion: v1
kind: Node
metadata: {name: on-demand}
"#;

#[test]
fn capacity_block_nodes_are_interrupted_at_the_block_end() {
    let m = load_str("blocks.yaml", CAPACITY_BLOCK).expect("loads");
    assert_eq!(
        m.interruptions,
        [Interruption {
            target: "in-block".to_string(),
            kind: InterruptionKind::CapacityBlockEnding,
            at_ms: dovetail_ingest::parse_rfc3339_ms("2026-12-01T12:00:00Z").expect("time"),
        }]
    );

    let no_end = CAPACITY_BLOCK.replace("      endTime: \"2026-12-01T12:00:00Z\"\n", "");
    let e = load_str("blocks.yaml", &no_end).expect_err("a block without its end");
    assert!(
        e.to_string().contains(
            "EC2NodeClass gpu: status.capacityReservations[0].endTime: required field is missing"
        ),
        "{e}"
    );
}

#[test]
fn capacity_reservations_in_a_node_class_status_are_read_for_reserved_offerings() {
    let with_types = CAPACITY_BLOCK
        .replace(
            "    - id: cr-block\n",
            "    - id: cr-block\n      instanceType: p5.48xlarge\n      availabilityZone: us-east-1a\n",
        )
        .replace(
            "    - id: cr-default\n",
            "    - id: cr-default\n      instanceType: m5.large\n      availabilityZone: us-east-1b\n",
        );
    let m = load_str("blocks.yaml", &with_types).expect("loads");
    let r = &m.nodeclasses[0].status.capacity_reservations;
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(
        (
            r[0].id.as_str(),
            r[0].instance_type.as_str(),
            r[0].zone.as_str()
        ),
        ("cr-block", "p5.48xlarge", "us-east-1a")
    );
    assert_eq!(r[0].reservation_type, "capacity-block");
    assert_eq!(
        r[0].end_ms,
        dovetail_ingest::parse_rfc3339_ms("2026-12-01T12:00:00Z")
    );
    assert_eq!(r[1].reservation_type, "default");
    assert_eq!(
        r[1].available, None,
        "a status does not say how many are left"
    );
    // Without type and zone (as in the manifest above) nothing is offered.
    let m = load_str("blocks.yaml", CAPACITY_BLOCK).expect("loads");
    assert!(m.nodeclasses[0].status.capacity_reservations.is_empty());
}
