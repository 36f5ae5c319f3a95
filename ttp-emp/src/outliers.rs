//! EMPv5 (Sec. 4.5): disciplined outlier removal, then the result.
//!
//! 1. Runs the run loop flagged (the warm-up run, Sec. 4; failed runs; runs
//!    with lost ledger records) and runs without a PT are set aside first.
//! 2. First sanity check: drop every run in which an infrequent, long-running
//!    daemon (from the calibration profile) ran longer than its cut-off.
//! 3. Second sanity check: over the runs that remain, drop those whose PT
//!    lies outside mean ± 2σ (Sec. 4.5.2, {P_i | P_i > P̄ + 2σ(P) or
//!    P_i < P̄ − 2σ(P)}), computed once over the remaining runs.
//! 4. The result is the average PT of the retained runs (Fig. 8, Step 4),
//!    with its standard deviation and relative error.
//!
//! ET gets its own ±2σ over the same runs (Table XVIII counts 16 = 15 + 1
//! ET and 20 = 15 + 5 PT outliers on INC128; Sec. 4.6.2 counts "outliers
//! with ET (PT) measurements" separately): the ET statistics are those of
//! the runs inside the ET band, the PT result those inside the PT band. A
//! run's verdict is its PT verdict (PT is the protocol's measure); its ET
//! outcome is reported beside it.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    error::EmpError,
    input::{EmpRun, PtSource, daemon_key, resolve_pt_source},
    profile::Profile,
    stats::{Summary, median, sample_sd},
};

pub const SCHEMA: &str = "ttp.emp/1";

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EmpConfig {
    /// Width of the second sanity check in standard deviations (2, Sec. 4.5).
    pub sigma_k: f64,
    pub pt_source: PtSource,
}

impl Default for EmpConfig {
    fn default() -> Self {
        Self {
            sigma_k: 2.0,
            pt_source: PtSource::Auto,
        }
    }
}

/// One daemon execution over its cut-off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonHit {
    pub name: String,
    pub pid: u32,
    pub pt_ns: u64,
    pub cutoff_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Above,
    Below,
}

/// What happened to one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    Retained,
    WarmUp,
    Failed {
        detail: String,
    },
    LostRecords {
        count: u64,
    },
    MissingPt,
    /// First sanity check (Sec. 4.5.1, after Step 8).
    DaemonCutoff {
        hits: Vec<DaemonHit>,
    },
    /// Second sanity check (Sec. 4.5.2, ±2σ).
    TwoSigma {
        side: Side,
    },
}

impl Verdict {
    pub fn is_retained(&self) -> bool {
        matches!(self, Verdict::Retained)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunVerdict {
    pub index: u32,
    pub et_ns: u64,
    pub pt_ns: Option<u64>,
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The ET ±2σ check (Table XVIII's ET row) for a run that passed the
    /// first sanity check: `Some(side)` when its ET lies outside the ET band.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub et_two_sigma: Option<Side>,
}

/// The ±2σ band of the second sanity check.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SigmaBand {
    /// Runs the band was computed over (those left after the first check).
    pub n: usize,
    pub mean_ns: f64,
    pub sd_ns: f64,
    pub lower_ns: f64,
    pub upper_ns: f64,
}

/// The cut-offs the first sanity check used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppliedCutoffs {
    /// Program length the periodic daemons' cases were chosen by: the median
    /// ET of the usable runs.
    pub program_ns: u64,
    pub cutoffs_ns: BTreeMap<String, u64>,
}

/// Ledger PT against taskstats PT over runs that have both (a cross-check
/// of the two sources; taskstats resolution is 1 µs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SourceAgreement {
    pub n: usize,
    /// Mean of (ledger − taskstats) in ns.
    pub mean_diff_ns: f64,
    pub max_abs_diff_ns: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DropCounts {
    pub flagged: usize,
    pub missing_pt: usize,
    pub daemon_cutoff: usize,
    /// PT outside the PT band (the second sanity check, Sec. 4.5.2).
    pub two_sigma: usize,
    /// ET outside the ET band (Table XVIII's ET row; these runs keep their
    /// PT verdict).
    #[serde(default)]
    pub et_two_sigma: usize,
}

/// Everything `run --protocol emp` reports (schema `ttp.emp/1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmpOutcome {
    pub schema: String,
    /// The measured command (set by the caller; empty when unknown).
    #[serde(default)]
    pub command: Vec<String>,
    /// The profile the cut-offs came from (set by the caller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_path: Option<std::path::PathBuf>,
    pub pt_source: PtSource,
    pub sigma_k: f64,
    /// `None` when no profile was given: the first sanity check was skipped.
    pub cutoffs: Option<AppliedCutoffs>,
    pub runs: Vec<RunVerdict>,
    /// The PT band of the second sanity check.
    pub two_sigma: Option<SigmaBand>,
    /// The ET band over the same runs (Table XVIII, ET row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub et_two_sigma: Option<SigmaBand>,
    pub dropped: DropCounts,
    /// PT of the retained runs: the protocol's result (mean = the time).
    pub pt: Option<Summary>,
    /// ET of the runs that passed the first sanity check and lie inside the
    /// ET band (Table XVIII's ET row). Files written before ET had its own
    /// band hold the ET of the PT-retained runs here.
    pub et: Option<Summary>,
    /// PT and ET of every run with a PT, before outlier removal.
    pub pt_before: Option<Summary>,
    pub et_before: Option<Summary>,
    pub source_agreement: Option<SourceAgreement>,
    /// Ledger PT against the scheduler's runtime over runs that have both:
    /// what the ledger counts on CPU that the scheduler does not (time
    /// stolen by a hypervisor, interrupts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_agreement: Option<SourceAgreement>,
    pub notes: Vec<String>,
    /// EMPv1–v4 set-up state from the `check` snapshot taken before the
    /// runs (set by the caller); `None` when not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<super::setup::EmpSetup>,
}

