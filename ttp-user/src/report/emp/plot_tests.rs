//! The SVGs are well-formed XML with one marker per plotted item.
use super::*;
use ttp_emp::{
    EmpConfig, apply,
    calibrate::{CalibrationConfig, analyze, tests::synthetic_runs},
};

fn count(svg: &str, tag: &str) -> usize {
    let doc = roxmltree::Document::parse(svg).expect("SVG is not well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    doc.descendants()
        .filter(|n| n.tag_name().name() == tag)
        .count()
}

/// One circle per dual execution and nothing else drawn as a circle.
/// Catches a plot per run instead of per pair, legend markers counted as
/// points, or malformed XML.
#[test]
fn dual_execution_plot_has_one_circle_per_pair() {
    let a = analyze(&[], &synthetic_runs(), &CalibrationConfig::default()).unwrap();
    let svg = dual_execution_svg(&a, Zoom::All).unwrap();
    assert_eq!(count(&svg, "circle"), a.pairs.len());
    assert_eq!(a.pairs.len(), 100);
    let zoomed = dual_execution_svg(&a, Zoom::Central).unwrap();
    assert_eq!(count(&zoomed, "circle"), a.l_shape.central);
}

/// Two panels (ET and PT): one circle per retained run in each, one
/// triangle (polygon) per run dropped by the daemon rule in each. Catches
/// dropped runs drawn as retained.
#[test]
fn series_plot_marks_dropped_runs() {
    let runs = synthetic_runs();
    let a = analyze(&[], &runs, &CalibrationConfig::default()).unwrap();
    let profile = ttp_emp::calibrate::build_profile(a, None, 2.0);
    let o = apply(&runs, Some(&profile), &EmpConfig::default()).unwrap();
    let retained = o.runs.iter().filter(|r| r.verdict.is_retained()).count();
    assert!(o.dropped.daemon_cutoff > 0);
    let svg = series_svg(&o).unwrap();
    assert_eq!(count(&svg, "circle"), 2 * retained);
    // +1: the legend's triangle in each panel.
    assert_eq!(count(&svg, "polygon"), 2 * (o.dropped.daemon_cutoff + 1));
}

/// The series plot keeps its legend right of every run's marker, and
/// labels the run axis once per whole run (no "-0", no run printed twice
/// at half-run ticks); the dual-execution legend is right of every pair.
/// Catches an outlying run hidden under the legend box and the repeated
/// run numbers of a formatter that rounds every tick.
#[test]
fn legends_beside_the_points_and_whole_runs_on_the_axis() {
    use crate::report::chart::tests::drawn;
    let runs = synthetic_runs();
    let a = analyze(&[], &runs, &CalibrationConfig::default()).unwrap();
    let profile = ttp_emp::calibrate::build_profile(a.clone(), None, 2.0);
    let o = apply(&runs, Some(&profile), &EmpConfig::default()).unwrap();
    let d = drawn(&series_svg(&o).unwrap());
    let rightmost = d.circles.iter().map(|c| c.0).fold(0.0, f64::max);
    let retained = d
        .texts
        .iter()
        .find(|t| t.2.starts_with("retained ("))
        .unwrap();
    assert!(
        retained.0 > rightmost + 10.0,
        "legend at {retained:?}, a run at x {rightmost}"
    );
    let labels: Vec<&str> = d
        .texts
        .iter()
        .filter(|t| t.2.parse::<i64>().is_ok() || t.2 == "-0")
        .map(|t| t.2.as_str())
        .collect();
    assert!(!labels.contains(&"-0"), "{labels:?}");
    let mut seen = std::collections::BTreeMap::new();
    for l in &labels {
        *seen.entry(*l).or_insert(0) += 1;
    }
    // Each run number appears once per panel (two panels).
    assert!(seen.values().all(|&n| n <= 2), "{seen:?}");
    let dual = drawn(&dual_execution_svg(&a, Zoom::All).unwrap());
    let right = dual.circles.iter().map(|c| c.0).fold(0.0, f64::max);
    let key = dual
        .texts
        .iter()
        .find(|t| t.2.starts_with("central cluster"))
        .unwrap();
    assert!(key.0 > right, "legend at {key:?}, a pair at x {right}");
}
