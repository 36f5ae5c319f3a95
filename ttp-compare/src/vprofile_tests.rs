//! The summary statistics of vprofile comparisons against scipy, and two
//! vprofile results made by the breakdown itself from known durations.
//!
//! Expected numbers were computed once with scipy 1.17.1 by this script
//! (the Fieller bounds by numpy.roots of the quadratic, the F interval
//! from scipy.stats.f.ppf):
//!
//! ```python
//! import numpy as np
//! from scipy import stats
//! def summ(ma, sa, na, mb, sb, nb, level=0.95):
//!     r = stats.ttest_ind_from_stats(mb, sb, nb, ma, sa, na, equal_var=False)
//!     va, vb = sa*sa/na, sb*sb/nb
//!     df = (va+vb)**2/(va*va/(na-1)+vb*vb/(nb-1))
//!     q = stats.t.ppf(0.5+level/2, df)
//!     d = mb-ma
//!     lo, hi = d - q*np.sqrt(va+vb), d + q*np.sqrt(va+vb)
//!     roots = np.sort(np.roots([ma*ma - q*q*va, -2*ma*mb, mb*mb - q*q*vb]).real)
//!     F = sb*sb/(sa*sa); d1, d2 = nb-1, na-1
//!     p = 2*min(stats.f.cdf(F, d1, d2), stats.f.sf(F, d1, d2))
//!     ci = (F/stats.f.ppf(1-(1-level)/2, d1, d2), F/stats.f.ppf((1-level)/2, d1, d2))
//!     print(repr((r.statistic, df, r.pvalue, lo, hi, roots[0], roots[1], F, p, ci[0], ci[1])))
//! summ(1000.0, 50.0, 40, 1030.0, 70.0, 25)
//! summ(250000.0, 40000.0, 50000, 249500.0, 41000.0, 60000)
//! def roots(c):
//!     return [c[i] + (50+i%2) + 10 + (40+i%3) + 5 for i in range(8)]
//! A = roots([100,900,300,700,200,800,400,600])
//! B = roots([300,1500,700,1100,500,1300,800,1000])
//! r = stats.ttest_ind(B, A, equal_var=False)
//! print(repr((np.mean(A), np.var(A, ddof=1), np.mean(B), np.var(B, ddof=1), r.statistic, r.pvalue)))
//! F = np.var(B, ddof=1)/np.var(A, ddof=1)
//! print(repr((F, 2*min(stats.f.cdf(F,7,7), stats.f.sf(F,7,7)))))
//! ```
// Built for the crates above too (feature `test-support`), where the
// tests are left out and only the helpers are used.
#![cfg_attr(not(test), allow(unused_imports, dead_code))]
use super::input::Summary;
use super::vprofile::compare_summaries;
use super::*;
use ttp_vprofile::{
    breakdown::Breakdown,
    fake_graph::{CONFIG, Fake, invocations_with, report},
};

fn close(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol * want.abs().max(1.0),
        "{what}: {got} against scipy's {want}"
    );
}

fn summary(root: &str, mean: f64, sd: f64, n: usize) -> Summary {
    Summary {
        root: root.into(),
        binary: "/bin/x".into(),
        invocations: n,
        mean_ns: mean,
        variance_ns2: sd * sd,
        factors: Vec::new(),
        lost_records: None,
    }
}

/// Catches a wrong Welch–Satterthwaite df, a one-sided p, a swapped F
/// (numerator and denominator), a wrong interval quantile, and Fieller's
/// roots taken from a wrong quadratic: each number of a small and of a
/// large (n ≈ 10⁵, where the F quantiles are hard) pair of summaries
/// within 1e-6 of scipy.
#[test]
fn summary_tests_match_scipy() {
    let cases = [
        (
            summary("r", 1000.0, 50.0, 40),
            summary("r", 1030.0, 70.0, 25),
            [
                1.8659112407133687,
                39.28809515733297,
                0.06953236521750855,
                -2.513070694976996,
                62.513070694976996,
                0.9975065120580724,
                1.0630201277457978,
                1.96,
                0.0599836763584878,
                0.9719095844132666,
                4.21586133810918,
            ],
        ),
        (
            summary("r", 250000.0, 40000.0, 50000),
            summary("r", 249500.0, 41000.0, 60000),
            [
                -2.040958005612079,
                107321.03485693554,
                0.041257442668053444,
                -980.1632576060673,
                -19.836742393932695,
                0.9960833541904587,
                0.9999205716923393,
                1.050625,
                8.31175645104289e-09,
                1.03313128585176,
                1.068401060382243,
            ],
        ),
    ];
    for (a, b, want) in cases {
        let c = compare_summaries(&a, &b, 0.95);
        let w = c.welch.as_ref().unwrap();
        let f = c.f_test.as_ref().unwrap();
        let ci = c.mean_ratio_ci.unwrap();
        let got = [
            w.t,
            w.df,
            w.p,
            w.difference_ci[0],
            w.difference_ci[1],
            ci[0],
            ci[1],
            f.f,
            f.p,
            f.ratio_ci[0],
            f.ratio_ci[1],
        ];
        let names = [
            "t",
            "df",
            "p",
            "diff lo",
            "diff hi",
            "Fieller lo",
            "Fieller hi",
            "F",
            "F p",
            "F ci lo",
            "F ci hi",
        ];
        for (i, ((g, w), n)) in got.iter().zip(want).zip(names).enumerate() {
            // p-values absolutely within 1e-6; interval bounds within 1e-6
            // of the interval's width (at ν ≈ 10⁵ statrs' t quantile
            // differs from scipy's in the 6th digit, which moves a bound
            // near 0 by more than 1e-6 of itself); the rest relatively.
            if n.ends_with('p') {
                assert!((g - w).abs() < 1e-6, "{n}: {g} against scipy's {w}");
            } else if (3..7).contains(&i) {
                let width = if i < 5 {
                    want[4] - want[3]
                } else {
                    want[6] - want[5]
                };
                assert!(
                    (g - w).abs() <= 1e-6 * width,
                    "{n}: {g} against scipy's {w}"
                );
            } else {
                close(*g, w, 1e-6, n);
            }
        }
    }
}

