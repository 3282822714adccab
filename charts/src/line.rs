//! Line charts over a shared x axis: the replay's timelines.

use crate::legend::{self, Entry, Mark};
use crate::{failed, font_px, tick_label, ChartError, Colour, FONT};
use plotters::prelude::*;

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series<'a> {
    pub name: &'a str,
    pub colour: Colour,
    pub points: Vec<(f64, f64)>,
}

const WIDTH: u32 = 760;
const PLOT_HEIGHT: u32 = 320;
const LEFT: i32 = 70;

/// A line chart with a title, axes with ticks and labels, one line per series and a legend
/// under it. Both axes start at zero; points that are not finite are left out.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series<'_>],
) -> Result<String, ChartError> {
    let fail = failed(title);
    let entries: Vec<Entry<'_>> = series
        .iter()
        .map(|s| Entry {
            name: s.name,
            colour: s.colour,
            mark: Mark::Line,
        })
        .collect();
    let legend_height = legend::height(&entries, LEFT, WIDTH);
    let lines: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|s| {
            s.points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .collect()
        })
        .collect();
    let points = lines.iter().flatten();
    let x_max = points.clone().map(|p| p.0).fold(0.0f64, f64::max).max(1e-9);
    let y_max = points.map(|p| p.1).fold(0.0f64, f64::max).max(1e-9) * 1.05;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, PLOT_HEIGHT + legend_height))
            .into_drawing_area();
        root.fill(&WHITE).map_err(&fail)?;
        let (plot, legend_area) = root.split_vertically(PLOT_HEIGHT);
        let mut chart = ChartBuilder::on(&plot)
            .caption(
                title,
                (FONT, font_px(15.0)).into_font().style(FontStyle::Bold),
            )
            .margin(10)
            .margin_right(20)
            .x_label_area_size(40)
            .y_label_area_size(LEFT - 10)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(&fail)?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .x_label_formatter(&|v| tick_label(*v))
            .y_label_formatter(&|v| tick_label(*v))
            .label_style((FONT, font_px(11.0)))
            .axis_desc_style((FONT, font_px(12.0)))
            .bold_line_style(BLACK.mix(0.12))
            .light_line_style(TRANSPARENT)
            .draw()
            .map_err(&fail)?;
        for (s, line) in series.iter().zip(lines) {
            chart
                .draw_series(LineSeries::new(line, s.colour.rgb().stroke_width(2)))
                .map_err(&fail)?;
        }
        legend::draw(&legend_area, &entries, LEFT).map_err(&fail)?;
        root.present().map_err(&fail)?;
    }
    Ok(svg)
}
