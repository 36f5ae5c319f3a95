//! Two-sample statistics for `compare`: centres, the seeded bootstrap of a
//! ratio of centres, Mann–Whitney U, Welch's t, effect sizes, Holm's
//! correction and the sample size a difference would need.
//!
//! Distributions (normal, Student's t) come from `statrs`; nothing here
//! evaluates a special function by hand. Each test follows the textbook
//! definition that scipy.stats also implements, so its p-values can be
//! checked against scipy (see `tests.rs`).
use rand::{RngExt, SeedableRng, rngs::Xoshiro256PlusPlus};
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, FisherSnedecor, Normal, StudentsT};

/// The centre a measure is summarised by, as its protocol reports it:
/// TTPv2 takes the median of the retained QEs (Sec. 8.5, Step 4), EMP the
/// mean of the retained runs' PT (paper 001, Sec. 4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Centre {
    Median,
    Mean,
}

impl Centre {
    pub fn of(self, xs: &[f64]) -> f64 {
        match self {
            Centre::Median => median(xs),
            Centre::Mean => mean(xs),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Centre::Median => "median",
            Centre::Mean => "mean",
        }
    }
}

pub(crate) fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Sample standard deviation (n − 1); 0 for fewer than two values.
pub(crate) fn sd(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = mean(xs);
    (xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (xs.len() - 1) as f64).sqrt()
}

pub(crate) fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    quantile_sorted(&v, 0.5)
}

/// Quantile of sorted values with linear interpolation between order
/// statistics (Hyndman & Fan type 7, numpy's and scipy's default).
pub(crate) fn quantile_sorted(v: &[f64], q: f64) -> f64 {
    let h = (v.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(v.len() - 1);
    v[lo] + (h - lo as f64) * (v[hi] - v[lo])
}

/// A two-sided percentile bootstrap interval of `centre(b) / centre(a)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BootstrapCi {
    pub lower: f64,
    pub upper: f64,
    pub level: f64,
    pub resamples: usize,
    pub seed: u64,
}

/// Percentile bootstrap (Efron & Tibshirani 1993, ch. 13) of the ratio of
/// the centres: each side resampled with replacement on its own, as for
/// two independent samples, `resamples` times from a Xoshiro256++ stream
/// seeded with `seed`. `None` when a resampled centre of `a` is 0 (the
/// ratio is then undefined).
pub(crate) fn bootstrap_ratio(
    a: &[f64],
    b: &[f64],
    centre: Centre,
    level: f64,
    resamples: usize,
    seed: u64,
) -> Option<BootstrapCi> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut ra = vec![0.0; a.len()];
    let mut rb = vec![0.0; b.len()];
    let mut ratios = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        for x in ra.iter_mut() {
            *x = a[rng.random_range(0..a.len())];
        }
        for x in rb.iter_mut() {
            *x = b[rng.random_range(0..b.len())];
        }
        let r = centre.of(&rb) / centre.of(&ra);
        if !r.is_finite() {
            return None;
        }
        ratios.push(r);
    }
    ratios.sort_by(f64::total_cmp);
    let alpha = (1.0 - level) / 2.0;
    Some(BootstrapCi {
        lower: quantile_sorted(&ratios, alpha),
        upper: quantile_sorted(&ratios, 1.0 - alpha),
        level,
        resamples,
        seed,
    })
}

/// How a Mann–Whitney p-value was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MwuMethod {
    /// The exact null distribution of U (no ties, a side of ≤ 8 values).
    Exact,
    /// Normal approximation with tie and continuity corrections.
    Asymptotic,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MannWhitney {
    /// U of the first sample (A): pairs with a > b, ties counting ½.
    pub u_a: f64,
    pub p: f64,
    pub method: MwuMethod,
}

