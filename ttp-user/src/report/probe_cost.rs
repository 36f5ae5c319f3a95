//! The probes' own cost (probe/cost.rs) in words, for the text reports.
use crate::{
    probe::cost::ProbeCost,
    protocol::ttpv2::paragraph::sig2,
    report::units::{grouped, ms},
};

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
pub fn lines(c: &ProbeCost, window_name: &str) -> String {
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
        "ledger cost: {sum} = {} ms of CPU, {} % of the {:.3} s {window_name} (kernel BPF statistics)\n",
        ms(c.total.run_time_ns),
        sig2(c.share_of_window * 100.0),
        c.window_ns as f64 / 1e9
    );
    for p in ran {
        s.push_str(&format!(
            "    {:<20} {:>12} runs × {:>6.0} ns = {:>9} ms{}\n",
            p.program,
            grouped(p.runs),
            p.ns_per_run.unwrap_or(0.0),
            ms(p.run_time_ns),
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
    use crate::probe::cost::{CostSnapshot, ProgramCounters};

    /// Catches the cost line losing its arithmetic (runs × ns = ms), its
    /// share, or listing programs that did not run.
    #[test]
    fn cost_in_words() {
        let snap = |at_ns, sw: u64, wk: u64| CostSnapshot {
            at_ns,
            programs: vec![
                ("block_io_done".into(), ProgramCounters::default()),
                (
                    "sched_switch".into(),
                    ProgramCounters {
                        run_count: sw,
                        run_time_ns: sw * 95,
                        recursion_misses: 0,
                    },
                ),
                (
                    "sched_wakeup".into(),
                    ProgramCounters {
                        run_count: wk,
                        run_time_ns: wk * 60,
                        recursion_misses: 0,
                    },
                ),
            ],
        };
        let c = ProbeCost::between(&snap(0, 0, 0), &snap(4_000_000_000, 12_345, 1_000));
        let text = lines(&c, "window");
        assert!(
            text.starts_with("ledger cost: 12 345 switches × 95 ns + 1 000 wake-ups × 60 ns = 1.23 ms of CPU, 0.031 % of the 4.000 s window"),
            "{text}"
        );
        assert!(!text.contains("block_io_done"), "{text}");
        assert_eq!(text.lines().count(), 3, "{text}");
    }
}
