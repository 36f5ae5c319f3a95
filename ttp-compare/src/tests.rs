//! The statistics against scipy, the false-positive rate on generated
//! samples, and the verdicts.
//!
//! The expected numbers were computed once with scipy 1.17.1 / numpy 2.4
//! by this script (its output is pasted into `SCIPY` below):
//!
//! ```python
//! import numpy as np
//! from scipy import stats
//! sets = {"large": (LARGE_A, LARGE_B), "small": (SMALL_A, SMALL_B),
//!         "ties": (TIES_A, TIES_B)}          # the arrays below
//! rng = np.random.default_rng(12345)
//! for name, (a, b) in sets.items():
//!     a = np.array(a); b = np.array(b)
//!     mw = stats.mannwhitneyu(a, b, alternative="two-sided", method="auto")
//!     w = stats.ttest_ind(b, a, equal_var=False)
//!     med = stats.bootstrap((a, b),
//!         lambda x, y, axis: np.median(y, axis=axis) / np.median(x, axis=axis),
//!         method="percentile", n_resamples=200000, paired=False,
//!         vectorized=True, rng=rng)
//!     mean = stats.bootstrap((a, b),
//!         lambda x, y, axis: np.mean(y, axis=axis) / np.mean(x, axis=axis),
//!         method="percentile", n_resamples=200000, paired=False,
//!         vectorized=True, rng=rng)
//!     print(name, mw.statistic, mw.pvalue, w.statistic, w.df, w.pvalue,
//!           *med.confidence_interval, *mean.confidence_interval)
//! ```
//!
//! scipy draws its resamples from PCG64, ttp from Xoshiro256++: the
//! intervals agree only up to Monte-Carlo error, which at 10,000 resamples
//! is far below the 1 % allowed here; p-values are deterministic and must
//! agree to 1e-6.
use super::stats::*;
use super::*;

const LARGE_A: &[f64] = &[
    101.2, 99.8, 100.5, 102.9, 98.7, 100.1, 101.7, 99.3, 100.9, 103.4,
];
const LARGE_B: &[f64] = &[
    96.1, 97.4, 95.8, 98.2, 96.9, 97.7, 95.2, 99.0, 96.4, 97.1, 98.5,
];
/// Small and without ties: scipy (and ttp) use the exact distribution of U.
const SMALL_A: &[f64] = &[12.31, 12.87, 12.05, 13.10, 12.66, 12.44];
const SMALL_B: &[f64] = &[12.95, 13.41, 13.02, 12.78, 13.66, 13.20, 13.35];
/// Time_calc-like: multiples of a 10 ms tick, many ties.
const TIES_A: &[f64] = &[
    1620.0, 1630.0, 1620.0, 1640.0, 1610.0, 1630.0, 1620.0, 1650.0, 1630.0, 1620.0,
];
const TIES_B: &[f64] = &[
    1600.0, 1610.0, 1620.0, 1600.0, 1610.0, 1590.0, 1610.0, 1620.0, 1600.0, 1610.0, 1630.0, 1600.0,
];

struct Expected {
    a: &'static [f64],
    b: &'static [f64],
    u_a: f64,
    p_mwu: f64,
    mwu: MwuMethod,
    welch_t: f64,
    welch_df: f64,
    p_welch: f64,
    median_ci: [f64; 2],
    mean_ci: [f64; 2],
}

/// scipy's numbers for the three sets (see the module comment).
const SCIPY: &[Expected] = &[
    Expected {
        a: LARGE_A,
        b: LARGE_B,
        u_a: 109.0,
        p_mwu: 0.000164985300876,
        mwu: MwuMethod::Asymptotic,
        welch_t: -6.27162762107,
        welch_df: 17.1211393004,
        p_welch: 8.16740707787e-06,
        median_ci: [0.949169, 0.978403],
        mean_ci: [0.952223, 0.973619],
    },
    Expected {
        a: SMALL_A,
        b: SMALL_B,
        u_a: 4.0,
        p_mwu: 0.013986013986,
        mwu: MwuMethod::Exact,
        welch_t: 3.22071988967,
        welch_df: 9.51059560641,
        p_welch: 0.00976248483416,
        median_ci: [1.007634, 1.089358],
        mean_ci: [1.021797, 1.078592],
    },
    Expected {
        a: TIES_A,
        b: TIES_B,
        u_a: 105.5,
        p_mwu: 0.00242850690059,
        mwu: MwuMethod::Asymptotic,
        welch_t: -3.82645602413,
        welch_df: 18.9865161611,
        p_welch: 0.00114008992284,
        median_ci: [0.981595, 0.993865],
        mean_ci: [0.982945, 0.994044],
    },
];

