//! One SVG per measure: every file's samples as a strip (one row per file,
//! baseline on top), each side's centre as a bar, and under each
//! candidate the bootstrap interval of its ratio to A, drawn in A's units
//! (ratio bounds × A's centre) so that it can be read against the strips.
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::report::render::rendered::{RenderError, write_plot};
use ttp_compare::{CompareDocument, MeasureComparison};

const WIDTH: u32 = 860;
const ROW_HEIGHT: u32 = 90;
const BLUE: RGBColor = RGBColor(31, 119, 180);
const ORANGE: RGBColor = RGBColor(255, 127, 14);

fn err(what: &str) -> impl Fn(String) -> RenderError + '_ {
    move |detail| RenderError::Plot {
        what: what.to_string(),
        detail,
    }
}

/// A row of the plot: label, samples, centre, and for candidates the
/// interval in A's units.
struct Row<'a> {
    label: String,
    samples: &'a [f64],
    centre: f64,
    ci: Option<(f64, f64)>,
    /// What the interval bar is, in words.
    ci_label: String,
}

fn rows<'a>(doc: &'a CompareDocument, measure: &str, ms: &[&'a MeasureComparison]) -> Vec<Row<'a>> {
    let Some(first) = ms.first() else {
        return Vec::new();
    };
    let mut rows = vec![Row {
        label: format!("{} (n={})", doc.files[0].label, first.baseline.n),
        samples: &first.baseline.samples,
        centre: first.baseline.centre,
        ci: None,
        ci_label: String::new(),
    }];
    for (c, m) in doc.comparisons.iter().filter_map(|c| {
        c.measures
            .iter()
            .find(|m| m.measure == measure)
            .map(|m| (c, m))
    }) {
        rows.push(Row {
            label: format!("{} (n={})", c.candidate, m.candidate.n),
            samples: &m.candidate.samples,
            centre: m.candidate.centre,
            ci: m
                .ci
                .as_ref()
                .map(|ci| (ci.lower * m.baseline.centre, ci.upper * m.baseline.centre)),
            ci_label: m.ci.as_ref().map_or(String::new(), |ci| {
                format!(
                    "{} % CI of {}/{} = {:.3}–{:.3}, × {}'s {}",
                    (ci.level * 100.0).round(),
                    c.candidate,
                    c.baseline,
                    ci.lower,
                    ci.upper,
                    c.baseline,
                    m.centre.name()
                )
            }),
        });
    }
    rows
}

/// Vertical offsets of a strip, spread by index so that equal values (ticks)
/// stay visible; deterministic so the file is reproducible.
fn jitter(i: usize) -> f64 {
    ((i * 37) % 11) as f64 / 11.0 * 0.3 - 0.15
}

fn draw(doc: &CompareDocument, measure: &str, rows: &[Row]) -> Result<String, String> {
    let e = |x: &dyn std::fmt::Display| x.to_string();
    let all = rows.iter().flat_map(|r| {
        r.samples
            .iter()
            .copied()
            .chain(r.ci.into_iter().flat_map(|(a, b)| [a, b]))
    });
    let (lo, hi) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| {
        (l.min(x), h.max(x))
    });
    let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.005).max(1e-9);
    let (x0, x1) = (lo - pad, hi + pad);
    let k = rows.len();
    let centre_name = doc
        .comparisons
        .first()
        .and_then(|c| c.measures.iter().find(|m| m.measure == measure))
        .map_or("centre", |m| m.centre.name());
    let mut svg = String::new();
    {
        let height = ROW_HEIGHT * k as u32 + 120;
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "{measure}: samples, {centre_name}s and the {} % interval of X/A",
                    { (doc.method.config.level * 100.0).round() }
                ),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(10)
            .build_cartesian_2d(x0..x1, -0.62f64..(k as f64 - 0.5))
            .map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_desc(measure)
            .draw()
            .map_err(|x| e(&x))?;
        for (i, r) in rows.iter().enumerate() {
            let y = (k - 1 - i) as f64;
            let color = if i == 0 { BLUE } else { ORANGE };
            chart
                .draw_series(
                    r.samples.iter().enumerate().map(|(j, &x)| {
                        Circle::new((x, y + jitter(j)), 4, color.mix(0.55).filled())
                    }),
                )
                .map_err(|x| e(&x))?;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(r.centre, y - 0.3), (r.centre, y + 0.3)],
                    BLACK.stroke_width(3),
                )))
                .map_err(|x| e(&x))?;
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("{}  {centre_name} {}", r.label, super::num(r.centre)),
                    (x0, y + 0.42),
                    ("sans-serif", 14),
                )))
                .map_err(|x| e(&x))?;
            if let Some((l, h)) = r.ci {
                let yc = y - 0.38;
                chart
                    .draw_series([
                        PathElement::new(vec![(l, yc), (h, yc)], BLACK.stroke_width(2)),
                        PathElement::new(
                            vec![(l, yc - 0.06), (l, yc + 0.06)],
                            BLACK.stroke_width(2),
                        ),
                        PathElement::new(
                            vec![(h, yc - 0.06), (h, yc + 0.06)],
                            BLACK.stroke_width(2),
                        ),
                    ])
                    .map_err(|x| e(&x))?;
                chart
                    .draw_series(std::iter::once(Text::new(
                        r.ci_label.clone(),
                        (l, yc - 0.06),
                        ("sans-serif", 12),
                    )))
                    .map_err(|x| e(&x))?;
            }
        }
        root.present().map_err(|x| e(&x))?;
    }
    Ok(svg)
}

