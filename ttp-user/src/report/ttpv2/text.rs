//! TTPv2's terminal report: per-QE table, dropped QEs, the result with its
//! spread, the checks, the causal model's correlations (Table IV) and the
//! Sec. 9 paragraph, all as the protocol computed them.
use std::fmt::Write as _;

use ttp_ttpv2::{
    analysis::{Analysis, QcDocument},
    checks::{CheckResult, SPECS},
    correlations::CorrelationRow,
    stats::Summary,
};

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "—".to_string(), |v| v.to_string())
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "—".to_string(), |v| format!("{v:.1}"))
}

fn spread(s: &Option<Summary>, unit: &str) -> String {
    match s {
        None => "—".into(),
        Some(s) => {
            let mut t = format!("{:.1} {unit}", s.median);
            if let Some(sd) = s.sd {
                let _ = write!(t, " ± {sd:.1} {unit}");
            }
            if let Some(r) = s.rel_error {
                let _ = write!(t, " (relative error {:.1}%)", r * 100.0);
            }
            t
        }
    }
}

fn qc_section(out: &mut String, d: &QcDocument) {
    let _ = writeln!(out, "TTPv2 — {} ({} QEs)", d.title(), d.qes.len());
    if let Some(line) = cpus_line(d) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "{:>4} {:>12} {:>6} {:>5} {:>7} {:>6} {:>7} {:>12} {:>10} {:>11}  dropped by",
        "QE",
        "Time_meas ms",
        "U",
        "S",
        "BlockIO",
        "IOWait",
        "IO_calc",
        "Time_calc ms",
        "exact ms",
        "exact−calc"
    );
    for e in &d.qes {
        let q = e.calc.query.as_ref();
        let _ = writeln!(
            out,
            "{:>4} {:>12.1} {:>6} {:>5} {:>7} {:>6} {:>7} {:>12} {:>10} {:>11}  {}",
            e.record.qe,
            e.record.time_meas_ms,
            opt(q.and_then(|q| q.u_ticks)),
            opt(q.and_then(|q| q.s_ticks)),
            opt(q.and_then(|q| q.blkio_ticks)),
            opt(e.record.overall.iowait_ticks),
            ms(e.calc.io_calc_ticks),
            ms(e.calc.time_calc_ms),
            ms(e.calc.time_exact_ms),
            ms(e.calc.exact_minus_calc_ms),
            e.dropped_by.join(",")
        );
    }
    for (i, w) in d.setup.warmup.iter().enumerate() {
        let _ = writeln!(
            out,
            "  warm-up {}: Time_meas {:.1} ms, U {} S {}, exact {} ms — measured before QE 1, not kept",
            i + 1,
            w.time_meas_ms,
            opt(w.u_ticks),
            opt(w.s_ticks),
            w.time_exact_ms.map_or("—".into(), |v| format!("{v:.1}")),
        );
    }
    irq_lines(out, d);
    let dropped: Vec<_> = d.qes.iter().filter(|e| !e.dropped_by.is_empty()).collect();
    if !dropped.is_empty() {
        let _ = writeln!(out, "Dropped in Step 2:");
        for e in dropped {
            let why: Vec<String> = e
                .dropped_by
                .iter()
                .map(|id| match SPECS.iter().find(|s| s.id == id) {
                    Some(s) => format!("{id} {}", s.name.trim_start_matches("Percentage of ")),
                    None => id.clone(),
                })
                .collect();
            let _ = writeln!(out, "  QE {}: {}", e.record.qe, why.join("; "));
        }
    }
    let r = &d.result;
    let s = &r.stats;
    match &r.dropped_reason {
        Some(reason) => {
            let _ = writeln!(out, "Q@C dropped — {reason}.");
            for extra in r.dropped_by.iter().skip(1) {
                let _ = writeln!(out, "  also {}", extra.reason);
            }
            if let Some(why) = &r.no_result_why {
                let _ = writeln!(out, "  No TTPv2 result: {why}.");
            }
            // Absent in results saved before these were computed.
            if let Some(all) = &s.time_meas_all_ms {
                let _ = writeln!(
                    out,
                    "  Measured over all {} QE(s) run: Time_meas {}; exact (ledger) {}",
                    all.n,
                    spread(&s.time_meas_all_ms, "ms"),
                    spread(&s.time_exact_all_ms, "ms")
                );
            }
            let _ = writeln!(
                out,
                "  Not a TTPv2 result; over the {} QE(s) Step 2 kept: Time_calc {}",
                s.time_meas_ms.as_ref().map_or(0, |s| s.n),
                spread(&s.time_calc_ms, "ms")
            );
        }
        None => {
            let _ = writeln!(
                out,
                "Result: Time_calc {} — median over {} retained QEs",
                spread(&s.time_calc_ms, "ms"),
                r.retained
            );
        }
    }
    let _ = writeln!(out, "  Time_meas         {}", spread(&s.time_meas_ms, "ms"));
    if s.time_exact_ms.is_some() {
        let _ = writeln!(
            out,
            "  exact (ledger)    {}   exact − calc {} ms",
            spread(&s.time_exact_ms, "ms"),
            ms(r.exact_minus_calc_ms)
        );
    }
    if s.time_calc_eq3_ms.is_some() {
        let _ = writeln!(
            out,
            "  eq. 3 share       {}",
            spread(&s.time_calc_eq3_ms, "ms")
        );
    }
    if let Some(f) = &s.others_fraction_measured {
        let _ = writeln!(
            out,
            "  measured share    {}   (IOWait not the query's: median {:.2}, eq. 1 assumes 0.50)",
            spread(&s.time_calc_share_ms, "ms"),
            f.median
        );
    }
    let _ = writeln!(
        out,
        "  CPU (S+U query)   {}; I/O (IO_calc) {}",
        spread(&s.su_query_ticks, "ticks"),
        spread(&s.io_calc_ticks, "ticks")
    );
}

