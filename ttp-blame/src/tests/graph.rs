//! Sec. 4.1–4.2: BC, Impact Factor and DOR on the graph, and the DOT text.
use std::collections::BTreeMap;

use super::scenario::{BURNER, READER_A, SLEEPER, scenario};
use super::*;
use crate::{
    Options,
    graph::{Level, VICTIM_ID, group_id, process_id},
};

/// DOR is computed by traversing paths (Sec. 4.2); independently it must
/// equal the node's BC over the victim's BC. Catches a wrong path product or
/// a traversal that visits a node before its successors.
#[test]
fn dor_equals_share_of_victim_blocked_time() {
    let report = crate::analyze(&scenario(|i| 2.0 + i as f64), &Options::default()).unwrap();
    let g = &report.graph;
    let total = g.node(VICTIM_ID).unwrap().blame_ns;
    assert!(close(total, (WINDOWS_BLOCKED_MS * MS) as f64));
    for n in &g.nodes {
        assert!(
            close(n.dor, n.blame_ns / total),
            "{}: {} vs {}",
            n.id,
            n.dor,
            n.blame_ns / total
        );
    }
    // Every cause ends in exactly one top-level node: their DORs sum to 1.
    let top: f64 = g
        .nodes
        .iter()
        .filter(|n| n.level == Level::Group)
        .map(|n| n.dor)
        .sum();
    assert!(close(top, 1.0));
    let a = g.node(&process_id(READER_A)).unwrap();
    assert!(a.dor > g.node(&process_id(BURNER)).unwrap().dor);
    assert!(g.node(&process_id(SLEEPER)).is_none(), "no edge, no node");
}

const WINDOWS_BLOCKED_MS: u64 = super::scenario::WINDOWS * 30;

/// Impact Factors: into every victim-side node they sum to 1 (the shares of
/// its impact), out of every culprit-side node towards threads/processes
/// they sum to 1 (the shares of its blame). Catches IFs normalised by the
/// wrong end of the edge.
#[test]
fn impact_factors_normalise() {
    let report = crate::analyze(&scenario(|i| 1.0 + (i % 4) as f64), &Options::default()).unwrap();
    let g = &report.graph;
    let level: BTreeMap<&str, Level> = g.nodes.iter().map(|n| (n.id.as_str(), n.level)).collect();
    let mut into: BTreeMap<&str, f64> = BTreeMap::new();
    let mut out_of: BTreeMap<&str, f64> = BTreeMap::new();
    for e in &g.edges {
        if level[e.to.as_str()] >= Level::Thread {
            *out_of.entry(&e.from).or_default() += e.impact_factor;
        } else {
            *into.entry(&e.to).or_default() += e.impact_factor;
        }
    }
    assert!(!into.is_empty() && !out_of.is_empty());
    for (id, s) in into.iter().chain(out_of.iter()) {
        assert!(close(*s, 1.0), "{id}: {s}");
    }
    // The kernel-thread group reaches its kworker process with IF 1.
    let kw = g
        .edges
        .iter()
        .find(|e| e.from == group_id("[kernel threads]"))
        .unwrap();
    assert!(close(kw.impact_factor, 1.0));
}
