//! `compare`: is B faster than A, by how much, or is it noise? Saved
//! results of one kind (TTPv2 runs, EMP runs) are reduced to the retained
//! samples of each measure; each candidate is compared with the first file
//! (the baseline) by the ratio of the protocol's centres with a seeded
//! bootstrap interval, a rank test and Welch's t-test, effect sizes, Holm's
//! correction over the candidates, and a verdict in words. docs/compare.md
//! gives the method.
pub mod input;
mod load;
mod sides;
pub mod stats;
#[cfg(test)]
mod tests;
mod ttpv2;
pub mod vprofile;
#[cfg(any(test, feature = "test-support"))]
pub mod vprofile_tests;

use serde::{Deserialize, Serialize};

pub use input::{InputError, Measure, Side};
pub use sides::side_of;
use stats::{BootstrapCi, Centre, MannWhitney, Welch, p_text};
pub use ttpv2::sides_by_name;

pub const COMPARE_SCHEMA: &str = "ttp.compare/1";

/// How the comparison is made; every field is reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// Confidence level of the bootstrap interval.
    pub level: f64,
    pub resamples: usize,
    pub seed: u64,
    /// Family-wise significance level (after Holm's correction).
    pub alpha: f64,
    /// The relative difference the power estimate is for (0.02 = 2 %).
    pub detect_rel: f64,
    /// Power the estimate asks for.
    pub power: f64,
    /// Compare vprofile results of different root functions.
    #[serde(default)]
    pub any_root: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            level: 0.95,
            resamples: 10_000,
            seed: 0x7474_7063,
            alpha: 0.05,
            detect_rel: 0.02,
            power: 0.8,
            any_root: false,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CompareError {
    #[error("compare needs at least two files: a baseline A and one or more candidates")]
    TooFewFiles,
    #[error("{a} is a {a_schema} result and {b} a {b_schema} result: compare files of one kind")]
    DifferentKinds {
        a: String,
        a_schema: String,
        b: String,
        b_schema: String,
    },
    #[error(
        "{a} profiles {a_root} and {b} profiles {b_root}: their factors cannot be matched; give --any-root to compare them anyway"
    )]
    DifferentRoots {
        a: String,
        a_root: String,
        b: String,
        b_root: String,
    },
}

/// One input file as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileEntry {
    /// A, B, C, …
    pub label: String,
    pub path: String,
    pub title: String,
    pub retained: usize,
}

/// What the document's numbers mean.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Method {
    pub interval: String,
    pub rng: String,
    pub tests: String,
    pub correction: String,
    /// How the runs needed to detect `detect_rel` are estimated.
    pub runs_needed: String,
    #[serde(flatten)]
    pub config: Config,
}

/// A set-up fact that differs between the baseline and a candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Difference {
    pub fact: String,
    pub baseline: Option<String>,
    pub candidate: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleSummary {
    pub n: usize,
    /// The protocol's centre (median for TTPv2, mean for EMP).
    pub centre: f64,
    pub median: f64,
    pub mean: f64,
    pub sd: f64,
    pub samples: Vec<f64>,
}

