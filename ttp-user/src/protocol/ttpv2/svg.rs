//! An SVG chart of each Q@C: per QE, the measured time beside the
//! calculated (eq. 2) and the exact (ledger) time, dropped QEs marked, and
//! the Q@C's median Time_calc as a line.
use plotters::prelude::*;

use super::analysis::{Analysis, QcDocument};

#[derive(Debug, thiserror::Error)]
#[error("cannot draw the chart: {0}")]
pub struct SvgError(String);

fn err<E: std::fmt::Display>(e: E) -> SvgError {
    SvgError(e.to_string())
}

/// A named, coloured series of (QE, ms) points.
type Line = (&'static str, RGBColor, Vec<(u64, f64)>);

const PANEL_HEIGHT: u32 = 320;
const WIDTH: u32 = 860;

fn panel(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    d: &QcDocument,
) -> Result<(), SvgError> {
    let title = d.title();
    // A u64 axis: plotters' u32 range overflows near u32::MAX, a QE number
    // a damaged file may hold.
    let qes: Vec<u64> = d.qes.iter().map(|e| u64::from(e.record.qe)).collect();
    let x_max = qes.iter().copied().max().unwrap_or(1) + 1;
    let y_max = d
        .qes
        .iter()
        .flat_map(|e| {
            [
                Some(e.record.time_meas_ms),
                e.calc.time_calc_ms,
                e.calc.time_exact_ms,
            ]
        })
        .flatten()
        .chain(d.result.time_calc_ms)
        .fold(1.0f64, f64::max)
        * 1.1;
    // Plotters maps to i32 pixels and overflows on values far outside the
    // axis: a damaged file's times (negative, or near f64::MAX) are left
    // out rather than drawn.
    let y_max = if y_max.is_finite() { y_max } else { f64::MAX };
    let drawable = |v: f64| (0.0..=y_max).contains(&v);
    let mut chart = ChartBuilder::on(area)
        .caption(format!("TTPv2 — {title}"), ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0u64..x_max, 0f64..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("QE")
        .y_desc("ms")
        .x_labels(qes.len().max(2))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;

    let series = |f: fn(&super::analysis::QeEntry) -> Option<f64>| -> Vec<(u64, f64)> {
        d.qes
            .iter()
            .filter_map(|e| {
                f(e).filter(|&v| drawable(v))
                    .map(|v| (u64::from(e.record.qe), v))
            })
            .collect()
    };
    let lines: [Line; 3] = [
        (
            "Time_meas",
            RGBColor(128, 128, 128),
            series(|e| Some(e.record.time_meas_ms)),
        ),
        (
            "Time_calc (eq. 2)",
            RGBColor(31, 119, 180),
            series(|e| e.calc.time_calc_ms),
        ),
        (
            "exact (ledger)",
            RGBColor(44, 160, 44),
            series(|e| e.calc.time_exact_ms),
        ),
    ];
    for (name, color, points) in lines {
        if points.is_empty() {
            continue;
        }
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    let dropped: Vec<(u64, f64)> = d
        .qes
        .iter()
        .filter(|e| !e.dropped_by.is_empty())
        .map(|e| {
            (
                u64::from(e.record.qe),
                e.calc.time_calc_ms.unwrap_or(e.record.time_meas_ms),
            )
        })
        .filter(|&(_, v)| drawable(v))
        .collect();
    if !dropped.is_empty() {
        chart
            .draw_series(
                dropped
                    .iter()
                    .map(|&p| Cross::new(p, 7, RED.stroke_width(2))),
            )
            .map_err(err)?
            .label("dropped in Step 2")
            .legend(|(x, y)| Cross::new((x + 9, y), 5, RED.stroke_width(2)));
    }
    if let Some(m) = d.result.time_calc_ms.filter(|&m| drawable(m)) {
        let blue = RGBColor(31, 119, 180);
        chart
            .draw_series(LineSeries::new(
                vec![(0, m), (x_max, m)],
                blue.mix(0.5).stroke_width(1),
            ))
            .map_err(err)?
            .label(format!("median Time_calc {m:.1} ms"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], blue.mix(0.5)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::MiddleRight)
        .draw()
        .map_err(err)?;
    Ok(())
}

/// Renders one panel per Q@C into an SVG document.
pub fn render_svg(a: &Analysis) -> Result<String, SvgError> {
    let mut svg = String::new();
    {
        let height = PANEL_HEIGHT * a.qcs.len().max(1) as u32;
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let areas = root.split_evenly((a.qcs.len().max(1), 1));
        for (area, d) in areas.iter().zip(&a.qcs) {
            panel(area, d)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ttpv2::analysis::analyse;
    use crate::protocol::ttpv2::testutil::clean_qc;

    /// Catches an empty or broken document: it is SVG, has one caption per
    /// Q@C and marks the dropped QE.
    #[test]
    fn one_panel_per_qc() {
        let mut a = clean_qc(8);
        a.labels.insert("cardinality".into(), "10".into());
        a.qes[2].timed_out = Some(true);
        let mut b = clean_qc(8);
        b.labels.insert("cardinality".into(), "20".into());
        let svg = render_svg(&analyse(&[a, b], None)).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("cardinality=10") && svg.contains("cardinality=20"));
        assert!(svg.contains("dropped in Step 2"));
        assert!(svg.contains("median Time_calc"));
    }
}
