//! The variance tree as an icicle chart: Var(root) is the top bar, and each
//! broken-down variance is split below it into its terms (eq. 1), each as
//! wide as its share of its parent. Covariances can be negative; they are
//! drawn as wide as their absolute value, in red, so widths stay positive.
use plotters::{
    backend::SVGBackend,
    drawing::IntoDrawingArea,
    element::{Rectangle, Text},
    style::{IntoFont, RGBColor, ShapeStyle, WHITE},
};

use ttp_vprofile::document::VprofileReport;

const WIDTH: u32 = 1200;
const ROW: u32 = 44;
const TOP: u32 = 48;

/// Errors of the chart backend.
#[derive(Debug, thiserror::Error)]
#[error("drawing the SVG failed: {0}")]
pub struct SvgError(String);

fn color(term: &str, share: f64) -> RGBColor {
    if term.starts_with("Cov(") {
        if share < 0.0 {
            RGBColor(214, 96, 77)
        } else {
            RGBColor(244, 165, 96)
        }
    } else if term.starts_with("Var(img_") {
        RGBColor(189, 189, 189)
    } else {
        RGBColor(116, 169, 207)
    }
}

/// Renders the report's tree; selected factors' instances get a black frame.
pub fn icicle(report: &VprofileReport) -> Result<String, SvgError> {
    let depth = depth(report, 0);
    let height = TOP + ROW * (depth as u32 + 1) + 20;
    let mut out = String::new();
    {
        let area = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
        area.fill(&WHITE).map_err(|e| SvgError(e.to_string()))?;
        let title = format!(
            "Variance of {} ({} invocations): terms of eq. 1, width = share of the parent",
            report.root, report.invocations
        );
        area.draw(&Text::new(title, (10, 16), ("sans-serif", 16).into_font()))
            .map_err(|e| SvgError(e.to_string()))?;
        let legend = "blue: Var(function) · grey: Var(img_F), F's own code · orange / red: 2·Cov, positive / negative · black frame: selected factor";
        area.draw(&Text::new(legend, (10, 34), ("sans-serif", 12).into_font()))
            .map_err(|e| SvgError(e.to_string()))?;
        let selected: Vec<&str> = report.selected.iter().map(String::as_str).collect();
        let mut stack = vec![(0usize, 0i32, WIDTH as i32 - 1, 0u32)];
        while let Some((id, x0, x1, level)) = stack.pop() {
            let n = &report.tree[id];
            let y0 = (TOP + level * ROW) as i32;
            let y1 = y0 + ROW as i32 - 4;
            let fill = ShapeStyle::from(&color(&n.term, n.share)).filled();
            area.draw(&Rectangle::new([(x0, y0), (x1, y1)], fill))
                .map_err(|e| SvgError(e.to_string()))?;
            let frame = if selected.contains(&n.term.as_str()) {
                ShapeStyle::from(&plotters::style::BLACK).stroke_width(3)
            } else {
                ShapeStyle::from(&WHITE).stroke_width(1)
            };
            area.draw(&Rectangle::new([(x0, y0), (x1, y1)], frame))
                .map_err(|e| SvgError(e.to_string()))?;
            let w = x1 - x0;
            if w > 40 {
                let label = format!("{} {:.1}%", n.term, n.share * 100.0);
                let max_chars = (w / 7).max(1) as usize;
                let label: String = if label.chars().count() > max_chars {
                    label
                        .chars()
                        .take(max_chars.saturating_sub(1))
                        .chain(['…'])
                        .collect()
                } else {
                    label
                };
                area.draw(&Text::new(
                    label,
                    (x0 + 4, y0 + 14),
                    ("sans-serif", 12).into_font(),
                ))
                .map_err(|e| SvgError(e.to_string()))?;
                if n.zeroed {
                    area.draw(&Text::new(
                        "explained by a child",
                        (x0 + 4, y0 + 30),
                        ("sans-serif", 10).into_font(),
                    ))
                    .map_err(|e| SvgError(e.to_string()))?;
                }
            }
            let kids: Vec<usize> = report
                .tree
                .iter()
                .filter(|c| c.parent == Some(id))
                .map(|c| c.id)
                .collect();
            let total: f64 = kids.iter().map(|&c| report.tree[c].share.abs()).sum();
            if total <= 0.0 {
                continue;
            }
            let mut x = f64::from(x0);
            for &c in &kids {
                let cw = f64::from(w) * report.tree[c].share.abs() / total;
                let (cx0, cx1) = (x.round() as i32, (x + cw).round() as i32);
                if cx1 > cx0 {
                    stack.push((c, cx0, cx1, level + 1));
                }
                x += cw;
            }
        }
        area.present().map_err(|e| SvgError(e.to_string()))?;
    }
    Ok(out)
}

fn depth(report: &VprofileReport, id: usize) -> usize {
    report
        .tree
        .iter()
        .filter(|c| c.parent == Some(id))
        .map(|c| 1 + depth(report, c.id))
        .max()
        .unwrap_or(0)
}
