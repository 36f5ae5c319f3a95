//! An SVG chart of each Q@C: per QE, the measured time beside the
//! calculated (eq. 2) and the exact (ledger) time, dropped QEs marked, and
//! the Q@C's median Time_calc as a line.
use plotters::prelude::*;

use crate::report::chart::{self, Area, Key};
use ttp_ttpv2::analysis::{Analysis, QcDocument};

#[derive(Debug, thiserror::Error)]
#[error("cannot draw the chart: {0}")]
pub struct SvgError(String);

impl SvgError {
    pub(crate) fn new(detail: impl Into<String>) -> Self {
        SvgError(detail.into())
    }
}

fn err<E: std::fmt::Display>(e: E) -> SvgError {
    SvgError(e.to_string())
}

/// A named, coloured series of (QE, ms) points.
type Line = (&'static str, RGBColor, Vec<(f64, f64)>);

const PANEL_HEIGHT: u32 = 320;
const WIDTH: u32 = 860;
/// The legend column right of each panel.
const LEGEND_WIDTH: u32 = 210;

fn panel(area: &Area<'_>, d: &QcDocument) -> Result<(), SvgError> {
    let title = d.title();
    let area = area
        .titled(&format!("TTPv2 — {title}"), ("sans-serif", 18))
        .map_err(err)?;
    let (plot, legend_area) = chart::split(&area, LEGEND_WIDTH);
    let qes: Vec<u32> = d.qes.iter().map(|e| e.record.qe).collect();
    // The axis covers the QEs only: half a QE of room on either side, and
    // ticks labelled at whole QE numbers within them (no QE 0 or n + 1).
    let first = qes.iter().copied().min().unwrap_or(1);
    let last = qes.iter().copied().max().unwrap_or(1);
    let (x_lo, x_hi) = (f64::from(first) - 0.5, f64::from(last) + 0.5);
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
    let mut chart = ChartBuilder::on(&plot)
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(x_lo..x_hi, 0f64..y_max)
        .map_err(err)?;
    let qe_label = |v: &f64| {
        let r = v.round();
        if (v - r).abs() < 1e-6 && r >= f64::from(first) && r <= f64::from(last) {
            format!("{r:.0}")
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .x_desc("QE")
        .y_desc("ms")
        .x_labels((qes.len() + 1).max(2))
        .x_label_formatter(&qe_label)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;

    let series = |f: fn(&ttp_ttpv2::analysis::QeEntry) -> Option<f64>| -> Vec<(f64, f64)> {
        d.qes
            .iter()
            .filter_map(|e| {
                f(e).filter(|&v| drawable(v))
                    .map(|v| (f64::from(e.record.qe), v))
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
    let mut legend: Vec<(String, Key)> = Vec::new();
    for (name, color, points) in lines {
        if points.is_empty() {
            continue;
        }
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(err)?;
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
        legend.push((name.to_string(), Key::Line(color)));
    }
    let dropped: Vec<(f64, f64)> = d
        .qes
        .iter()
        .filter(|e| !e.dropped_by.is_empty())
        .map(|e| {
            (
                f64::from(e.record.qe),
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
            .map_err(err)?;
        legend.push(("dropped in Step 2".into(), Key::Cross(RED)));
    }
    if let Some(m) = d.result.time_calc_ms.filter(|&m| drawable(m)) {
        let blue = RGBColor(31, 119, 180);
        chart
            .draw_series(LineSeries::new(
                vec![(x_lo, m), (x_hi, m)],
                blue.mix(0.5).stroke_width(1),
            ))
            .map_err(err)?;
        legend.push((format!("median Time_calc {m:.1} ms"), Key::Faded(blue)));
    }
    chart::draw(&legend_area, &legend, 10).map_err(SvgError)?;
    Ok(())
}

/// Renders one panel per Q@C into an SVG document.
pub(crate) fn render_svg(a: &Analysis) -> Result<String, SvgError> {
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
    use ttp_ttpv2::analysis::analyse;
    use ttp_ttpv2::testutil::clean_qc;

    /// Catches an empty or broken document: it is SVG, has one caption per
    /// Q@C and marks the dropped QE.
    #[test]
    fn one_panel_per_qc() {
        let mut a = clean_qc(8);
        a.labels.insert("cardinality".into(), "10".into());
        a.qes[2].timed_out = Some(true);
        let mut b = clean_qc(8);
        b.labels.insert("cardinality".into(), "20".into());
        let svg = render_svg(&analyse(
            &[a, b],
            None,
            crate::report::ttpv2::paragraph::text,
        ))
        .unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("cardinality=10") && svg.contains("cardinality=20"));
        assert!(svg.contains("dropped in Step 2"));
        assert!(svg.contains("median Time_calc"));
    }

    /// Eight QEs, one dropped: every point and the dropped QE's cross lie
    /// left of the legend column, the legend's labels inside it, and the x
    /// axis is labelled 1 to 8 only. Catches the legend drawn over a
    /// dropped-QE marker and an axis showing QE 0 and QE 9.
    #[test]
    fn legend_beside_the_data_and_only_real_qes_on_the_axis() {
        use crate::report::chart::tests::drawn;
        let mut a = clean_qc(8);
        a.qes[7].timed_out = Some(true);
        let svg = render_svg(&analyse(&[a], None, crate::report::ttpv2::paragraph::text)).unwrap();
        let d = drawn(&svg);
        let column = f64::from(WIDTH - LEGEND_WIDTH);
        // Time_meas and Time_calc of each QE (no ledger times in the fixture).
        assert_eq!(d.circles.len(), 2 * 8);
        assert!(
            d.circles.iter().all(|&(x, _)| x < column),
            "{:?}",
            d.circles
        );
        let legend_x = |label: &str| {
            d.texts
                .iter()
                .find(|t| t.2.starts_with(label))
                .unwrap_or_else(|| panic!("no {label:?}"))
                .0
        };
        assert!(legend_x("dropped in Step 2") > column);
        assert!(legend_x("Time_meas") > column);
        // The cross of the dropped QE 8: its two strokes are paths near the
        // last circle, left of the column like it.
        let last_qe_x = d.circles.iter().map(|c| c.0).fold(0.0, f64::max);
        assert!(last_qe_x + 7.0 < column);
        let axis: Vec<&str> = d
            .texts
            .iter()
            .filter(|t| t.2.parse::<u32>().is_ok() && t.1 > f64::from(PANEL_HEIGHT) - 40.0)
            .map(|t| t.2.as_str())
            .collect();
        assert_eq!(
            axis,
            ["1", "2", "3", "4", "5", "6", "7", "8"],
            "{:?}",
            d.texts
        );
    }
}
