//! SVG plots of EMP: the dual-execution scatter plot (Sec. 4.5.2, Fig. 14:
//! one circle per pair of consecutive runs, x = ET of the first, y = ET of
//! the second; infrequent long-running daemons show as an L), and the ET /
//! PT series per run with dropped runs marked (cf. Fig. 16: triangles for
//! the daemon rule, squares for ±2σ).
use plotters::{coord::Shift, prelude::*};

use crate::report::chart::{self, Key};
use ttp_emp::{
    EmpError, EmpOutcome, Verdict,
    calibrate::{CalibrationAnalysis, PairKind},
};

/// Width of the legend column beside each plot, px.
const LEGEND_WIDTH: u32 = 300;

const MS: f64 = 1e6;

fn err(what: &'static str) -> impl Fn(String) -> EmpError {
    move |detail| EmpError::Plot { what, detail }
}

/// Range [lo, hi] padded by 3 % (or ±1 ms when flat).
fn padded(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.03).max(if hi > lo { 0.0 } else { 1.0 });
    (lo - pad, hi + pad)
}

/// Which part of the scatter plot to draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Zoom {
    /// Every pair (Fig. 14(a)).
    All,
    /// Only pairs inside the central cluster's fence (Fig. 14(d)).
    Central,
}

fn kind_style(kind: PairKind) -> (RGBColor, &'static str) {
    match kind {
        PairKind::Central => (RGBColor(31, 119, 180), "central cluster"),
        PairKind::FirstHigh => (RGBColor(214, 39, 40), "first run an L-sample"),
        PairKind::SecondHigh => (RGBColor(255, 127, 14), "second run an L-sample"),
        PairKind::BothHigh => (RGBColor(148, 103, 189), "both runs L-samples"),
        PairKind::Low => (RGBColor(127, 127, 127), "below the low fence"),
    }
}

/// The dual-execution scatter plot as an SVG document.
pub(crate) fn dual_execution_svg(a: &CalibrationAnalysis, zoom: Zoom) -> Result<String, EmpError> {
    let e = err("dual-execution");
    let pairs: Vec<_> = a
        .pairs
        .iter()
        .filter(|p| zoom == Zoom::All || p.kind == PairKind::Central)
        .collect();
    let (lo, hi) = padded(
        pairs
            .iter()
            .flat_map(|p| [p.first_et_ns as f64 / MS, p.second_et_ns as f64 / MS]),
    );
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (720 + LEGEND_WIDTH, 680)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(x.to_string()))?;
        let title = match zoom {
            Zoom::All => format!("Dual executions: {} pairs of consecutive runs", pairs.len()),
            Zoom::Central => format!("Central cluster: {} pairs", pairs.len()),
        };
        let root = root
            .titled(&title, ("sans-serif", 20))
            .map_err(|x| e(x.to_string()))?;
        let (plot, legend_area) = chart::split(&root, LEGEND_WIDTH);
        let mut legend: Vec<(String, Key)> = Vec::new();
        let mut chart = ChartBuilder::on(&plot)
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(80)
            .build_cartesian_2d(lo..hi, lo..hi)
            .map_err(|x| e(x.to_string()))?;
        chart
            .configure_mesh()
            .x_desc("ET of the first run of the pair (ms)")
            .y_desc("ET of the second run (ms)")
            .draw()
            .map_err(|x| e(x.to_string()))?;
        // The fence that separates L-samples (Step 3), where it is in view.
        let fence = a.fence.upper_ns / MS;
        if zoom == Zoom::All && fence < hi {
            let grey = RGBColor(160, 160, 160);
            chart
                .draw_series(LineSeries::new([(fence, lo), (fence, hi)], grey))
                .map_err(|x| e(x.to_string()))?;
            legend.push((format!("L-sample fence {fence:.3} ms"), Key::Line(grey)));
            chart
                .draw_series(LineSeries::new([(lo, fence), (hi, fence)], grey))
                .map_err(|x| e(x.to_string()))?;
        }
        for kind in [
            PairKind::Central,
            PairKind::FirstHigh,
            PairKind::SecondHigh,
            PairKind::BothHigh,
            PairKind::Low,
        ] {
            let pts: Vec<(f64, f64)> = pairs
                .iter()
                .filter(|p| p.kind == kind)
                .map(|p| (p.first_et_ns as f64 / MS, p.second_et_ns as f64 / MS))
                .collect();
            if pts.is_empty() {
                continue;
            }
            let (color, label) = kind_style(kind);
            let n = pts.len();
            chart
                .draw_series(
                    pts.into_iter()
                        .map(|p| Circle::new(p, 4, color.stroke_width(1))),
                )
                .map_err(|x| e(x.to_string()))?;
            legend.push((format!("{label} ({n})"), Key::Square(color)));
        }
        chart::draw(&legend_area, &legend, 12).map_err(&e)?;
        root.present().map_err(|x| e(x.to_string()))?;
    }
    Ok(svg)
}

/// Marker class of one run in the series plot.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mark {
    Retained,
    Daemon,
    TwoSigma,
    Set,
}

fn mark(v: &Verdict) -> Mark {
    match v {
        Verdict::Retained => Mark::Retained,
        Verdict::DaemonCutoff { .. } => Mark::Daemon,
        Verdict::TwoSigma { .. } => Mark::TwoSigma,
        _ => Mark::Set,
    }
}