impl SampleSummary {
    fn of(xs: &[f64], centre: Centre) -> Self {
        SampleSummary {
            n: xs.len(),
            centre: centre.of(xs),
            median: stats::median(xs),
            mean: stats::mean(xs),
            sd: stats::sd(xs),
            samples: xs.to_vec(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Faster,
    Slower,
    NoDifference,
    /// The baseline's centre is 0: no ratio.
    NoRatio,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub outcome: Outcome,
    /// How much faster or slower, in % of A (positive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_percent: Option<f64>,
    /// The interval of that change, in %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_ci_percent: Option<[f64; 2]>,
    /// Samples (QEs, runs, seconds) per side that would detect the
    /// `detect_rel` difference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_needed: Option<u64>,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasureComparison {
    pub measure: String,
    pub what: String,
    pub centre: Centre,
    /// What one sample is: "QEs", "runs", "seconds".
    pub sample_unit: String,
    pub baseline: SampleSummary,
    pub candidate: SampleSummary,
    /// centre(B) / centre(A); `None` when centre(A) is 0.
    pub ratio: Option<f64>,
    pub ci: Option<BootstrapCi>,
    pub mann_whitney: MannWhitney,
    pub welch: Option<Welch>,
    /// Which test decides: the rank test for medians, Welch for means.
    pub decided_by: String,
    /// That test's p-value, and after Holm's correction.
    pub p: f64,
    pub p_holm: f64,
    pub cliffs_delta: f64,
    pub cohens_d: Option<f64>,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub baseline: String,
    pub candidate: String,
    pub setup_differences: Vec<Difference>,
    pub measures: Vec<MeasureComparison>,
    /// Measures left out, and why.
    pub skipped: Vec<String>,
    /// Numbers each file holds once (no samples, no interval), side by side.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub whole_run: Vec<WholeRun>,
    /// vprofile results: the root's mean and variance from summaries, and
    /// the factor shares side by side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vprofile: Option<vprofile::VprofileComparison>,
}

/// A number both files hold once for the whole measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WholeRun {
    pub name: String,
    pub baseline: f64,
    pub candidate: f64,
    /// candidate / baseline; `None` when the baseline is 0.
    pub ratio: Option<f64>,
}

fn whole_run(a: &Side, b: &Side) -> Vec<WholeRun> {
    a.whole_run
        .iter()
        .filter_map(|(name, x)| {
            let (_, y) = b.whole_run.iter().find(|(n, _)| n == name)?;
            Some(WholeRun {
                name: name.clone(),
                baseline: *x,
                candidate: *y,
                ratio: (*x != 0.0).then(|| y / x),
            })
        })
        .collect()
}

/// The `ttp.compare/1` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareDocument {
    pub schema: String,
    /// The kind of the compared results.
    pub kind: String,
    pub files: Vec<FileEntry>,
    pub method: Method,
    pub comparisons: Vec<Comparison>,
}

/// "A", "B", …, "Z", "AA", …
pub fn label(i: usize) -> String {
    let mut s = String::new();
    let mut i = i + 1;
    while i > 0 {
        s.insert(0, (b'A' + ((i - 1) % 26) as u8) as char);
        i = (i - 1) / 26;
    }
    s
}

fn setup_differences(a: &Side, b: &Side) -> Vec<Difference> {
    let keys: std::collections::BTreeSet<_> = a.setup.keys().chain(b.setup.keys()).collect();
    keys.into_iter()
        .filter(|k| a.setup.get(*k) != b.setup.get(*k))
        .map(|k| Difference {
            fact: k.to_string(),
            baseline: a.setup.get(k).cloned(),
            candidate: b.setup.get(k).cloned(),
        })
        .collect()
}

/// The family of a measure for Holm's correction: its name without the
/// Q@C ("cardinality=1: time_calc_ms" → "time_calc_ms").
fn family(measure: &str) -> &str {
    measure.rsplit(": ").next().unwrap_or(measure)
}

/// Compares every file after the first with the first.
pub fn compare(files: &[(String, Side)], cfg: &Config) -> Result<CompareDocument, CompareError> {
    let [(a_path, a), rest @ ..] = files else {
        return Err(CompareError::TooFewFiles);
    };
    if rest.is_empty() {
        return Err(CompareError::TooFewFiles);
    }
    if let Some((b_path, b)) = rest.iter().find(|(_, b)| b.schema != a.schema) {
        return Err(CompareError::DifferentKinds {
            a: a_path.clone(),
            a_schema: a.schema.clone(),
            b: b_path.clone(),
            b_schema: b.schema.clone(),
        });
    }
    if !cfg.any_root
        && let Some(ra) = &a.vprofile
        && let Some((b_path, rb)) = rest.iter().find_map(|(p, b)| {
            b.vprofile
                .as_ref()
                .filter(|rb| rb.root != ra.root)
                .map(|rb| (p, rb))
        })
    {
        return Err(CompareError::DifferentRoots {
            a: a_path.clone(),
            a_root: ra.root.clone(),
            b: b_path.clone(),
            b_root: rb.root.clone(),
        });
    }
    let mut comparisons: Vec<Comparison> = rest
        .iter()
        .enumerate()
        .map(|(i, (_, b))| Comparison {
            baseline: label(0),
            candidate: label(i + 1),
            setup_differences: setup_differences(a, b),
            measures: Vec::new(),
            skipped: Vec::new(),
            whole_run: whole_run(a, b),
            vprofile: a
                .vprofile
                .as_ref()
                .zip(b.vprofile.as_ref())
                .map(|(x, y)| vprofile::compare_summaries(x, y, cfg.level)),
        })
        .collect();
    vprofile_verdicts(&mut comparisons, cfg);
    // Every comparison that has samples, in A's measure order.
    let mut raw = Vec::new();
    for ma in &a.measures {
        for (c, (_, b)) in rest.iter().enumerate() {
            let xb = b
                .measures
                .iter()
                .find(|m| m.name == ma.name)
                .map_or(&[][..], |m| &m.samples[..]);
            if ma.samples.len() < 2 || xb.len() < 2 {
                comparisons[c].skipped.push(format!(
                    "{}: {} sample(s) in A, {} in {} (needs 2 on each side)",
                    ma.name,
                    ma.samples.len(),
                    xb.len(),
                    label(c + 1)
                ));
                continue;
            }
            raw.push((c, measure(ma, xb, cfg)));
        }
    }
    // Holm's families: one per measure (time_calc_ms, pt_ms, …), holding
    // its comparisons for every candidate and, in analyses, every Q@C.
    let mut p_holm = vec![0.0; raw.len()];
    let mut family_size = vec![0; raw.len()];
    let mut families: Vec<&str> = Vec::new();
    for (_, r) in &raw {
        if !families.contains(&family(&r.measure)) {
            families.push(family(&r.measure));
        }
    }
    for f in families {
        let members: Vec<usize> = (0..raw.len())
            .filter(|&i| family(&raw[i].1.measure) == f)
            .collect();
        let adjusted = stats::holm(&members.iter().map(|&i| raw[i].1.p).collect::<Vec<_>>());
        for (&i, p) in members.iter().zip(adjusted) {
            p_holm[i] = p;
            family_size[i] = members.len();
        }
    }
    for (i, (c, mut r)) in raw.into_iter().enumerate() {
        r.p_holm = p_holm[i];
        r.verdict = verdict(&r, &label(c + 1), family_size[i], cfg);
        comparisons[c].measures.push(r);
    }
    Ok(CompareDocument {
        schema: COMPARE_SCHEMA.into(),
        kind: a.schema.clone(),
        files: files
            .iter()
            .enumerate()
            .map(|(i, (path, s))| FileEntry {
                label: label(i),
                path: path.clone(),
                title: s.title.clone(),
                retained: s.retained,
            })
            .collect(),
        method: method(cfg, &a.schema),
        comparisons,
    })
}

/// Holm's correction over the candidates (one family for the means, one
/// for the variances), then the verdicts of vprofile comparisons.
fn vprofile_verdicts(comparisons: &mut [Comparison], cfg: &Config) {
    let idx: Vec<usize> = (0..comparisons.len())
        .filter(|&i| comparisons[i].vprofile.is_some())
        .collect();
    let vp = |i: usize| comparisons[i].vprofile.as_ref().expect("filtered");
    let means = stats::holm(&idx.iter().map(|&i| vp(i).p_mean_holm).collect::<Vec<_>>());
    let vars = stats::holm(
        &idx.iter()
            .map(|&i| vp(i).p_variance_holm)
            .collect::<Vec<_>>(),
    );
    for (k, &i) in idx.iter().enumerate() {
        let who = comparisons[i].candidate.clone();
        let v = comparisons[i].vprofile.as_mut().expect("filtered");
        v.p_mean_holm = means[k];
        v.p_variance_holm = vars[k];
        vprofile::verdicts(v, &who, idx.len(), cfg.alpha, cfg.level);
    }
}

fn method(cfg: &Config, kind: &str) -> Method {
    if kind == "ttp.vprofile/1" {
        return Method {
            interval: "Fieller's interval of mean(B) / mean(A), Student's t at the Welch–Satterthwaite degrees of freedom (Fieller 1954); the F-based interval of Var(B) / Var(A)".into(),
            rng: "not used: a vprofile file holds summaries, not samples".into(),
            tests: "two-sided Welch's t-test from each root's mean, sample variance and invocation count (Welch 1947); two-sided F-test of equal variances (exact under normality only). Factor shares are descriptive: the file holds no per-invocation samples, so no test or interval of a share".into(),
            correction: "Holm over the candidates, one family for the means and one for the variances".into(),
            runs_needed: "not estimated for summaries".into(),
            config: cfg.clone(),
        };
    }
    Method {
        interval: format!(
            "percentile bootstrap of centre(B) / centre(A), each side resampled on its own, {} resamples",
            cfg.resamples
        ),
        rng: "Xoshiro256++ (rand 0.10), seeded".into(),
        tests: "two-sided Mann–Whitney U (exact without ties when a side has ≤ 8 values, else normal approximation with tie and continuity corrections) decides for medians; two-sided Welch's t-test decides for means".into(),
        correction: "Holm over the comparisons of each measure with A (one per candidate and, in analyses, per Q@C)".into(),
        runs_needed: "runs per side for a two-sided test at alpha to detect detect_rel with the given power: 2 (z₁₋α/₂ + z_power)² σ² / δ², σ the pooled sd, divided by 3/π for the rank test".into(),
        config: cfg.clone(),
    }
}

/// The numbers of one measure, before the correction and the verdict.
fn measure(spec: &Measure, b: &[f64], cfg: &Config) -> MeasureComparison {
    let a = &spec.samples[..];
    let sa = SampleSummary::of(a, spec.centre);
    let sb = SampleSummary::of(b, spec.centre);
    let ratio = (sa.centre != 0.0).then(|| sb.centre / sa.centre);
    let ci = ratio.and_then(|_| {
        stats::bootstrap_ratio(a, b, spec.centre, cfg.level, cfg.resamples, cfg.seed)
    });
    let mw = stats::mann_whitney(a, b);
    let welch = stats::welch(a, b);
    let (decided_by, p) = match spec.centre {
        Centre::Median => ("mann_whitney", mw.p),
        // Both sides without spread: t is undefined; equal means are no
        // evidence of a difference, different ones are certain.
        Centre::Mean => (
            "welch",
            welch
                .as_ref()
                .map_or(if sa.mean == sb.mean { 1.0 } else { 0.0 }, |w| w.p),
        ),
    };
    MeasureComparison {
        measure: spec.name.clone(),
        what: spec.what.clone(),
        centre: spec.centre,
        sample_unit: spec.sample_unit.into(),
        ratio,
        ci,
        cliffs_delta: stats::cliffs_delta(a, b),
        cohens_d: stats::cohens_d(a, b),
        mann_whitney: mw,
        welch,
        decided_by: decided_by.into(),
        p,
        p_holm: p,
        baseline: sa,
        candidate: sb,
        verdict: Verdict {
            outcome: Outcome::NoDifference,
            change_percent: None,
            change_ci_percent: None,
            runs_needed: None,
            text: String::new(),
        },
    }
}

/// A percentage: one decimal, two below 1 %, no sign on zero.
fn pct(x: f64) -> String {
    let s = if x.abs() < 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.1}")
    };
    if s.trim_start_matches('-')
        .trim_matches(|c| c == '0' || c == '.')
        .is_empty()
    {
        s.trim_start_matches('-').to_string()
    } else {
        s
    }
}

