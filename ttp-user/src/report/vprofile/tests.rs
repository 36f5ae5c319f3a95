//! The text, chart and saved form of a vprofile report, on the hand-built
//! call graph of ttp-vprofile/src/fake_graph.rs (every number known in
//! advance) and on the vprof-target fixture.
use super::icicle;
use ttp_vprofile::{
    document::SCHEMA,
    fake_graph::{CONFIG, report, run},
    fixture::Variant,
    fixture_variance_tests::drive_deep,
};

/// JSON carries the schema and a tree whose children of every broken-down
/// node add up to it (eq. 1); the text shows the selected factor and the
/// tree; the SVG draws one rectangle per shown node. Catches outputs that
/// drift from the computed tree.
#[test]
fn outputs_agree_with_the_tree() {
    let b = run(CONFIG);
    let r = report(&b);
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["schema"], SCHEMA);
    assert_eq!(json["selected"][0], "Var(C)");
    let tree = json["tree"].as_array().unwrap();
    for node in tree {
        let id = node["id"].as_u64().unwrap();
        let kids: Vec<&serde_json::Value> = tree
            .iter()
            .filter(|c| c["parent"].as_u64() == Some(id))
            .collect();
        if !kids.is_empty() {
            let sum: f64 = kids.iter().map(|c| c["value_ns2"].as_f64().unwrap()).sum();
            let v = node["value_ns2"].as_f64().unwrap();
            assert!(
                (sum - v).abs() <= 1e-9 * v.abs().max(1.0),
                "{}: {sum} vs {v}",
                node["term"]
            );
        }
    }
    let text = super::vprofile_text(&r, 0.0);
    assert!(text.contains("Var(C)"), "{text}");
    assert!(text.contains("(explained by a child)"), "{text}");
    let svg = icicle(&r).unwrap();
    assert!(svg.starts_with("<svg"));
    // Background + (fill + frame) per node at least ~12 px wide, and a
    // label on every node wider than 40 px (≥ 5 % of the root here).
    let rects = svg.matches("<rect").count();
    let wide = r.tree.iter().filter(|n| n.share.abs() >= 0.01).count();
    assert!(rects > 2 * wide, "{rects} rectangles for {wide} wide nodes");
    for n in r.tree.iter().filter(|n| n.share.abs() >= 0.05) {
        assert!(svg.contains(&n.term), "{} not labelled", n.term);
    }
}

/// The JSON `vprofile --json` writes, read back by `ttp-ebpf report`,
/// gives the same text and one row per factor. Catches a field the JSON
/// loses, so that a saved result would read differently.
#[test]
fn saved_report_renders_the_same() {
    let r = report(&run(CONFIG));
    let saved = crate::report::render::load(serde_json::to_value(&r).unwrap()).unwrap();
    assert_eq!(saved.text(), super::vprofile_text(&r, 0.01));
    let t = saved.table();
    assert_eq!(t.rows.len(), r.factors.len());
    assert_eq!(t.rows[0][1], "Var(C)");
}

/// The chart of the report driven from the vprof-target fixture (PIE and
/// not) labels the injected source. Catches a chart that drops the
/// selected factor of a real run.
#[test]
fn fixture_chart_names_the_injected_source() {
    for variant in [Variant::Pie, Variant::NoPie] {
        let (report, _) = drive_deep(variant);
        assert!(icicle(&report).unwrap().contains("Var(usleep)"));
    }
}
