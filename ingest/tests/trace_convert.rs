//! The Alibaba trace converters, on small slices of the real CSVs kept in
//! `data/traces/fixtures/` (see `data/README.md` for where they come from).

use dovetail_dataflow::model::{Pod, TolerationOperator, WhenUnsatisfiable};
use dovetail_ingest::trace::{
    convert_dlrm, convert_openb, read_trace, ConvertError, ConvertOptions, ConvertStats, Trace,
    TraceEvent,
};
use std::collections::BTreeMap;

const DLRM: &str = include_str!("../../data/traces/fixtures/dlrm_pod_events.head.csv");
const OPENB: &str = include_str!("../../data/traces/fixtures/openb_pod_events.head.csv");

const MILLI_PER_MIB: i64 = 1024 * 1024 * 1000;

type Converter = fn(&[u8], &ConvertOptions, &mut Vec<u8>) -> Result<ConvertStats, ConvertError>;

fn dlrm(
    csv: &[u8],
    opts: &ConvertOptions,
    out: &mut Vec<u8>,
) -> Result<ConvertStats, ConvertError> {
    convert_dlrm(csv, opts, out)
}

fn openb(
    csv: &[u8],
    opts: &ConvertOptions,
    out: &mut Vec<u8>,
) -> Result<ConvertStats, ConvertError> {
    convert_openb(csv, opts, out)
}

/// Converts and reads back (strictly: every line the converter writes must read).
fn convert(f: Converter, csv: &str, opts: &ConvertOptions) -> (ConvertStats, Trace) {
    let mut out = Vec::new();
    let stats = f(csv.as_bytes(), opts, &mut out).unwrap();
    let trace = read_trace("converted.jsonl", &out[..], false).unwrap();
    assert_eq!(trace.events.len() as u64, stats.events);
    assert!(trace.notes.is_empty(), "{:?}", trace.notes);
    (stats, trace)
}

fn pods(trace: &Trace) -> BTreeMap<String, (u64, Pod)> {
    trace
        .events
        .iter()
        .filter_map(|e| match &e.event {
            TraceEvent::PodCreated(p) => Some((p.name.clone(), (e.t, (**p).clone()))),
            _ => None,
        })
        .collect()
}

fn deletes(trace: &Trace) -> Vec<(u64, String)> {
    trace
        .events
        .iter()
        .filter_map(|e| match &e.event {
            TraceEvent::PodDeleted(r) => Some((e.t, r.name.clone())),
            _ => None,
        })
        .collect()
}

fn opts() -> ConvertOptions {
    ConvertOptions {
        namespace: "dlrm".to_string(),
        ..ConvertOptions::default()
    }
}

