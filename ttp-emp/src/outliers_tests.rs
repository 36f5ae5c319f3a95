//! EMPv5 on constructed data, against hand-computed values.
use super::*;
use crate::{
    input::{DaemonExec, ProgramTime, RunFlags},
    profile::{Applies, CutoffCase, DaemonCutoff, PROFILE_SCHEMA},
};

const MS: u64 = 1_000_000;

fn run(index: u32, pt_ms: u64, daemons: Vec<DaemonExec>) -> EmpRun {
    EmpRun {
        index,
        et_ns: (pt_ms + 5) * MS,
        start_offset_ns: None,
        pt: ProgramTime {
            taskstats_us: Some(pt_ms * 1_000),
            ledger_on_cpu_ns: None,
            runtime_ns: None,
        },
        daemons,
        flags: RunFlags::default(),
    }
}

fn d(name: &str, pid: u32, ms: u64) -> DaemonExec {
    DaemonExec {
        name: name.into(),
        pid,
        pt_ns: ms * MS,
    }
}

fn profile(cutoffs: &[(&str, u64)]) -> Profile {
    Profile {
        schema: PROFILE_SCHEMA.into(),
        created_by: "test".into(),
        daemons: cutoffs
            .iter()
            .map(|&(n, ms)| DaemonCutoff {
                name: n.into(),
                period_ns: None,
                task_time_ns: None,
                cases: vec![CutoffCase {
                    applies: Applies::Always,
                    cutoff_ns: ms * MS,
                }],
                short_basis: None,
                long_basis: None,
            })
            .collect(),
        cutoff_resolution_ns: None,
        calibrations: vec![],
        procedure: None,
    }
}

fn dropped(o: &EmpOutcome, f: impl Fn(&Verdict) -> bool) -> Vec<u32> {
    o.runs
        .iter()
        .filter(|r| f(&r.verdict))
        .map(|r| r.index)
        .collect()
}

/// PT = 100 ms × 9 and 130 ms: mean 103, sd √(810/9) = √90 = 9.4868 ms,
/// band [84.03, 121.97] ms, so only 130 goes. Catches a population sd
/// (√81 = 9 would still drop it, but the band values differ), a band that
/// is not symmetric, or a result that keeps the outlier.
#[test]
fn two_sigma_drops_the_high_run() {
    let mut runs: Vec<EmpRun> = (0..9).map(|i| run(i, 100, vec![])).collect();
    runs.push(run(9, 130, vec![]));
    let o = apply(&runs, None, &EmpConfig::default()).unwrap();
    let b = o.two_sigma.unwrap();
    assert_eq!(b.mean_ns, 103.0 * MS as f64);
    assert!((b.sd_ns - 90f64.sqrt() * MS as f64).abs() < 1e-3);
    assert!((b.upper_ns - (103.0 + 2.0 * 90f64.sqrt()) * MS as f64).abs() < 1e-3);
    assert_eq!(
        dropped(&o, |v| matches!(v, Verdict::TwoSigma { side: Side::Above })),
        [9]
    );
    let pt = o.pt.unwrap();
    assert_eq!(
        (pt.n, pt.mean_ns, pt.sd_ns, pt.rel_err),
        (9, 100.0 * MS as f64, Some(0.0), Some(0.0))
    );
    assert_eq!(o.dropped.two_sigma, 1);
    assert!(
        o.notes
            .iter()
            .any(|n| n.contains("no daemon cut-off profile"))
    );
}

