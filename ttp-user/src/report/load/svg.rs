//! The percentile spectrum of a run (as in the paper's Fig. 4(b) and 5(b)):
//! latency against percentile on a log axis of 1/(1−p), one line per
//! distribution, so the models can be compared over the whole tail.
use plotters::prelude::*;

use ttp_load::{
    histograms::{new_histogram, spectrum_points},
    output::{LoadReport, Series},
};

#[derive(Debug, thiserror::Error)]
pub enum SvgError {
    #[error("no latencies were measured, so there is nothing to plot")]
    Empty,
    #[error("drawing the percentile spectrum failed: {0}")]
    Draw(String),
}

/// Lines often coincide (the open model and its known answer; YCSB's
/// correction and the open model): wider lines are drawn first so each
/// stays visible under the next.
fn stroke_width(s: Series) -> u32 {
    match s {
        Series::Expected => 7,
        Series::OpenLatency => 4,
        Series::ClosedIntended | Series::ClosedUncorrected => 2,
        Series::OpenServiceTime => 1,
    }
}

fn color(s: Series) -> RGBColor {
    match s {
        Series::OpenLatency => RGBColor(0x1f, 0x77, 0xb4),
        Series::OpenServiceTime => RGBColor(0x7f, 0x7f, 0x7f),
        Series::ClosedUncorrected => RGBColor(0xd6, 0x27, 0x28),
        Series::ClosedIntended => RGBColor(0xff, 0x7f, 0x0e),
        Series::Expected => RGBColor(0x2c, 0xa0, 0x2c),
    }
}

/// The label of a point on the 1/(1−p) axis: 1 → "0%", 10 → "90%",
/// 1000 → "99.9%"; empty between powers of ten.
fn percentile_label(x: f64) -> String {
    let k = x.log10();
    if (k - k.round()).abs() > 1e-6 {
        return String::new();
    }
    let k = k.round() as i32;
    if k <= 0 {
        return "0%".into();
    }
    let decimals = (k - 2).max(0) as usize;
    format!("{:.decimals$}%", 100.0 * (1.0 - 10f64.powi(-k)))
}

/// Renders the spectrum of every distribution in `report` as SVG text.
pub fn render(report: &LoadReport) -> Result<String, SvgError> {
    let mut lines: Vec<(Series, Vec<(f64, f64)>)> = Vec::new();
    for ph in &report.phases {
        for (s, h) in ph.series() {
            let pts = spectrum_points(h);
            if !pts.is_empty() {
                lines.push((s, pts));
            }
        }
    }
    if let Some(values) = &report.expected_ns {
        let mut h = new_histogram();
        for &v in values {
            h.saturating_record(v);
        }
        let pts = spectrum_points(&h);
        if !pts.is_empty() {
            lines.push((Series::Expected, pts));
        }
    }
    lines.sort_by_key(|(s, _)| std::cmp::Reverse(stroke_width(*s)));
    if lines.is_empty() {
        return Err(SvgError::Empty);
    }
    let x_max = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.0))
        .fold(10.0f64, f64::max);
    let x_max = 10f64.powf(x_max.log10().ceil());
    let y_max = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.1))
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.05;
    let draw = |e: &dyn std::fmt::Display| SvgError::Draw(e.to_string());
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| draw(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption("Latency by percentile", ("sans-serif", 20))
            .margin(12)
            .margin_right(36)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((1.0f64..x_max).log_scale(), 0.0f64..y_max)
            .map_err(|e| draw(&e))?;
        chart
            .configure_mesh()
            .x_desc("percentile (axis: 1/(1 - p), log scale)")
            .y_desc("latency (ms)")
            .x_label_formatter(&|x| percentile_label(*x))
            .draw()
            .map_err(|e| draw(&e))?;
        for (s, pts) in lines {
            let style = color(s).stroke_width(stroke_width(s));
            chart
                .draw_series(LineSeries::new(pts, style))
                .map_err(|e| draw(&e))?
                .label(s.label())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| draw(&e))?;
        root.present().map_err(|e| draw(&e))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches axis labels that name the wrong percentile.
    #[test]
    fn percentile_labels() {
        assert_eq!(percentile_label(1.0), "0%");
        assert_eq!(percentile_label(10.0), "90%");
        assert_eq!(percentile_label(100.0), "99%");
        assert_eq!(percentile_label(1000.0), "99.9%");
        assert_eq!(percentile_label(100_000.0), "99.999%");
        assert_eq!(percentile_label(3.0), "");
    }
}
