//! A chart of time against a scanned parameter (`run --parameter-scan`,
//! `-L`): per command, each Q@C's median Time_calc (Sec. 8.5, Step 4) at
//! its parameter value, joined by a line, with every retained QE drawn as a
//! dot and a bar from the fastest to the slowest of them (the Q@C's
//! spread); beside it the exact time (ledger) of every QE that ran, each a
//! hollow dot, and their median, which a busy machine does not disturb
//! when Step 2 drops the QEs. This is what TTPv2's monotonicity checks
//! (QC3/QC4, App. E; POST2/POST3, Table XIV) look at.
use std::collections::BTreeMap;

use plotters::prelude::*;

use super::svg::SvgError;
use crate::report::chart::{self, Key};
use ttp_ttpv2::{
    analysis::{Analysis, QcDocument},
    model::NAME_LABEL,
};

const WIDTH: u32 = 860;
const HEIGHT: u32 = 420;
const LEGEND_WIDTH: u32 = 230;

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
];
const EXACT: RGBColor = RGBColor(44, 160, 44);

/// One Q@C on the chart.
struct Point {
    x: f64,
    /// Time_calc of the QEs the protocol retained (Step 2 kept them in a
    /// Q@C Step 3 kept); empty when the Q@C was dropped.
    calc: Vec<f64>,
    median_calc: Option<f64>,
    /// The exact time of every QE that ran to its end.
    exact: Vec<f64>,
    median_exact: Option<f64>,
}

/// The Q@Cs with a numeric value of their scanned parameter, by command
/// (the `name` label; "" for a run of one command), in order of value.
fn series(a: &Analysis) -> (String, BTreeMap<String, Vec<Point>>) {
    let mut by: BTreeMap<String, Vec<Point>> = BTreeMap::new();
    let mut parameter = String::new();
    for qc in &a.qcs {
        let Some(p) = qc.setup.parameter.as_deref() else {
            continue;
        };
        let Some(x) = qc
            .labels
            .get(p)
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|x| x.is_finite())
        else {
            continue;
        };
        parameter = p.to_string();
        let name = qc.labels.get(NAME_LABEL).cloned().unwrap_or_default();
        by.entry(name).or_default().push(point(qc, x));
    }
    for v in by.values_mut() {
        v.sort_by(|a, b| a.x.total_cmp(&b.x));
    }
    (parameter, by)
}

fn point(qc: &QcDocument, x: f64) -> Point {
    let calc = if qc.result.dropped_reason.is_some() {
        Vec::new()
    } else {
        qc.qes
            .iter()
            .filter(|e| e.dropped_by.is_empty())
            .filter_map(|e| e.calc.time_calc_ms)
            .collect()
    };
    let exact: Vec<f64> = qc
        .qes
        .iter()
        .filter(|e| e.record.spawn_error.is_none() && e.record.timed_out != Some(true))
        .filter_map(|e| e.calc.time_exact_ms)
        .collect();
    let median_exact = ttp_ttpv2::stats::Summary::of(&exact).map(|s| s.median);
    Point {
        x,
        calc,
        median_calc: qc.result.time_calc_ms,
        exact,
        median_exact,
    }
}

fn err<E: std::fmt::Display>(e: E) -> SvgError {
    SvgError::new(e.to_string())
}