/// ET has its own ±2σ (Table XVIII: 16 ET and 20 PT outliers on INC128).
/// PT 100 ms × 9 and 130 ms (run 9); ET = PT + 5 ms except run 4, which
/// waited: ET 160 ms at PT 100 ms. ET band: mean 113.5, sd √(3202.5/9) =
/// 18.864 ms, [75.77, 151.23] ms, so run 4 (160) is an ET outlier and run 9
/// (135) is not; the PT band drops run 9 only. ET statistics are over the
/// nine runs inside the ET band: mean (8 × 105 + 135)/9 = 108.333 ms.
/// Catches ET judged by the PT band, ET statistics taken over the
/// PT-retained runs (mean 111.1 ms), or an ET outlier losing its PT.
#[test]
fn et_has_its_own_two_sigma() {
    let mut runs: Vec<EmpRun> = (0..9).map(|i| run(i, 100, vec![])).collect();
    runs.push(run(9, 130, vec![]));
    runs[4].et_ns = 160 * MS;
    let o = apply(&runs, None, &EmpConfig::default()).unwrap();
    let eb = o.et_two_sigma.unwrap();
    assert_eq!((eb.n, eb.mean_ns), (10, 113.5 * MS as f64));
    assert!((eb.sd_ns - (3202.5f64 / 9.0).sqrt() * MS as f64).abs() < 1e-3);
    let et_out: Vec<u32> = o
        .runs
        .iter()
        .filter(|r| r.et_two_sigma == Some(Side::Above))
        .map(|r| r.index)
        .collect();
    assert_eq!(et_out, [4]);
    assert_eq!(dropped(&o, |v| matches!(v, Verdict::TwoSigma { .. })), [9]);
    assert!(o.runs[4].verdict.is_retained());
    assert_eq!((o.dropped.two_sigma, o.dropped.et_two_sigma), (1, 1));
    let et = o.et.unwrap();
    assert_eq!(et.n, 9);
    assert!((et.mean_ns - 975.0 / 9.0 * MS as f64).abs() < 1e-3);
    assert_eq!(o.pt.unwrap().n, 9);
    assert_eq!(o.pt.unwrap().mean_ns, 100.0 * MS as f64);
}

/// A `ttp.emp/1` file written before ET had its own band still loads.
/// Catches a new field without `#[serde(default)]`.
#[test]
fn old_outcome_files_still_load() {
    let runs: Vec<EmpRun> = (0..4).map(|i| run(i, 100, vec![])).collect();
    let o = apply(&runs, None, &EmpConfig::default()).unwrap();
    let mut v = serde_json::to_value(&o).unwrap();
    let m = v.as_object_mut().unwrap();
    m.remove("et_two_sigma");
    m["dropped"].as_object_mut().unwrap().remove("et_two_sigma");
    let back: EmpOutcome = serde_json::from_value(v).unwrap();
    assert_eq!(back.dropped.et_two_sigma, 0);
    assert_eq!(back.et_two_sigma, None);
}

/// Mirror image: catches a one-sided rule that never drops fast runs.
#[test]
fn two_sigma_drops_the_low_run() {
    let mut runs: Vec<EmpRun> = (0..9).map(|i| run(i, 100, vec![])).collect();
    runs.push(run(9, 70, vec![]));
    let o = apply(&runs, None, &EmpConfig::default()).unwrap();
    assert_eq!(
        dropped(&o, |v| matches!(v, Verdict::TwoSigma { side: Side::Below })),
        [9]
    );
}

