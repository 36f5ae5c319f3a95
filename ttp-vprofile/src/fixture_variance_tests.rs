//! The variance tree and Algorithm 2 on the vprof-target fixture, checked
//! against the program's own clock readings: the call graph comes from the
//! compiled binary, the per-invocation durations are the ones the program
//! measured itself, fed in through the child table as probes would.
// Built for the crates above too (feature `test-support`), where the
// tests are left out and only the helpers are used.
#![cfg_attr(not(test), allow(unused_imports, dead_code))]
use super::{
    breakdown::{Breakdown, BreakdownConfig},
    callgraph::CallGraph,
    elf::ElfImage,
    fixture::{self, Records, Variant},
};
use ttp_variance::{FnName, Term, VarianceTree};

fn var(xs: &[u64]) -> f64 {
    let n = xs.len() as f64;
    let m = xs.iter().map(|&x| x as f64).sum::<f64>() / n;
    xs.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / (n - 1.0)
}

fn mean(xs: &[u64]) -> f64 {
    xs.iter().map(|&x| x as f64).sum::<f64>() / xs.len() as f64
}

/// Pearson correlation of two columns of the program's own timings.
fn correlation(xs: &[u64], ys: &[u64]) -> f64 {
    let (mx, my) = (mean(xs), mean(ys));
    let cov: f64 = xs
        .iter()
        .zip(ys)
        .map(|(&x, &y)| (x as f64 - mx) * (y as f64 - my))
        .sum::<f64>()
        / (xs.len() as f64 - 1.0);
    cov / (var(xs) * var(ys)).sqrt()
}

fn node<'a>(t: &'a VarianceTree, term: &Term) -> &'a ttp_variance::Node {
    t.nodes
        .iter()
        .find(|n| &n.term == term)
        .unwrap_or_else(|| panic!("{term} missing from the tree"))
}

const CONFIG: BreakdownConfig = BreakdownConfig {
    k: 3,
    threshold_share: 0.05,
    min_child_share: 0.8,
    max_rounds: 6,
};

/// Drives Algorithm 2 with the fixture's records standing in for probes.
fn run_breakdown(
    graph: &CallGraph,
    root: &str,
    records: &Records,
    config: BreakdownConfig,
) -> Breakdown {
    let mut b = Breakdown::new(root, config);
    while let Some(table) = b.next_table(graph) {
        let invocations = records.invocations(table);
        b.observe(&invocations, graph).expect("round");
    }
    b
}

