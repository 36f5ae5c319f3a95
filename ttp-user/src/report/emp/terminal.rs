//! Terminal reports of EMP: the result of a measurement (runs table, what
//! was dropped and why, the result), a calibration (Steps 2–8) and a
//! sample-size study (EMPv6).
use std::fmt::Write;

use ttp_emp::{
    EmpOutcome, PtSource, SampleSizeReport, Verdict,
    calibrate::{CalibrationAnalysis, PeriodKind},
    outliers::Side,
    profile::{Applies, Profile},
    stats::Summary,
    version_label,
};

/// Up to this many runs the report lists every run.
pub(crate) const FULL_TABLE_RUNS: usize = 40;

/// ns as ms with three decimals (µs resolution, that of taskstats).
pub(crate) fn ms(ns: f64) -> String {
    format!("{:.3}", ns / 1e6)
}

fn sci(x: Option<f64>) -> String {
    x.map_or("—".into(), |v| format!("{v:.1e}"))
}

fn summary_line(label: &str, s: Option<&Summary>) -> String {
    match s {
        None => format!("  {label:<22} —\n"),
        Some(s) => format!(
            "  {label:<22} mean {} ms  sd {} ms  rel. error {}  min {}  max {}  (n = {})\n",
            ms(s.mean_ns),
            s.sd_ns.map_or("—".into(), ms),
            sci(s.rel_err),
            ms(s.min_ns as f64),
            ms(s.max_ns as f64),
            s.n
        ),
    }
}

fn verdict_text(v: &Verdict) -> String {
    match v {
        Verdict::Retained => "retained".into(),
        Verdict::WarmUp => "set aside: warm-up run (Sec. 4)".into(),
        Verdict::Failed { detail } => format!("set aside: program failed ({detail})"),
        Verdict::LostRecords { count } => format!("set aside: {count} ledger records lost"),
        Verdict::MissingPt => "set aside: no process time from the chosen source".into(),
        Verdict::DaemonCutoff { hits } => {
            let list: Vec<String> = hits
                .iter()
                .map(|h| {
                    format!(
                        "{}[{}] {} ms > {} ms",
                        h.name,
                        h.pid,
                        ms(h.pt_ns as f64),
                        ms(h.cutoff_ns as f64)
                    )
                })
                .collect();
            format!("dropped (daemon cut-off): {}", list.join(", "))
        }
        Verdict::TwoSigma { side: Side::Above } => "dropped (±2σ): PT above mean + 2σ".into(),
        Verdict::TwoSigma { side: Side::Below } => "dropped (±2σ): PT below mean − 2σ".into(),
    }
}