/// Two-sided Mann–Whitney U test (Mann & Whitney 1947). The method is
/// chosen as scipy.stats.mannwhitneyu's "auto" does: exact when there are
/// no ties and one side has at most 8 values, otherwise the normal
/// approximation with the tie-corrected variance and a continuity
/// correction of ½.
pub(crate) fn mann_whitney(a: &[f64], b: &[f64]) -> MannWhitney {
    let (n1, n2) = (a.len(), b.len());
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    // Average ranks; tie group sizes for the variance correction.
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0;
    let mut ties = false;
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        let avg_rank = (i + j) as f64 / 2.0 + 1.0;
        rank_sum_a += all[i..=j].iter().filter(|e| e.1).count() as f64 * avg_rank;
        tie_term += t * t * t - t;
        ties |= j > i;
        i = j + 1;
    }
    let (f1, f2) = (n1 as f64, n2 as f64);
    let u_a = rank_sum_a - f1 * (f1 + 1.0) / 2.0;
    let u = u_a.max(f1 * f2 - u_a);
    if (n1 <= 8 || n2 <= 8) && !ties {
        let p = (2.0 * exact_u_sf(n1, n2, u.round() as usize)).min(1.0);
        return MannWhitney {
            u_a,
            p,
            method: MwuMethod::Exact,
        };
    }
    let n = f1 + f2;
    let s = (f1 * f2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)))).sqrt();
    let z = (u - f1 * f2 / 2.0 - 0.5) / s;
    let p = if s > 0.0 {
        (2.0 * standard_normal().sf(z)).min(1.0)
    } else {
        1.0
    };
    MannWhitney {
        u_a,
        p,
        method: MwuMethod::Asymptotic,
    }
}

/// P(U ≥ u) under the null hypothesis, from the number of orderings of
/// n1 + n2 distinct values giving each U (the coefficients of the Gaussian
/// binomial; counted, not approximated): placing the largest value, it is
/// either from the first sample (it beats all n2 of the second: U − n2) or
/// from the second (U unchanged).
pub(super) fn exact_u_sf(n1: usize, n2: usize, u: usize) -> f64 {
    let (m, n) = (n1.min(n2), n1.max(n2));
    let max_u = m * n;
    // counts[i][v]: orderings of i values of the small side and j of the
    // large one with U = v, for the current j.
    let mut counts = vec![vec![0.0f64; max_u + 1]; m + 1];
    counts[0][0] = 1.0;
    // j = 0: one ordering for every i, with U = 0.
    for row in counts.iter_mut() {
        row[0] = 1.0;
    }
    for j in 1..=n {
        for i in 1..=m {
            // counts[i] holds j − 1 (value from the large side last);
            // counts[i − 1] already holds j (value from the small side last,
            // beating all j of the large side).
            let (prev, cur) = counts.split_at_mut(i);
            let below = &prev[i - 1];
            for v in (j..=max_u).rev() {
                cur[0][v] += below[v - j];
            }
        }
    }
    let total: f64 = counts[m].iter().sum();
    counts[m][u.min(max_u)..].iter().sum::<f64>() / total
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welch {
    /// t of mean(b) − mean(a).
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    pub p: f64,
}

/// Welch's unequal-variance t-test (Welch 1947), two-sided; `None` when
/// both sides have no spread (t is undefined).
pub(crate) fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (va, vb) = (sd(a).powi(2) / na, sd(b).powi(2) / nb);
    let se2 = va + vb;
    if se2 <= 0.0 {
        return None;
    }
    let t = (mean(b) - mean(a)) / se2.sqrt();
    let df = se2 * se2 / (va * va / (na - 1.0) + vb * vb / (nb - 1.0));
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    Some(Welch {
        t,
        df,
        p: (2.0 * dist.sf(t.abs())).min(1.0),
    })
}

/// Cliff's delta (Cliff 1993): P(b > a) − P(b < a) over all pairs, in
/// [−1, 1]; the effect size that belongs with the rank test. Negative: B
/// tends to be smaller (faster).
pub(crate) fn cliffs_delta(a: &[f64], b: &[f64]) -> f64 {
    let mut more = 0i64;
    for &y in b {
        for &x in a {
            more += match y.partial_cmp(&x) {
                Some(std::cmp::Ordering::Greater) => 1,
                Some(std::cmp::Ordering::Less) => -1,
                _ => 0,
            };
        }
    }
    more as f64 / (a.len() * b.len()) as f64
}

