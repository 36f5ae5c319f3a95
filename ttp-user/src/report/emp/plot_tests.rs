//! The SVGs are well-formed XML with one marker per plotted item.
use super::*;
use crate::protocol::emp::{
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
    let profile = crate::protocol::emp::calibrate::build_profile(a, None, 2.0);
    let o = apply(&runs, Some(&profile), &EmpConfig::default()).unwrap();
    let retained = o.runs.iter().filter(|r| r.verdict.is_retained()).count();
    assert!(o.dropped.daemon_cutoff > 0);
    let svg = series_svg(&o).unwrap();
    assert_eq!(count(&svg, "circle"), 2 * retained);
    // +1: the legend's triangle in each panel.
    assert_eq!(count(&svg, "polygon"), 2 * (o.dropped.daemon_cutoff + 1));
}