/// Writes `compare-MEASURE.svg` for every measure compared into `dir`.
pub(crate) fn write_svgs(doc: &CompareDocument, dir: &Path) -> Result<Vec<PathBuf>, RenderError> {
    let mut names: Vec<&str> = Vec::new();
    for c in &doc.comparisons {
        for m in &c.measures {
            if !names.contains(&m.measure.as_str()) {
                names.push(&m.measure);
            }
        }
    }
    let mut files = Vec::new();
    for name in names {
        let ms: Vec<&MeasureComparison> = doc
            .comparisons
            .iter()
            .filter_map(|c| c.measures.iter().find(|m| m.measure == name))
            .collect();
        let rows = rows(doc, name, &ms);
        let file = format!("compare-{name}.svg");
        let text = draw(doc, name, &rows).map_err(err(&file))?;
        files.push(write_plot(dir, &file, &text)?);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ttp_compare::{Config, Measure, Side, compare, stats::Centre};

    fn side(xs: &[f64]) -> Side {
        let m = |name: &str| Measure {
            name: name.into(),
            what: String::new(),
            centre: Centre::Mean,
            samples: xs.to_vec(),
            sample_unit: "runs",
        };
        Side {
            schema: "ttp.emp/1".into(),
            title: "q".into(),
            retained: xs.len(),
            measures: vec![m("pt_ms"), m("et_ms")],
            whole_run: Vec::new(),
            setup: Default::default(),
            vprofile: None,
        }
    }

    /// Catches a plot that loses a file's row, a measure, or the interval:
    /// one SVG per measure, a labelled row per file, the interval's bounds
    /// written beside its bar.
    #[test]
    fn one_strip_plot_per_measure_with_every_row_and_interval() {
        let a = side(&[10.0, 10.2, 9.9, 10.1, 10.3]);
        let b = side(&[9.5, 9.6, 9.4, 9.7, 9.5]);
        let c = side(&[10.0, 10.1, 10.2, 9.9, 10.0]);
        let doc = compare(
            &[("a".into(), a), ("b".into(), b), ("c".into(), c)],
            &Config::default(),
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let files = write_svgs(&doc, dir.path()).unwrap();
        assert_eq!(files.len(), 2);
        let text = std::fs::read_to_string(&files[0]).unwrap();
        assert!(files[0].ends_with("compare-pt_ms.svg"));
        assert!(text.starts_with("<svg"));
        for row in ["A (n=5)", "B (n=5)", "C (n=5)"] {
            assert!(text.contains(row), "{row}");
        }
        let ci = doc.comparisons[0].measures[0].ci.as_ref().unwrap();
        assert!(text.contains(&format!("95 % CI of B/A = {:.3}–{:.3}", ci.lower, ci.upper)));
    }
}
