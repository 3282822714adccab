//! The charts of dovetail's reports: the replay's timelines (`dovetail replay --report`) and the
//! benchmarks' throughput and latency bars (`dovetail-bench`, `dovetail-bench-disruption`).
//! Each chart is one self-contained SVG document, drawn with plotters' SVG backend, so a report
//! needs nothing to view but a browser and the README can embed it.

mod bars;
mod legend;
mod line;

pub use bars::{bar_charts, Bar, BarChart, BarGroup, Reference, Scale};
pub use line::{line_chart, Series};

use plotters::style::RGBColor;

/// A colour as `0xRRGGBB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Colour(pub u32);

impl Colour {
    fn rgb(self) -> RGBColor {
        RGBColor((self.0 >> 16) as u8, (self.0 >> 8) as u8, self.0 as u8)
    }
}

/// The bar charts' series colours, in order (Tableau 10).
pub const PALETTE: [Colour; 6] = [
    Colour(0x4e79a7),
    Colour(0xf28e2b),
    Colour(0x59a14f),
    Colour(0xe15759),
    Colour(0x76b7b2),
    Colour(0xb07aa1),
];

/// A chart that could not be drawn (in practice a chart area too small for its labels).
#[derive(Debug, thiserror::Error)]
#[error("drawing the chart {chart:?}: {message}")]
pub struct ChartError {
    pub chart: String,
    pub message: String,
}

fn failed<E: std::fmt::Display>(chart: &str) -> impl Fn(E) -> ChartError + '_ {
    move |e| ChartError {
        chart: chart.to_string(),
        message: e.to_string(),
    }
}

const FONT: &str = "sans-serif";

/// plotters writes `font-size` as the size it is given divided by 1.24; this is the size to
/// give for text `px` pixels high in the SVG.
fn font_px(px: f64) -> f64 {
    px * 1.24
}

/// A tick or bar label: short, with k / M for thousands and millions.
pub fn tick_label(v: f64) -> String {
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{}M", trim(format!("{:.1}", v / 1e6)))
    } else if a >= 1e4 {
        format!("{}k", trim(format!("{:.1}", v / 1e3)))
    } else if a >= 10.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        trim(format!("{v:.1}"))
    } else {
        trim(format!("{v:.3}"))
    }
}

#[cfg(test)]
mod tests {
    use super::tick_label;

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(tick_label(0.0), "0");
        assert_eq!(tick_label(0.25), "0.25");
        assert_eq!(tick_label(2.5), "2.5");
        assert_eq!(tick_label(3.0), "3");
        assert_eq!(tick_label(781.6), "782");
        assert_eq!(tick_label(2500.0), "2500");
        assert_eq!(tick_label(10_159.0), "10.2k");
        assert_eq!(tick_label(20_000.0), "20k");
        assert_eq!(tick_label(1_500_000.0), "1.5M");
    }
}
