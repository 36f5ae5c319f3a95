//! The probes' own cost (probe/cost.rs) in words, for the text reports.
use crate::report::ttpv2::paragraph::sig2;
use crate::report::units::{grouped, ms};
use ttp_ledger::probe::cost::ProbeCost;

/// The per-program name a reader knows the runs by.
fn runs_of(program: &str) -> &'static str {
    match program {
        "sched_switch" => "switches",
        "sched_wakeup" | "sched_wakeup_new" => "wake-ups",
        "sched_process_fork" => "forks",
        "sched_process_exec" => "execs",
        "cpu_idle" => "idle entries and exits",
        p if p.starts_with("block_") => "block I/O events",
        _ => "runs",
    }
}

/// "ledger cost: 12 345 switches × 95 ns + … = 1.23 ms of CPU, 0.3 % of
/// the 4.000 s window", then one line per program that ran.
pub(crate) fn lines(c: &ProbeCost, window_name: &str) -> String {
    let ran: Vec<_> = c.programs.iter().filter(|p| p.runs > 0).collect();
    let terms: Vec<String> = ran
        .iter()
        .take(2)
        .map(|p| {
            format!(
                "{} {} × {:.0} ns",
                grouped(p.runs),
                runs_of(&p.program),
                p.ns_per_run.unwrap_or(0.0)
            )
        })
        .collect();
    let rest: u64 = ran
        .iter()
        .skip(2)
        .fold(0u64, |a, p| a.saturating_add(p.runs));
    let mut sum = terms.join(" + ");
    if rest > 0 {
        sum += &format!(" + {} other probe runs", grouped(rest));
    }
    if sum.is_empty() {
        sum = "no probe runs".into();
    }
    let mut s = format!(
        "ledger cost: {sum} = {} ms of CPU, {} % of the {:.3} s {window_name} (kernel BPF statistics in {} sampling window{} of {} ms{})\n",
        ms(c.total.run_time_ns),
        sig2(c.share_of_window * 100.0),
        c.window_ns as f64 / 1e9,
        c.sample_windows,
        if c.sample_windows == 1 { "" } else { "s" },
        ttp_ledger::probe::cost::SAMPLE.as_millis(),
        if c.means_since_load {
            ", none inside this window"
        } else {
            ""
        }
    );
    for p in ran {
        let err = p
            .ns_per_run_stderr
            .map_or(String::new(), |e| format!(" ± {e:.0}"));
        let (mean, time) = match p.ns_per_run {
            Some(n) => (
                format!("{n:>6.0}{err} ns"),
                format!("{:>9} ms", ms(p.run_time_ns)),
            ),
            None => (
                "     ? ns".to_string(),
                "no run inside a sampling window".to_string(),
            ),
        };
        s.push_str(&format!(
            "    {:<20} {:>12} runs{} × {mean} = {time}{}\n",
            p.program,
            grouped(p.runs),
            if p.runs_counted { "" } else { " (est.)" },
            if p.recursion_misses > 0 {
                format!(", {} events missed", grouped(p.recursion_misses))
            } else {
                String::new()
            }
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use ttp_ledger::probe::cost::ProbeCost;

    /// Catches the cost line losing its arithmetic (runs × ns = ms), its
    /// share, the sampling it comes from, or listing programs that did not
    /// run.
    #[test]
    fn cost_in_words() {
        let row = |program: &str, runs: u64, ns: f64| ttp_ledger::probe::cost::ProgramCost {
            program: program.into(),
            runs,
            runs_counted: true,
            run_time_ns: (runs as f64 * ns) as u64,
            ns_per_run: (runs > 0).then_some(ns),
            ns_per_run_stderr: Some(2.0),
            sample_windows: 2,
            sampled_runs: runs / 10,
            recursion_misses: 0,
        };
        let programs = vec![
            row("sched_switch", 12_345, 95.0),
            row("sched_wakeup", 1_000, 60.0),
            row("block_io_done", 0, 0.0),
        ];
        let mut total = row("total", 13_345, 0.0);
        total.run_time_ns = 12_345 * 95 + 60_000;
        let c = ProbeCost {
            source: "kernel BPF statistics … the windows inside this one".into(),
            window_ns: 4_000_000_000,
            sample_windows: 2,
            stats_on_ns: 400_000_000,
            means_since_load: false,
            share_of_window: total.run_time_ns as f64 / 4e9,
            programs,
            total,
        };
        let text = lines(&c, "window");
        assert!(
            text.starts_with("ledger cost: 12 345 switches × 95 ns + 1 000 wake-ups × 60 ns = 1.23 ms of CPU, 0.031 % of the 4.000 s window (kernel BPF statistics in 2 sampling windows of 200 ms)"),
            "{text}"
        );
        assert!(!text.contains("block_io_done"), "{text}");
        assert_eq!(text.lines().count(), 3, "{text}");
    }
}