/// Pooled standard deviation of two samples.
pub(crate) fn pooled_sd(a: &[f64], b: &[f64]) -> f64 {
    let (na, nb) = (a.len() as f64, b.len() as f64);
    (((na - 1.0) * sd(a).powi(2) + (nb - 1.0) * sd(b).powi(2)) / (na + nb - 2.0)).sqrt()
}

/// Cohen's d: (mean(b) − mean(a)) / pooled sd; `None` without spread.
pub(crate) fn cohens_d(a: &[f64], b: &[f64]) -> Option<f64> {
    let s = pooled_sd(a, b);
    (s > 0.0).then(|| (mean(b) - mean(a)) / s)
}

/// Holm's step-down adjustment (Holm 1979) of a family of p-values: the
/// i-th smallest is multiplied by (k − i), made monotone, capped at 1.
/// Controls the family-wise error rate at α without assumptions about the
/// dependence between the tests.
pub(crate) fn holm(ps: &[f64]) -> Vec<f64> {
    let k = ps.len();
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by(|&i, &j| ps[i].total_cmp(&ps[j]));
    let mut adjusted = vec![0.0; k];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((k - rank) as f64 * ps[i]).min(1.0));
        adjusted[i] = running;
    }
    adjusted
}

fn standard_normal() -> Normal {
    Normal::standard()
}

/// Runs per side a two-sided test at `alpha` needs to detect a relative
/// difference `rel` of `centre_a` with probability `power`, for samples of
/// standard deviation `sd`: the normal-approximation sample size of the
/// two-sample comparison, n = 2 (z₁₋α/₂ + z_power)² σ² / δ² (Cohen 1988,
/// ch. 2), divided by the asymptotic relative efficiency of the rank test
/// against the t-test under normality, 3/π (Lehmann 1975), when the rank
/// test decides. At least 2, and for the rank test at least the smallest
/// n per side whose most extreme outcome (all of one side below all of the
/// other, two-sided p = 2 / C(2n, n)) reaches `alpha`: 4 at α = 0.05.
pub(crate) fn runs_needed(
    sd: f64,
    centre_a: f64,
    rel: f64,
    alpha: f64,
    power: f64,
    rank: bool,
) -> u64 {
    let delta = (rel * centre_a).abs();
    if delta <= 0.0 {
        return u64::MAX;
    }
    let z = standard_normal();
    let k = z.inverse_cdf(1.0 - alpha / 2.0) + z.inverse_cdf(power);
    let mut n = 2.0 * k * k * (sd / delta).powi(2);
    let mut floor = 2;
    if rank {
        n /= 3.0 / std::f64::consts::PI;
        while 2.0 / binomial(2 * floor, floor) >= alpha {
            floor += 1;
        }
    }
    (n.ceil() as u64).max(floor)
}

/// C(n, k) as a float (exact for the sizes used here).
fn binomial(n: u64, k: u64) -> f64 {
    (0..k).fold(1.0, |c, i| c * (n - i) as f64 / (i + 1) as f64)
}

/// Welch's t-test from summaries, and the interval of the difference of
/// means it implies: what a result without per-sample values allows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WelchSummary {
    /// t of mean(b) − mean(a).
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    pub p: f64,
    /// mean(b) − mean(a).
    pub difference: f64,
    /// Its two-sided interval at the configured level.
    pub difference_ci: [f64; 2],
}