/// Applies EMPv5 to a set of runs.
pub fn apply(
    runs: &[EmpRun],
    profile: Option<&Profile>,
    cfg: &EmpConfig,
) -> Result<EmpOutcome, EmpError> {
    let mut notes = Vec::new();
    let mut verdicts: Vec<RunVerdict> = Vec::with_capacity(runs.len());
    let mut sorted: Vec<&EmpRun> = runs.iter().collect();
    sorted.sort_by_key(|r| r.index);

    let flag_verdict = |r: &EmpRun| -> Option<Verdict> {
        if r.flags.warm_up {
            Some(Verdict::WarmUp)
        } else if let Some(d) = &r.flags.failed {
            Some(Verdict::Failed { detail: d.clone() })
        } else if r.flags.lost_records > 0 {
            Some(Verdict::LostRecords {
                count: r.flags.lost_records,
            })
        } else {
            None
        }
    };
    let usable: Vec<&EmpRun> = sorted
        .iter()
        .copied()
        .filter(|r| flag_verdict(r).is_none())
        .collect();
    if usable.is_empty() {
        return Err(EmpError::NoUsableRuns { total: runs.len() });
    }
    let source = resolve_pt_source(usable.iter().copied(), cfg.pt_source);
    let median_et =
        median(&usable.iter().map(|r| r.et_ns as f64).collect::<Vec<_>>()).unwrap_or(0.0);
    let applied = profile.map(|p| AppliedCutoffs {
        program_ns: median_et.round() as u64,
        cutoffs_ns: p.cutoffs_for(median_et.round() as u64),
    });
    if applied.is_none() {
        notes.push(
            "no daemon cut-off profile: the first sanity check (Sec. 4.5) was not applied; make one with `ttp-ebpf calibrate`"
                .to_string(),
        );
    }

    let mut dropped = DropCounts::default();
    // Verdicts after the flags, PT and first sanity check; None = still in.
    for r in &sorted {
        let pt = r.pt.ns(source);
        let verdict = if let Some(v) = flag_verdict(r) {
            dropped.flagged += 1;
            Some(v)
        } else if pt.is_none() {
            dropped.missing_pt += 1;
            Some(Verdict::MissingPt)
        } else {
            let hits = applied
                .as_ref()
                .map(|a| daemon_hits(r, &a.cutoffs_ns))
                .unwrap_or_default();
            if hits.is_empty() {
                None
            } else {
                dropped.daemon_cutoff += 1;
                Some(Verdict::DaemonCutoff { hits })
            }
        };
        verdicts.push(RunVerdict {
            index: r.index,
            et_ns: r.et_ns,
            pt_ns: pt,
            verdict: verdict.unwrap_or(Verdict::Retained),
            et_two_sigma: None,
        });
    }

    // Second sanity check over the runs the first one retained.
    let rest: Vec<f64> = verdicts
        .iter()
        .filter(|v| v.verdict.is_retained())
        .filter_map(|v| v.pt_ns.map(|p| p as f64))
        .collect();
    let band = sigma_band(&rest, cfg.sigma_k);
    // ET's own band over the same runs (Table XVIII).
    let rest_et: Vec<f64> = verdicts
        .iter()
        .filter(|v| v.verdict.is_retained())
        .map(|v| v.et_ns as f64)
        .collect();
    let et_band = sigma_band(&rest_et, cfg.sigma_k);
    if let Some(b) = &et_band {
        for v in verdicts.iter_mut().filter(|v| v.verdict.is_retained()) {
            v.et_two_sigma = b.outside(v.et_ns as f64);
            dropped.et_two_sigma += usize::from(v.et_two_sigma.is_some());
        }
    }
    match &band {
        Some(b) => {
            for v in verdicts.iter_mut().filter(|v| v.verdict.is_retained()) {
                if let Some(side) = b.outside(v.pt_ns.unwrap_or_default() as f64) {
                    v.verdict = Verdict::TwoSigma { side };
                    dropped.two_sigma += 1;
                }
            }
        }
        None => notes.push(format!(
            "the second sanity check needs at least 2 runs after the first; {} left, not applied",
            rest.len()
        )),
    }

    let with_pt: Vec<&RunVerdict> = verdicts
        .iter()
        .filter(|v| v.pt_ns.is_some())
        .filter(|v| {
            !matches!(
                v.verdict,
                Verdict::WarmUp | Verdict::Failed { .. } | Verdict::LostRecords { .. }
            )
        })
        .collect();
    let kept: Vec<&RunVerdict> = verdicts
        .iter()
        .filter(|v| v.verdict.is_retained())
        .collect();
    // Passed the first check (PT-retained or PT ±2σ) and inside the ET band.
    let et_kept: Vec<&RunVerdict> = verdicts
        .iter()
        .filter(|v| matches!(v.verdict, Verdict::Retained | Verdict::TwoSigma { .. }))
        .filter(|v| v.et_two_sigma.is_none())
        .collect();
    let pt_of =
        |vs: &[&RunVerdict]| Summary::of(&vs.iter().filter_map(|v| v.pt_ns).collect::<Vec<_>>());
    let et_of = |vs: &[&RunVerdict]| Summary::of(&vs.iter().map(|v| v.et_ns).collect::<Vec<_>>());

    Ok(EmpOutcome {
        schema: SCHEMA.to_string(),
        command: Vec::new(),
        profile_path: None,
        pt_source: source,
        sigma_k: cfg.sigma_k,
        cutoffs: applied,
        two_sigma: band,
        et_two_sigma: et_band,
        dropped,
        pt: pt_of(&kept),
        et: et_of(&et_kept),
        pt_before: pt_of(&with_pt),
        et_before: et_of(&with_pt),
        source_agreement: agreement(&usable, |r| {
            Some((r.pt.ledger_on_cpu_ns?, r.pt.taskstats_us? * 1_000))
        }),
        runtime_agreement: agreement(&usable, |r| {
            Some((r.pt.ledger_on_cpu_ns?, r.pt.runtime_ns?))
        }),
        runs: verdicts,
        notes,
        setup: None,
    })
}