fn close(got: f64, want: f64, rel: f64) -> bool {
    (got - want).abs() <= rel * want.abs()
}

/// Catches a wrong rank sum, tie correction, continuity correction, exact
/// distribution or the wrong choice between exact and asymptotic.
#[test]
fn mann_whitney_matches_scipy() {
    for e in SCIPY {
        let r = mann_whitney(e.a, e.b);
        assert_eq!(r.u_a, e.u_a);
        assert_eq!(r.method, e.mwu);
        assert!(
            (r.p - e.p_mwu).abs() < 1e-6,
            "p {} vs scipy {}",
            r.p,
            e.p_mwu
        );
    }
}

/// Catches a wrong standard error, Welch–Satterthwaite df or t tail.
#[test]
fn welch_matches_scipy() {
    for e in SCIPY {
        let w = welch(e.a, e.b).expect("both sides have spread");
        assert!(close(w.t, e.welch_t, 1e-9), "t {} vs {}", w.t, e.welch_t);
        assert!(
            close(w.df, e.welch_df, 1e-9),
            "df {} vs {}",
            w.df,
            e.welch_df
        );
        assert!(
            (w.p - e.p_welch).abs() < 1e-6,
            "p {} vs scipy {}",
            w.p,
            e.p_welch
        );
    }
}

/// Catches a paired or pooled resampling, a wrong quantile rule or a ratio
/// the wrong way round: both bounds within 1 % of scipy's.
#[test]
fn bootstrap_intervals_match_scipy() {
    for e in SCIPY {
        for (centre, want) in [(Centre::Median, e.median_ci), (Centre::Mean, e.mean_ci)] {
            let ci = bootstrap_ratio(e.a, e.b, centre, 0.95, 10_000, 7).unwrap();
            assert!(
                close(ci.lower, want[0], 0.01) && close(ci.upper, want[1], 0.01),
                "{centre:?}: {}–{} vs scipy {}–{}",
                ci.lower,
                ci.upper,
                want[0],
                want[1]
            );
        }
    }
}

