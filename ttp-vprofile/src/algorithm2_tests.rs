//! Algorithm 2 (VProfiler Sec. 3.3) on the hand-built call graph of
//! fake_graph.rs, whose durations make every number known in advance.
use super::{
    breakdown::{Breakdown, BreakdownConfig},
    fake_graph::{CONFIG, Fake, invocations, run},
};

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

/// `--children A` measures only A under the root, so B's time is img_R.
/// Catches the restriction being ignored, or applied below the root.
#[test]
fn root_children_can_be_restricted() {
    let g = Fake::default();
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
