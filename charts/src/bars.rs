//! Grouped bar charts, stacked in panels: the benchmarks' throughput and latency.

use crate::legend::{self, Entry, Mark};
use crate::{failed, font_px, tick_label, ChartError, Colour, FONT, PALETTE};
use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// How the value axis is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// In decades, for values that span orders of magnitude (a from-scratch bar beside
    /// incremental ones).
    Log,
}

/// A horizontal line across the panel at a value, such as a published figure to compare with.
#[derive(Debug, Clone)]
pub struct Reference<'a> {
    pub value: f64,
    pub label: &'a str,
}

/// One bar: its series (an index into [`BarChart::series`], which picks its colour), its value
/// and the label written over it.
#[derive(Debug, Clone)]
pub struct Bar {
    pub series: usize,
    pub value: f64,
    pub label: String,
}

/// Bars side by side over one label on the category axis.
#[derive(Debug, Clone)]
pub struct BarGroup {
    pub label: String,
    pub bars: Vec<Bar>,
}

/// One panel: a title, a value axis, groups of bars and a legend of the series under it.
#[derive(Debug, Clone)]
pub struct BarChart<'a> {
    pub title: &'a str,
    pub y_label: &'a str,
    pub series: &'a [String],
    pub groups: &'a [BarGroup],
    pub scale: Scale,
    pub reference: Option<Reference<'a>>,
}

const LEFT: i32 = 80;
const REFERENCE: Colour = Colour(0xcc0000);

/// The panels one under another, each `panel_height` pixels high, in one SVG `width` wide.
pub fn bar_charts(
    width: u32,
    panel_height: u32,
    panels: &[BarChart<'_>],
) -> Result<String, ChartError> {
    let mut svg = String::new();
    {
        let height = panel_height * panels.len().max(1) as u32;
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(failed("bar chart"))?;
        let areas = root.split_evenly((panels.len().max(1), 1));
        for (panel, area) in panels.iter().zip(areas) {
            draw_panel(&area, panel).map_err(failed(panel.title))?;
        }
        root.present().map_err(failed("bar chart"))?;
    }
    Ok(svg)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    c: &BarChart<'_>,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let mut entries: Vec<Entry<'_>> = c
        .series
        .iter()
        .enumerate()
        .map(|(i, name)| Entry {
            name,
            colour: PALETTE[i % PALETTE.len()],
            mark: Mark::Block,
        })
        .collect();
    if let Some(r) = &c.reference {
        entries.push(Entry {
            name: r.label,
            colour: REFERENCE,
            mark: Mark::Dashed,
        });
    }
    let (width, height) = area.dim_in_pixel();
    let legend_height = legend::height(&entries, LEFT, width);
    let (plot, legend_area) = area.split_vertically(height.saturating_sub(legend_height));
    let values = c
        .groups
        .iter()
        .flat_map(|g| g.bars.iter().map(|b| b.value))
        .chain(c.reference.as_ref().map(|r| r.value))
        .filter(|v| v.is_finite() && *v > 0.0);
    let max = values.clone().fold(0.0f64, f64::max).max(1e-9);
    match c.scale {
        Scale::Linear => draw_bars(&plot, c, RangedCoordf64::from(0.0..max * 1.15), 0.0)?,
        Scale::Log => {
            let min = values.fold(max, f64::min);
            let lo = 10f64.powf(min.log10().floor());
            // Headroom above the tallest bar for its label.
            let hi = 10f64.powf((max * 2.0).log10().ceil()).max(lo * 10.0);
            draw_bars(&plot, c, LogCoord::from((lo..hi).log_scale()), lo)?
        }
    }
    legend::draw(&legend_area, &entries, LEFT)
}

fn draw_bars<DB, Y>(
    plot: &DrawingArea<DB, Shift>,
    c: &BarChart<'_>,
    y: Y,
    base: f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: DrawingBackend,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let groups = c.groups.len().max(1);
    let mut chart = ChartBuilder::on(plot)
        .caption(
            c.title,
            (FONT, font_px(16.0)).into_font().style(FontStyle::Bold),
        )
        .margin(10)
        .margin_right(20)
        .x_label_area_size(30)
        .y_label_area_size(LEFT - 10)
        .build_cartesian_2d(Slots(groups), y)?;
    let group_label = |v: &f64| {
        c.groups
            .get(v.floor().max(0.0) as usize)
            .map(|g| g.label.clone())
            .unwrap_or_default()
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(c.y_label)
        .x_label_formatter(&group_label)
        .y_label_formatter(&|v| tick_label(*v))
        .label_style((FONT, font_px(12.0)))
        .axis_desc_style((FONT, font_px(12.0)))
        .bold_line_style(BLACK.mix(0.12))
        .light_line_style(TRANSPARENT)
        .draw()?;
    // Bar `j` of a group of `n` sits in the middle 80 % of the group's slot.
    let place = |g: usize, j: usize, n: usize| {
        let w = 0.8 / n.max(1) as f64;
        let x0 = g as f64 + 0.1 + j as f64 * w;
        (x0 + w * 0.04, x0 + w * 0.96)
    };
    let bars = || {
        c.groups.iter().enumerate().flat_map(move |(g, group)| {
            let n = group.bars.len();
            group
                .bars
                .iter()
                .enumerate()
                .filter(|(_, b)| b.value.is_finite())
                .map(move |(j, b)| (place(g, j, n), b))
        })
    };
    for s in 0..c.series.len() {
        let colour = PALETTE[s % PALETTE.len()].rgb();
        chart.draw_series(bars().filter(|(_, b)| b.series == s).map(|((x0, x1), b)| {
            Rectangle::new([(x0, base), (x1, b.value.max(base))], colour.filled())
        }))?;
    }
    let label = TextStyle::from((FONT, font_px(10.0)).into_font())
        .pos(Pos::new(HPos::Center, VPos::Bottom));
    chart.draw_series(bars().map(|((x0, x1), b)| {
        EmptyElement::at(((x0 + x1) / 2.0, b.value.max(base)))
            + Text::new(b.label.clone(), (0, -2), label.clone())
    }))?;
    if let Some(r) = &c.reference {
        let style = REFERENCE.rgb().stroke_width(1);
        chart.draw_series(DashedLineSeries::new(
            [(0.0, r.value), (groups as f64, r.value)],
            6,
            4,
            style,
        ))?;
        let red = REFERENCE.rgb();
        let text = TextStyle::from((FONT, font_px(11.0)).into_font())
            .color(&red)
            .pos(Pos::new(HPos::Right, VPos::Bottom));
        chart.draw_series(std::iter::once(
            EmptyElement::at((groups as f64, r.value))
                + Text::new(r.label.to_string(), (-4, -3), text),
        ))?;
    }
    Ok(())
}

/// The category axis: `0..n`, one slot per group, ticks (and so labels) at the slots' middles.
struct Slots(usize);

impl Ranged for Slots {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let f = value / self.0.max(1) as f64;
        limit.0 + (f * (limit.1 - limit.0) as f64).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, _: Hint) -> Vec<f64> {
        (0..self.0).map(|i| i as f64 + 0.5).collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        0.0..self.0 as f64
    }
}

impl ValueFormatter<f64> for Slots {
    // Never used: the chart formats its categories with the groups' labels.
    fn format(value: &f64) -> String {
        tick_label(*value)
    }
}
