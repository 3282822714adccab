//! Each kind of reason a trace header, an event line, a converter row or the converter options
//! can be refused for: an input that makes it, and the typed reason it gives (a tool matches on
//! the kind, not on words).

use dovetail_ingest::trace::{
    convert_dlrm, convert_openb, ConvertError, ConvertOptions, HeaderReason, InterruptReason,
    LineReason, OptionsReason, RowReason, TraceError, TraceReader,
};

const HEADER: &str = r#"{"dovetail_trace":1,"source":"test","time_unit":"ms"}"#;

/// Whether a reason is the kind a case expects.
type Is<R> = fn(&R) -> bool;

fn header_reason(text: &[u8]) -> HeaderReason {
    match TraceReader::new("h.jsonl", text) {
        Err(TraceError::Header {
            reason, line: 1, ..
        }) => reason,
        Err(other) => panic!(
            "{:?}: not a header error: {other:?}",
            String::from_utf8_lossy(text)
        ),
        Ok(_) => panic!("{:?} was accepted", String::from_utf8_lossy(text)),
    }
}

#[test]
fn each_header_reason() {
    let cases: &[(&[u8], Is<HeaderReason>)] = &[
        (b"", |r| matches!(r, HeaderReason::EmptyTrace)),
        (b"\xff\xfe\n", |r| matches!(r, HeaderReason::NotUtf8(_))),
        (b"\n", |r| matches!(r, HeaderReason::EmptyLine)),
        (b"not json\n", |r| matches!(r, HeaderReason::InvalidJson(_))),
        (b"[1]\n", |r| matches!(r, HeaderReason::NotAnObject)),
        (b"{\"source\":\"x\"}\n", |r| {
            matches!(r, HeaderReason::NoVersion)
        }),
        (
            b"{\"dovetail_trace\":\"1\"}\n",
            |r| matches!(r, HeaderReason::VersionNotANumber { found } if found == "1"),
        ),
        (b"{\"dovetail_trace\":2}\n", |r| {
            matches!(r, HeaderReason::UnsupportedVersion { version: 2 })
        }),
        (
            b"{\"dovetail_trace\":1,\"time_unit\":\"s\"}\n",
            |r| matches!(r, HeaderReason::UnsupportedTimeUnit { found } if found == "s"),
        ),
        (
            b"{\"dovetail_trace\":1,\"source\":7}\n",
            |r| matches!(r, HeaderReason::SourceNotAString { found } if found == 7),
        ),
    ];
    for (text, expected) in cases {
        let reason = header_reason(text);
        assert!(
            expected(&reason),
            "{:?} gave {reason:?}",
            String::from_utf8_lossy(text)
        );
        assert!(!reason.to_string().is_empty());
    }
}

/// The reason line 3 is refused for, after a good line at t=5.
fn line_reason(line: &[u8]) -> LineReason {
    let mut text =
        format!("{HEADER}\n{{\"t\":5,\"event\":\"pod_deleted\",\"name\":\"ok\"}}\n").into_bytes();
    text.extend_from_slice(line);
    text.push(b'\n');
    let mut reader = match TraceReader::new("r.jsonl", &text[..]) {
        Ok(r) => r,
        Err(e) => panic!("header refused: {e}"),
    };
    assert!(reader.next().is_some_and(|e| e.is_ok()));
    match reader.next() {
        Some(Err(TraceError::Line {
            reason, line: 3, ..
        })) => reason,
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(line)),
    }
}

const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c"}]}}"#;