#[test]
fn dlrm_slice_converts() {
    let (stats, trace) = convert(dlrm, DLRM, &opts());
    assert_eq!(
        stats,
        ConvertStats {
            rows: 49,
            pods: 37,
            pods_at_start: 23,
            creates: 14,
            deletes: 4,
            events: 41,
            last_t_ms: 1_799_786_000,
            // Deletions of pods present at the start that are not in the slice.
            unmatched_deletes: 8,
            ..ConvertStats::default()
        }
    );
    assert!(trace.header.source.contains("DLRM"));
    assert_eq!(trace.header.extra["conversion"]["converter"], "dlrm");
    assert!(trace.header.extra["terms"]
        .as_str()
        .unwrap()
        .contains("research or study"));

    let pods = pods(&trace);
    // A GPU (HN) pod with max_per_node 8.
    let (t, hn) = &pods["instance-0"];
    assert_eq!(*t, 0);
    assert_eq!(hn.namespace, "dlrm");
    assert_eq!(hn.labels["app"], "app_0");
    assert_eq!(hn.labels["role"], "HN");
    assert_eq!(hn.labels.len(), 2);
    assert_eq!(hn.owner, Some(("ReplicaSet".into(), "app-0-hn".into())));
    let r = &hn.scheduling.requests;
    assert_eq!((r.cpu, r.memory), (12_000, 122_880 * MILLI_PER_MIB));
    assert_eq!(r.extended["nvidia.com/gpu"], 1000);
    let tol = &hn.scheduling.tolerations;
    assert_eq!(tol.len(), 1);
    assert_eq!(tol[0].key, "nvidia.com/gpu");
    assert_eq!(tol[0].operator, TolerationOperator::Exists);
    let spread = &hn.scheduling.topology_spread;
    assert_eq!(spread.len(), 1);
    assert_eq!(spread[0].topology_key, "kubernetes.io/hostname");
    assert_eq!(spread[0].max_skew, 8);
    assert_eq!(
        spread[0].when_unsatisfiable,
        WhenUnsatisfiable::DoNotSchedule
    );
    let selector = &spread[0].selector.requirements;
    for (key, value) in [("app", "app_0"), ("role", "HN")] {
        assert!(selector.get(key).is_some_and(|r| r.has(value)), "{key}");
    }
    assert_eq!(selector.0.len(), 2);

    // A CPU (CN) pod without a per-node maximum: no GPU, toleration or spread.
    let (_, cn) = &pods["instance-100"];
    assert_eq!(cn.scheduling.requests.cpu, 48_000);
    assert!(cn.scheduling.requests.extended.is_empty());
    assert!(cn.scheduling.tolerations.is_empty());
    assert!(cn.scheduling.topology_spread.is_empty());

    // Creates keep the trace's seconds as milliseconds.
    assert_eq!(pods["instance-7280"].0, 475_000);
    // instance_17763 is deleted and created in the same second, the deletion listed first: the
    // converter creates it before deleting it.
    let lines: Vec<(u64, &str)> = trace
        .events
        .iter()
        .filter(|e| match &e.event {
            TraceEvent::PodCreated(p) => p.name == "instance-17763",
            TraceEvent::PodDeleted(r) => r.name == "instance-17763",
            _ => false,
        })
        .map(|e| (e.t, e.event.name()))
        .collect();
    assert_eq!(
        lines,
        vec![
            (1_799_786_000, "pod_created"),
            (1_799_786_000, "pod_deleted")
        ]
    );
    assert_eq!(
        deletes(&trace)[..3],
        [
            (75_000, "instance-2455".to_string()),
            (85_000, "instance-2454".to_string()),
            (554_000, "instance-2456".to_string())
        ]
    );
}

#[test]
fn openb_converts_whole_gpu_pods_and_counts_fractional_ones() {
    let (stats, trace) = convert(openb, OPENB, &ConvertOptions::default());
    // 28 pods: 10 ask for a share of one GPU (gpu_milli 110..470), 18 for whole GPUs or none.
    assert_eq!(stats.skipped_fractional_gpu, 10);
    assert_eq!(stats.pods, 18);
    assert_eq!(stats.creates, 18);
    assert_eq!(stats.pods_at_start, 0);
    assert_eq!(stats.deletes, 18);
    assert_eq!(stats.unmatched_deletes, 0);
    assert_eq!(stats.rows, 56);
    let pods = pods(&trace);
    assert!(
        !pods.contains_key("openb-pod-0001"),
        "fractional (460) pod converted"
    );
    let (_, one) = &pods["openb-pod-0000"];
    assert_eq!(one.scheduling.requests.extended["nvidia.com/gpu"], 1000);
    assert_eq!(one.labels["qos"], "LS");
    assert!(one.owner.is_none());
    let (t, eight) = &pods["openb-pod-0017"];
    assert_eq!(*t, 9_437_497_000);
    assert_eq!(eight.scheduling.requests.extended["nvidia.com/gpu"], 8000);
    assert_eq!(eight.scheduling.requests.cpu, 88_000);
    assert_eq!(eight.scheduling.tolerations.len(), 1);
    let (_, cpu_only) = &pods["openb-pod-0005"];
    assert!(cpu_only.scheduling.requests.extended.is_empty());
    assert!(cpu_only.scheduling.tolerations.is_empty());
    // Only converted pods are deleted.
    let deleted: Vec<String> = deletes(&trace).into_iter().map(|(_, n)| n).collect();
    assert!(deleted.iter().all(|n| pods.contains_key(n)));
}

