//! The churn bench's chart: each run's engine update time per epoch (p50, p99, max) on a log
//! scale, under a line at issue 20's must (p99 ≤ 50 ms). The bench draws one group per size it
//! ran; `--render` draws committed runs side by side, such as the same size across commits.

use anyhow::{bail, Context, Result};
use dovetail_charts::{bar_charts, tick_label, Bar, BarChart, BarGroup, Reference, Scale};
use serde_json::Value;

/// Issue 20's must for the update time per epoch, p99.
pub const MUST_P99_MS: f64 = 50.0;

/// One replay's update times per epoch, in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct ChurnRun {
    pub label: String,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// The runs in a results file: the bench's own (a list of rows, one per size, or one row; each
/// labelled `label` and, when there are several, its size, or only its size when `label` is
/// empty) or one `dovetail replay --json` summary (labelled `label`).
pub fn read_runs(json: &str, label: &str) -> Result<Vec<ChurnRun>> {
    let v: Value = serde_json::from_str(json).context("not JSON")?;
    if let Some(u) = v.get("engine_update_micros") {
        let ms = |key: &str| -> Result<f64> {
            Ok(number(&u[key], 0, &format!("engine_update_micros.{key}"))? / 1000.0)
        };
        return Ok(vec![ChurnRun {
            label: label.to_string(),
            p50_ms: ms("p50")?,
            p99_ms: ms("p99")?,
            max_ms: ms("max")?,
        }]);
    }
    let rows: Vec<&Value> = match &v {
        Value::Array(rows) => rows.iter().collect(),
        Value::Object(_) => vec![&v],
        _ => bail!("neither the bench's rows nor a replay summary"),
    };
    let several = rows.len() > 1;
    rows.iter()
        .enumerate()
        .map(|(i, row)| {
            let label = match (row["pods"].as_u64(), label.is_empty(), several) {
                (Some(pods), true, _) => format!("{} pods", tick_label(pods as f64)),
                (Some(pods), false, true) => format!("{label} · {}", tick_label(pods as f64)),
                _ => label.to_string(),
            };
            let u = &row["update_ms"];
            Ok(ChurnRun {
                label,
                p50_ms: number(&u["p50"], i, "update_ms.p50")?,
                p99_ms: number(&u["p99"], i, "update_ms.p99")?,
                max_ms: number(&u["max"], i, "update_ms.max")?,
            })
        })
        .collect()
}

fn number(v: &Value, row: usize, field: &str) -> Result<f64> {
    v.as_f64()
        .with_context(|| format!("run {row}: field {field} is missing or not a number"))
}

/// The SVG chart of `runs`.
pub fn chart(title: &str, runs: &[ChurnRun]) -> Result<String> {
    let series = ["p50".to_string(), "p99".to_string(), "max".to_string()];
    let groups: Vec<BarGroup> = runs
        .iter()
        .map(|r| BarGroup {
            label: r.label.clone(),
            bars: [r.p50_ms, r.p99_ms, r.max_ms]
                .into_iter()
                .enumerate()
                .map(|(series, value)| Bar {
                    series,
                    value,
                    // A tenth of a millisecond shows a change near the goals.
                    label: if value < 100.0 {
                        format!("{value:.1}")
                    } else {
                        tick_label(value)
                    },
                })
                .collect(),
        })
        .collect();
    let must = format!("issue 20's must: p99 ≤ {MUST_P99_MS} ms");
    Ok(bar_charts(
        (140 * runs.len() as u32).max(760),
        400,
        &[BarChart {
            title,
            y_label: "engine update per epoch, ms",
            series: &series,
            groups: &groups,
            scale: Scale::Log,
            reference: Some(Reference {
                value: MUST_P99_MS,
                label: &must,
            }),
        }],
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_bench_rows_and_a_replay_summary() {
        let rows = r#"[{"pods": 20000, "update_ms": {"p50": 9.1, "p99": 52.4, "max": 389.3}},
                       {"pods": 100000, "update_ms": {"p50": 10.4, "p99": 40.9, "max": 1356.8}}]"#;
        let runs = read_runs(rows, "abc").unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[1].label, "abc · 100k");
        assert_eq!(read_runs(rows, "").unwrap()[0].label, "20k pods");
        let row = r#"{"pods": 100000, "update_ms": {"p50": 12.9, "p99": 59.8, "max": 2677.0}}"#;
        assert_eq!(read_runs(row, "groups").unwrap()[0].p99_ms, 59.8);
        assert_eq!(runs[1].p99_ms, 40.9);
        let summary =
            r#"{"engine_update_micros": {"count": 3, "p50": 10487, "p99": 40895, "max": 1356799}}"#;
        let runs = read_runs(summary, "label-sets").unwrap();
        assert_eq!(runs[0].label, "label-sets");
        assert_eq!(runs[0].p99_ms, 40.895);
    }

    #[test]
    fn a_missing_figure_is_named() {
        let err = read_runs(r#"[{"update_ms": {"p50": 1.0, "max": 2.0}}]"#, "x").unwrap_err();
        assert!(format!("{err:#}").contains("update_ms.p99"), "{err:#}");
        assert!(read_runs("[1, 2", "x").is_err());
        assert!(read_runs("3", "x").is_err());
    }

    #[test]
    fn draws_every_run() {
        let runs = vec![
            ChurnRun {
                label: "before".into(),
                p50_ms: 10.0,
                p99_ms: 47.4,
                max_ms: 1605.0,
            },
            ChurnRun {
                label: "after".into(),
                p50_ms: 9.9,
                p99_ms: 42.3,
                max_ms: 1443.0,
            },
        ];
        let svg = chart("churn", &runs).unwrap();
        assert!(svg.starts_with("<svg"));
        for text in ["before", "after", "47.4", "42.3", "must"] {
            assert!(svg.contains(text), "{text} not drawn");
        }
    }
}