/// The daemon executions of one run over their cut-offs.
pub(crate) fn daemon_hits(run: &EmpRun, cutoffs_ns: &BTreeMap<String, u64>) -> Vec<DaemonHit> {
    run.daemons
        .iter()
        .filter_map(|d| {
            let cutoff = *cutoffs_ns.get(daemon_key(&d.name))?;
            // "ran longer than its cut-off": strictly greater.
            (d.pt_ns > cutoff).then(|| DaemonHit {
                name: d.name.clone(),
                pid: d.pid,
                pt_ns: d.pt_ns,
                cutoff_ns: cutoff,
            })
        })
        .collect()
}

impl SigmaBand {
    /// Which side of the band `x` lies on, if outside. Strict inequalities,
    /// as in the set definition of Sec. 4.5.2:
    /// {P_i | P_i > P̄ + 2σ(P) or P_i < P̄ − 2σ(P)}.
    pub(crate) fn outside(&self, x: f64) -> Option<Side> {
        if x > self.upper_ns {
            Some(Side::Above)
        } else if x < self.lower_ns {
            Some(Side::Below)
        } else {
            None
        }
    }
}

/// mean ± k·σ over `values` (Sec. 4.5.2); `None` for fewer than 2 values.
pub(crate) fn sigma_band(values: &[f64], k: f64) -> Option<SigmaBand> {
    let sd = sample_sd(values.iter().copied())?;
    let mean = super::stats::mean(values.iter().copied());
    Some(SigmaBand {
        n: values.len(),
        mean_ns: mean,
        sd_ns: sd,
        lower_ns: mean - k * sd,
        upper_ns: mean + k * sd,
    })
}

/// `a − b` over the runs where `pair` gives both, in ns.
fn agreement(
    runs: &[&EmpRun],
    pair: impl Fn(&EmpRun) -> Option<(u64, u64)>,
) -> Option<SourceAgreement> {
    let diffs: Vec<i128> = runs
        .iter()
        .filter_map(|r| pair(r).map(|(a, b)| a as i128 - b as i128))
        .collect();
    if diffs.is_empty() {
        return None;
    }
    Some(SourceAgreement {
        n: diffs.len(),
        mean_diff_ns: diffs.iter().map(|&d| d as f64).sum::<f64>() / diffs.len() as f64,
        max_abs_diff_ns: diffs.iter().map(|d| d.unsigned_abs()).max().unwrap_or(0) as u64,
    })
}

#[cfg(test)]
#[path = "outliers_tests.rs"]
mod tests;
