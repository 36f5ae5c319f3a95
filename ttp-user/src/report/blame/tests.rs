//! The blame report rendered from the example recording
//! (docs/examples/blame-recording.json), analysed as `blame --replay` does.
use std::path::PathBuf;

use super::{blame_text, dot, summary_text};
use ttp_blame::{BlameReport, Recording};

fn example() -> Recording {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/examples/blame-recording.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn analysed(rec: &Recording) -> BlameReport {
    ttp_blame::analyze(rec, &Default::default()).unwrap()
}

/// The victim's exit is said in words only when it exited in the window.
#[test]
fn an_exited_victim_is_said() {
    let mut report = analysed(&example());
    assert!(!blame_text(&report, 5).contains("exited"));
    report.victim.exited_after_ns = Some(170_000_000);
    let text = blame_text(&report, 5);
    assert!(
        text.contains("The victim exited 170.0 ms after the start."),
        "{text}"
    );
}

/// The top explanations are listed with their sentence, and the culprit
/// table shows ttp's top culprits and, beside them, the processes only the
/// overlap baseline blames (iQCAR Sec. 6.1), so the two answers can be
/// compared.
#[test]
fn explanations_and_both_answers_are_listed() {
    let report = analysed(&example());
    let top = 2;
    let text = blame_text(&report, top);
    assert!(!report.explanations.is_empty());
    for e in report.explanations.iter().take(top) {
        assert!(text.contains(&e.text), "{} missing from\n{text}", e.text);
    }
    let mut by_overlap: Vec<_> = report.culprits.iter().collect();
    by_overlap.sort_by(|a, b| b.overlap_blame_ns.total_cmp(&a.overlap_blame_ns));
    let listed = |c: &ttp_window::window::blame_record::CulpritSummary| {
        let name: String = c.process.chars().take(17).collect();
        let pid = c.pid.map_or("-".to_string(), |p| p.to_string());
        text.lines()
            .any(|l| l.trim_start().starts_with(&name) && l.contains(&pid))
    };
    for c in report.culprits.iter().take(top) {
        assert!(
            listed(c),
            "ttp's culprit {} missing from\n{text}",
            c.process
        );
    }
    for c in by_overlap
        .iter()
        .take(top)
        .filter(|c| c.overlap_blame_ns > 0.0)
    {
        assert!(
            listed(c),
            "the baseline's culprit {} missing from\n{text}",
            c.process
        );
    }
}

/// The DOT text has one node line per node and one edge line per edge, and
/// escapes quotes in names (a comm may contain any byte).
#[test]
fn dot_lists_every_node_and_edge_escaped() {
    let mut rec = example();
    let culprit = analysed(&rec).culprits[0].pid.expect("a process culprit");
    rec.tasks
        .iter_mut()
        .filter(|t| t.pid == culprit)
        .for_each(|t| t.comm = "read\"er".into());
    let report = analysed(&rec);
    let text = dot::render(&report.graph, "t");
    assert!(text.starts_with("digraph blame {") && text.trim_end().ends_with('}'));
    assert_eq!(text.matches(" -> ").count(), report.graph.edges.len());
    assert_eq!(text.matches("fillcolor=").count(), report.graph.nodes.len());
    assert!(
        text.contains(&format!("read\\\"er pid {culprit}")),
        "{text}"
    );
    assert!(!text.contains("read\"er"));
}

/// The per-QE summary of `run --blame` heads its lines with the QE and the
/// blocked total, names every measured resource with its blocked time, and
/// lists no more explanations than asked. Catches a resource or an
/// explanation lost on the way from the blame report to the run's report.
#[test]
fn the_per_qe_summary_names_resources_and_top_explanations() {
    let report = analysed(&example());
    let summary = report.summary(5);
    let text = summary_text(&summary, 3, 1);
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with(&format!(
            "  QE 3: blocked {}",
            ttp_blame::fmt_ns(summary.blocked_ns() as f64)
        )),
        "{text}"
    );
    let blocked: Vec<_> = summary
        .resources
        .iter()
        .filter(|r| r.blocked_measured && r.blocked_ns > 0)
        .collect();
    assert!(!blocked.is_empty(), "the example blocks on something");
    for r in blocked {
        let named = format!(
            "{} {}",
            r.resource.name(),
            ttp_blame::fmt_ns(r.blocked_ns as f64)
        );
        assert!(first.contains(&named), "{named} missing: {text}");
    }
    let e = summary.explanations.first().expect("the example explains");
    assert_eq!(text.lines().count(), 2, "one explanation asked: {text}");
    assert!(text.contains(&format!("    1. {}", e.text)), "{text}");
}