/// Flat workload, one round (the root's children only). Catches: the
/// injected source not ranked first among the root's children or given a
/// share far from the one the program measured for its sleep; the
/// covarying pair lost; the root's own work not ending up in img_vt_root;
/// contributions that do not add up to Var(root) (eq. 1).
#[test]
fn flat_tree_matches_the_programs_own_clock() {
    let bin = fixture::build(Variant::Pie);
    let elf = ElfImage::load(&bin).unwrap();
    let graph = CallGraph::build(&elf, elf.lookup("vt_root").unwrap());
    let records = fixture::run(&bin, "flat", 200);
    let config = BreakdownConfig {
        max_rounds: 1,
        ..CONFIG
    };
    let b = run_breakdown(&graph, "vt_root", &records, config);
    let t = b.tree().unwrap();
    assert_eq!(t.invocations, 200);

    // Eq. 1: the root's children add up to Var(root).
    let sum: f64 = t
        .root()
        .children
        .iter()
        .map(|&c| t.nodes[c].value_ns2)
        .sum();
    let root_var = var(records.column("root"));
    assert!((t.root_variance_ns2() - root_var).abs() / root_var < 1e-9);
    assert!(
        (sum - root_var).abs() / root_var < 0.05,
        "Σ = {sum}, Var(root) = {root_var}"
    );

    // The injected source: largest variance among the children, with the
    // share of Var(root) that the program's own usleep timings give.
    let var_children: Vec<&ttp_variance::Node> = t
        .root()
        .children
        .iter()
        .map(|&c| &t.nodes[c])
        .filter(|n| matches!(n.term, Term::Var(_)))
        .collect();
    let top = var_children
        .iter()
        .max_by(|a, b| a.value_ns2.total_cmp(&b.value_ns2))
        .unwrap();
    assert_eq!(top.term, Term::Var(FnName::real("vt_jitter")));
    let true_share = var(records.column("usleep")) / root_var;
    eprintln!(
        "Var(vt_jitter) share {:.4} vs the program's own {true_share:.4} (bound 0.05)",
        top.share
    );
    assert!(
        (top.share - true_share).abs() < 0.05,
        "Var(vt_jitter) share {:.3} vs the program's own {:.3}",
        top.share,
        true_share
    );

    // The covarying pair: the largest covariance, strongly correlated.
    let pair = node(
        t,
        &Term::cov(FnName::real("vt_scan"), FnName::real("vt_sum")),
    );
    let cov = pair.value_ns2 / 2.0;
    let corr = cov
        / (node(t, &Term::Var(FnName::real("vt_scan"))).value_ns2
            * node(t, &Term::Var(FnName::real("vt_sum"))).value_ns2)
            .sqrt();
    // vt_sum copies vt_scan's time, plus its own wake-up delay on a busy
    // machine, which under heavy load is of the same order: how strongly
    // the two covary depends on the machine, so the tree's correlation is
    // checked against the one the program's own timings give (a wrong pair
    // of columns behind the Cov node would give another figure), and it
    // must be clearly positive (independent waits would give ≈ 0).
    let own = correlation(records.column("vt_scan"), records.column("vt_sum"));
    eprintln!("corr(vt_scan, vt_sum) {corr:.4} vs the program's own {own:.4} (bound 0.02)");
    assert!(
        (corr - own).abs() < 0.02,
        "corr(vt_scan, vt_sum) = {corr} in the tree vs {own} in the program's timings"
    );
    assert!(corr > 0.1, "corr(vt_scan, vt_sum) = {corr}");
    let largest_cov = t
        .root()
        .children
        .iter()
        .map(|&c| &t.nodes[c])
        .filter(|n| matches!(n.term, Term::Cov(..)))
        .max_by(|a, b| a.value_ns2.total_cmp(&b.value_ns2))
        .unwrap();
    assert_eq!(largest_cov.term, pair.term);

    // The body's work is img_vt_root: same mean (plus the few clock reads
    // and calls the body column does not cover) and the same variance.
    let img = node(t, &Term::Var(FnName::img("vt_root")));
    let body = records.column("body");
    let (img_mean, body_mean) = (img.mean_ns.unwrap(), mean(body));
    assert!(
        (img_mean - body_mean).abs() < (0.1 * body_mean).max(20_000.0),
        "E(img_vt_root) = {img_mean} ns, E(body) = {body_mean} ns"
    );
    let body_var = var(body);
    // (Wider than the mean's bound: one preemption between the root's
    // calls, outside the body's clock reads, adds ~(4 ms)²/n.)
    assert!(
        (img.value_ns2 - body_var).abs() / body_var < 0.35,
        "Var(img_vt_root) = {}, Var(body) = {body_var}",
        img.value_ns2
    );
    // Selection (Algorithm 1) picks the sleep; the body's work and the
    // pair's covariance are factors above the threshold too (which of them
    // make the top k depends on how much noise the machine added).
    let selected: Vec<String> = b
        .selected()
        .iter()
        .map(|&i| b.factors()[i].term.to_string())
        .collect();
    assert!(
        selected.contains(&"Var(vt_jitter)".to_string()),
        "{selected:?}"
    );
    let img_factor = b.factors().iter().find(|f| f.term == img.term).unwrap();
    assert!(
        img_factor.share >= CONFIG.threshold_share,
        "{}",
        img_factor.share
    );
    let pair_factor = b.factors().iter().find(|f| f.term == pair.term).unwrap();
    assert!(
        pair_factor.share >= CONFIG.threshold_share,
        "{}",
        pair_factor.share
    );
}

/// Deep workload: the sleep is two calls below the root. Algorithm 2 must
/// descend root → vt_mid → vt_jitter → usleep, zeroing each parent whose
/// child explains ≥ 80 % of it, and end with the sleep first. Catches a
/// breakdown that stops at the first level or re-expands the same instance.
#[test]
fn deep_breakdown_descends_to_the_source() {
    let bin = fixture::build(Variant::Pie);
    let elf = ElfImage::load(&bin).unwrap();
    let graph = CallGraph::build(&elf, elf.lookup("vt_root_deep").unwrap());
    let records = fixture::run(&bin, "deep", 200);
    let b = run_breakdown(&graph, "vt_root_deep", &records, CONFIG);
    assert!(b.is_done() && !b.stopped_early);
    let rounds = b.rounds();
    let expanded: Vec<String> = rounds
        .iter()
        .flat_map(|r| r.broken_down.iter().map(|p| p.join("/")))
        .collect();
    assert_eq!(
        expanded,
        [
            "vt_root_deep",
            "vt_root_deep/vt_mid",
            "vt_root_deep/vt_mid/vt_jitter"
        ]
    );
    let first = &b.factors()[b.selected()[0]];
    assert_eq!(first.term, Term::Var(FnName::real("usleep")));
    assert!(first.pinned, "a leaf is kept, not broken down");
    let t = b.tree().unwrap();
    let path = t.instance_path(first.instances[0]).unwrap();
    assert_eq!(path, ["vt_root_deep", "vt_mid", "vt_jitter", "usleep"]);
    let true_share = var(records.column("usleep")) / var(records.column("root"));
    assert!(
        (first.share - true_share).abs() < 1e-9,
        "same data, same share"
    );
    for p in [
        vec!["vt_root_deep".to_string()],
        vec!["vt_root_deep".into(), "vt_mid".into()],
    ] {
        assert!(
            b.adjustments().zeroed.contains(&p),
            "{p:?} should be zeroed"
        );
    }
}