/// Catches an interval that depends on anything but the data and the seed.
#[test]
fn bootstrap_is_reproducible_from_its_seed() {
    let a = bootstrap_ratio(LARGE_A, LARGE_B, Centre::Median, 0.95, 2000, 42);
    let b = bootstrap_ratio(LARGE_A, LARGE_B, Centre::Median, 0.95, 2000, 42);
    let c = bootstrap_ratio(LARGE_A, LARGE_B, Centre::Median, 0.95, 2000, 43);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

/// The exact null distribution of U against brute force: every way of
/// choosing which n1 of n1 + n2 ranks belong to the first sample.
#[test]
fn exact_u_distribution_matches_enumeration() {
    for (n1, n2) in [(3, 4), (5, 5), (2, 7), (6, 3)] {
        let n = n1 + n2;
        let mut counts = vec![0u64; n1 * n2 + 1];
        for mask in 0u32..(1 << n) {
            if mask.count_ones() as usize != n1 {
                continue;
            }
            let rank_sum: usize = (0..n).filter(|i| mask & (1 << i) != 0).map(|i| i + 1).sum();
            counts[rank_sum - n1 * (n1 + 1) / 2] += 1;
        }
        let total: u64 = counts.iter().sum();
        for u in 0..=n1 * n2 {
            let want = counts[u..].iter().sum::<u64>() as f64 / total as f64;
            let got = exact_u_sf(n1, n2, u);
            assert!(
                (got - want).abs() < 1e-12,
                "n1 {n1} n2 {n2} u {u}: {got} vs {want}"
            );
        }
    }
}

/// Holm (1979) on a worked family: p = 0.01, 0.04, 0.03 → 0.03, 0.06, 0.06.
#[test]
fn holm_adjusts_step_down() {
    let adj = holm(&[0.01, 0.04, 0.03]);
    let want = [0.03, 0.06, 0.06];
    for (g, w) in adj.iter().zip(want) {
        assert!((g - w).abs() < 1e-12, "{adj:?}");
    }
    // 2 × 0.7 caps at 1, and the larger p cannot fall below it.
    assert_eq!(holm(&[0.7, 0.9]), vec![1.0, 1.0]);
    assert_eq!(holm(&[0.02]), vec![0.02]);
}

/// Cohen (1988): d = 1 at α = 0.05 (two-sided), power 0.8 needs
/// 2 (1.95996 + 0.84162)² = 15.70 → 16 per side by the normal
/// approximation; the rank test needs π/3 as many (16.44 → 17).
#[test]
fn runs_needed_follows_the_normal_approximation() {
    assert_eq!(runs_needed(1.0, 100.0, 0.01, 0.05, 0.8, false), 16);
    assert_eq!(runs_needed(1.0, 100.0, 0.01, 0.05, 0.8, true), 17);
    // Half the difference: four times the runs.
    assert_eq!(runs_needed(1.0, 100.0, 0.005, 0.05, 0.8, false), 63);
    // No spread: the t-test's floor of 2; the rank test cannot reach
    // p < 0.05 with 3 per side (2 / C(6, 3) = 0.1), with 4 it can
    // (2 / 70 = 0.029); at α = 0.025 (two candidates) it needs 5
    // (2 / 252 = 0.008; 4 gives 0.029).
    assert_eq!(runs_needed(0.0, 100.0, 0.02, 0.05, 0.8, false), 2);
    assert_eq!(runs_needed(0.0, 100.0, 0.02, 0.05, 0.8, true), 4);
    assert_eq!(runs_needed(0.0, 100.0, 0.02, 0.025, 0.8, true), 5);
}

/// Normal samples from a seeded stream (inverse CDF of uniforms).
fn normal_samples(
    rng: &mut rand::rngs::Xoshiro256PlusPlus,
    n: usize,
    mean: f64,
    sd: f64,
) -> Vec<f64> {
    use rand::RngExt;
    use statrs::distribution::{ContinuousCDF, Normal};
    let z = Normal::standard();
    (0..n)
        .map(|_| mean + sd * z.inverse_cdf(rng.random_range(1e-12..1.0 - 1e-12)))
        .collect()
}

/// The same distribution twice, 4000 times: each test must reject at about
/// its nominal 5 %. The count of rejections of an exact 5 % test is
/// Binomial(4000, 0.05): mean 200, sd √(4000 · 0.05 · 0.95) = 13.8; the
/// bounds are ±4 sd (145–255, a 6·10⁻⁵ chance of failing an exact test; the
/// seed fixes the draw). Mann–Whitney with its continuity correction is
/// slightly conservative at n = 10 (about 4.3 %), inside the bounds; a test
/// that rejected at 2.5 % or 10 % (a one-sided p doubled or halved) would
/// fall outside.
#[test]
fn same_distribution_twice_rejects_about_five_percent() {
    use rand::SeedableRng;
    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(2024);
    let (mut mw, mut w) = (0u32, 0u32);
    for _ in 0..4000 {
        let a = normal_samples(&mut rng, 10, 100.0, 3.0);
        let b = normal_samples(&mut rng, 10, 100.0, 3.0);
        mw += u32::from(mann_whitney(&a, &b).p < 0.05);
        w += u32::from(welch(&a, &b).unwrap().p < 0.05);
    }
    assert!(
        (145..=255).contains(&mw),
        "Mann–Whitney rejected {mw} of 4000"
    );
    assert!((145..=255).contains(&w), "Welch rejected {w} of 4000");
}

fn side(schema: &str, samples: Vec<Vec<f64>>) -> Side {
    let specs = match schema {
        "ttp.emp/1" => input::EMP_MEASURES,
        _ => input::TTPV2_MEASURES,
    };
    Side {
        schema: schema.into(),
        title: "q".into(),
        retained: samples[0].len(),
        measures: specs
            .iter()
            .zip(samples)
            .map(|(s, x)| Measure::of(s, x, "runs"))
            .collect(),
        whole_run: Vec::new(),
        setup: [("kernel", "6.18".to_string())].into_iter().collect(),
        vprofile: None,
    }
}

fn scaled(xs: &[f64], f: f64) -> Vec<f64> {
    xs.iter().map(|x| x * f).collect()
}

/// A candidate 4 % faster on every measure: the verdict says faster, by
/// the ratio of medians, with an interval that contains the true 4 % and
/// the text docs/compare.md gives.
#[test]
fn a_faster_candidate_is_called_faster() {
    let a = side("ttp.run/1", vec![LARGE_A.to_vec(); 3]);
    let b = side("ttp.run/1", vec![scaled(LARGE_A, 0.96); 3]);
    let doc = compare(&[("a".into(), a), ("b".into(), b)], &Config::default()).unwrap();
    let m = &doc.comparisons[0].measures[0];
    assert_eq!(m.verdict.outcome, Outcome::Faster);
    assert!(close(m.ratio.unwrap(), 0.96, 1e-12));
    let [lo, hi] = m.verdict.change_ci_percent.unwrap();
    assert!(lo < 4.0 && 4.0 < hi, "{lo}–{hi}");
    assert!(
        m.verdict.text.starts_with("B is 4.0 % faster (95 % CI "),
        "{}",
        m.verdict.text
    );
    assert!(doc.comparisons[0].setup_differences.is_empty());
}

/// The same samples on both sides: no difference, the interval contains
/// 1, and the power estimate is given.
#[test]
fn the_same_samples_show_no_difference_and_a_run_count() {
    let a = side("ttp.emp/1", vec![LARGE_A.to_vec(); 2]);
    let doc = compare(
        &[("a".into(), a.clone()), ("b".into(), a)],
        &Config::default(),
    )
    .unwrap();
    for m in &doc.comparisons[0].measures {
        assert_eq!(m.verdict.outcome, Outcome::NoDifference);
        let ci = m.ci.as_ref().unwrap();
        assert!(ci.lower <= 1.0 && 1.0 <= ci.upper);
        assert_eq!(m.decided_by, "welch");
        // sd 1.504 around a mean of 100.85: 2 % is 2.017, and
        // 2 · (1.95996 + 0.84162)² · (1.504 / 2.017)² = 8.73 → 9 per side.
        assert_eq!(m.verdict.runs_needed, Some(9), "{}", m.verdict.text);
        assert!(m.verdict.text.contains("needs about 9 runs per side"));
    }
}

/// Two candidates: Holm multiplies the smaller p by 2; the set-up
/// difference of C is reported.
#[test]
fn several_candidates_are_corrected_and_setups_compared() {
    let a = side("ttp.run/1", vec![LARGE_A.to_vec(); 3]);
    let b = side("ttp.run/1", vec![LARGE_B.to_vec(); 3]);
    let mut c = side("ttp.run/1", vec![LARGE_A.to_vec(); 3]);
    c.setup.insert("kernel", "6.1".into());
    let doc = compare(
        &[("a".into(), a), ("b".into(), b), ("c".into(), c)],
        &Config::default(),
    )
    .unwrap();
    let mb = &doc.comparisons[0].measures[0];
    let mc = &doc.comparisons[1].measures[0];
    assert!(close(mb.p_holm, 2.0 * mb.p, 1e-12));
    assert!(mc.p_holm >= mb.p_holm);
    assert!(mb.verdict.text.contains("Holm-adjusted over 2"));
    assert!(doc.comparisons[0].setup_differences.is_empty());
    let d = &doc.comparisons[1].setup_differences;
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].fact, "kernel");
    assert_eq!(d[0].candidate.as_deref(), Some("6.1"));
}