/// The chart, or `None` when no Q@C has a numeric scanned parameter
/// (a run without a scan, or a scan of names such as compilers).
pub(crate) fn render_scan_svg(a: &Analysis) -> Result<Option<String>, SvgError> {
    let (parameter, by) = series(a);
    if by.is_empty() {
        return Ok(None);
    }
    let xs: Vec<f64> = by.values().flatten().map(|p| p.x).collect();
    let (x_min, x_max) = xs
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    let pad = if x_max > x_min {
        (x_max - x_min) * 0.05
    } else {
        x_min.abs().max(1.0) * 0.5
    };
    let ys = by.values().flatten().flat_map(|p| {
        p.calc
            .iter()
            .chain(&p.exact)
            .copied()
            .chain(p.median_calc)
            .chain(p.median_exact)
    });
    let y_max = ys.filter(|y| y.is_finite()).fold(1.0f64, f64::max) * 1.1;
    let drawable = |v: f64| (0.0..=y_max).contains(&v);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let area = root
            .titled(
                &format!("TTPv2 — time against {parameter}"),
                ("sans-serif", 18),
            )
            .map_err(err)?;
        let (plot, legend_area) = chart::split(&area, LEGEND_WIDTH);
        let mut c = ChartBuilder::on(&plot)
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d((x_min - pad)..(x_max + pad), 0f64..y_max)
            .map_err(err)?;
        c.configure_mesh()
            .x_desc(parameter.as_str())
            .y_desc("ms")
            .y_label_formatter(&|v| format!("{v:.0}"))
            .draw()
            .map_err(err)?;
        let mut legend: Vec<(String, Key)> = Vec::new();
        for (k, (name, points)) in by.iter().enumerate() {
            let color = PALETTE[k % PALETTE.len()];
            let who = if name.is_empty() {
                String::new()
            } else {
                format!("{name}: ")
            };
            // The spread: every retained QE, and the fastest-to-slowest bar.
            for p in points {
                let ok: Vec<f64> = p.calc.iter().copied().filter(|&v| drawable(v)).collect();
                c.draw_series(
                    ok.iter()
                        .map(|&v| Circle::new((p.x, v), 2, color.mix(0.45).filled())),
                )
                .map_err(err)?;
                if let (Some(lo), Some(hi)) = (
                    ok.iter().copied().reduce(f64::min),
                    ok.iter().copied().reduce(f64::max),
                ) {
                    c.draw_series(std::iter::once(PathElement::new(
                        vec![(p.x, lo), (p.x, hi)],
                        color.stroke_width(1),
                    )))
                    .map_err(err)?;
                }
            }
            let medians: Vec<(f64, f64)> = points
                .iter()
                .filter_map(|p| p.median_calc.filter(|&v| drawable(v)).map(|v| (p.x, v)))
                .collect();
            if !medians.is_empty() {
                c.draw_series(LineSeries::new(medians.clone(), color.stroke_width(2)))
                    .map_err(err)?;
                c.draw_series(medians.iter().map(|&p| {
                    EmptyElement::at(p) + Rectangle::new([(-4, -4), (4, 4)], color.filled())
                }))
                .map_err(err)?;
                legend.push((format!("{who}median Time_calc"), Key::Line(color)));
                legend.push((format!("{who}retained QEs, min–max"), Key::Square(color)));
            }
            let shade = if by.len() == 1 { EXACT } else { color };
            for p in points {
                c.draw_series(
                    p.exact
                        .iter()
                        .filter(|&&v| drawable(v))
                        .map(|&v| Circle::new((p.x, v), 3, shade.stroke_width(1))),
                )
                .map_err(err)?;
            }
            let exact: Vec<(f64, f64)> = points
                .iter()
                .filter_map(|p| p.median_exact.filter(|&v| drawable(v)).map(|v| (p.x, v)))
                .collect();
            if !exact.is_empty() {
                c.draw_series(LineSeries::new(
                    exact.clone(),
                    shade.mix(0.6).stroke_width(1),
                ))
                .map_err(err)?;
                c.draw_series(
                    exact
                        .iter()
                        .map(|&p| TriangleMarker::new(p, 4, shade.filled())),
                )
                .map_err(err)?;
                legend.push((
                    format!("{who}exact (ledger), every QE"),
                    Key::Outline(shade),
                ));
                legend.push((format!("{who}median exact"), Key::Triangle(shade)));
            }
            let dropped = points.iter().filter(|p| p.median_calc.is_none()).count();
            if dropped > 0 {
                legend.push((
                    format!("{who}{dropped} Q@C(s) dropped (Step 3)"),
                    Key::Cross(RED),
                ));
            }
        }
        chart::draw(&legend_area, &legend, 10).map_err(SvgError::new)?;
        root.present().map_err(err)?;
    }
    Ok(Some(svg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ttp_ttpv2::analysis::analyse;
    use ttp_ttpv2::model::QcInput;
    use ttp_ttpv2::testutil::clean_qc;

    fn scan_qc(rows: &str, name: Option<&str>, extra_u: u64) -> QcInput {
        let mut qc = clean_qc(8);
        qc.setup.parameter = Some("rows".into());
        qc.labels.insert("rows".into(), rows.into());
        if let Some(n) = name {
            qc.labels.insert(NAME_LABEL.into(), n.into());
        }
        // The extra CPU shows in the machine's ticks and the elapsed time
        // too, so that the QEs still pass the protocol's checks.
        for q in &mut qc.qes {
            q.overall.user_ticks = q.overall.user_ticks.map(|u| u + extra_u);
            q.time_meas_ms += extra_u as f64 * 10.0;
            q.time_meas_ns = q.time_meas_ns.map(|t| t + extra_u * 10_000_000);
            for p in &mut q.processes {
                if p.class == ttp_window::window::record::ProcessClass::Query {
                    p.m.u_ticks = p.m.u_ticks.map(|u| u + extra_u);
                }
            }
        }
        qc
    }

    /// Two commands at three values: one dot per retained QE (8 × 6) and
    /// one hollow dot per QE's exact time (none in these QEs), the
    /// value axis labelled with the parameter, a legend row per command;
    /// and no chart without a scan. Catches Q@Cs of one command drawn as
    /// another's, and a chart drawn for runs that scanned nothing.
    #[test]
    fn one_line_per_command_with_every_qe() {
        let qcs: Vec<QcInput> = ["old", "new"]
            .iter()
            .flat_map(|n| {
                [("1000", 0), ("2000", 100), ("4000", 300)].map(|(r, u)| scan_qc(r, Some(n), u))
            })
            .collect();
        let a = analyse(&qcs, None, crate::report::ttpv2::paragraph::text);
        let retained: usize = a.qcs.iter().map(|q| q.result.retained).sum();
        assert_eq!(
            retained,
            8 * 6,
            "the constructed QEs must pass the protocol"
        );
        let svg = render_scan_svg(&a).unwrap().expect("a chart");
        let d = crate::report::chart::tests::drawn(&svg);
        assert_eq!(d.circles.len(), 8 * 6);
        assert!(svg.contains("time against rows"));
        assert!(svg.contains("old: median Time_calc") && svg.contains("new: median Time_calc"));
        let (_, by) = series(&a);
        let old: Vec<(f64, Option<f64>)> = by["old"].iter().map(|p| (p.x, p.median_calc)).collect();
        // clean_qc: median Time_calc 1915 ms; +100 and +300 ticks of U.
        assert_eq!(
            old,
            [
                (1000.0, Some(1915.0)),
                (2000.0, Some(2915.0)),
                (4000.0, Some(4915.0))
            ]
        );
        assert!(
            render_scan_svg(&analyse(
                &[clean_qc(8)],
                None,
                crate::report::ttpv2::paragraph::text
            ))
            .unwrap()
            .is_none()
        );
    }
}