#[test]
fn each_line_reason() {
    let pod_with = |extra: &str| format!("{}{extra}}}", &POD[..POD.len() - 1]);
    let cases: &[(Vec<u8>, Is<LineReason>)] = &[
        (b"\xff{}".to_vec(), |r| matches!(r, LineReason::NotUtf8(_))),
        (b"{not json".to_vec(), |r| {
            matches!(r, LineReason::InvalidJson(_))
        }),
        (b"[1,2]".to_vec(), |r| matches!(r, LineReason::NotAnObject)),
        (br#"{"event":"pod_deleted","name":"a"}"#.to_vec(), |r| {
            matches!(r, LineReason::MissingTime)
        }),
        (br#"{"t":-5,"event":"pod_deleted","name":"a"}"#.to_vec(), |r| {
            matches!(r, LineReason::TimeNotMilliseconds { found } if found == -5)
        }),
        (
            br#"{"t":999999999999999,"event":"pod_deleted","name":"a"}"#.to_vec(),
            |r| matches!(r, LineReason::PastHorizon { t: 999_999_999_999_999 }),
        ),
        (br#"{"t":3,"event":"pod_deleted","name":"a"}"#.to_vec(), |r| {
            matches!(r, LineReason::TimeDecreased { t: 3, previous: 5 })
        }),
        (br#"{"t":6,"name":"a"}"#.to_vec(), |r| {
            matches!(r, LineReason::MissingEvent)
        }),
        (br#"{"t":6,"event":7}"#.to_vec(), |r| {
            matches!(r, LineReason::EventNotAString { found } if found == 7)
        }),
        (br#"{"t":6,"event":"pod_evicted","name":"a"}"#.to_vec(), |r| {
            matches!(r, LineReason::UnknownEvent { name } if name == "pod_evicted")
        }),
        (br#"{"t":6,"event":"pod_deleted","namespace":"x"}"#.to_vec(), |r| {
            matches!(r, LineReason::Body { event: "pod_deleted", .. })
        }),
        (br#"{"t":6,"event":"pod_created","pod":"web"}"#.to_vec(), |r| {
            matches!(r, LineReason::NotAManifest { event: "pod_created", field: "pod", .. })
        }),
        (br#"{"t":6,"event":"apply","object":[]}"#.to_vec(), |r| {
            matches!(r, LineReason::NotAManifest { event: "apply", field: "object", .. })
        }),
        (
            br#"{"t":6,"event":"pod_created","pod":{"kind":"Deployment"}}"#.to_vec(),
            |r| matches!(r, LineReason::PodOfKind { kind } if kind == "Deployment"),
        ),
        (
            br#"{"t":6,"event":"pod_created","pod":{"metadata":{"name":"a"}}}"#.to_vec(),
            |r| matches!(r, LineReason::PodWithoutKind),
        ),
        (
            br#"{"t":6,"event":"apply","object":{"metadata":{"name":"a"}}}"#.to_vec(),
            |r| matches!(r, LineReason::ObjectWithoutKind),
        ),
        (
            br#"{"t":6,"event":"apply","object":{"kind":"Deployment"}}"#.to_vec(),
            |r| matches!(r, LineReason::NotApplicable { kind } if kind == "Deployment"),
        ),
        (
            format!(
                r#"{{"t":6,"event":"pod_created","pod":{}}}"#,
                POD.replace(r#""name":"c""#, r#""name":"c","resources":{"requests":{"cpu":"lots"}}"#)
            )
            .into_bytes(),
            |r| matches!(r, LineReason::Manifest(_)),
        ),
        (
            format!(
                r#"{{"t":6,"event":"pod_created","pod":{}}}"#,
                pod_with(r#","status":{"phase":"Succeeded"}"#)
            )
            .into_bytes(),
            |r| {
                matches!(r, LineReason::NotRead { event: "pod_created", what: "pod", notes }
                    if !notes.is_empty())
            },
        ),
        (br#"{"t":6,"event":"pod_deleted","name":""}"#.to_vec(), |r| {
            matches!(
                r,
                LineReason::EmptyField {
                    event: "pod_deleted",
                    field: "name"
                }
            )
        }),
        (
            br#"{"t":6,"event":"delete","kind":"NodePool","namespace":"x","name":"a"}"#.to_vec(),
            |r| matches!(r, LineReason::NamespaceOnClusterScoped { .. }),
        ),
        (
            br#"{"t":6,"event":"price","instance_type":"m5.large","capacity_type":"spot","price_per_hour":-1}"#.to_vec(),
            |r| matches!(r, LineReason::NotAPrice { price } if *price == -1.0),
        ),
        (
            br#"{"t":6,"event":"interrupt","node":"n","zone":"z","kind":"spot"}"#.to_vec(),
            |r| matches!(r, LineReason::Interrupt(InterruptReason::OfferingFieldsWithNode)),
        ),
        (br#"{"t":6,"event":"interrupt","node":"","kind":"spot"}"#.to_vec(), |r| {
            matches!(
                r,
                LineReason::Interrupt(InterruptReason::EmptyTarget { field: "node" })
            )
        }),
        (
            br#"{"t":6,"event":"interrupt","node":"n","instance_type":"m5.large","kind":"spot"}"#
                .to_vec(),
            |r| matches!(r, LineReason::Interrupt(InterruptReason::BothTargets)),
        ),
        (br#"{"t":6,"event":"interrupt","kind":"spot"}"#.to_vec(), |r| {
            matches!(r, LineReason::Interrupt(InterruptReason::NoTarget))
        }),
    ];
    for (line, expected) in cases {
        let reason = line_reason(line);
        assert!(
            expected(&reason),
            "{:?} gave {reason:?}",
            String::from_utf8_lossy(line)
        );
        assert!(!reason.to_string().is_empty());
    }
}

const DLRM_HEAD: &str = "time_s,event,pod,role,app,cpu_milli,memory_mib,num_gpu,max_per_node\n";
const OPENB_HEAD: &str = "time_s,event,pod,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n";

/// The reason `csv` is refused for (the first bad row, or the header).
fn row_reason(openb: bool, csv: &[u8]) -> RowReason {
    let opts = ConvertOptions::default();
    let got = if openb {
        convert_openb(csv, &opts, Vec::new())
    } else {
        convert_dlrm(csv, &opts, Vec::new())
    };
    match got {
        Err(ConvertError::Row { reason, .. }) => reason,
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(csv)),
    }
}

