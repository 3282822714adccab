//! The trace format: writing and reading back every event kind, the header, bad lines (named by
//! line number, or counted with skip-bad) and time order.

use dovetail_dataflow::model::{Price, WhenUnsatisfiable};
use dovetail_ingest::load_str;
use dovetail_ingest::trace::{
    read_trace, AppliedObject, CapacityChange, CapacityType, InterruptKind, InterruptTarget,
    Interruption, ObjectKind, ObjectRef, PodRef, PriceChange, RawEvent, TraceError, TraceEvent,
    TraceHeader, TraceReader, TraceWriter,
};
use serde_json::{json, Value};

const HEADER: &str = r#"{"dovetail_trace":1,"source":"test","time_unit":"ms"}"#;

fn web_pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9f", "controller": true}]
        },
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}],
            "nodeSelector": {"kubernetes.io/arch": "arm64"},
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a", "us-east-1b"]}]}
                ]}},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}
                ]}
            },
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}],
            "topologySpreadConstraints": [{
                "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}
            }]
        }
    })
}

fn nodepool() -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]
        }}}
    })
}

fn nodeclass() -> Value {
    json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}]},
        "status": {"subnets": [{"id": "subnet-1", "zone": "us-east-1a"}]}
    })
}

fn write(events: &[(u64, RawEvent)]) -> String {
    let mut header = TraceHeader::new("round trip");
    header
        .extra
        .insert("note".to_string(), json!({"written_by": "test"}));
    let mut w = TraceWriter::new(Vec::new(), &header).unwrap();
    for (t, e) in events {
        w.write(*t, e).unwrap();
    }
    assert_eq!(w.events_written(), events.len() as u64);
    String::from_utf8(w.finish().unwrap()).unwrap()
}

fn read(text: &str) -> Result<dovetail_ingest::trace::Trace, TraceError> {
    read_trace("test.jsonl", text.as_bytes(), false)
}

fn line_error(text: &str) -> TraceError {
    match read(text) {
        Ok(t) => panic!("expected an error, read {} events", t.events.len()),
        Err(e) => e,
    }
}