/// A signed percentage: "+0.6", "−3.1".
fn signed_pct(x: f64) -> String {
    let s = pct(x);
    match s.strip_prefix('-') {
        Some(abs) => format!("−{abs}"),
        None if x > 0.0 => format!("+{s}"),
        None => s,
    }
}

/// The verdict in words: a difference is claimed only when the corrected
/// test and the interval agree (p_holm < alpha and the interval excludes a
/// ratio of 1); otherwise the power estimate says how many runs would
/// detect `detect_rel`.
fn verdict(r: &MeasureComparison, who: &str, family: usize, cfg: &Config) -> Verdict {
    let level = (cfg.level * 100.0).round();
    let p = if family > 1 {
        format!("{}, Holm-adjusted over {family}", p_text(r.p_holm))
    } else {
        p_text(r.p_holm)
    };
    let Some(ratio) = r.ratio else {
        return Verdict {
            outcome: Outcome::NoRatio,
            change_percent: None,
            change_ci_percent: None,
            runs_needed: None,
            text: format!(
                "A's {} is 0 {}: no ratio ({p})",
                r.centre.name(),
                unit(&r.measure)
            ),
        };
    };
    let significant = r.p_holm < cfg.alpha
        && r.ci
            .as_ref()
            .is_some_and(|ci| ci.upper < 1.0 || ci.lower > 1.0);
    if significant {
        let ci = r.ci.as_ref().expect("checked above");
        let (outcome, word, change, lo, hi) = if ratio < 1.0 {
            (
                Outcome::Faster,
                "faster",
                (1.0 - ratio) * 100.0,
                (1.0 - ci.upper) * 100.0,
                (1.0 - ci.lower) * 100.0,
            )
        } else {
            (
                Outcome::Slower,
                "slower",
                (ratio - 1.0) * 100.0,
                (ci.lower - 1.0) * 100.0,
                (ci.upper - 1.0) * 100.0,
            )
        };
        return Verdict {
            outcome,
            change_percent: Some(change),
            change_ci_percent: Some([lo, hi]),
            runs_needed: None,
            text: format!(
                "{who} is {} % {word} ({level} % CI {}–{} %, {p})",
                pct(change),
                pct(lo),
                pct(hi)
            ),
        };
    }
    let sd = stats::pooled_sd(&r.baseline.samples, &r.candidate.samples);
    let n = stats::runs_needed(
        sd,
        r.baseline.centre,
        cfg.detect_rel,
        cfg.alpha / family as f64,
        cfg.power,
        r.decided_by == "mann_whitney",
    );
    let interval = match &r.ci {
        Some(ci) => format!(
            "{level} % CI of the change {} % to {} %",
            signed_pct((ci.lower - 1.0) * 100.0),
            signed_pct((ci.upper - 1.0) * 100.0)
        ),
        None => "no interval".into(),
    };
    Verdict {
        outcome: Outcome::NoDifference,
        change_percent: None,
        change_ci_percent: None,
        runs_needed: Some(n),
        text: format!(
            "no difference detectable with these samples ({who}/A = {ratio:.3}, {interval}, {p}); with this spread, detecting {} % needs about {n} {} per side",
            pct(cfg.detect_rel * 100.0),
            r.sample_unit
        ),
    }
}

/// The unit at the end of a measure's name ("time_calc_ms" → "ms").
pub(crate) fn unit(measure: &str) -> &str {
    measure.rsplit('_').next().unwrap_or("")
}
