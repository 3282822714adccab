//! Hostile and careless input to every reader: the extremes of each parser saturate or are
//! refused, never wrap; and a bounded proptest pass over the manifest reader, the trace reader,
//! the interruption message parser and quantities finds no panic (the cargo-fuzz targets in
//! `fuzz/` search the same entry points for longer).

use dovetail_dataflow::model::duration::parse_duration;
use dovetail_dataflow::model::quantity::{format_milli, parse_quantity, QuantityError};
use dovetail_dataflow::model::{Price, Resources};
use dovetail_ingest::trace::{read_trace, MAX_TRACE_MS};
use dovetail_ingest::{load_str, parse_message, parse_rfc3339_ms};
use proptest::prelude::*;

#[test]
fn quantities_at_the_ends_of_milli_units() {
    assert_eq!(parse_quantity("9223372036854775807m"), Ok(i64::MAX));
    assert_eq!(parse_quantity("9223372036854775.807"), Ok(i64::MAX));
    assert_eq!(parse_quantity("-9223372036854775807m"), Ok(-i64::MAX));
    for too_big in [
        "9223372036854775808m",
        "9223372036854776",
        "8Ei",
        "10E",
        "1e30",
        "1e31",
        "99999999999999999999999999999999999999999",
    ] {
        assert!(
            matches!(parse_quantity(too_big), Err(QuantityError::Overflow(_))),
            "{too_big}: {:?}",
            parse_quantity(too_big)
        );
    }
    // The finest values round up to one milli-unit, never down to nothing.
    assert_eq!(parse_quantity("1e-30"), Ok(1));
    assert_eq!(parse_quantity("0.000000000000000000000000000001"), Ok(1));
    assert_eq!(parse_quantity("0"), Ok(0));
    assert_eq!(format_milli(i64::MAX), "9223372036854775807m");
}

#[test]
fn durations_saturate_at_the_longest_time() {
    // Near the end of i64 nanoseconds the float sum may be off by a millisecond, no more.
    let ms = parse_duration("2562047h").ok().flatten().expect("reads");
    assert!((ms - 2_562_047 * 3_600_000).abs() <= 1, "{ms}");
    for huge in ["99999999999999999999h", "1e400h"] {
        match parse_duration(huge) {
            Ok(Some(ms)) => assert_eq!(ms, i64::MAX, "{huge}"),
            Ok(None) => panic!("{huge} read as Never"),
            Err(_) => {} // refused is fine too
        }
    }
    assert!(parse_duration("-1h").is_err());
}

#[test]
fn times_at_the_ends_of_the_calendar() {
    assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00Z"), Some(0));
    let last = parse_rfc3339_ms("9999-12-31T23:59:59.999Z").expect("year 9999 reads");
    assert_eq!(last, 253_402_300_799_999);
    assert!(parse_rfc3339_ms("0000-01-01T00:00:00Z").is_none_or(|ms| ms < 0));
    assert_eq!(parse_rfc3339_ms("99999-01-01T00:00:00Z"), None);
    assert_eq!(parse_rfc3339_ms("2026-13-01T00:00:00Z"), None);
}

#[test]
fn prices_saturate_at_the_ceiling_and_are_never_negative() {
    assert_eq!(Price::from_dollars(f64::INFINITY), Price::CEILING);
    assert_eq!(Price::from_dollars(f64::NAN), Price::CEILING);
    assert_eq!(Price::from_dollars(1e300), Price::CEILING);
    assert_eq!(Price::from_dollars(-1.0), Price(0));
    assert_eq!(Price::from_dollars(0.0432), Price(43_200));
    assert_eq!(Price::clamped(i128::MAX), Price::CEILING);
    assert_eq!(Price::clamped(i128::MIN), Price(0));
    // A million nodes at the ceiling still sum inside an i64.
    assert!(Price::CEILING.0.checked_mul(1_000_000).is_some());
    // A NodeOverlay's price past what micro-dollars hold is refused, not wrapped.
    let overlay = |price: &str| {
        format!(
            "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {{name: o}}\nspec:\n  requirements: []\n  price: \"{price}\"\n"
        )
    };
    let m = load_str("o.yaml", &overlay("1000000")).expect("a large price reads");
    assert_eq!(m.overlays[0].price, Some(1_000_000_000_000));
    assert!(load_str("o.yaml", &overlay("99999999999999999999")).is_err());
}