/// Files of different kinds are refused.
#[test]
fn different_kinds_are_refused() {
    let a = side("ttp.run/1", vec![LARGE_A.to_vec(); 3]);
    let b = side("ttp.emp/1", vec![LARGE_A.to_vec(); 2]);
    let e = compare(
        &[("a.json".into(), a), ("b.json".into(), b)],
        &Config::default(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "a.json is a ttp.run/1 result and b.json a ttp.emp/1 result: compare files of one kind"
    );
}

/// The verdict's own false-claim rate: 400 pairs of samples from one
/// distribution, each compared in full (1,000 resamples to keep the test
/// short). A difference is claimed only when the rank test and the
/// interval agree, so the rate must not exceed the test's 5 %: the bound is
/// 5 % + 3 binomial sd, √(0.05 · 0.95 / 400) = 1.1 %, i.e. 33 of 400.
#[test]
fn the_verdict_claims_no_more_than_five_percent_on_equal_samples() {
    use rand::SeedableRng;
    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(77);
    let cfg = Config {
        resamples: 1000,
        ..Config::default()
    };
    let mut claims = 0;
    for _ in 0..400 {
        let a = normal_samples(&mut rng, 10, 100.0, 3.0);
        let b = normal_samples(&mut rng, 10, 100.0, 3.0);
        let doc = compare(
            &[
                ("a".into(), side("ttp.run/1", vec![a])),
                ("b".into(), side("ttp.run/1", vec![b])),
            ],
            &cfg,
        )
        .unwrap();
        claims +=
            usize::from(doc.comparisons[0].measures[0].verdict.outcome != Outcome::NoDifference);
    }
    assert!(claims <= 33, "{claims} of 400 claimed a difference");
}