#[test]
fn each_row_reason() {
    let dlrm = |rows: &str| format!("{DLRM_HEAD}{rows}\n").into_bytes();
    let openb = |rows: &str| format!("{OPENB_HEAD}{rows}\n").into_bytes();
    let cases: &[(bool, Vec<u8>, Is<RowReason>)] = &[
        (false, Vec::new(), |r| {
            matches!(r, RowReason::EmptyCsv { .. })
        }),
        (false, b"time_s,event,pod\n".to_vec(), |r| {
            matches!(r, RowReason::MissingColumn { column: "role", .. })
        }),
        (
            false,
            [
                DLRM_HEAD.as_bytes(),
                &b"1,create,\xff,CN,app,1,1,0,-1\n"[..],
            ]
            .concat(),
            |r| matches!(r, RowReason::NotUtf8(_)),
        ),
        (false, dlrm("1,create,\"a\",CN,app,1,1,0,-1"), |r| {
            matches!(r, RowReason::Quoted)
        }),
        (false, dlrm("1,create,a"), |r| {
            matches!(
                r,
                RowReason::FieldCount {
                    found: 3,
                    expected: 9
                }
            )
        }),
        (
            false,
            dlrm("1,create,a,CN,app,lots,1,0,-1"),
            |r| matches!(r, RowReason::NotA { column: "cpu_milli", value, .. } if value == "lots"),
        ),
        (false, dlrm("inf,create,a,CN,app,1,1,0,-1"), |r| {
            matches!(
                r,
                RowReason::NotA {
                    column: "time_s",
                    ..
                }
            )
        }),
        (
            false,
            dlrm("5,create,a,CN,app,1,1,0,-1\n3,create,b,CN,app,1,1,0,-1"),
            |r| matches!(r, RowReason::TimeDecreased { time, previous } if *time == 3.0 && *previous == 5.0),
        ),
        (
            false,
            dlrm("1,create,a,CN,app,1,1,0,-1\n2,create,a,CN,app,1,1,0,-1"),
            |r| matches!(r, RowReason::CreatedTwice { pod } if pod == "a"),
        ),
        (
            false,
            dlrm("1,create,A/b,CN,app,1,1,0,-1"),
            |r| matches!(r, RowReason::PodName { pod } if pod == "A/b"),
        ),
        (true, openb("-1,create,a,1,1,0,0,,LS"), |r| {
            matches!(r, RowReason::NegativeTime { .. })
        }),
        (false, dlrm("-1,create,a,CN,app,1,1,0,-1"), |r| {
            matches!(r, RowReason::CreateAtNegativeTime { .. })
        }),
        (false, dlrm("5,present_at_start,a,CN,app,1,1,0,-1"), |r| {
            matches!(r, RowReason::PresentLater { .. })
        }),
        (
            false,
            dlrm("1,evict,a,CN,app,1,1,0,-1"),
            |r| matches!(r, RowReason::UnknownEvent { found, .. } if found == "evict"),
        ),
        (false, dlrm("1,create,a,CN,app 0,1,1,0,-1"), |r| {
            matches!(r, RowReason::LabelValue { column: "app", .. })
        }),
        (
            false,
            dlrm("1,create,a,CN,a..b,1,1,0,-1"),
            |r| matches!(r, RowReason::OwnerName { app, .. } if app == "a..b"),
        ),
        (true, openb("1,create,a,1,1,0,500,,LS"), |r| {
            matches!(r, RowReason::GpuMilliWithoutGpu { gpu_milli: 500 })
        }),
        (true, openb("1,create,a,1,1,2,1500,,LS"), |r| {
            matches!(
                r,
                RowReason::GpuShares {
                    num_gpu: 2,
                    gpu_milli: 1500
                }
            )
        }),
    ];
    for (is_openb, csv, expected) in cases {
        let reason = row_reason(*is_openb, csv);
        assert!(
            expected(&reason),
            "{:?} gave {reason:?}",
            String::from_utf8_lossy(csv)
        );
        assert!(!reason.to_string().is_empty());
    }
}

#[test]
fn each_options_reason() {
    let cases: &[(ConvertOptions, Is<OptionsReason>)] = &[
        (
            ConvertOptions {
                replicate: 0,
                ..ConvertOptions::default()
            },
            |r| matches!(r, OptionsReason::NoReplicas),
        ),
        (
            ConvertOptions {
                time_compress: 0.0,
                ..ConvertOptions::default()
            },
            |r| matches!(r, OptionsReason::TimeCompress(_)),
        ),
        (
            ConvertOptions {
                sample_one_in: 0,
                ..ConvertOptions::default()
            },
            |r| matches!(r, OptionsReason::NoSample),
        ),
        (
            ConvertOptions {
                until_s: Some(f64::NAN),
                ..ConvertOptions::default()
            },
            |r| matches!(r, OptionsReason::UntilNotANumber),
        ),
        (
            ConvertOptions {
                namespace: "Shop".to_string(),
                ..ConvertOptions::default()
            },
            |r| matches!(r, OptionsReason::Namespace(ns) if ns == "Shop"),
        ),
    ];
    for (opts, expected) in cases {
        match convert_dlrm(DLRM_HEAD.as_bytes(), opts, Vec::new()) {
            Err(ConvertError::Options(reason)) => {
                assert!(expected(&reason), "{opts:?} gave {reason:?}")
            }
            other => panic!("{opts:?}: {other:?}"),
        }
    }
}
