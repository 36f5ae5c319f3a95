//! Algorithm 2 and the outputs on a hand-built call graph with constructed
//! durations, so every number is known in advance.
use std::collections::HashMap;

use super::{
    breakdown::{Breakdown, BreakdownConfig, CallGraphView},
    callgraph::{Child, ChildKey},
    elf::{ElfKind, SymbolSource},
    render::{BinaryInfo, MeasurementInfo, SCHEMA, VprofileReport},
    svg::icicle,
    tree::{ChildTable, Invocation},
};

/// R calls A and B; A calls C and D. Heights: C, D, B = 0; A = 1; R = 2.
struct Fake(HashMap<&'static str, Vec<&'static str>>);

impl Fake {
    fn new() -> Self {
        Self(HashMap::from([
            ("R", vec!["A", "B"]),
            ("A", vec!["C", "D"]),
        ]))
    }
}

impl CallGraphView for Fake {
    fn root_height(&self) -> u32 {
        2
    }
    fn height(&self, f: &str) -> u32 {
        match f {
            "R" => 2,
            "A" => 1,
            _ => 0,
        }
    }
    fn children(&self, f: &str) -> Vec<Child> {
        self.0
            .get(f)
            .map(|cs| {
                cs.iter()
                    .enumerate()
                    .map(|(i, c)| Child {
                        key: ChildKey::Import((*c).into()),
                        name: (*c).into(),
                        call_sites: vec![(0x100 + i as u64 * 8, 0x105 + i as u64 * 8)],
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Durations (ns) of 8 invocations: C carries almost all of the variance;
/// D, B and the bodies are nearly constant.
fn invocations(table: &ChildTable) -> Vec<Invocation> {
    let c = [100u64, 900, 300, 700, 200, 800, 400, 600];
    (0..8)
        .map(|i| {
            let d = 50 + (i as u64 % 2);
            let a = c[i] + d + 10;
            let b = 40 + (i as u64 % 3);
            let col = |f: &str| match f {
                "A" => a,
                "B" => b,
                "C" => c[i],
                "D" => d,
                _ => unreachable!(),
            };
            Invocation {
                root_ns: a + b + 5,
                children_ns: table.slots.iter().map(|s| col(&s.function)).collect(),
            }
        })
        .collect()
}

fn run(config: BreakdownConfig) -> Breakdown {
    let g = Fake::new();
    let mut b = Breakdown::new("R", config);
    while let Some(table) = b.next_table(&g) {
        let inv = invocations(table);
        b.observe(&inv, &g).unwrap();
    }
    b
}

const CONFIG: BreakdownConfig = BreakdownConfig {
    k: 2,
    threshold_share: 0.05,
    min_child_share: 0.8,
    max_rounds: 5,
};

fn report(b: &Breakdown) -> VprofileReport {
    VprofileReport::new(
        b,
        BinaryInfo {
            path: "/bin/fake".into(),
            kind: ElfKind::PieExecutable,
            symbols: SymbolSource::Symtab,
            root_height: 2,
            reachable_functions: 5,
        },
        MeasurementInfo::default(),
    )
    .unwrap()
}

/// Round 1 selects Var(A) (resp (2−1)³·share ≫ others), round 2 breaks A
/// down, C explains ≥ 80 % of A so A is zeroed, and C (a leaf) is kept.
/// Catches a loop that never ends, re-expands A, or leaves A's
/// contribution standing next to C's.
#[test]
fn algorithm2_descends_and_stops_at_a_leaf() {
    let b = run(CONFIG);
    assert!(b.is_done());
    assert_eq!(b.rounds().len(), 2);
    assert_eq!(b.rounds()[0].next, vec!["A".to_string()]);
    assert_eq!(
        b.rounds()[1].broken_down,
        vec![vec!["R".to_string(), "A".into()]]
    );
    assert!(b.rounds()[1].next.is_empty());
    let first = &b.factors()[b.selected()[0]];
    assert_eq!(first.term.to_string(), "Var(C)");
    assert!(first.pinned);
    assert!(
        b.adjustments()
            .zeroed
            .contains(&vec!["R".to_string(), "A".into()])
    );
    // Var(C) = the variance of c over 8 invocations = 600000/7 ns².
    assert!((first.contribution_ns2 - 600000.0 / 7.0).abs() < 1e-6);
}

/// With --rounds 1 the breakdown stops after the root and says so.
/// Catches `max_rounds` being ignored or the early stop going unreported.
#[test]
fn round_limit_is_reported() {
    let b = run(BreakdownConfig {
        max_rounds: 1,
        ..CONFIG
    });
    assert_eq!(b.rounds().len(), 1);
    assert!(b.stopped_early);
    assert_eq!(b.factors()[b.selected()[0]].term.to_string(), "Var(A)");
}

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
    let text = r.to_text(0.0);
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

/// `--children A` measures only A under the root, so B's time is img_R.
/// Catches the restriction being ignored, or applied below the root.
#[test]
fn root_children_can_be_restricted() {
    let g = Fake::new();
    let mut b = Breakdown::new("R", CONFIG).only_root_children(vec!["A".into()]);
    let table = b.next_table(&g).unwrap();
    let names: Vec<&str> = table.slots.iter().map(|s| s.function.as_str()).collect();
    assert_eq!(names, ["A"]);
    let inv = invocations(table);
    b.observe(&inv, &g).unwrap();
    let table = b.next_table(&g).unwrap();
    let names: Vec<&str> = table.slots.iter().map(|s| s.function.as_str()).collect();
    assert_eq!(names, ["A", "C", "D"], "A's own children are all measured");
}

/// The JSON `vprofile --json` writes, read back by `ttp-ebpf report`,
/// gives the same text and one row per factor. Catches a field the JSON
/// loses, so that a saved result would read differently.
#[test]
fn saved_report_renders_the_same() {
    let r = report(&run(CONFIG));
    let saved = crate::report::render::load(serde_json::to_value(&r).unwrap()).unwrap();
    assert_eq!(saved.text(), r.to_text(0.01));
    let t = saved.table();
    assert_eq!(t.rows.len(), r.factors.len());
    assert_eq!(t.rows[0][1], "Var(C)");
}