/// The PT and ET series per run, dropped runs marked, as an SVG document.
pub(crate) fn series_svg(o: &EmpOutcome) -> Result<String, EmpError> {
    let e = err("PT/ET series");
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900 + LEGEND_WIDTH, 720)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(x.to_string()))?;
        let root = root
            .titled(
                "EMP runs: elapsed time (top) and process time (bottom)",
                ("sans-serif", 20),
            )
            .map_err(|x| e(x.to_string()))?;
        let panels = root.split_evenly((2, 1));
        let et: Vec<(u32, f64, Mark)> = o
            .runs
            .iter()
            .map(|r| (r.index, r.et_ns as f64 / MS, mark(&r.verdict)))
            .collect();
        let pt: Vec<(u32, f64, Mark)> = o
            .runs
            .iter()
            .filter_map(|r| r.pt_ns.map(|p| (r.index, p as f64 / MS, mark(&r.verdict))))
            .collect();
        panel(&panels[0], "ET (ms)", &et, None).map_err(&e)?;
        let band = o.two_sigma.map(|b| (b.lower_ns / MS, b.upper_ns / MS));
        panel(&panels[1], "PT (ms)", &pt, band).map_err(&e)?;
        root.present().map_err(|x| e(x.to_string()))?;
    }
    Ok(svg)
}

fn panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    y_desc: &str,
    pts: &[(u32, f64, Mark)],
    band: Option<(f64, f64)>,
) -> Result<(), String> {
    let x_hi = pts.iter().map(|p| p.0).max().unwrap_or(0) + 1;
    let x_lo = pts.iter().map(|p| p.0).min().unwrap_or(0);
    // A time is never negative: a wide ±2σ band stops at 0 on the axis.
    let band = band.map(|(l, u)| (l.max(0.0), u));
    let (lo, hi) = padded(
        pts.iter()
            .map(|p| p.1)
            .chain(band.into_iter().flat_map(|(a, b)| [a, b])),
    );
    let (area, legend_area) = chart::split(area, LEGEND_WIDTH);
    let mut legend: Vec<(String, Key)> = Vec::new();
    // Runs are whole numbers: ticks between them stay unlabelled.
    let run_label = |x: &f64| {
        let r = x.round();
        if (x - r).abs() < 1e-6 && r >= f64::from(x_lo) && r < f64::from(x_hi) {
            format!("{r:.0}")
        } else {
            String::new()
        }
    };
    let mut chart = ChartBuilder::on(&area)
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(80)
        .build_cartesian_2d(f64::from(x_lo) - 0.5..f64::from(x_hi) - 0.5, lo..hi)
        .map_err(|x| x.to_string())?;
    chart
        .configure_mesh()
        .x_desc("run")
        .x_label_formatter(&run_label)
        .y_desc(y_desc)
        .draw()
        .map_err(|x| x.to_string())?;
    if let Some((l, u)) = band {
        let c = RGBColor(160, 160, 160);
        let (a, b) = (f64::from(x_lo) - 0.5, f64::from(x_hi) - 0.5);
        chart
            .draw_series(LineSeries::new([(a, u), (b, u)], c))
            .map_err(|x| x.to_string())?;
        legend.push(("mean ± 2σ (second sanity check)".into(), Key::Line(c)));
        chart
            .draw_series(LineSeries::new([(a, l), (b, l)], c))
            .map_err(|x| x.to_string())?;
    }
    let sel = |m: Mark| {
        pts.iter()
            .filter(move |p| p.2 == m)
            .map(|p| (f64::from(p.0), p.1))
    };
    let blue = RGBColor(31, 119, 180);
    let red = RGBColor(214, 39, 40);
    let orange = RGBColor(255, 127, 14);
    let grey = RGBColor(127, 127, 127);
    let n = |m: Mark| pts.iter().filter(|p| p.2 == m).count();
    if n(Mark::Retained) > 0 {
        chart
            .draw_series(sel(Mark::Retained).map(|p| Circle::new(p, 3, blue.filled())))
            .map_err(|x| x.to_string())?;
        legend.push((
            format!("retained ({})", n(Mark::Retained)),
            Key::Square(blue),
        ));
    }
    if n(Mark::Daemon) > 0 {
        chart
            .draw_series(sel(Mark::Daemon).map(|p| TriangleMarker::new(p, 7, red.filled())))
            .map_err(|x| x.to_string())?;
        legend.push((
            format!("dropped: daemon cut-off ({})", n(Mark::Daemon)),
            Key::Triangle(red),
        ));
    }
    if n(Mark::TwoSigma) > 0 {
        chart
            .draw_series(sel(Mark::TwoSigma).map(|(x, y)| {
                EmptyElement::at((x, y))
                    + Rectangle::new([(-5, -5), (5, 5)], orange.stroke_width(2))
            }))
            .map_err(|x| x.to_string())?;
        legend.push((
            format!("dropped: ±2σ ({})", n(Mark::TwoSigma)),
            Key::Outline(orange),
        ));
    }
    if n(Mark::Set) > 0 {
        chart
            .draw_series(sel(Mark::Set).map(|p| Cross::new(p, 5, grey.stroke_width(2))))
            .map_err(|x| x.to_string())?;
        legend.push((
            format!(
                "set aside: warm-up, failed, lost records, no PT ({})",
                n(Mark::Set)
            ),
            Key::Cross(grey),
        ));
    }
    chart::draw(&legend_area, &legend, 10)
}

#[cfg(test)]
#[path = "plot_tests.rs"]
mod tests;
