//! Steps 2–8 on a synthetic calibration with a known L shape.
// Built for the crates above too (feature `test-support`), where the
// tests are left out and only the helpers are used.
#![cfg_attr(not(test), allow(unused_imports, dead_code))]
use super::*;
use crate::{
    error::EmpError,
    input::{DaemonExec, EmpRun, ProgramTime, RunFlags},
};

const MS: u64 = 1_000_000;

/// Deterministic uniform jitter in [0, 1 ms) (xorshift64).
fn jitter(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state % MS
}

fn d(name: &str, pid: u32, pt_ns: u64) -> DaemonExec {
    DaemonExec {
        name: name.into(),
        pid,
        pt_ns,
    }
}

/// 200 runs of a 1 s program. Every run has proc_monitor (~200 ms), java
/// (3 ms) and flush-9:0 (1 ms). Injected:
/// * rhn_check (450 ms, +500 ms ET) in runs 37, 77, 117, 157: period 40;
/// * flush-9:0 long (120 ms, +130 ms ET) in runs 37 and 136;
/// * bash (2 ms) and sshd (15 ms), +20 ms ET, in run 10.
pub fn synthetic_runs() -> Vec<EmpRun> {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    (0u32..200)
        .map(|i| {
            let mut et = 1_000 * MS + jitter(&mut seed);
            let mut daemons = vec![
                d("proc_monitor", 100, 200 * MS + u64::from(i % 5) * 100_000),
                d("java", 200, 3 * MS),
            ];
            let flush_long = i == 37 || i == 136;
            daemons.push(d("flush-9:0", 300, if flush_long { 120 * MS } else { MS }));
            if flush_long {
                et += 130 * MS;
            }
            if [37, 77, 117, 157].contains(&i) {
                daemons.push(d("rhn_check", 1_000 + i, 450 * MS));
                et += 500 * MS;
            }
            if i == 10 {
                daemons.push(d("bash", 2_000, 2 * MS));
                daemons.push(d("sshd", 2_001, 15 * MS));
                et += 20 * MS;
            }
            EmpRun {
                index: i,
                et_ns: et,
                start_offset_ns: Some(u64::from(i) * 1_100 * MS),
                pt: ProgramTime {
                    taskstats_us: Some(et / 1_000 - 1_000),
                    ledger_on_cpu_ns: None,
                    runtime_ns: None,
                },
                daemons,
                flags: RunFlags::default(),
            }
        })
        .collect()
}

fn analysed() -> CalibrationAnalysis {
    analyze(
        &["inc".into()],
        &synthetic_runs(),
        &CalibrationConfig::default(),
    )
    .unwrap()
}

/// Catches a fence that misses an arm run or swallows a central one, and
/// pairs formed across the wrong boundaries.
#[test]
fn finds_exactly_the_injected_l_samples() {
    let a = analysed();
    let l: Vec<u32> = a
        .runs
        .iter()
        .filter(|r| r.class == RunClass::LSample)
        .map(|r| r.index)
        .collect();
    assert_eq!(l, [10, 37, 77, 117, 136, 157]);
    assert_eq!(a.pairs.len(), 100);
    assert!(
        a.pairs
            .iter()
            .enumerate()
            .all(|(k, p)| p.first_index == 2 * k as u32 && p.second_index == p.first_index + 1)
    );
    // 10 and 136 are first in their pairs, 37/77/117/157 second.
    assert_eq!(
        (
            a.l_shape.first_high,
            a.l_shape.second_high,
            a.l_shape.both_high
        ),
        (2, 4, 0)
    );
    assert_eq!(a.l_shape.central, 94);
    assert!(a.l_shape.is_l_shape);
    assert!(a.symmetry.unwrap().is_symmetric);
}

/// Step 4 on the central cluster: catches L-sample executions leaking into
/// the central statistics (flush-9:0 would then have max 120 ms).
#[test]
fn central_daemon_statistics() {
    let a = analysed();
    let flush = a.central_daemons["flush-9:0"];
    assert_eq!(
        (flush.executions, flush.max_pt_ns, flush.sd_pt_ns),
        (194, MS, 0.0)
    );
    let pm = a.central_daemons["proc_monitor"];
    assert_eq!(pm.max_pt_ns, 200 * MS + 400_000);
    assert!(!a.central_daemons.contains_key("rhn_check"));
}