/// The report of `run --protocol emp`.
pub(crate) fn render_outcome(o: &EmpOutcome) -> String {
    let mut s = String::new();
    let src = match o.pt_source {
        PtSource::Taskstats => "taskstats ac_utime + ac_stime (µs)",
        PtSource::Runtime => "the scheduler's runtime, sum_exec_runtime (ns)",
        _ => "kernel ledger on-CPU time (ns)",
    };
    let _ = writeln!(
        s,
        "EMP (compute-bound timing, {}): {} runs, PT from {src}",
        version_label(o.setup.as_ref()),
        o.runs.len()
    );
    if let Some(setup) = &o.setup {
        let _ = writeln!(
            s,
            "\nSet-up (Fig. 8 Step 1, EMPv1–v4, from `ttp-ebpf check`)"
        );
        for v in &setup.versions {
            if v.met() {
                let _ = writeln!(s, "  {} held: {}", v.version, v.asks);
                continue;
            }
            let _ = writeln!(s, "  {} NOT met: {}", v.version, v.asks);
            for u in &v.unmet {
                let _ = writeln!(s, "    {}: {}", u.title, u.detail);
            }
        }
    }
    // Long measurements list only the runs not retained.
    let all = o.runs.len() <= FULL_TABLE_RUNS;
    let _ = writeln!(
        s,
        "\n{}",
        if all {
            "Runs"
        } else {
            "Runs not retained (the JSON lists every run)"
        }
    );
    let _ = writeln!(
        s,
        "  {:>5}  {:>12}  {:>12}  verdict",
        "run", "ET (ms)", "PT (ms)"
    );
    for r in o
        .runs
        .iter()
        .filter(|r| all || !r.verdict.is_retained() || r.et_two_sigma.is_some())
    {
        let _ = writeln!(
            s,
            "  {:>5}  {:>12}  {:>12}  {}",
            r.index,
            ms(r.et_ns as f64),
            r.pt_ns.map_or("—".into(), |p| ms(p as f64)),
            verdict_text(&r.verdict)
                + match r.et_two_sigma {
                    Some(Side::Above) => "; ET above its mean + 2σ",
                    Some(Side::Below) => "; ET below its mean − 2σ",
                    None => "",
                }
        );
    }
    let d = &o.dropped;
    let _ = writeln!(s, "\nOutlier removal (Sec. 4.5)");
    match &o.cutoffs {
        Some(c) => {
            let _ = writeln!(
                s,
                "  first check, daemon cut-offs ({} daemon(s), chosen for a {} ms program): {} dropped",
                c.cutoffs_ns.len(),
                ms(c.program_ns as f64),
                d.daemon_cutoff
            );
        }
        None => {
            let _ = writeln!(
                s,
                "  first check, daemon cut-offs: not applied (no profile)"
            );
        }
    }
    match &o.two_sigma {
        Some(b) => {
            let _ = writeln!(
                s,
                "  second check, PT outside mean ± {}σ = [{}, {}] ms over {} runs: {} dropped",
                o.sigma_k,
                ms(b.lower_ns),
                ms(b.upper_ns),
                b.n,
                d.two_sigma
            );
        }
        None => {
            let _ = writeln!(s, "  second check, ±2σ: not applied");
        }
    }
    if let Some(b) = &o.et_two_sigma {
        let _ = writeln!(
            s,
            "  ET's own band (Table XVIII), mean ± {}σ = [{}, {}] ms over the same {} runs: {} outside (ET statistics leave them out; the PT result does not)",
            o.sigma_k,
            ms(b.lower_ns),
            ms(b.upper_ns),
            b.n,
            d.et_two_sigma
        );
    }
    if d.flagged + d.missing_pt > 0 {
        let _ = writeln!(
            s,
            "  set aside before both checks: {} flagged by the run loop, {} without PT",
            d.flagged, d.missing_pt
        );
    }
    let _ = writeln!(
        s,
        "\nResult (average PT of the retained runs, Fig. 8 Step 4)"
    );
    s += &summary_line("process time (PT)", o.pt.as_ref());
    s += &summary_line("elapsed time (ET)", o.et.as_ref());
    if o.et_two_sigma.is_some() {
        let _ = writeln!(
            s,
            "  outliers: PT {} (= {} + {}), ET {} (= {} + {}) of {} runs (first check + own ±2σ)",
            d.daemon_cutoff + d.two_sigma,
            d.daemon_cutoff,
            d.two_sigma,
            d.daemon_cutoff + d.et_two_sigma,
            d.daemon_cutoff,
            d.et_two_sigma,
            o.runs.len() - d.flagged - d.missing_pt
        );
    }
    s += &summary_line("PT before removal", o.pt_before.as_ref());
    s += &summary_line("ET before removal", o.et_before.as_ref());
    if let Some(a) = &o.source_agreement {
        let _ = writeln!(
            s,
            "  ledger − taskstats PT: mean {:.1} µs, max |{:.1}| µs over {} runs",
            a.mean_diff_ns / 1e3,
            a.max_abs_diff_ns as f64 / 1e3,
            a.n
        );
    }
    if let Some(a) = &o.runtime_agreement {
        let _ = writeln!(
            s,
            "  ledger − runtime PT:   mean {:.1} µs, max |{:.1}| µs over {} runs (stolen and interrupt time the ledger counts)",
            a.mean_diff_ns / 1e3,
            a.max_abs_diff_ns as f64 / 1e3,
            a.n
        );
    }
    for n in &o.notes {
        let _ = writeln!(s, "  note: {n}");
    }
    s
}

/// The report of `calibrate`: Steps 2–6 of each calibration, then Step 8.
pub(crate) fn render_calibration(p: &Profile) -> String {
    let mut s = p
        .procedure
        .as_ref()
        .map(|pr| pr.statement())
        .unwrap_or_default();
    for (i, a) in p.calibrations.iter().enumerate() {
        let which = if i == 0 { "short" } else { "long" };
        let _ = writeln!(
            s,
            "Calibration ({which}): {} usable runs, median ET {} ms",
            a.usable_runs,
            ms(a.median_et_ns as f64)
        );
        render_analysis(&mut s, a);
    }
    let _ = writeln!(
        s,
        "Step 8: daemon cut-offs ({} daemons){}",
        p.daemons.len(),
        p.cutoff_resolution_ns.map_or(String::new(), |r| format!(
            ", rounded half up to {} ms and at least that (the paper's PT resolution, Table XVI)",
            ms(r as f64)
        ))
    );
    let _ = writeln!(
        s,
        "  {:<16} {:>14}  {:>14}  applies",
        "daemon", "cut-off (ms)", "period (s)"
    );
    for d in &p.daemons {
        for c in &d.cases {
            let when = match c.applies {
                Applies::Always => "always".to_string(),
                Applies::ShorterThan { task_time_ns } => {
                    format!("programs < {:.1} s", task_time_ns as f64 / 1e9)
                }
                Applies::AtLeast { task_time_ns } => {
                    format!("programs ≥ {:.1} s", task_time_ns as f64 / 1e9)
                }
            };
            let _ = writeln!(
                s,
                "  {:<16} {:>14}  {:>14}  {when}",
                d.name,
                ms(c.cutoff_ns as f64),
                d.period_ns
                    .map_or("—".into(), |p| format!("{:.1}", p as f64 / 1e9)),
            );
        }
    }
    s
}

