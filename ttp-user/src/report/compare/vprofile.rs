//! The vprofile part of a comparison shown: the root's mean and variance
//! with their tests and intervals, and the factor shares side by side.
use crate::report::render::table::Table;
use ttp_compare::{Comparison, vprofile::VprofileComparison};

/// What the factor table is, and is not.
pub(crate) const FACTORS_NOTE: &str = "factor shares of Var(root) and contributions (share × Var(root), ns²; VProfiler Sec. 3), largest change first: descriptive only — the files hold no per-invocation samples, so no test or interval of a share";

fn p_cell(p: f64) -> String {
    if p < 1e-4 {
        format!("{p:.1e}")
    } else {
        format!("{p:.4}")
    }
}

fn pair(x: Option<[f64; 2]>, digits: usize) -> String {
    x.map_or("unbounded".into(), |[lo, hi]| {
        format!("{lo:.digits$}–{hi:.digits$}")
    })
}

/// The root's mean and variance, one row each.
pub(crate) fn root_table(c: &Comparison, v: &VprofileComparison) -> Table {
    let (a, x) = (&c.baseline, &c.candidate);
    let cols = [
        "root".to_string(),
        format!("n_{a}"),
        format!("n_{x}"),
        a.clone(),
        x.clone(),
        format!("{x}/{a}"),
        format!("CI_of_{x}/{a}"),
        "test".into(),
        "p".into(),
        "p_Holm".into(),
    ];
    let mut t = Table::new(&cols.iter().map(String::as_str).collect::<Vec<_>>());
    let (na, nb) = (
        v.invocations_baseline.to_string(),
        v.invocations_candidate.to_string(),
    );
    t.push(vec![
        "mean (ns)".into(),
        na.clone(),
        nb.clone(),
        format!("{:.1}", v.mean_baseline_ns),
        format!("{:.1}", v.mean_candidate_ns),
        v.mean_ratio.map_or("-".into(), |r| format!("{r:.4}")),
        pair(v.mean_ratio_ci, 4),
        v.welch.as_ref().map_or("-".into(), |w| {
            format!("Welch t = {:.3}, df = {:.1}", w.t, w.df)
        }),
        v.welch.as_ref().map_or("-".into(), |w| p_cell(w.p)),
        p_cell(v.p_mean_holm),
    ]);
    t.push(vec![
        "variance (ns²)".into(),
        na,
        nb,
        format!("{:.4e}", v.variance_baseline_ns2),
        format!("{:.4e}", v.variance_candidate_ns2),
        v.f_test
            .as_ref()
            .map_or("-".into(), |f| format!("{:.4}", f.f)),
        v.f_test
            .as_ref()
            .map_or("-".into(), |f| pair(Some(f.ratio_ci), 4)),
        v.f_test
            .as_ref()
            .map_or("-".into(), |f| format!("F({}, {})", f.df_num, f.df_den)),
        v.f_test.as_ref().map_or("-".into(), |f| p_cell(f.p)),
        p_cell(v.p_variance_holm),
    ]);
    t
}

/// The difference of the means with its interval, in words.
pub(crate) fn difference_line(
    c: &Comparison,
    v: &VprofileComparison,
    level: f64,
) -> Option<String> {
    let w = v.welch.as_ref()?;
    Some(format!(
        "mean({}) − mean({}) = {:.1} ns ({} % CI {:.1} to {:.1} ns, Welch–Satterthwaite df {:.1})",
        c.candidate,
        c.baseline,
        w.difference,
        (level * 100.0).round(),
        w.difference_ci[0],
        w.difference_ci[1],
        w.df
    ))
}

fn share(x: Option<f64>) -> String {
    x.map_or("-".into(), |s| format!("{:.1} %", s * 100.0))
}

fn ns2(x: Option<f64>) -> String {
    x.map_or("-".into(), |s| format!("{s:.4e}"))
}

/// Every factor of either file, largest change of contribution first.
pub(crate) fn factor_table(c: &Comparison, v: &VprofileComparison) -> Table {
    let (a, x) = (&c.baseline, &c.candidate);
    let cols = [
        "factor".to_string(),
        format!("share_{a}"),
        format!("share_{x}"),
        format!("contribution_{a}_ns2"),
        format!("contribution_{x}_ns2"),
        "change_ns2".into(),
    ];
    let mut t = Table::new(&cols.iter().map(String::as_str).collect::<Vec<_>>());
    for f in &v.factors {
        t.push(vec![
            f.factor.clone(),
            share(f.share_baseline),
            share(f.share_candidate),
            ns2(f.contribution_baseline_ns2),
            ns2(f.contribution_candidate_ns2),
            f.change_ns2.map_or_else(
                || {
                    if f.share_baseline.is_none() {
                        format!("only in {x}")
                    } else {
                        format!("only in {a}")
                    }
                },
                |d| format!("{d:+.4e}"),
            ),
        ]);
    }
    t
}

/// The lines of a vprofile comparison: verdicts, the difference, losses.
pub(crate) fn lines(c: &Comparison, v: &VprofileComparison, level: f64) -> Vec<String> {
    let mut out = vec![
        format!("root mean: {}", v.mean_verdict),
        format!("root variance: {}", v.variance_verdict),
    ];
    out.extend(difference_line(c, v, level));
    out.extend(v.losses.iter().cloned());
    out
}
