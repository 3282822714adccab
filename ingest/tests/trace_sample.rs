//! The sample trace shipped in `data/traces/` reads completely, and its NodePools load.

use dovetail_dataflow::model::Effect;
use dovetail_ingest::load_paths;
use dovetail_ingest::trace::{TraceEvent, TraceReader};
use std::collections::BTreeSet;
use std::path::PathBuf;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../data/traces")
        .join(name)
}

#[test]
fn dlrm_sample_parses_completely() {
    let path = data("dlrm-sample.jsonl");
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size < 1_000_000, "{size} bytes");
    let mut reader = TraceReader::open(&path).unwrap();
    assert_eq!(reader.header().version, 1);
    assert!(reader.header().source.contains("DLRM"));
    assert_eq!(reader.header().extra["conversion"]["sample_one_in"], 12);
    assert_eq!(reader.header().extra["conversion"]["until_s"], 432_000.0);
    let (mut at_start, mut created, mut deleted, mut last_t) = (0, 0, 0, 0);
    let mut alive = BTreeSet::new();
    let mut max_alive = 0;
    for event in reader.by_ref() {
        let event = event.unwrap();
        last_t = event.t;
        match event.event {
            TraceEvent::PodCreated(p) => {
                if event.t == 0 {
                    at_start += 1;
                } else {
                    created += 1;
                }
                assert_eq!(p.namespace, "dlrm");
                let gpu = p
                    .scheduling
                    .requests
                    .extended
                    .contains_key("nvidia.com/gpu");
                assert_eq!(gpu, p.labels["role"] == "HN", "{}", p.name);
                assert_eq!(gpu, !p.scheduling.tolerations.is_empty(), "{}", p.name);
                assert!(alive.insert(p.key()), "{} created twice", p.key());
                max_alive = max_alive.max(alive.len());
            }
            TraceEvent::PodDeleted(r) => {
                assert!(alive.remove(&r.key()), "{} deleted but not alive", r.key());
                deleted += 1;
            }
            other => panic!("unexpected event {other:?}"),
        }
    }
    assert_eq!(reader.skipped(), 0);
    assert!(reader.notes().is_empty(), "{:?}", reader.notes());
    assert_eq!((at_start, created, deleted), (602, 113, 108));
    assert_eq!(last_t, 7_181_033);
    assert!(max_alive >= 602);
}

#[test]
fn sample_nodepools_load() {
    let m = load_paths(&[data("nodepools.yaml")]).unwrap();
    // Its EC2NodeClass's status lists subnets only: the rest is assumed, and said.
    assert_eq!(m.notes.len(), 1, "{:?}", m.notes);
    assert!(
        m.notes[0].starts_with("EC2NodeClass default: status.securityGroups is absent"),
        "{:?}",
        m.notes
    );
    let names: Vec<&str> = m.nodepools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, vec!["cpu", "gpu"]);
    let gpu = &m.nodepools[1];
    assert_eq!(gpu.taints.len(), 1);
    assert_eq!(gpu.taints[0].key, "nvidia.com/gpu");
    assert_eq!(gpu.taints[0].effect, Effect::NoSchedule);
    assert_eq!(m.nodeclasses.len(), 1);
    let zones: Vec<&str> = m.nodeclasses[0]
        .status
        .subnet_zones
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(zones, vec!["us-east-1a", "us-east-1b", "us-east-1c"]);
}