/// Welch's unequal-variance t-test (Welch 1947, eq. for t and ν) from each
/// side's mean, sample variance (n − 1) and count, two-sided, as
/// scipy.stats.ttest_ind_from_stats(..., equal_var=False) computes it:
/// t = (m_b − m_a) / √(v_a/n_a + v_b/n_b),
/// ν = (v_a/n_a + v_b/n_b)² / ((v_a/n_a)²/(n_a − 1) + (v_b/n_b)²/(n_b − 1)).
/// The interval of the difference is (m_b − m_a) ± t₁₋α/₂,ν × se. `None`
/// when both sides have no spread or a side has fewer than 2 values.
pub(crate) fn welch_from_stats(
    a: (f64, f64, f64),
    b: (f64, f64, f64),
    level: f64,
) -> Option<WelchSummary> {
    let ((ma, va, na), (mb, vb, nb)) = (a, b);
    if na < 2.0 || nb < 2.0 {
        return None;
    }
    let (sa, sb) = (va / na, vb / nb);
    let se2 = sa + sb;
    if se2.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return None;
    }
    let difference = mb - ma;
    let t = difference / se2.sqrt();
    let df = se2 * se2 / (sa * sa / (na - 1.0) + sb * sb / (nb - 1.0));
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    let half = dist.inverse_cdf(0.5 + level / 2.0) * se2.sqrt();
    Some(WelchSummary {
        t,
        df,
        p: (2.0 * dist.sf(t.abs())).min(1.0),
        difference,
        difference_ci: [difference - half, difference + half],
    })
}

/// Fieller's interval (Fieller 1954) of the ratio of two independent means
/// m_b / m_a with squared standard errors se2_a, se2_b and the quantile q
/// (here Student's t at the Welch–Satterthwaite ν): the θ with
/// (m_b − θ m_a)² ≤ q² (se2_b + θ² se2_a), i.e. the roots of
/// θ² (m_a² − q² se2_a) − 2 θ m_a m_b + (m_b² − q² se2_b) = 0.
/// `None` when m_a is not significantly different from 0
/// (g = q² se2_a / m_a² ≥ 1): the set is then unbounded.
pub(crate) fn fieller_ratio(ma: f64, se2_a: f64, mb: f64, se2_b: f64, q: f64) -> Option<[f64; 2]> {
    let q2 = q * q;
    let a = ma * ma - q2 * se2_a;
    if a <= 0.0 {
        return None;
    }
    let half_b = ma * mb;
    let c = mb * mb - q2 * se2_b;
    let disc = half_b * half_b - a * c;
    if disc < 0.0 {
        return None;
    }
    let root = disc.sqrt();
    Some([(half_b - root) / a, (half_b + root) / a])
}

/// The F-test for equal variances, with the interval of the ratio.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FTest {
    /// F = v_b / v_a.
    pub f: f64,
    /// n_b − 1 and n_a − 1.
    pub df_num: f64,
    pub df_den: f64,
    /// Two-sided: 2 min(P(F' ≤ F), P(F' ≥ F)), capped at 1.
    pub p: f64,
    /// Interval of σ_b² / σ_a² at the configured level.
    pub ratio_ci: [f64; 2],
}

/// The two-sided F-test of σ_b² = σ_a² (Snedecor & Cochran 1989,
/// Sec. 6.12): F = v_b / v_a has the F(n_b − 1, n_a − 1) distribution
/// under normality and equal variances; the interval of σ_b²/σ_a² is
/// [F / F₁₋α/₂, F / F_α/₂] of that distribution. Exact only for normal
/// data: docs/compare.md says why it is still shown and how to read it.
/// `None` when v_a is 0 or a side has fewer than 2 values.
pub(crate) fn f_test(va: f64, na: f64, vb: f64, nb: f64, level: f64) -> Option<FTest> {
    if na < 2.0 || nb < 2.0 || va <= 0.0 || vb < 0.0 {
        return None;
    }
    let (d1, d2) = (nb - 1.0, na - 1.0);
    let dist = FisherSnedecor::new(d1, d2).ok()?;
    let f = vb / va;
    let p = (2.0 * dist.cdf(f).min(dist.sf(f))).min(1.0);
    let tail = (1.0 - level) / 2.0;
    Some(FTest {
        f,
        df_num: d1,
        df_den: d2,
        p,
        ratio_ci: [f / dist.inverse_cdf(1.0 - tail), f / dist.inverse_cdf(tail)],
    })
}

/// p as people read it: "p = 0.002", "p < 0.001".
pub(crate) fn p_text(p: f64) -> String {
    if p < 0.001 {
        "p < 0.001".into()
    } else if p < 0.01 {
        format!("p = {p:.3}")
    } else {
        format!("p = {p:.2}")
    }
}
