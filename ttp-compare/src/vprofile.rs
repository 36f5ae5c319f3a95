//! What `compare` takes from a `ttp.vprofile/1` result, and how two are
//! compared.
//!
//! A vprofile file keeps no per-invocation durations: only the root's mean
//! and sample variance over the last round's invocations, their count, and
//! each factor's share of Var(root) (VProfiler, paper 002, Sec. 3–4). So
//! the root's mean is compared by Welch's t-test from those summaries with
//! the interval of the difference and Fieller's interval of the ratio, its
//! variance by the F-test with the interval of the ratio, and the factor
//! shares side by side, descriptively: without samples no test or interval
//! of a share is possible. docs/compare.md gives the method.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::input::{Factor, InputError, Side, Summary};
use super::stats::{self, FTest, WelchSummary};
use ttp_vprofile::document::VprofileReport;

pub(crate) fn vprofile_side(r: VprofileReport) -> Result<Side, InputError> {
    if r.invocations < 2 {
        return Err(InputError::TooFew {
            retained: r.invocations,
            unit: "invocation(s)",
            why: " of the root in the last round".into(),
        });
    }
    let mut setup = BTreeMap::new();
    setup.insert("schema", r.schema.clone());
    setup.insert("binary", r.binary.path.clone());
    let c = &r.config;
    setup.insert(
        "breakdown settings",
        format!(
            "k {}, d {}, m {}, rounds ≤ {}",
            c.k, c.threshold_share, c.min_child_share, c.max_rounds
        ),
    );
    setup.insert(
        "probe cost subtracted",
        if r.measurement.probe_cost.is_some() {
            "yes"
        } else {
            "no"
        }
        .into(),
    );
    Ok(Side {
        schema: r.schema.clone(),
        title: format!("{} in {}", r.root, r.binary.path),
        retained: r.invocations,
        measures: Vec::new(),
        whole_run: Vec::new(),
        setup,
        vprofile: Some(Summary {
            root: r.root,
            binary: r.binary.path,
            invocations: r.invocations,
            mean_ns: r.root_mean_ns,
            variance_ns2: r.root_variance_ns2,
            factors: r
                .factors
                .into_iter()
                .map(|f| Factor {
                    factor: f.factor,
                    share: f.share,
                })
                .collect(),
            lost_records: r.measurement.lost_records,
        }),
    })
}

/// A factor in both files (or one), by the change of its contribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FactorChange {
    pub factor: String,
    /// Share of Var(root) in the baseline and the candidate; `None` when
    /// the factor is not among that file's factors.
    pub share_baseline: Option<f64>,
    pub share_candidate: Option<f64>,
    /// share × Var(root), ns².
    pub contribution_baseline_ns2: Option<f64>,
    pub contribution_candidate_ns2: Option<f64>,
    /// Candidate − baseline contribution, ns²; `None` unless in both.
    pub change_ns2: Option<f64>,
}

/// The comparison of two vprofile files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VprofileComparison {
    pub root: String,
    pub invocations_baseline: usize,
    pub invocations_candidate: usize,
    pub mean_baseline_ns: f64,
    pub mean_candidate_ns: f64,
    /// Welch's t-test of the means from the summaries; `None` without
    /// spread on either side.
    pub welch: Option<WelchSummary>,
    /// mean(B) / mean(A); `None` when mean(A) is 0.
    pub mean_ratio: Option<f64>,
    /// Fieller's interval of that ratio; `None` when unbounded.
    pub mean_ratio_ci: Option<[f64; 2]>,
    pub variance_baseline_ns2: f64,
    pub variance_candidate_ns2: f64,
    /// The F-test of the variances, with the interval of their ratio.
    pub f_test: Option<FTest>,
    /// Welch's and the F-test's p after Holm's correction over the
    /// candidates.
    pub p_mean_holm: f64,
    pub p_variance_holm: f64,
    pub mean_verdict: String,
    pub variance_verdict: String,
    /// Every factor of either file, largest change of contribution first.
    pub factors: Vec<FactorChange>,
    /// Records lost by the kernel in either file, in words; empty if none.
    #[serde(default)]
    pub losses: Vec<String>,
}

/// The summary statistics of B against A, before the correction and the
/// verdicts.
pub(crate) fn compare_summaries(a: &Summary, b: &Summary, level: f64) -> VprofileComparison {
    let (na, nb) = (a.invocations as f64, b.invocations as f64);
    let welch = stats::welch_from_stats(
        (a.mean_ns, a.variance_ns2, na),
        (b.mean_ns, b.variance_ns2, nb),
        level,
    );
    let mean_ratio = (a.mean_ns != 0.0).then(|| b.mean_ns / a.mean_ns);
    // Fieller's quantile: Student's t at the Welch–Satterthwaite ν.
    let mean_ratio_ci = welch.as_ref().and_then(|w| {
        let q = StudentsT::new(0.0, 1.0, w.df)
            .ok()?
            .inverse_cdf(0.5 + level / 2.0);
        stats::fieller_ratio(
            a.mean_ns,
            a.variance_ns2 / na,
            b.mean_ns,
            b.variance_ns2 / nb,
            q,
        )
    });
    let f_test = stats::f_test(a.variance_ns2, na, b.variance_ns2, nb, level);
    let mut losses = Vec::new();
    for (who, s) in [("A", a), ("B", b)] {
        if let Some(n) = s.lost_records.filter(|&n| n > 0) {
            losses.push(format!(
                "{who} lost {n} kernel record(s): its invocations are fewer than ran, and its numbers may be biased"
            ));
        }
    }
    VprofileComparison {
        root: a.root.clone(),
        invocations_baseline: a.invocations,
        invocations_candidate: b.invocations,
        mean_baseline_ns: a.mean_ns,
        mean_candidate_ns: b.mean_ns,
        p_mean_holm: welch.as_ref().map_or(1.0, |w| w.p),
        welch,
        mean_ratio,
        mean_ratio_ci,
        variance_baseline_ns2: a.variance_ns2,
        variance_candidate_ns2: b.variance_ns2,
        p_variance_holm: f_test.as_ref().map_or(1.0, |f| f.p),
        f_test,
        mean_verdict: String::new(),
        variance_verdict: String::new(),
        factors: factor_changes(a, b),
        losses,
    }
}