/// Steps 5–6: catches a threshold that flags ordinary executions (java at
/// its central maximum, proc_monitor) or misses the injected ones, and a
/// wrong periodicity.
#[test]
fn identifies_long_running_executions_and_period() {
    let a = analysed();
    let mut got: Vec<(u32, &str)> = a
        .long_executions
        .iter()
        .map(|e| (e.run_index, e.name.as_str()))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            (10, "bash"),
            (10, "sshd"),
            (37, "flush-9:0"),
            (37, "rhn_check"),
            (77, "rhn_check"),
            (117, "rhn_check"),
            (136, "flush-9:0"),
            (157, "rhn_check")
        ]
    );
    let rhn = &a.infrequent["rhn_check"];
    let p = rhn.periodicity.unwrap();
    assert_eq!(
        (p.kind, p.period_runs, p.period_ns),
        (PeriodKind::Regular, 40.0, 44_000 * MS)
    );
    let flush = &a.infrequent["flush-9:0"];
    assert_eq!(flush.periodicity.unwrap().kind, PeriodKind::Tentative);
    assert_eq!(flush.min_pt_ns, 120 * MS);
    assert!(a.infrequent["bash"].periodicity.is_none());
}

/// Step 8 on the synthetic set: midpoints between central max (or 0) and
/// L minimum, rounded half up to whole ms (Table XVI). Catches midpoints of
/// the wrong quantities.
#[test]
fn cutoffs_of_the_synthetic_profile() {
    let p = build_profile(analysed(), None, 2.0);
    let c = |n: &str| {
        p.daemons
            .iter()
            .find(|d| d.name == n)
            .unwrap()
            .cutoff_for(1_000 * MS)
            .unwrap()
    };
    assert_eq!(c("rhn_check"), 225 * MS); // (0 + 450)/2
    assert_eq!(c("flush-9:0"), 61 * MS); // (1 + 120)/2 = 60.5
    assert_eq!(c("bash"), MS); // (0 + 2)/2
    assert_eq!(c("sshd"), 8 * MS); // (0 + 15)/2 = 7.5
    assert_eq!(p.daemons.len(), 4);
}

/// Catches failed or warm-up runs being paired as if consecutive.
#[test]
fn flagged_runs_break_their_pair() {
    let mut runs = synthetic_runs();
    runs[4].flags.failed = Some("exit status 1".into());
    runs[0].flags.warm_up = true;
    let a = analyze(&[], &runs, &CalibrationConfig::default()).unwrap();
    assert_eq!(a.pairs.len(), 98);
    assert_eq!(a.pairs[0].first_index, 2);
    assert_eq!(a.skipped_runs, 2);
}

/// Catches a calibration accepted on too little data.
#[test]
fn too_few_runs_is_an_error() {
    let runs = synthetic_runs();
    assert!(matches!(
        analyze(&[], &runs[..5], &CalibrationConfig::default()),
        Err(EmpError::TooFewRuns { got: 5, .. })
    ));
}

/// Catches an off-by-one in the gap test: one gap of 41 among gaps of 40
/// is within tolerance; a gap of 60 is not.
#[test]
fn periodicity_tolerance() {
    assert!(periodicity(&[0, 40, 81, 121], None, 1.0, 0.1).is_some());
    assert!(periodicity(&[0, 40, 100, 140], None, 1.0, 0.1).is_none());
    assert!(periodicity(&[5], None, 1.0, 0.1).is_none());
}

/// Step 7 as a separate calibration merged in: a long calibration where
/// rhn_check runs 900 ms gives a long cut-off of 450 ms; rhn_check's period
/// (40 runs of 1.1 s = 44 s) makes the task time 2.2 s. Programs shorter
/// than that keep 225 ms, longer ones get max(225, 450). Catches the two
/// calibrations' roles swapped in the merge.
#[test]
fn merged_long_calibration_adds_the_long_case() {
    let short = build_profile(analysed(), None, 2.0);
    let mut runs = synthetic_runs();
    for r in &mut runs {
        for d in &mut r.daemons {
            if d.name == "rhn_check" {
                d.pt_ns = 900 * MS;
            }
        }
    }
    let long = build_profile(
        analyze(&[], &runs, &CalibrationConfig::default()).unwrap(),
        None,
        2.0,
    );
    // As `calibrate --pair` merges them: the stored short calibration and
    // the new long one, cut-offs recomputed from both.
    let merged = build_profile(
        short.calibrations[0].clone(),
        Some(long.calibrations[0].clone()),
        2.0,
    );
    assert_eq!(merged.calibrations.len(), 2);
    let rhn = merged
        .daemons
        .iter()
        .find(|d| d.name == "rhn_check")
        .unwrap();
    assert_eq!(rhn.task_time_ns, Some(2_200 * MS));
    assert_eq!(rhn.cutoff_for(2_199 * MS), Some(225 * MS));
    assert_eq!(rhn.cutoff_for(2_200 * MS), Some(450 * MS));
}