/// Fieller's interval is unbounded (None) when the baseline's mean is not
/// significantly different from 0, and Welch has nothing to say without
/// spread: catches a finite interval invented where there is none.
#[test]
fn degenerate_summaries_give_no_interval() {
    let c = compare_summaries(
        &summary("r", 1.0, 100.0, 4),
        &summary("r", 2.0, 1.0, 4),
        0.95,
    );
    assert!(c.welch.is_some());
    assert_eq!(c.mean_ratio_ci, None);
    let files: Vec<(String, Side)> = ["a", "b"]
        .into_iter()
        .map(|n| {
            let mut p = profile(C_A);
            p["root_variance_ns2"] = 0.0.into();
            (n.to_string(), side_of(p).unwrap())
        })
        .collect();
    let doc = compare(&files, &Config::default()).unwrap();
    let v = doc.comparisons[0].vprofile.as_ref().unwrap();
    assert!(v.welch.is_none() && v.f_test.is_none());
    assert!(
        v.mean_verdict.starts_with("neither root's duration varies"),
        "{}",
        v.mean_verdict
    );
}

/// A vprofile report of the fake call graph (R → A, B; A → C, D) whose C
/// takes `c[i]` ns in invocation i, the rest as in fake_graph.rs.
pub fn profile(c: [u64; 8]) -> serde_json::Value {
    let g = Fake::default();
    let mut b = Breakdown::new("R", CONFIG);
    while let Some(table) = b.next_table(&g) {
        let inv = invocations_with(table, c);
        b.observe(&inv, &g).unwrap();
    }
    serde_json::to_value(report(&b)).unwrap()
}

pub const C_A: [u64; 8] = [100, 900, 300, 700, 200, 800, 400, 600];
pub const C_B: [u64; 8] = [300, 1500, 700, 1100, 500, 1300, 800, 1000];

