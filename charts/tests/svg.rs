//! Charts drawn from given data carry that data: their titles, axis labels, legends and one
//! mark per point or bar, read back from the SVG text.

use dovetail_charts::{
    bar_charts, line_chart, Bar, BarChart, BarGroup, Colour, Reference, Scale, Series, PALETTE,
};

/// The text of every `<text>` element, unescaped.
fn texts(svg: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(start) = rest.find("<text") {
        rest = &rest[start..];
        let Some(open_end) = rest.find('>') else {
            break;
        };
        let Some(close) = rest.find("</text>") else {
            break;
        };
        out.push(unescape(rest[open_end + 1..close].trim()));
        rest = &rest[close + 7..];
    }
    out
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// The elements named `tag` (their attribute text) whose attributes contain `needle`.
fn elements<'a>(svg: &'a str, tag: &str, needle: &str) -> Vec<&'a str> {
    svg.split(&format!("<{tag} "))
        .skip(1)
        .filter_map(|e| e.split('>').next())
        .filter(|attrs| attrs.contains(needle))
        .collect()
}

fn attr<'a>(element: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let at = format!(" {element}").find(&key)? + key.len() - 1;
    let value = &element[at..];
    value.split('"').next()
}

/// A data line's stroke (the legend's marks are drawn thicker).
fn stroke(c: Colour) -> String {
    format!("stroke=\"#{:06X}\" stroke-width=\"2\"", c.0)
}

fn polyline_points(attrs: &str) -> Vec<(f64, f64)> {
    attr(attrs, "points")
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|p| {
            let (x, y) = p.split_once(',')?;
            Some((x.parse().ok()?, y.parse().ok()?))
        })
        .collect()
}

#[test]
fn a_line_chart_has_its_title_axes_legend_and_one_line_per_series() {
    let nodes = Colour(0x1f77b4);
    let pods = Colour(0x2ca02c);
    let svg = line_chart(
        "Nodes & pods <running>",
        "simulated hours",
        "count",
        &[
            Series {
                name: "nodes",
                colour: nodes,
                points: vec![(0.0, 1.0), (1.0, 3.0), (2.0, 2.0)],
            },
            Series {
                name: "pods running",
                colour: pods,
                points: vec![(0.0, 10.0), (1.0, 40.0), (2.0, f64::NAN), (3.0, 20.0)],
            },
        ],
    )
    .expect("drawn");
    assert!(svg.starts_with("<svg"), "{svg}");
    let t = texts(&svg);
    for want in [
        "Nodes & pods <running>",
        "simulated hours",
        "count",
        "nodes",
        "pods running",
    ] {
        assert!(t.iter().any(|s| s == want), "no text {want:?} in {t:?}");
    }
    // Tick labels on both axes: the x axis reaches the last point's 3 hours, the y axis 40.
    assert!(t.iter().any(|s| s == "3"), "{t:?}");
    assert!(t.iter().any(|s| s == "40"), "{t:?}");
    let node_line = elements(&svg, "polyline", &stroke(nodes));
    let pod_line = elements(&svg, "polyline", &stroke(pods));
    assert_eq!(node_line.len(), 1, "{svg}");
    assert_eq!(pod_line.len(), 1, "{svg}");
    let n = polyline_points(node_line[0]);
    let p = polyline_points(pod_line[0]);
    assert_eq!(n.len(), 3, "{n:?}");
    // The NaN point is left out.
    assert_eq!(p.len(), 3, "{p:?}");
    // Screen y grows downwards: 40 pods is drawn above 3 nodes, 3 nodes above 1.
    assert!(p[1].1 < n[1].1 && n[1].1 < n[0].1, "{n:?} {p:?}");
    // x is shared: 1 hour is at the same place on both lines, 3 hours to the right of 2.
    assert_eq!(n[1].0, p[1].0);
    assert!(p[2].0 > n[2].0);
}

#[test]
fn a_bar_chart_has_its_groups_bars_legend_and_reference() {
    let series = vec!["incremental".to_string(), "from scratch".to_string()];
    let groups = vec![
        BarGroup {
            label: "p50".into(),
            bars: vec![
                Bar {
                    series: 0,
                    value: 2.0,
                    label: "2.0".into(),
                },
                Bar {
                    series: 1,
                    value: 900.0,
                    label: "900.0".into(),
                },
            ],
        },
        BarGroup {
            label: "p99".into(),
            bars: vec![
                Bar {
                    series: 0,
                    value: 30.0,
                    label: "30.0".into(),
                },
                Bar {
                    series: 1,
                    value: 1500.0,
                    label: "1500.0".into(),
                },
            ],
        },
    ];
    let throughput = vec![BarGroup {
        label: "1000 pods".into(),
        bars: vec![Bar {
            series: 0,
            value: 5000.0,
            label: "5k".into(),
        }],
    }];
    let svg = bar_charts(
        900,
        390,
        &[
            BarChart {
                title: "Cold solve",
                y_label: "pods per second",
                series: &series[..1],
                groups: &throughput,
                scale: Scale::Linear,
                reference: Some(Reference {
                    value: 781.6,
                    label: "Karpenter: 781.6 pods/s",
                }),
            },
            BarChart {
                title: "One change (log scale)",
                y_label: "milliseconds",
                series: &series,
                groups: &groups,
                scale: Scale::Log,
                reference: None,
            },
        ],
    )
    .expect("drawn");
    let t = texts(&svg);
    for want in [
        "Cold solve",
        "One change (log scale)",
        "pods per second",
        "milliseconds",
        "incremental",
        "from scratch",
        "1000 pods",
        "p50",
        "p99",
        "2.0",
        "900.0",
        "30.0",
        "1500.0",
        "5k",
        "Karpenter: 781.6 pods/s",
    ] {
        assert!(t.iter().any(|s| s == want), "no text {want:?} in {t:?}");
    }
    // One filled rectangle per bar, in its series' colour.
    let fill = |c: Colour| format!("fill=\"#{:06X}\"", c.0);
    let first = elements(&svg, "rect", &fill(PALETTE[0]));
    let second = elements(&svg, "rect", &fill(PALETTE[1]));
    // Three bars of the first series and its legend mark (one in each panel).
    assert_eq!(first.len(), 3 + 2, "{first:?}");
    assert_eq!(second.len(), 2 + 1, "{second:?}");
    let top = |r: &str| {
        attr(r, "y")
            .and_then(|y| y.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    // In the log panel (the lower half), 1500 ms reaches higher than 900, and 900 than 30.
    let lower: Vec<f64> = second
        .iter()
        .map(|r| top(r))
        .filter(|y| *y > 390.0)
        .collect();
    assert_eq!(lower.len(), 3, "{second:?}");
    let bars: Vec<f64> = first
        .iter()
        .map(|r| top(r))
        .filter(|y| *y > 390.0)
        .collect();
    // Bars are drawn before the legend, p50's group before p99's.
    assert!(lower[1] < lower[0], "{lower:?}");
    assert!(lower[0] < bars[1], "{lower:?} {bars:?}");
    assert!(bars[1] < bars[0], "{bars:?}");
}