/// Every factor of either file; those in both first, by the size of the
/// change of their contribution (share × Var(root), VProfiler Sec. 3), then
/// those in one file only, by their contribution.
fn factor_changes(a: &Summary, b: &Summary) -> Vec<FactorChange> {
    let mut names: Vec<&str> = a.factors.iter().map(|f| f.factor.as_str()).collect();
    for f in &b.factors {
        if !names.contains(&f.factor.as_str()) {
            names.push(&f.factor);
        }
    }
    let share = |s: &Summary, n: &str| s.factors.iter().find(|f| f.factor == n).map(|f| f.share);
    let mut rows: Vec<FactorChange> = names
        .into_iter()
        .map(|n| {
            let (sa, sb) = (share(a, n), share(b, n));
            let ca = sa.map(|s| s * a.variance_ns2);
            let cb = sb.map(|s| s * b.variance_ns2);
            FactorChange {
                factor: n.to_string(),
                share_baseline: sa,
                share_candidate: sb,
                contribution_baseline_ns2: ca,
                contribution_candidate_ns2: cb,
                // A change below the rounding of the shares is none.
                change_ns2: ca.zip(cb).map(|(x, y)| {
                    let d = y - x;
                    if d.abs() <= 1e-12 * x.abs().max(y.abs()) {
                        0.0
                    } else {
                        d
                    }
                }),
            }
        })
        .collect();
    let key = |r: &FactorChange| {
        r.change_ns2.map_or(
            (
                1,
                -r.contribution_baseline_ns2
                    .or(r.contribution_candidate_ns2)
                    .unwrap_or(0.0)
                    .abs(),
            ),
            |c| (0, -c.abs()),
        )
    };
    rows.sort_by(|x, y| {
        let (kx, ky) = (key(x), key(y));
        kx.0.cmp(&ky.0).then(kx.1.total_cmp(&ky.1))
    });
    rows
}

/// The verdicts in words, after Holm's correction: a difference of the
/// means is claimed only when the corrected p is below alpha and Fieller's
/// interval excludes 1; of the variances, when the corrected F-test p is
/// below alpha (its interval then excludes 1 too).
pub(crate) fn verdicts(
    c: &mut VprofileComparison,
    who: &str,
    family: usize,
    alpha: f64,
    level: f64,
) {
    let level = (level * 100.0).round();
    let holm = |p: f64| {
        if family > 1 {
            format!("{}, Holm-adjusted over {family}", stats::p_text(p))
        } else {
            stats::p_text(p)
        }
    };
    let p = holm(c.p_mean_holm);
    c.mean_verdict = match (c.mean_ratio, c.mean_ratio_ci) {
        _ if c.welch.is_none() => {
            "neither root's duration varies: no t-test of the means (they are shown above)".into()
        }
        (Some(r), Some([lo, hi])) if c.p_mean_holm < alpha && (hi < 1.0 || lo > 1.0) => {
            let (word, ch, l, h) = if r < 1.0 {
                ("faster", 1.0 - r, 1.0 - hi, 1.0 - lo)
            } else {
                ("slower", r - 1.0, lo - 1.0, hi - 1.0)
            };
            format!(
                "{who}'s root is {:.1} % {word} on average ({level} % Fieller CI {:.1}–{:.1} %, Welch {p})",
                ch * 100.0,
                l * 100.0,
                h * 100.0
            )
        }
        (Some(r), ci) => format!(
            "no difference of the root's mean detectable ({who}/A = {r:.4}, {}, Welch {p})",
            ci.map_or("Fieller's interval unbounded".into(), |[lo, hi]| format!(
                "{level} % Fieller CI {lo:.4}–{hi:.4}"
            ))
        ),
        (None, _) => format!("A's root mean is 0: no ratio (Welch {p})"),
    };
    let p = holm(c.p_variance_holm);
    c.variance_verdict = match &c.f_test {
        Some(f) if c.p_variance_holm < alpha => format!(
            "{who}'s Var(root) is {:.3} × A's ({level} % CI {:.3}–{:.3}, F-test {p})",
            f.f, f.ratio_ci[0], f.ratio_ci[1]
        ),
        Some(f) => format!(
            "no difference of Var(root) detectable ({who}/A = {:.3}, {level} % CI {:.3}–{:.3}, F-test {p})",
            f.f, f.ratio_ci[0], f.ratio_ci[1]
        ),
        None => format!("A's Var(root) is 0: no F-test ({p})"),
    };
}