/// Runs 3 and 8 carry an injected rhn_check of 300 ms (cut-off 225 ms);
/// run 5 has one of 100 ms (under the cut-off) and java, which has no
/// cut-off, uses 900 ms in run 6. PT is 1000 + (i mod 4) ms, except 1050 ms
/// in runs 3 and 8 and 1010 ms in run 11.
///
/// The daemon rule must drop exactly 3 and 8. The ±2σ band is then
/// computed over the other ten (d = PT − 1000: Σd = 22, Σd² = 124, mean
/// 2.2, sd √8.4 = 2.898 ms, band [−3.60, 8.00]): run 11 goes. (Over all
/// twelve runs the band would reach 47.7 ms and keep run 11.) The nine
/// retained give mean 1001.333 ms and sd √(8/8) = 1 ms.
///
/// Catches the rule dropping on daemons without a cut-off, on executions
/// under it, or computing ±2σ before the daemon rule.
#[test]
fn daemon_rule_drops_exactly_the_injected_runs() {
    let runs: Vec<EmpRun> = (0u32..12)
        .map(|i| {
            let mut ds = vec![d("cron", 50, 1)];
            let pt = match i {
                3 | 8 => {
                    ds.push(d("rhn_check", 900 + i, 300));
                    1_050
                }
                11 => 1_010,
                _ => 1_000 + u64::from(i % 4),
            };
            if i == 5 {
                ds.push(d("rhn_check", 905, 100));
            }
            if i == 6 {
                ds.push(d("java", 60, 900));
            }
            run(i, pt, ds)
        })
        .collect();
    let p = profile(&[("rhn_check", 225), ("cron", 5)]);
    let o = apply(&runs, Some(&p), &EmpConfig::default()).unwrap();
    assert_eq!(
        dropped(&o, |v| matches!(v, Verdict::DaemonCutoff { .. })),
        [3, 8]
    );
    let Verdict::DaemonCutoff { hits } = &o.runs[3].verdict else {
        panic!("run 3 not dropped by the daemon rule")
    };
    assert_eq!(
        hits,
        &[DaemonHit {
            name: "rhn_check".into(),
            pid: 903,
            pt_ns: 300 * MS,
            cutoff_ns: 225 * MS
        }]
    );
    assert_eq!(dropped(&o, |v| matches!(v, Verdict::TwoSigma { .. })), [11]);
    let b = o.two_sigma.unwrap();
    assert_eq!(b.n, 10);
    assert!((b.sd_ns - 8.4f64.sqrt() * MS as f64).abs() < 1e-3);
    let pt = o.pt.unwrap();
    assert_eq!(pt.n, 9);
    assert!((pt.mean_ns - 1_001_333_333.333).abs() < 1.0);
    assert!((pt.sd_ns.unwrap() - MS as f64).abs() < 1e-3);
    assert!((pt.rel_err.unwrap() - 1.0 / 1001.3333333).abs() < 1e-9);
    assert_eq!(o.dropped.daemon_cutoff, 2);
    assert_eq!(
        o.cutoffs.as_ref().unwrap().cutoffs_ns["rhn_check"],
        225 * MS
    );
}

/// Catches a warm-up or failed run entering the statistics, and a missing
/// PT being treated as zero.
#[test]
fn flagged_runs_are_set_aside_first() {
    let mut runs: Vec<EmpRun> = (0..6).map(|i| run(i, 100, vec![])).collect();
    runs[0].pt.taskstats_us = Some(5_000_000);
    runs[0].flags.warm_up = true;
    runs[1].flags.failed = Some("exit status 2".into());
    runs[2].pt.taskstats_us = None;
    let o = apply(&runs, None, &EmpConfig::default()).unwrap();
    assert!(matches!(o.runs[0].verdict, Verdict::WarmUp));
    assert!(matches!(o.runs[1].verdict, Verdict::Failed { .. }));
    assert!(matches!(o.runs[2].verdict, Verdict::MissingPt));
    assert_eq!(o.pt.unwrap().n, 3);
    assert_eq!(o.pt.unwrap().mean_ns, 100.0 * MS as f64);
    assert_eq!((o.dropped.flagged, o.dropped.missing_pt), (2, 1));
}

/// Catches a sign slip in the ledger/taskstats cross-check.
#[test]
fn source_agreement_is_ledger_minus_taskstats() {
    let mut runs: Vec<EmpRun> = (0..3).map(|i| run(i, 100, vec![])).collect();
    runs[0].pt.ledger_on_cpu_ns = Some(100 * MS + 400);
    runs[1].pt.ledger_on_cpu_ns = Some(100 * MS - 200);
    let o = apply(&runs, None, &EmpConfig::default()).unwrap();
    let a = o.source_agreement.unwrap();
    assert_eq!((a.n, a.mean_diff_ns, a.max_abs_diff_ns), (2, 100.0, 400));
}

/// Catches an empty or all-flagged measurement producing a result.
#[test]
fn no_usable_runs_is_an_error() {
    let mut r = run(0, 100, vec![]);
    r.flags.warm_up = true;
    assert!(matches!(
        apply(&[r], None, &EmpConfig::default()),
        Err(EmpError::NoUsableRuns { total: 1 })
    ));
}