#[test]
fn container_requests_whose_sum_overflows_ask_for_everything() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: a, resources: {requests: {cpu: \"9223372036854775\"}}}\n  - {name: b, resources: {requests: {cpu: \"9223372036854775\"}}}\n";
    let m = load_str("p.yaml", text).expect("each request fits on its own");
    let requests = &m.pods[0].scheduling.requests;
    assert_eq!(
        requests.cpu,
        i64::MAX,
        "the sum saturates instead of wrapping"
    );
    let biggest_node = Resources {
        cpu: 448_000,
        memory: 24 * 1024 * 1024 * 1024 * 1024 * 1000,
        pods: 737_000,
        ephemeral_storage: i64::MAX,
        ..Default::default()
    };
    assert!(!requests.fits_in(&biggest_node));
}

#[test]
fn trace_times_past_the_horizon_are_refused() {
    let header = r#"{"dovetail_trace":1,"source":"t","time_unit":"ms"}"#;
    for t in [
        MAX_TRACE_MS + 1,
        1_000_000_000_000_000,
        i64::MAX as u64,
        u64::MAX,
    ] {
        let text = format!("{header}\n{{\"t\":{t},\"event\":\"pod_deleted\",\"name\":\"a\"}}\n");
        let err = read_trace("t.jsonl", text.as_bytes(), false).expect_err("past the horizon");
        assert!(err.to_string().contains("line 2"), "{err}");
    }
}

/// Seeds the generators mutate: a valid document of each reader.
const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  containers:\n  - name: c\n    resources:\n      requests: {cpu: 250m, memory: 512Mi}\n  nodeSelector: {kubernetes.io/arch: arm64}\n";
const NODEPOOL: &str = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements:\n      - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}\n  disruption: {consolidateAfter: 30s, budgets: [{nodes: \"10%\"}]}\n";
const TRACE: &str = "{\"dovetail_trace\":1,\"source\":\"p\",\"time_unit\":\"ms\"}\n{\"t\":0,\"event\":\"pod_created\",\"pod\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}\n{\"t\":1500,\"event\":\"pod_deleted\",\"namespace\":\"default\",\"name\":\"a\"}\n";
const MESSAGE: &str = r#"{"version":"0","id":"1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"1","time":"2026-11-30T09:00:00Z","region":"us-east-1","resources":["arn:aws:ec2:us-east-1:1:instance/i-0abc"],"detail":{"instance-id":"i-0abc","instance-action":"terminate"}}"#;

/// `seed` with `insert` spliced in at a position and up to `cut` bytes removed there.
fn mutate(seed: &str, at: usize, cut: usize, insert: &str) -> String {
    let bytes = seed.as_bytes();
    let at = at % (bytes.len() + 1);
    let end = (at + cut).min(bytes.len());
    let mut out = bytes[..at].to_vec();
    out.extend_from_slice(insert.as_bytes());
    out.extend_from_slice(&bytes[end..]);
    String::from_utf8_lossy(&out).into_owned()
}

/// Text a careless user might splice in: YAML and JSON punctuation, digits, suffixes, keys.
fn splice() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ -~\n\t]{0,12}",
        "(-|\\.|e|E|[0-9]){1,24}(m|Mi|Gi|Ei|k|e30|%)?",
        Just("{".to_string()),
        Just("[[[[".to_string()),
        Just(": &a [*a]".to_string()),
        Just("\"t\":18446744073709551615,".to_string()),
        Just("cpu: 9223372036854775807".to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn manifests_never_panic(at in any::<usize>(), cut in 0usize..8, insert in splice(), pool in any::<bool>()) {
        let text = mutate(if pool { NODEPOOL } else { POD }, at, cut, &insert);
        let _ = load_str("fuzz.yaml", &text);
    }

    #[test]
    fn traces_never_panic_and_stay_in_order(at in any::<usize>(), cut in 0usize..8, insert in splice(), skip in any::<bool>()) {
        let text = mutate(TRACE, at, cut, &insert);
        if let Ok(trace) = read_trace("fuzz.jsonl", text.as_bytes(), skip) {
            let times: Vec<u64> = trace.events.iter().map(|e| e.t).collect();
            prop_assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
            prop_assert!(times.iter().all(|t| *t <= MAX_TRACE_MS), "{times:?}");
        }
    }

    #[test]
    fn interruption_messages_never_panic(at in any::<usize>(), cut in 0usize..8, insert in splice()) {
        let _ = parse_message("fuzz.json", 1, &mutate(MESSAGE, at, cut, &insert));
    }

    #[test]
    fn quantities_parse_or_refuse_and_print_back(text in "[-+]?[0-9.]{0,24}(e-?[0-9]{1,3}|[numkMGTPE]|[KMGTPE]i)?") {
        if let Ok(milli) = parse_quantity(&text) {
            prop_assert_eq!(parse_quantity(&format_milli(milli)), Ok(milli), "{}", text);
        }
    }
}