#[test]
fn every_event_kind_round_trips() {
    let price = PriceChange {
        instance_type: "m5.large".to_string(),
        zone: Some("us-east-1a".to_string()),
        capacity_type: CapacityType::Spot,
        price_per_hour: 0.0312,
    };
    let capacity = CapacityChange {
        instance_type: "p4d.24xlarge".to_string(),
        zone: Some("us-east-1b".to_string()),
        capacity_type: CapacityType::OnDemand,
        instances: 0,
    };
    let by_node = Interruption {
        target: InterruptTarget::Node("general-abc".to_string()),
        kind: InterruptKind::Spot,
    };
    let by_type = Interruption {
        target: InterruptTarget::Offering {
            instance_type: "m5.large".to_string(),
            zone: None,
            capacity_type: Some(CapacityType::Spot),
        },
        kind: InterruptKind::ScheduledChange,
    };
    let overlay = json!({
        "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "fuse"},
        "spec": {"requirements": [], "capacity": {"smarter-devices/fuse": "1"}}
    });
    let daemonset = json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "kube-system"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}}]}}}
    });
    let pdb = json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}
    });
    let events = vec![
        (
            0,
            RawEvent::Apply {
                object: nodeclass(),
            },
        ),
        (0, RawEvent::Apply { object: nodepool() }),
        (0, RawEvent::Apply { object: overlay }),
        (0, RawEvent::Apply { object: daemonset }),
        (0, RawEvent::Apply { object: pdb }),
        (
            10,
            RawEvent::PodCreated {
                pod: web_pod("web-1"),
            },
        ),
        (10, RawEvent::Price(price.clone())),
        (20, RawEvent::Capacity(capacity.clone())),
        (30, RawEvent::Interrupt(by_node.clone())),
        (30, RawEvent::Interrupt(by_type.clone())),
        (
            40,
            RawEvent::PodDeleted(PodRef {
                namespace: "shop".to_string(),
                name: "web-1".to_string(),
            }),
        ),
        (
            50,
            RawEvent::Delete(ObjectRef {
                kind: ObjectKind::NodePool,
                namespace: None,
                name: "general".to_string(),
            }),
        ),
    ];
    let text = write(&events);
    assert!(
        text.lines()
            .nth(1)
            .unwrap()
            .starts_with(r#"{"t":0,"event":"apply","#),
        "{text}"
    );
    let trace = read(&text).unwrap();
    assert_eq!(trace.header.source, "round trip");
    assert_eq!(trace.header.extra["note"], json!({"written_by": "test"}));
    assert_eq!(trace.events.len(), events.len());
    for (i, e) in trace.events.iter().enumerate() {
        assert_eq!(e.line, i as u64 + 2);
        assert_eq!(e.t, events[i].0);
        assert_eq!(e.event.name(), events[i].1.name());
    }

    // Embedded objects mean what the same manifests mean to the manifest loader.
    let direct = load_str(
        "direct.json",
        &serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List",
            "items": [web_pod("web-1"), nodepool(), nodeclass()]}))
        .unwrap(),
    )
    .unwrap();
    let TraceEvent::PodCreated(pod) = &trace.events[5].event else {
        panic!("{:?}", trace.events[5]);
    };
    assert_eq!(**pod, direct.pods[0]);
    assert_eq!(pod.key(), "shop/web-1");
    assert_eq!(pod.owner, Some(("ReplicaSet".into(), "web-5d9f".into())));
    assert_eq!(pod.scheduling.requests.cpu, 250);
    assert_eq!(pod.scheduling.required_node_affinity.len(), 1);
    assert_eq!(pod.scheduling.pod_anti_affinity.len(), 1);
    assert_eq!(pod.scheduling.tolerations.len(), 1);
    assert_eq!(
        pod.scheduling.topology_spread[0].when_unsatisfiable,
        WhenUnsatisfiable::DoNotSchedule
    );
    match &trace.events[1].event {
        TraceEvent::Apply(a) => {
            assert_eq!(**a, AppliedObject::NodePool(direct.nodepools[0].clone()))
        }
        other => panic!("{other:?}"),
    }
    match &trace.events[0].event {
        TraceEvent::Apply(a) => {
            assert_eq!(
                **a,
                AppliedObject::EC2NodeClass(direct.nodeclasses[0].clone())
            )
        }
        other => panic!("{other:?}"),
    }
    let kinds: Vec<ObjectKind> = trace.events[..5]
        .iter()
        .map(|e| match &e.event {
            TraceEvent::Apply(a) => a.kind(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            ObjectKind::EC2NodeClass,
            ObjectKind::NodePool,
            ObjectKind::NodeOverlay,
            ObjectKind::DaemonSet,
            ObjectKind::PodDisruptionBudget
        ]
    );
    match &trace.events[3].event {
        TraceEvent::Apply(a) => assert_eq!(
            a.object_ref(),
            ObjectRef {
                kind: ObjectKind::DaemonSet,
                namespace: Some("kube-system".into()),
                name: "agent".into()
            }
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(trace.events[6].event, TraceEvent::Price(price.clone()));
    assert_eq!(price.price(), Price(31_200));
    assert_eq!(trace.events[7].event, TraceEvent::Capacity(capacity));
    assert_eq!(trace.events[8].event, TraceEvent::Interrupt(by_node));
    assert_eq!(trace.events[9].event, TraceEvent::Interrupt(by_type));
    assert_eq!(
        trace.events[10].event,
        TraceEvent::PodDeleted(PodRef {
            namespace: "shop".into(),
            name: "web-1".into()
        })
    );

    // Writing what was read gives the same text.
    assert_eq!(write(&events), text);
}

#[test]
fn hand_written_lines_with_defaults() {
    let text = format!(
        "{HEADER}\n\
         {{\"t\":0,\"event\":\"pod_deleted\",\"name\":\"a\"}}\n\
         {{\"t\":1,\"event\":\"delete\",\"kind\":\"PodDisruptionBudget\",\"name\":\"p\"}}\n\
         {{\"t\":2,\"event\":\"price\",\"instance_type\":\"m5.large\",\"capacity_type\":\"on-demand\",\"price_per_hour\":1}}\n\
         {{\"t\":3,\"event\":\"interrupt\",\"instance_type\":\"m5.large\",\"zone\":\"us-east-1a\",\"kind\":\"terminate\"}}\n"
    );
    let trace = read(&text).unwrap();
    assert_eq!(
        trace.events[0].event,
        TraceEvent::PodDeleted(PodRef {
            namespace: "default".into(),
            name: "a".into()
        })
    );
    assert_eq!(
        trace.events[1].event,
        TraceEvent::Delete(ObjectRef {
            kind: ObjectKind::PodDisruptionBudget,
            namespace: Some("default".into()),
            name: "p".into()
        })
    );
    let TraceEvent::Price(p) = &trace.events[2].event else {
        panic!()
    };
    assert_eq!(p.zone, None);
    assert_eq!(p.price(), Price(1_000_000));
}

#[test]
fn header_versions_and_units_are_checked() {
    let cases = [
        (
            r#"{"dovetail_trace":2,"source":"x","time_unit":"ms"}"#,
            "trace format version 2 is not supported (this dovetail reads version 1)",
        ),
        (
            r#"{"dovetail_trace":1,"time_unit":"s"}"#,
            "time_unit \"s\" is not supported",
        ),
        (
            r#"{"t":0,"event":"pod_deleted","name":"a"}"#,
            "no dovetail_trace field",
        ),
        ("", "the trace is empty"),
        ("\n", "found an empty line"),
        ("not json", "invalid JSON"),
        (r#"{"dovetail_trace":"1"}"#, "a whole number"),
    ];
    for (header, expected) in cases {
        let text = if header.is_empty() {
            String::new()
        } else {
            format!("{header}\n")
        };
        let err = TraceReader::new("h.jsonl", text.as_bytes())
            .err()
            .unwrap_or_else(|| panic!("{header:?} was accepted"));
        assert!(matches!(err, TraceError::Header { line: 1, .. }), "{err:?}");
        let msg = err.to_string();
        assert!(
            msg.starts_with("h.jsonl: line 1: ") && msg.contains(expected),
            "{header:?}: {msg}"
        );
    }
    // time_unit may be left out; unknown header fields are kept.
    let r = TraceReader::new("h", &b"{\"dovetail_trace\":1,\"generator\":\"me\"}\n"[..]).unwrap();
    assert_eq!(r.header().time_unit, "ms");
    assert_eq!(r.header().extra["generator"], "me");
}

/// The event line for each bad case, and a part of the message it must give.
const BAD_LINES: &[(&str, &str)] = &[
    ("{not json", "not a JSON object"),
    ("[1,2]", "not a JSON object"),
    (r#"{"event":"pod_deleted","name":"a"}"#, "missing field t"),
    (
        r#"{"t":-5,"event":"pod_deleted","name":"a"}"#,
        "t must be a whole number of milliseconds ≥ 0, found -5",
    ),
    (r#"{"t":1.5,"event":"pod_deleted","name":"a"}"#, "found 1.5"),
    (r#"{"t":1,"name":"a"}"#, "missing field event"),
    (
        r#"{"t":1,"event":"pod_evicted","name":"a"}"#,
        "unknown event \"pod_evicted\"",
    ),
    (
        r#"{"t":1,"event":"pod_deleted","namespce":"x","name":"a"}"#,
        "pod_deleted: unknown field `namespce`",
    ),
    (
        r#"{"t":1,"event":"pod_deleted","namespace":"x"}"#,
        "pod_deleted: missing field `name`",
    ),
    (
        r#"{"t":1,"event":"price","instance_type":"m5.large","capacity_type":"spot","price_per_hour":-1}"#,
        "price_per_hour -1 is not a price",
    ),
    (
        r#"{"t":1,"event":"price","instance_type":"m5.large","capacity_type":"cheap","price_per_hour":1}"#,
        "unknown variant `cheap`",
    ),
    (
        r#"{"t":1,"event":"capacity","instance_type":"m5.large","capacity_type":"spot","instances":-1}"#,
        "capacity: invalid value",
    ),
    (
        r#"{"t":1,"event":"interrupt","kind":"spot"}"#,
        "give node or instance_type",
    ),
    (
        r#"{"t":1,"event":"interrupt","node":"n","zone":"us-east-1a","kind":"spot"}"#,
        "zone and capacity_type go with instance_type",
    ),
    (
        r#"{"t":1,"event":"interrupt","node":"n","kind":"meteor"}"#,
        "unknown variant `meteor`",
    ),
    (
        r#"{"t":1,"event":"delete","kind":"NodePool","namespace":"x","name":"a"}"#,
        "NodePool is cluster-scoped",
    ),
    (
        r#"{"t":1,"event":"delete","kind":"Pod","name":"a"}"#,
        "unknown variant `Pod`",
    ),
    (
        r#"{"t":1,"event":"pod_created","pod":"web"}"#,
        "pod must be a Pod manifest",
    ),
    (
        r#"{"t":1,"event":"pod_created","pod":{"kind":"Deployment","metadata":{"name":"a"}}}"#,
        "pod is a Deployment, not a Pod",
    ),
    (
        r#"{"t":1,"event":"pod_created","pod":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"lots"}}}]}}}"#,
        "Pod default/a: spec.containers[0].resources.requests.cpu: quantity \"lots\"",
    ),
    (
        r#"{"t":1,"event":"pod_created","pod":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c"}]},"status":{"phase":"Succeeded"}}}"#,
        "the pod was not read: Pod default/a: skipped (phase Succeeded)",
    ),
    (
        r#"{"t":1,"event":"apply","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}}"#,
        "Pod cannot be applied in a trace (pods are pod_created events)",
    ),
    (
        r#"{"t":1,"event":"apply","object":{"apiVersion":"karpenter.sh/v1beta1","kind":"NodePool","metadata":{"name":"a"}}}"#,
        "NodePool a: apiVersion: karpenter.sh/v1beta1 is not supported",
    ),
];

#[test]
fn a_bad_line_is_an_error_naming_its_line() {
    for (line, expected) in BAD_LINES {
        // The bad line is line 4: header, a good event, a blank line, then it.
        let text = format!("{HEADER}\n{{\"t\":0,\"event\":\"pod_deleted\",\"name\":\"ok\"}}\n\n{line}\n{{\"t\":9,\"event\":\"pod_deleted\",\"name\":\"after\"}}\n");
        let mut reader = TraceReader::new("bad.jsonl", text.as_bytes()).unwrap();
        assert!(reader.next().unwrap().is_ok());
        let err = reader.next().unwrap().unwrap_err();
        assert_eq!(err.line(), 4, "{line}: {err}");
        assert!(matches!(err, TraceError::Line { .. }));
        let msg = err.to_string();
        assert!(
            msg.starts_with("bad.jsonl: line 4: ") && msg.contains(expected),
            "{line}\n  gave {msg}\n  expected it to contain {expected}"
        );
        // Reading stops at the first bad line.
        assert!(reader.next().is_none());
    }
}

#[test]
fn skip_bad_counts_bad_lines_and_goes_on() {
    let mut text = format!("{HEADER}\n");
    for (i, (line, _)) in BAD_LINES.iter().enumerate() {
        text.push_str(&format!(
            "{{\"t\":{i},\"event\":\"pod_deleted\",\"name\":\"p{i}\"}}\n{line}\n"
        ));
    }
    let mut reader = TraceReader::new("skip.jsonl", text.as_bytes())
        .unwrap()
        .skip_bad(true);
    let events: Vec<_> = reader.by_ref().collect::<Result<_, _>>().unwrap();
    assert_eq!(events.len(), BAD_LINES.len());
    assert_eq!(reader.skipped(), BAD_LINES.len() as u64);
    let lines: Vec<u64> = reader.bad_lines().iter().map(TraceError::line).collect();
    let expected: Vec<u64> = (0..BAD_LINES.len() as u64)
        .take(20)
        .map(|i| 3 + 2 * i)
        .collect();
    assert_eq!(lines, expected);
    assert_eq!(reader.lines_read(), 1 + 2 * BAD_LINES.len() as u64);

    let trace = read_trace("skip.jsonl", text.as_bytes(), true).unwrap();
    assert_eq!(trace.events.len(), BAD_LINES.len());
    assert_eq!(trace.skipped, BAD_LINES.len() as u64);
}

#[test]
fn times_past_the_horizon_are_refused_at_their_line() {
    use dovetail_ingest::trace::MAX_TRACE_MS;
    let ev = |t: u64| format!("{{\"t\":{t},\"event\":\"pod_deleted\",\"name\":\"a\"}}\n");
    // At the horizon is fine; one past it, 10^15 (31,700 years) and u64::MAX are not.
    let ok = format!("{HEADER}\n{}", ev(MAX_TRACE_MS));
    assert_eq!(
        read_trace("t", ok.as_bytes(), false).unwrap().events.len(),
        1
    );
    for far in [MAX_TRACE_MS + 1, 1_000_000_000_000_000, u64::MAX] {
        let text = format!("{HEADER}\n{}{}", ev(0), ev(far));
        let err = line_error(&text);
        assert_eq!(err.line(), 3, "{err}");
        assert!(err.to_string().contains("past the trace horizon"), "{err}");
    }
    let mut w = TraceWriter::new(Vec::new(), &TraceHeader::new("w")).unwrap();
    let e = RawEvent::PodDeleted(PodRef {
        namespace: "default".into(),
        name: "a".into(),
    });
    let err = w.write(MAX_TRACE_MS + 1, &e).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn time_must_not_decrease() {
    let ev = |t: u64, name: &str| {
        format!("{{\"t\":{t},\"event\":\"pod_deleted\",\"name\":\"{name}\"}}\n")
    };
    let text = format!(
        "{HEADER}\n{}{}{}{}{}",
        ev(5, "a"),
        ev(5, "b"),
        ev(3, "c"),
        ev(4, "d"),
        ev(7, "e")
    );
    let err = line_error(&text);
    assert_eq!(err.line(), 4);
    assert!(
        err.to_string()
            .contains("t=3 is earlier than the previous event's t=5"),
        "{err}"
    );
    // Skipped lines do not move the clock: d (t=4) is still earlier than b (t=5).
    let trace = read_trace("t", text.as_bytes(), true).unwrap();
    let ts: Vec<u64> = trace.events.iter().map(|e| e.t).collect();
    assert_eq!(ts, vec![5, 5, 7]);
    assert_eq!(trace.skipped, 2);

    // The writer refuses to go back in time.
    let mut w = TraceWriter::new(Vec::new(), &TraceHeader::new("w")).unwrap();
    let e = RawEvent::PodDeleted(PodRef {
        namespace: "default".into(),
        name: "a".into(),
    });
    w.write(10, &e).unwrap();
    let err = w.write(9, &e).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(w.events_written(), 1);
}

#[test]
fn priority_classes_applied_earlier_give_pods_their_priority() {
    let mut pod = web_pod("a");
    pod["spec"]["priorityClassName"] = json!("high");
    let mut pod_b = pod.clone();
    pod_b["metadata"]["name"] = json!("b");
    let class = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "high"}, "value": 1000});
    let text = write(&[
        (0, RawEvent::PodCreated { pod }),
        (1, RawEvent::Apply { object: class }),
        (2, RawEvent::PodCreated { pod: pod_b }),
    ]);
    let trace = read(&text).unwrap();
    let priority = |i: usize| match &trace.events[i].event {
        TraceEvent::PodCreated(p) => p.scheduling.priority,
        other => panic!("{other:?}"),
    };
    assert_eq!(priority(0), 0);
    assert_eq!(priority(2), 1000);
    assert_eq!(
        trace.events[1].event,
        TraceEvent::Apply(Box::new(AppliedObject::PriorityClass {
            name: "high".into(),
            value: 1000,
            global_default: false
        }))
    );
    assert_eq!(trace.notes.len(), 1, "{:?}", trace.notes);
    assert!(
        trace.notes[0].starts_with("line 2: Pod shop/a: PriorityClass high is not in the input"),
        "{:?}",
        trace.notes
    );
}

#[test]
fn crlf_line_endings_and_blank_lines_are_accepted() {
    let text = format!(
        "{HEADER}\r\n\r\n{{\"t\":0,\"event\":\"pod_deleted\",\"name\":\"a\"}}\r\n   \n{{\"t\":1,\"event\":\"pod_deleted\",\"name\":\"b\"}}"
    );
    let trace = read(&text).unwrap();
    let lines: Vec<u64> = trace.events.iter().map(|e| e.line).collect();
    assert_eq!(lines, vec![3, 5]);
}

#[test]
fn invalid_utf8_is_a_bad_line() {
    let mut bytes = format!("{HEADER}\n").into_bytes();
    bytes.extend_from_slice(b"{\"t\":0,\"event\":\"pod_deleted\",\"name\":\"\xff\"}\n");
    bytes.extend_from_slice(b"{\"t\":0,\"event\":\"pod_deleted\",\"name\":\"ok\"}\n");
    let err = read_trace("u", &bytes[..], false).unwrap_err();
    assert_eq!(err.line(), 2);
    assert!(err.to_string().contains("not UTF-8"), "{err}");
    let trace = read_trace("u", &bytes[..], true).unwrap();
    assert_eq!(trace.events.len(), 1);
    assert_eq!(trace.skipped, 1);
}