fn render_analysis(s: &mut String, a: &CalibrationAnalysis) {
    let l = &a.l_shape;
    let _ = writeln!(
        s,
        "  Step 2: {} dual executions: {} central, {} with the first run high, {} with the second high, {} both high (expected by chance {:.2}), {} low",
        l.pairs, l.central, l.first_high, l.second_high, l.both_high, l.expected_both_high, l.low
    );
    let _ = writeln!(
        s,
        "          {}",
        if l.is_l_shape {
            "L shape: arms present, corner empty — evidence of infrequent, long-running daemons"
        } else if l.both_high > 0 {
            "corner occupied: some long-running activity is frequent (it strikes consecutive runs)"
        } else {
            "no arms: no run above the fence"
        }
    );
    let _ = writeln!(
        s,
        "  Step 3: central cluster = runs with ET in [{}, {}] ms (Q1 − {k}·IQR, Q3 + {k}·IQR); {} L-samples",
        ms(a.fence.lower_ns.max(0.0)),
        ms(a.fence.upper_ns),
        a.runs
            .iter()
            .filter(|r| r.class == ttp_emp::calibrate::RunClass::LSample)
            .count(),
        k = a.fence.k
    );
    if let Some(y) = &a.symmetry {
        let _ = writeln!(
            s,
            "          symmetry: sd {} / {} ms, correlation {:.2} — {}",
            ms(y.sd_first_ns),
            ms(y.sd_second_ns),
            y.correlation,
            if y.is_symmetric {
                "roughly circular"
            } else {
                "not circular: inspect the plot"
            }
        );
    }
    let mut central: Vec<_> = a.central_daemons.iter().collect();
    central.sort_by_key(|d| std::cmp::Reverse(d.1.max_pt_ns));
    let _ = writeln!(
        s,
        "  Step 4: {} daemons in the central cluster (largest maxima):",
        central.len()
    );
    for (name, c) in central.iter().take(10) {
        let _ = writeln!(
            s,
            "    {name:<16} max {:>10} ms  sd {:>9} ms  ({} executions)",
            ms(c.max_pt_ns as f64),
            ms(c.sd_pt_ns),
            c.executions
        );
    }
    let _ = writeln!(
        s,
        "  Steps 5–6: {} long-running executions; infrequent daemons:",
        a.long_executions.len()
    );
    for d in a.infrequent.values() {
        let period = d.periodicity.map_or("—".into(), |p| {
            format!(
                "every {:.0} runs ({:.1} s){}",
                p.period_runs,
                p.period_ns as f64 / 1e9,
                if p.kind == PeriodKind::Tentative {
                    " ?"
                } else {
                    ""
                }
            )
        });
        let _ = writeln!(
            s,
            "    {:<16} central max {:>10}  L min {:>10} ms  in runs {:?}  period {period}",
            d.name,
            d.central.map_or("—".into(), |c| ms(c.max_pt_ns as f64)),
            ms(d.min_pt_ns as f64),
            d.run_indices
        );
    }
    s.push('\n');
}