/// Stands in for the uprobes: answers each round from the fixture's own
/// records, and checks the plan it is given against the binary's bytes.
struct Replay<'a> {
    records: &'a Records,
    bytes: Vec<u8>,
    rounds: usize,
}

impl super::driver::InvocationSource for Replay<'_> {
    fn measure(
        &mut self,
        table: &ttp_variance::ChildTable,
        plan: &super::plan::ProbePlan,
        _stop: super::driver::Stop,
    ) -> Result<super::driver::RoundData, Box<dyn std::error::Error + Send + Sync>> {
        self.rounds += 1;
        for site in &plan.sites {
            // A direct call is E8 rel32 (5 bytes); through the GOT, FF 15.
            let op = self.bytes[site.call_offset as usize];
            assert!(
                op == 0xe8 || op == 0xff,
                "no call at offset {:#x}",
                site.call_offset
            );
            if op == 0xe8 {
                assert_eq!(site.return_offset, site.call_offset + 5);
            }
        }
        Ok(super::driver::RoundData {
            invocations: self.records.invocations(table),
            probe_hits: 10,
            probe_ns: 1500,
            ..Default::default()
        })
    }
}

/// The whole pipeline on the fixture, from ELF to report: probe offsets
/// land on the call instructions in the file (both PIE and non-PIE), the
/// rounds reach the sleep, and the JSON and SVG are produced. Catches
/// uprobe offsets computed from virtual addresses, and a driver that
/// loses the measurement counters.
#[test]
fn driver_plans_probes_on_call_instructions() {
    for variant in [Variant::Pie, Variant::NoPie] {
        let (report, rounds) = drive_deep(variant);
        assert_eq!(rounds, 3);
        assert_eq!(report.selected[0], "Var(usleep)");
        assert_eq!(report.measurement.probe_hits, Some(30));
        assert_eq!(report.measurement.probe_overhead_ns_per_hit, Some(150.0));
        let json = serde_json::to_string(&report).unwrap();
        assert!(json.contains("\"schema\":\"ttp.vprofile/1\""));
        // The SVG of this report: report/vprofile/tests.rs.
    }
}

/// The deep workload of the fixture (60 invocations) driven from ELF to
/// report; returns the report and the rounds the source measured.
pub fn drive_deep(variant: Variant) -> (super::document::VprofileReport, usize) {
    let bin = fixture::build(variant);
    let elf = ElfImage::load(&bin).unwrap();
    let root = elf.lookup("vt_root_deep").unwrap();
    let graph = CallGraph::build(&elf, root);
    let records = fixture::run(&bin, "deep", 60);
    let mut source = Replay {
        records: &records,
        bytes: std::fs::read(&bin).unwrap(),
        rounds: 0,
    };
    let report = super::driver::drive(
        &elf,
        &graph,
        CONFIG,
        super::driver::Stop::Invocations(60),
        None,
        &mut source,
        None,
    )
    .unwrap();
    (report, source.rounds)
}

/// The answer must not depend on which invocations a run happened to see:
/// 20 bootstrap resamples of the deep workload's invocations (a fixed-seed
/// xorshift picks them, with replacement) must each end with the injected
/// source, `usleep` under vt_jitter, selected first. The resamples
/// reorder the small factors as repeated runs on a noisy machine do. (The
/// flat workload is no such test: under CPU load its covarying pair, which
/// sleeps twice and copies the first wake-up delay into the second sleep,
/// legitimately overtakes the injected sleep.) Catches a selection that depends on the ranking of negligible
/// factors (Algorithm 1's `break`, docs/vprofile.md).
#[test]
fn the_answer_names_the_injected_source_on_every_resample() {
    let bin = fixture::build(Variant::Pie);
    let elf = ElfImage::load(&bin).unwrap();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % n as u64) as usize
    };
    for (mode, root, rounds) in [("deep", "vt_root_deep", 6)] {
        let graph = CallGraph::build(&elf, elf.lookup(root).unwrap());
        let records = fixture::run(&bin, mode, 200);
        for _ in 0..20 {
            let pick: Vec<usize> = (0..records.invocations)
                .map(|_| next(records.invocations))
                .collect();
            let resampled = Records {
                columns: records
                    .columns
                    .iter()
                    .map(|(k, v)| (k.clone(), pick.iter().map(|&i| v[i]).collect()))
                    .collect(),
                invocations: pick.len(),
            };
            let config = BreakdownConfig {
                max_rounds: rounds,
                ..CONFIG
            };
            let b = run_breakdown(&graph, root, &resampled, config);
            let selected: Vec<String> = b
                .selected()
                .iter()
                .map(|&i| b.factors()[i].term.to_string())
                .collect();
            assert_eq!(
                selected.first().map(String::as_str),
                Some("Var(usleep)"),
                "{selected:?}"
            );
        }
    }
}
