//! Graphviz DOT of the blame graph: causes on the left, the victim on the
//! right, one column per level; nodes show BC and DOR, edges the Impact
//! Factor (Sec. 4.2). Render with `dot -Tsvg blame.dot > blame.svg`.
use std::fmt::Write;

use ttp_blame::{
    fmt_ns,
    graph::{Graph, Level},
};
use ttp_window::window::blame_record::CauseKind;

/// The graph as DOT text.
pub fn render(graph: &Graph, title: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "digraph blame {{");
    let _ = writeln!(s, "  rankdir=LR;");
    let _ = writeln!(s, "  label=\"{}\"; labelloc=t;", escape(title));
    let _ = writeln!(
        s,
        "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];"
    );
    let _ = writeln!(s, "  edge [fontname=\"Helvetica\", fontsize=9];");
    let levels = [
        Level::Group,
        Level::Process,
        Level::Thread,
        Level::Unit,
        Level::Resource,
        Level::Victim,
    ];
    for level in levels {
        let _ = writeln!(s, "  {{ rank=same;");
        for n in graph.nodes.iter().filter(|n| n.level == level) {
            let _ = writeln!(
                s,
                "    \"{}\" [label=\"{}\\n{}  DOR {:.3}\", fillcolor=\"{}\"];",
                escape(&n.id),
                escape(&n.label),
                fmt_ns(n.blame_ns),
                n.dor,
                color(n.level, n.kind)
            );
        }
        let _ = writeln!(s, "  }}");
    }
    for e in &graph.edges {
        let _ = writeln!(
            s,
            "  \"{}\" -> \"{}\" [label=\"IF {:.3}\", penwidth={:.2}];",
            escape(&e.from),
            escape(&e.to),
            e.impact_factor,
            1.0 + 3.0 * e.impact_factor.clamp(0.0, 1.0)
        );
    }
    let _ = writeln!(s, "}}");
    s
}

fn color(level: Level, kind: Option<CauseKind>) -> &'static str {
    match (level, kind) {
        (Level::Victim, _) => "#f4cccc",
        (Level::Resource | Level::Unit, _) => "#fff2cc",
        (_, Some(CauseKind::Concurrent)) => "#cfe2f3",
        (_, Some(CauseKind::Own)) => "#f4cccc",
        (_, Some(CauseKind::Known)) => "#d9ead3",
        (_, Some(CauseKind::Unknown) | None) => "#eeeeee",
    }
}

/// Escapes a string for a double-quoted DOT id or label.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}