#[test]
fn replicate_makes_copies_of_every_pod_and_deletion() {
    let o = ConvertOptions {
        replicate: 3,
        ..opts()
    };
    let (stats, trace) = convert(dlrm, DLRM, &o);
    assert_eq!(stats.pods, 3 * 37);
    assert_eq!(stats.pods_at_start, 3 * 23);
    assert_eq!(stats.creates, 3 * 14);
    assert_eq!(stats.deletes, 3 * 4);
    assert_eq!(stats.unmatched_deletes, 8);
    let pods = pods(&trace);
    for name in ["instance-0", "instance-0-r1", "instance-0-r2"] {
        let (t, p) = &pods[name];
        assert_eq!(*t, 0);
        // Copies share labels: they are more replicas of the same workload.
        assert_eq!(p.labels["app"], "app_0");
    }
    assert!(!pods.contains_key("instance-0-r3"));
    let deleted: Vec<String> = deletes(&trace)
        .into_iter()
        .filter(|(t, _)| *t == 75_000)
        .map(|(_, n)| n)
        .collect();
    assert_eq!(
        deleted,
        vec!["instance-2455", "instance-2455-r1", "instance-2455-r2"]
    );

    let (stats, _) = convert(
        openb,
        OPENB,
        &ConvertOptions {
            replicate: 2,
            ..ConvertOptions::default()
        },
    );
    assert_eq!(stats.pods, 36);
    // Skipped pods are counted once, as source pods.
    assert_eq!(stats.skipped_fractional_gpu, 10);
}

#[test]
fn time_compress_divides_trace_time() {
    let o = ConvertOptions {
        time_compress: 60.0,
        ..opts()
    };
    let (stats, trace) = convert(dlrm, DLRM, &o);
    assert_eq!(stats.last_t_ms, 29_996_433); // 1,799,786 s / 60, in ms (rounded)
    let pods = pods(&trace);
    assert_eq!(pods["instance-0"].0, 0);
    assert_eq!(pods["instance-7280"].0, 7_917); // 475 s / 60 = 7.9167 s
    assert_eq!(deletes(&trace)[0], (1_250, "instance-2455".to_string()));
    assert_eq!(trace.header.extra["conversion"]["time_compress"], 60.0);
}

#[test]
fn window_sample_and_max_events_cut_the_trace() {
    // until_s: rows from 600 s on are left out; pods alive then stay.
    let (stats, trace) = convert(
        dlrm,
        DLRM,
        &ConvertOptions {
            until_s: Some(600.0),
            ..opts()
        },
    );
    assert_eq!(stats.creates, 7);
    assert_eq!(stats.deletes, 3);
    assert_eq!(stats.after_window, 49 - 23 - 10);
    assert!(trace.events.iter().all(|e| e.t < 600_000));

    // max_events: stops there.
    let (stats, trace) = convert(
        dlrm,
        DLRM,
        &ConvertOptions {
            max_events: Some(25),
            ..opts()
        },
    );
    assert!(stats.truncated);
    assert_eq!(stats.events, 25);
    assert_eq!(trace.events.len(), 25);
    assert_eq!(stats.pods_at_start, 23);

    // sample_one_in keeps whole apps, by a stable hash of the app name.
    let o = ConvertOptions {
        sample_one_in: 3,
        ..opts()
    };
    let (stats, trace) = convert(dlrm, DLRM, &o);
    assert_eq!(stats.sampled_out + stats.pods, 37);
    assert!(stats.sampled_out > 0 && stats.pods > 0, "{stats:?}");
    let apps: std::collections::BTreeSet<String> = pods(&trace)
        .values()
        .map(|(_, p)| p.labels["app"].clone())
        .collect();
    let (_, all) = convert(dlrm, DLRM, &opts());
    for (_, p) in pods(&all).values() {
        // Every pod of a kept app is kept.
        assert_eq!(
            apps.contains(&p.labels["app"]),
            pods(&trace).contains_key(&p.name),
            "{}",
            p.name
        );
    }
    // Deletions of sampled-out pods are dropped silently, not counted as unmatched.
    assert_eq!(stats.unmatched_deletes, 8);
    let (again, _) = convert(dlrm, DLRM, &o);
    assert_eq!(again, stats);
}