/// With `--irq-time`: each QE's on-CPU time of the query as the kernel
/// charges it (the ledger's `on_cpu_ns`, the kernel's runtime) beside the
/// same without the interrupt handlers that ran inside it (`irq_ns`).
/// Nothing when the interrupts were not measured.
fn irq_lines(out: &mut String, d: &QcDocument) {
    let rows: Vec<(u32, u64, u64)> = d
        .qes
        .iter()
        .filter_map(|e| {
            let l = &e.calc.query.as_ref()?.ledger;
            Some((e.record.qe, l.on_cpu_ns?, l.irq_ns?))
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "On-CPU of the query: the kernel's, and without interrupt handlers (--irq-time):"
    );
    for (qe, cpu, irq) in rows {
        let _ = writeln!(
            out,
            "  QE {qe}: on-CPU {:.1} ms, without interrupts {:.1} ms (interrupts {:.1} ms, {:.1}%)",
            cpu as f64 / 1e6,
            cpu.saturating_sub(irq) as f64 / 1e6,
            irq as f64 / 1e6,
            if cpu > 0 {
                irq as f64 * 100.0 / cpu as f64
            } else {
                0.0
            }
        );
    }
}

/// For a query that ran threads on several CPUs at once (Sec. 3.4 assumes
/// one query process on one CPU): how many, and what Time_calc then means.
fn cpus_line(d: &QcDocument) -> Option<String> {
    let most = d
        .qes
        .iter()
        .filter_map(|e| e.record.query_threads_max)
        .max()?;
    let cpus = d.setup.cpus.max(1);
    if most <= 1 || cpus <= 1 {
        return None;
    }
    let busy: Vec<f64> = d
        .qes
        .iter()
        .filter_map(|e| {
            let cpu = e.calc.query.as_ref()?.ledger.on_cpu_ns? as f64;
            let meas = e.record.time_meas_ns? as f64;
            (meas > 0.0).then(|| cpu / meas)
        })
        .collect();
    let busy = Summary::of(&busy)
        .map(|s| format!(", {:.2} CPUs busy on average (median over QEs)", s.median))
        .unwrap_or_default();
    Some(format!(
        "The query ran up to {most} threads at once on this {cpus}-CPU machine (kernel ledger){busy}: \
         Time_calc is CPU time summed over its threads, not latency; QE4 allows min({most}, {cpus}) × Time_meas."
    ))
}

fn check_line(out: &mut String, c: &CheckResult) {
    let result = if c.is_na() {
        "n/a".to_string()
    } else if let Some(v) = c.value {
        format!("{v:.1}% over {} Q@C(s)", c.evaluated.unwrap_or(0))
    } else {
        let mut t = format!(
            "{} of {}",
            c.violations.unwrap_or(0),
            c.evaluated.unwrap_or(0)
        );
        if let Some(p) = c.percent {
            let _ = write!(t, " ({p:.1}%)");
        }
        t
    };
    let flag = if c.violated() { "!" } else { " " };
    let _ = writeln!(
        out,
        "{flag}{:<6} {:<24} paper {:<6} {}",
        c.id, result, c.paper_observed, c.name
    );
    if let Some(reason) = &c.na_reason {
        let _ = writeln!(out, "        n/a: {reason}");
    }
    if c.violated() && !c.offenders.is_empty() {
        let shown: Vec<&str> = c.offenders.iter().take(6).map(String::as_str).collect();
        let more = c.offenders.len().saturating_sub(shown.len());
        let tail = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        let _ = writeln!(out, "        {}{tail}", shown.join(", "));
    }
    if let Some(n) = &c.note {
        let _ = writeln!(out, "        note: {n}");
    }
    if let Some(l) = &c.paper_literal {
        let who = if l.offenders.is_empty() {
            String::new()
        } else {
            format!(": {}", l.offenders.join(", "))
        };
        let _ = writeln!(
            out,
            "        paper's literal rule ({}): {} of {}{who} — reported, not dropped (docs/ttpv2.md)",
            l.rule, l.violations, l.evaluated
        );
    }
}

/// Renders the whole report.
pub fn render(a: &Analysis, correlations: Option<&[CorrelationRow]>) -> String {
    let mut out = String::new();
    for d in &a.qcs {
        qc_section(&mut out, d);
        out.push('\n');
    }
    let _ = writeln!(out, "Sanity checks (Steps 1 and 5):");
    for c in &a.checks {
        check_line(&mut out, c);
    }
    if let Some(rows) = correlations {
        let _ = writeln!(
            out,
            "\nCausal model (Table IV), Pearson r after per-experiment min–max scaling; p: two-sided t test of r ≠ 0, significant below 0.05 (Sec. 6):"
        );
        let mut unexpressed = Vec::new();
        for r in rows {
            let Some(v) = r.r else {
                unexpressed.push(r.id.as_str());
                continue;
            };
            let _ = writeln!(
                out,
                "  {:<6} {:<24} / {:<24} predicted {:<4} observed {:>6.3} {} ({}, n={}, p={}{})",
                r.id,
                r.x,
                r.y,
                format!("{:?}", r.predicted).to_lowercase(),
                v,
                r.observed
                    .map(|o| format!("{o:?}").to_lowercase())
                    .unwrap_or_default(),
                r.agreement.clone().unwrap_or_default(),
                r.n,
                r.p_value.map_or("—".to_string(), |p| format!("{p:.3}")),
                if r.significant == Some(false) {
                    ", not significant"
                } else {
                    ""
                }
            );
        }
        if !unexpressed.is_empty() {
            let _ = writeln!(
                out,
                "  not expressed by this data (a measure absent or constant; reasons in the JSON): {}",
                unexpressed.join(" ")
            );
        }
    }
    let _ = writeln!(out, "\n{}", a.paragraph);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ttp_ttpv2::analysis::{RunDocument, analyse};
    use ttp_ttpv2::testutil::clean_qc;

    /// The report names each dropped QE with the checks that dropped it,
    /// says when the Q@C is dropped and why, and gives no result for it.
    /// Catches a dropped Q@C presented as a result.
    #[test]
    fn dropped_qes_and_qc_are_explained() {
        let mut qc = clean_qc(6);
        qc.qes[1].overall.iowait_ticks = Some(41);
        let text = render(
            &analyse(&[qc], None, crate::report::ttpv2::paragraph::text),
            None,
        );
        assert!(text.contains("QE 2: QE9 IOWait Time Violations"), "{text}");
        assert!(
            text.contains("Q@C dropped — Step 3 (iv): 5 QE(s) retained"),
            "{text}"
        );
        assert!(!text.contains("Result: Time_calc"), "{text}");
        assert!(text.contains("!QE9"), "violated checks are marked: {text}");
    }

    /// `run -- echo`: every QE has 0 ticks. Catches a report that shows
    /// no number at all: Time_meas and the exact time over the QEs run are
    /// printed, with the one-line reason (QE3) and the command as title.
    #[test]
    fn short_command_reports_what_was_measured() {
        let mut qc = clean_qc(6);
        qc.command = vec!["echo".into(), "hi".into()];
        for qe in &mut qc.qes {
            qe.time_meas_ms = 0.8;
            qe.processes
                .retain(|p| p.class == ttp_window::window::record::ProcessClass::Query);
            qe.overall.user_ticks = Some(0);
            qe.overall.system_ticks = Some(0);
            qe.overall.iowait_ticks = Some(0);
            let q = qe
                .processes
                .iter_mut()
                .find(|p| p.class == ttp_window::window::record::ProcessClass::Query)
                .unwrap();
            q.m.u_ticks = Some(0);
            q.m.s_ticks = Some(0);
            q.m.blkio_ticks = Some(0);
            q.m.ledger.on_cpu_ns = Some(500_000);
            q.m.ledger.iowait_own_ns = Some(0);
        }
        let a = analyse(&[qc], None, crate::report::ttpv2::paragraph::text);
        let text = render(&a, None);
        assert!(text.starts_with("TTPv2 — `echo hi` (6 QEs)"), "{text}");
        assert!(
            text.contains("No TTPv2 result: QE3 Zero Query Time"),
            "{text}"
        );
        assert!(text.contains("dropped 6 of 6 QEs."), "only QE3: {text}");
        assert!(
            text.contains("Measured over all 6 QE(s) run: Time_meas 0.8 ms"),
            "{text}"
        );
        assert!(text.contains("exact (ledger) 0.5 ms"), "{text}");
        let s = &a.qcs[0].result.stats;
        assert_eq!(s.time_meas_all_ms.as_ref().unwrap().median, 0.8);
    }

    /// Catches the interrupt lines shown without the measure (a 0 that
    /// was never measured) or the on-CPU time without interrupts taken
    /// from anything but the query's two ledger counters.
    #[test]
    fn on_cpu_without_interrupts_only_when_measured() {
        let mut qc = clean_qc(6);
        let text = render(
            &analyse(&[qc.clone()], None, crate::report::ttpv2::paragraph::text),
            None,
        );
        assert!(!text.contains("without interrupts"), "{text}");
        for qe in &mut qc.qes {
            for p in &mut qe.processes {
                p.m.ledger.on_cpu_ns = Some(40_000_000);
                p.m.ledger.irq_ns = Some(1_000_000);
            }
        }
        let a = analyse(&[qc], None, crate::report::ttpv2::paragraph::text);
        let text = render(&a, None);
        let q = a.qcs[0].qes[0].calc.query.as_ref().unwrap();
        let (cpu, irq) = (q.ledger.on_cpu_ns.unwrap(), q.ledger.irq_ns.unwrap());
        assert!(irq > 0 && cpu > irq);
        let want = format!(
            "  QE 1: on-CPU {:.1} ms, without interrupts {:.1} ms",
            cpu as f64 / 1e6,
            (cpu - irq) as f64 / 1e6
        );
        assert!(text.contains(&want), "{want}\n{text}");
    }

    /// A document read back from a file may name checks this version does
    /// not know; rendering it must not panic.
    #[test]
    fn unknown_check_ids_render() {
        let mut doc = RunDocument::new(&clean_qc(8), None, crate::report::ttpv2::paragraph::text);
        doc.qc.qes[0].dropped_by = vec!["QE99".into()];
        assert!(render(&doc.to_analysis(), None).contains("QE 1: QE99"));
    }
}
