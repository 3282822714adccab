//! A legend in a strip of its own under the plot, so it never hides data (a box inside the plot
//! would cover the top right of a timeline that rises).

use crate::{font_px, Colour, FONT};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// How an entry's mark is drawn.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Mark {
    Line,
    Dashed,
    Block,
}

pub(crate) struct Entry<'a> {
    pub name: &'a str,
    pub colour: Colour,
    pub mark: Mark,
}

const ROW: i32 = 18;
const MARK: i32 = 16;

/// Each entry's top-left corner when laid out from `left` across `width`, wrapping; and the
/// strip's height.
fn layout(entries: &[Entry<'_>], left: i32, width: i32) -> (Vec<(i32, i32)>, i32) {
    let (mut x, mut y) = (left, 4);
    let mut at = Vec::with_capacity(entries.len());
    for e in entries {
        // An estimate of the text's width at 12 px: the SVG's viewer lays the text out itself.
        let w = MARK + 6 + 7 * e.name.chars().count() as i32 + 24;
        if x > left && x + w > width {
            x = left;
            y += ROW;
        }
        at.push((x, y));
        x += w;
    }
    let height = if entries.is_empty() { 0 } else { y + ROW + 4 };
    (at, height)
}

/// The strip's height for `entries` in a chart `width` pixels wide.
pub(crate) fn height(entries: &[Entry<'_>], left: i32, width: u32) -> u32 {
    layout(entries, left, width as i32).1 as u32
}

pub(crate) fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[Entry<'_>],
    left: i32,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let (at, _) = layout(entries, left, area.dim_in_pixel().0 as i32);
    let text =
        TextStyle::from((FONT, font_px(12.0)).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (e, (x, y)) in entries.iter().zip(at) {
        let mid = y + ROW / 2;
        let colour = e.colour.rgb();
        match e.mark {
            Mark::Line => area.draw(&PathElement::new(
                vec![(x, mid), (x + MARK, mid)],
                colour.stroke_width(3),
            ))?,
            Mark::Dashed => {
                for dx in [0, 7, 14] {
                    area.draw(&PathElement::new(
                        vec![(x + dx, mid), ((x + dx + 4).min(x + MARK), mid)],
                        colour.stroke_width(2),
                    ))?
                }
            }
            Mark::Block => {
                area.draw(&Rectangle::new(
                    [(x, mid - 6), (x + 12, mid + 6)],
                    colour.filled(),
                ))?;
            }
        }
        area.draw(&Text::new(
            e.name.to_string(),
            (x + MARK + 6, mid),
            text.clone(),
        ))?;
    }
    Ok(())
}