/// The report of `analyze --sample-size` (cf. Tables XX–XXI).
pub(crate) fn render_sample_size(r: &SampleSizeReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "EMPv6 sample size (Sec. 4.6): first n runs of {}",
        r.full.size
    );
    let _ = writeln!(
        s,
        "  {:>6}  {:>16}  {:>10}  {:>12}  {:>16}  {:>10}  keeps sd (±{:.0} %)  keeps outliers",
        "size",
        "outliers (=I+II)",
        "retained",
        "sd PT (ms)",
        "ET outl. (=I+II)",
        "sd ET (ms)",
        r.sd_tolerance * 100.0
    );
    for row in std::iter::once(&r.full).chain(&r.rows) {
        let whole = row.size == r.full.size;
        let _ = writeln!(
            s,
            "  {:>6}  {:>16}  {:>10}  {:>12}  {:>16}  {:>10}  {:>18}  {}",
            row.size,
            format!(
                "{} (={}+{})",
                row.outliers(),
                row.dropped_daemon,
                row.dropped_two_sigma
            ),
            row.retained,
            row.sd_pt_ns.map_or("—".into(), ms),
            format!(
                "{} (={}+{})",
                row.et_outliers(),
                row.dropped_daemon,
                row.dropped_et_two_sigma
            ),
            row.sd_et_ns.map_or("—".into(), ms),
            if whole {
                "whole set"
            } else if row.keeps_sd {
                "yes"
            } else {
                "no"
            },
            if whole {
                ""
            } else if row.keeps_outliers {
                "yes"
            } else {
                "no"
            },
        );
    }
    let _ = writeln!(
        s,
        "  similar (ttp's own rule: sd within ±{:.0} %, outliers at most {}× the whole set's share; the paper judges by eye): {}",
        r.sd_tolerance * 100.0,
        r.outlier_factor,
        r.similar.map_or("no subset".into(), |n| format!(
            "{n} runs (the smallest subset)"
        ))
    );
    let floor = match (r.similar, r.min_runs) {
        (Some(sim), Some(min)) if sim < min => format!(
            " (raised from {sim}: never fewer than {min}, Sec. 4.6.2 — with 5 or fewer runs ±2σ cannot drop a run)"
        ),
        _ => String::new(),
    };
    let _ = writeln!(
        s,
        "  recommended: {}{floor}",
        r.recommended.map_or(
            "no subset keeps both; use the whole set size".into(),
            |n| format!("{n} runs")
        )
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use ttp_emp::{EmpConfig, EmpRun, EmpSetup, ProgramTime, RunFlags, apply, setup::VERSIONS};

    fn outcome(daemons_item: &str) -> EmpOutcome {
        let runs: Vec<EmpRun> = (0..10u64)
            .map(|i| EmpRun {
                index: i as u32,
                et_ns: if i == 4 { 160_000_000 } else { 105_000_000 },
                start_offset_ns: None,
                pt: ProgramTime {
                    taskstats_us: None,
                    ledger_on_cpu_ns: Some(100_000_000),
                    runtime_ns: None,
                },
                daemons: vec![],
                flags: RunFlags::default(),
            })
            .collect();
        let mut o = apply(&runs, None, &EmpConfig::default()).unwrap();
        let items: Vec<serde_json::Value> = VERSIONS
            .iter()
            .flat_map(|(_, _, ids)| ids.iter())
            .map(|id| {
                let status = if *id == "noncritical_daemons" {
                    daemons_item
                } else {
                    "pass"
                };
                serde_json::json!({"id": id, "title": format!("T-{id}"), "source": "s",
                    "status": status, "detail": format!("D-{id}")})
            })
            .collect();
        let check = serde_json::from_value(serde_json::json!({
            "schema": "ttp.check/1", "root": "/", "sample_ms": 1000, "items": items,
        }))
        .unwrap();
        o.setup = Some(EmpSetup::from_check(check));
        o
    }

    /// The header claims EMPv5 only when EMPv1–v4 held, and names what did
    /// not; the ET band and both outlier counts are printed. Catches
    /// "EMPv5" printed unconditionally or the unmet item left unnamed.
    #[test]
    fn header_claims_empv5_only_when_the_setup_held() {
        let met = render_outcome(&outcome("pass"));
        assert!(
            met.starts_with("EMP (compute-bound timing, EMPv5): 10 runs"),
            "{met}"
        );
        assert!(met.contains("EMPv1 held"), "{met}");
        let unmet = render_outcome(&outcome("warn"));
        assert!(
            unmet.starts_with(
                "EMP (compute-bound timing, EMPv5's outlier removal, not EMPv5: set-up of EMPv1 not met)"
            ),
            "{unmet}"
        );
        assert!(unmet.contains("EMPv1 NOT met"), "{unmet}");
        assert!(
            unmet.contains("T-noncritical_daemons: D-noncritical_daemons"),
            "{unmet}"
        );
        assert!(unmet.contains("ET's own band (Table XVIII)"), "{unmet}");
        assert!(
            unmet.contains("outliers: PT 0 (= 0 + 0), ET 1 (= 0 + 1) of 10 runs"),
            "{unmet}"
        );
    }
}