#[test]
fn bad_rows_are_errors_naming_the_line_or_counted() {
    let head = "time_s,event,pod,role,app,cpu_milli,memory_mib,num_gpu,max_per_node\n";
    let good = "-1,present_at_start,instance_1,HN,app_0,12000,122880,1,8\n";
    let cases = [
        (
            "soon,create,instance_2,CN,app_0,1000,1024,0,-1",
            "time_s \"soon\" is not a time in seconds",
        ),
        (
            "5,create,instance_2,CN,app_0,1000,1024,0",
            "8 fields, but the header has 9",
        ),
        (
            "5,create,instance_2,CN,app_0,lots,1024,0,-1",
            "cpu_milli \"lots\" is not a whole number of millicores",
        ),
        (
            "5,create,instance_2,CN,app_0,1000,1024,0.5,-1",
            "num_gpu \"0.5\"",
        ),
        (
            "5,create,instance_2,CN,app 0,1000,1024,0,-1",
            "app \"app 0\" is not a valid label value",
        ),
        (
            "5,create,Instance/2,CN,app_0,1000,1024,0,-1",
            "cannot be made a Kubernetes pod name",
        ),
        (
            "5,evict,instance_2,CN,app_0,1000,1024,0,-1",
            "event \"evict\"",
        ),
        (
            "5,present_at_start,instance_2,CN,app_0,1000,1024,0,-1",
            "present_at_start at time 5",
        ),
        (
            "1,create,instance_1,CN,app_0,1000,1024,0,-1",
            "pod instance_1 is created twice",
        ),
        (
            "5,create,\"instance_2\",CN,app_0,1000,1024,0,-1",
            "quoted CSV fields are not supported",
        ),
        (
            "-5,delete,instance_1,CN,app_0,1000,1024,0,-1",
            "earlier than the previous row",
        ),
    ];
    for (row, expected) in cases {
        // The bad row is line 4 of the CSV, after a good row at time 1.
        let csv = format!("{head}{good}1,create,instance_9,CN,app_0,1000,1024,0,-1\n{row}\n");
        let err = convert_dlrm(csv.as_bytes(), &opts(), Vec::new()).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, ConvertError::Row { line: 4, .. }) && msg.contains(expected),
            "{row}: {msg}"
        );
        assert!(msg.starts_with("line 4: "), "{msg}");

        let o = ConvertOptions {
            skip_bad: true,
            ..opts()
        };
        let mut out = Vec::new();
        let stats = convert_dlrm(csv.as_bytes(), &o, &mut out).unwrap();
        assert_eq!(stats.bad_rows, 1, "{row}");
        assert_eq!(stats.pods, 2, "{row}");
        assert!(stats.bad_row_examples[0].starts_with("line 4: "));
        read_trace("skipped.jsonl", &out[..], false).unwrap();
    }

    let head = "time_s,event,pod,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n";
    for (row, expected) in [
        (
            "0,create,p,1000,1024,0,500,,LS",
            "gpu_milli 500 without a GPU",
        ),
        ("0,create,p,1000,1024,2,500,,LS", "neither whole GPUs"),
        ("0,create,p,1000,1024,1,0,,LS", "neither whole GPUs"),
    ] {
        let csv = format!("{head}{row}\n");
        let err =
            convert_openb(csv.as_bytes(), &ConvertOptions::default(), Vec::new()).unwrap_err();
        assert!(err.to_string().contains(expected), "{row}: {err}");
    }
    // gpu_milli may also be given as the total (1000 per GPU).
    let csv = format!("{head}0,create,p,1000,1024,2,2000,V100M16|V100M32,LS\n");
    let (stats, trace) = convert(openb, &csv, &ConvertOptions::default());
    assert_eq!(stats.pods, 1);
    let (_, p) = &pods(&trace)["p"];
    assert_eq!(p.scheduling.requests.extended["nvidia.com/gpu"], 2000);
    assert_eq!(p.annotations["gpu-spec"], "V100M16|V100M32");
}

#[test]
fn header_and_options_are_checked() {
    let err = convert_dlrm(&b"time_s,event,pod\n"[..], &opts(), Vec::new()).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("line 1: the CSV header has no column role"),
        "{err}"
    );
    let err = convert_openb(&b""[..], &ConvertOptions::default(), Vec::new()).unwrap_err();
    assert!(err.to_string().contains("the CSV is empty"), "{err}");
    for (o, expected) in [
        (
            ConvertOptions {
                replicate: 0,
                ..opts()
            },
            "replicate must be at least 1",
        ),
        (
            ConvertOptions {
                time_compress: 0.0,
                ..opts()
            },
            "time_compress must be a number > 0",
        ),
        (
            ConvertOptions {
                sample_one_in: 0,
                ..opts()
            },
            "sample_one_in must be at least 1",
        ),
        (
            ConvertOptions {
                namespace: "Bad_NS".into(),
                ..opts()
            },
            "not a valid namespace name",
        ),
    ] {
        let err = convert_dlrm(DLRM.as_bytes(), &o, Vec::new()).unwrap_err();
        assert!(matches!(err, ConvertError::Options(_)), "{err:?}");
        assert!(err.to_string().contains(expected), "{err}");
    }
}