/// Two results of the breakdown itself, saved and read back: the root's
/// mean and variance are those of the known durations (checked against
/// numpy), Welch's p and the F-test's p those of scipy on the durations
/// themselves, and each factor's contribution is its share × Var(root).
/// Catches a summary read from the wrong field, a population variance
/// where the sample one belongs, and shares not matched by factor.
#[test]
fn two_saved_profiles() {
    let sides: Vec<(String, Side)> = [("a.json", C_A), ("b.json", C_B)]
        .into_iter()
        .map(|(n, c)| {
            let text = serde_json::to_string(&profile(c)).unwrap();
            (
                n.to_string(),
                side_of(serde_json::from_str(&text).unwrap()).unwrap(),
            )
        })
        .collect();
    let doc = compare(&sides, &Config::default()).unwrap();
    assert_eq!(doc.kind, "ttp.vprofile/1");
    assert_eq!(doc.files[0].retained, 8);
    let v = doc.comparisons[0].vprofile.as_ref().unwrap();
    close(v.mean_baseline_ns, 606.375, 1e-12, "mean A");
    close(v.mean_candidate_ns, 1006.375, 1e-12, "mean B");
    close(v.variance_baseline_ns2, 86115.41071428571, 1e-9, "var A");
    close(v.variance_candidate_ns2, 163429.69642857142, 1e-9, "var B");
    let w = v.welch.as_ref().unwrap();
    close(w.t, 2.264803123478224, 1e-6, "t");
    assert!((w.p - 0.04159679751441784).abs() < 1e-6, "{}", w.p);
    let f = v.f_test.as_ref().unwrap();
    close(f.f, 1.8977984901076483, 1e-6, "F");
    assert!((f.p - 0.4171695993719366).abs() < 1e-6, "{}", f.p);
    // A single candidate: Holm leaves p as it is.
    assert_eq!(v.p_mean_holm, w.p);
    assert!(
        v.mean_verdict.starts_with("B's root is 66.0 % slower"),
        "{}",
        v.mean_verdict
    );
    assert!(
        v.variance_verdict
            .starts_with("no difference of Var(root) detectable")
    );
    // Every factor of both files, each contribution share × Var(root), in
    // order of the size of its change.
    let a: serde_json::Value = profile(C_A);
    let n_factors = a["factors"].as_array().unwrap().len();
    assert!(n_factors >= 2);
    assert_eq!(v.factors.len(), n_factors);
    for fc in &v.factors {
        let share_a = a["factors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["factor"] == fc.factor.as_str())
            .unwrap()["share"]
            .as_f64()
            .unwrap();
        assert_eq!(fc.share_baseline, Some(share_a));
        close(
            fc.contribution_baseline_ns2.unwrap(),
            share_a * 86115.41071428571,
            1e-9,
            &fc.factor,
        );
    }
    let changes: Vec<f64> = v
        .factors
        .iter()
        .map(|f| f.change_ns2.unwrap().abs())
        .collect();
    assert!(changes.windows(2).all(|w| w[0] >= w[1]), "{changes:?}");
}

/// Different roots are refused unless asked for; a different binary is
/// compared with the set-up warning. Catches factors of unrelated
/// functions matched by name without a word.
#[test]
fn different_roots_are_refused_and_binaries_noted() {
    let a = side_of(profile(C_A)).unwrap();
    let mut other = profile(C_B);
    other["root"] = "S".into();
    let b = side_of(other).unwrap();
    let files = [("a.json".to_string(), a.clone()), ("b.json".to_string(), b)];
    let e = compare(&files, &Config::default()).unwrap_err();
    assert!(matches!(e, CompareError::DifferentRoots { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("a.json profiles R and b.json profiles S")
    );
    let forced = Config {
        any_root: true,
        ..Config::default()
    };
    assert!(compare(&files, &forced).is_ok());
    let mut moved = profile(C_B);
    moved["binary"]["path"] = "/bin/fake-new".into();
    let files = [
        ("a.json".to_string(), a),
        ("b.json".to_string(), side_of(moved).unwrap()),
    ];
    let doc = compare(&files, &Config::default()).unwrap();
    let d = &doc.comparisons[0].setup_differences;
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].fact, "binary");
}

/// A profile of one invocation cannot be compared: catches a variance of
/// one value passed to the tests.
#[test]
fn one_invocation_is_too_few() {
    let mut p = profile(C_A);
    p["invocations"] = 1.into();
    let e = side_of(p).unwrap_err();
    assert!(matches!(e, InputError::TooFew { retained: 1, .. }), "{e}");
}

/// Two candidates: Welch's p-values form one Holm family and the F-test's
/// another, and the verdicts say so. Catches an uncorrected p claimed
/// with several candidates.
#[test]
fn several_candidates_are_corrected() {
    let files: Vec<(String, Side)> = [("a", C_A), ("b", C_B), ("c", C_B)]
        .into_iter()
        .map(|(n, c)| (n.to_string(), side_of(profile(c)).unwrap()))
        .collect();
    let doc = compare(&files, &Config::default()).unwrap();
    for c in &doc.comparisons {
        let v = c.vprofile.as_ref().unwrap();
        let (pw, pf) = (v.welch.as_ref().unwrap().p, v.f_test.as_ref().unwrap().p);
        // Equal p-values: Holm multiplies both by 2.
        assert!((v.p_mean_holm - (2.0 * pw).min(1.0)).abs() < 1e-15);
        assert!((v.p_variance_holm - (2.0 * pf).min(1.0)).abs() < 1e-15);
        // 2 × 0.0416 is above 0.05: no claim.
        assert!(
            v.mean_verdict
                .starts_with("no difference of the root's mean detectable"),
            "{}",
            v.mean_verdict
        );
        assert!(v.mean_verdict.contains("Holm-adjusted over 2"));
    }
}

/// A `ttp.compare/1` document written before vprofile results were read
/// (no `any_root`, no `vprofile`) still loads. Catches a new field made
/// required.
#[test]
fn older_compare_documents_still_load() {
    let s = |xs: &[f64]| Side {
        schema: "ttp.emp/1".into(),
        title: "x".into(),
        retained: xs.len(),
        measures: vec![Measure {
            name: "pt_ms".into(),
            what: String::new(),
            centre: stats::Centre::Mean,
            samples: xs.to_vec(),
            sample_unit: "runs",
        }],
        whole_run: Vec::new(),
        setup: Default::default(),
        vprofile: None,
    };
    let files = [
        ("a".to_string(), s(&[1.0, 2.0, 3.0])),
        ("b".to_string(), s(&[2.0, 3.0, 4.0])),
    ];
    let mut v = serde_json::to_value(compare(&files, &Config::default()).unwrap()).unwrap();
    assert!(v["comparisons"][0].get("vprofile").is_none());
    v["method"]
        .as_object_mut()
        .unwrap()
        .remove("any_root")
        .unwrap();
    let back: CompareDocument = serde_json::from_value(v).unwrap();
    assert!(!back.method.config.any_root);
}
