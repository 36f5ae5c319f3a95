//! The legend of every chart, drawn in a column of its own right of the
//! plot. plotters' built-in legend box sits inside the plotting area, where
//! it covers data (a dropped QE, an outlying run), and places its keys
//! from font metrics it can only estimate without a font, so the keys
//! drift a row from their labels in SVG viewers. Here each row has fixed
//! coordinates: the key and its label share one y.
use plotters::{
    coord::Shift,
    prelude::*,
    style::text_anchor::{HPos, Pos, VPos},
};

/// The SVG drawing area of a chart.
pub(crate) type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// The glyph of a legend row.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Key {
    /// A line segment.
    Line(RGBColor),
    /// A thin, half-transparent line (a reference level).
    Faded(RGBColor),
    /// A filled square (a bar or a point).
    Square(RGBColor),
    /// An unfilled square.
    Outline(RGBColor),
    /// An × (something dropped).
    Cross(RGBColor),
    /// A filled triangle.
    Triangle(RGBColor),
}

/// Height of one legend row, px.
const ROW: i32 = 20;

/// Splits `area` into the plot (left) and a legend column `width` px wide.
pub(crate) fn split<'a>(area: &Area<'a>, width: u32) -> (Area<'a>, Area<'a>) {
    let (w, _) = area.dim_in_pixel();
    area.split_horizontally(w.saturating_sub(width))
}

/// Draws `rows` top-down in `area` (a legend column from [`split`]),
/// starting `top` px below its top edge.
pub(crate) fn draw(area: &Area<'_>, rows: &[(String, Key)], top: i32) -> Result<(), String> {
    let e = |x: DrawingAreaErrorKind<_>| x.to_string();
    let font = ("sans-serif", 12).into_font().color(&BLACK);
    let style = font.pos(Pos::new(HPos::Left, VPos::Center));
    for (i, (label, key)) in rows.iter().enumerate() {
        let y = top + ROW / 2 + i as i32 * ROW;
        let (x0, x1) = (6, 24);
        match *key {
            Key::Line(c) => area.draw(&PathElement::new([(x0, y), (x1, y)], c.stroke_width(2))),
            Key::Faded(c) => area.draw(&PathElement::new([(x0, y), (x1, y)], c.mix(0.5))),
            Key::Square(c) => area.draw(&Rectangle::new(
                [(x0 + 4, y - 5), (x1 - 4, y + 5)],
                c.filled(),
            )),
            Key::Outline(c) => area.draw(&Rectangle::new(
                [(x0 + 4, y - 5), (x1 - 4, y + 5)],
                c.stroke_width(2),
            )),
            Key::Cross(c) => area.draw(&Cross::new((x0 + 9, y), 5, c.stroke_width(2))),
            Key::Triangle(c) => area.draw(&TriangleMarker::new((x0 + 9, y), 6, c.filled())),
        }
        .map_err(e)?;
        area.draw(&Text::new(label.clone(), (x1 + 8, y), style.clone()))
            .map_err(e)?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    /// Every element of an SVG: (tag, x, y) of circles (cx, cy), texts and
    /// rects, and text contents, for layout assertions.
    pub(crate) struct Drawn {
        pub circles: Vec<(f64, f64)>,
        pub texts: Vec<(f64, f64, String)>,
    }

    pub(crate) fn drawn(svg: &str) -> Drawn {
        let doc = roxmltree::Document::parse(svg).expect("SVG is not well-formed XML");
        let num = |n: &roxmltree::Node, a: &str| n.attribute(a).and_then(|v| v.parse().ok());
        let mut d = Drawn {
            circles: Vec::new(),
            texts: Vec::new(),
        };
        for n in doc.descendants() {
            match n.tag_name().name() {
                "circle" => d
                    .circles
                    .push((num(&n, "cx").unwrap(), num(&n, "cy").unwrap())),
                "text" => d.texts.push((
                    num(&n, "x").unwrap(),
                    num(&n, "y").unwrap(),
                    n.text().unwrap_or_default().trim().to_string(),
                )),
                _ => {}
            }
        }
        d
    }
}
