//! The kernel side's losses and repairs over a window, in words: what was
//! lost, how much, and which figures it makes short. Every counter of
//! `KernelStats` (probe/read.rs) and the programs' recursion misses
//! (probe/cost.rs) appears here, so a text report never hides one.
use ttp_ledger::probe::KernelStats;

/// Which figures of a report a loss can change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Affects {
    /// Per-process times (on-CPU, waits) and counts.
    Processes,
    /// Per-process disk I/O (requests, bytes, device and own-I/O time).
    Io,
    /// The machine's per-CPU busy/idle/iowait.
    Machine,
    /// The --trace timeline.
    Trace,
    /// The taskstats references and exit count.
    Taskstats,
    /// Nothing: a repair that kept the figures exact, shown for the record.
    Nothing,
}

/// One non-zero counter, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Loss {
    pub count: u64,
    pub text: String,
    pub affects: Affects,
}

/// What else the window lost besides the kernel's counters.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Extra {
    /// Threads in the first image that neither the last image nor an exit
    /// record shows (accounts/image.rs).
    pub vanished_threads: u64,
    /// Runs the kernel skipped because the program was already running on
    /// that CPU (bpf_prog_info.recursion_misses, probe/cost.rs).
    pub recursion_misses: u64,
    /// Exit messages the taskstats listener's socket dropped.
    pub taskstats_overflows: u64,
}

/// Every non-zero loss or repair counter of a window, losses first.
pub(crate) fn describe(k: &KernelStats, extra: &Extra) -> Vec<Loss> {
    use Affects::*;
    let n = crate::report::units::grouped;
    let rows: [(u64, Affects, String); 17] = [
        (
            k.exit_records_lost,
            Processes,
            format!(
                "{} of {} thread exits lost (exit ring buffer full): their time since the previous refresh is missing from the per-process table; the machine totals are complete",
                n(k.exit_records_lost),
                n(k.exit_records_lost.saturating_add(k.exit_records))
            ),
        ),
        (
            extra.vanished_threads,
            Processes,
            format!(
                "{} threads vanished without an exit record: their time since the previous read is missing from the per-process figures",
                n(extra.vanished_threads)
            ),
        ),
        (
            k.thread_map_full,
            Processes,
            format!(
                "{} times a thread got no account (thread table full): its time is missing from the per-process figures; the machine totals are complete (raise the table with --max-threads)",
                n(k.thread_map_full)
            ),
        ),
        (
            k.read_failed,
            Processes,
            format!(
                "{} probe runs could not read their task and were skipped: the per-process figures miss those events",
                n(k.read_failed)
            ),
        ),
        (
            extra.recursion_misses,
            Processes,
            format!(
                "{} events never reached a probe (the kernel's recursion_misses: the program was already running on that CPU): the figures miss those events",
                n(extra.recursion_misses)
            ),
        ),
        (
            k.cpu_out_of_range,
            Machine,
            format!(
                "{} events on CPUs beyond the ledger's CPU table were ignored: per-CPU figures miss them",
                n(k.cpu_out_of_range)
            ),
        ),
        (
            k.lock_contended,
            Machine,
            format!(
                "{} per-CPU or disk-clock updates gave up on a contended lock: the machine's idle/iowait split and iowait shares miss those intervals",
                n(k.lock_contended)
            ),
        ),
        (
            k.request_map_full,
            Io,
            format!(
                "{} block requests were not followed (request table full): their bytes and device time are missing from the I/O figures",
                n(k.request_map_full)
            ),
        ),
        (
            k.proc_disk_map_full,
            Io,
            format!(
                "{} times a process's disk service could not be recorded (table full): own-I/O time may be short",
                n(k.proc_disk_map_full)
            ),
        ),
        (
            k.requests_ended_at_reuse,
            Io,
            format!(
                "{} block requests whose end never reached the ledger (the kernel fired no completion event) ended late, when their request was reused: own-I/O times around them are approximate, and their device time is missing",
                n(k.requests_ended_at_reuse)
            ),
        ),
        (
            k.irq_capped,
            Processes,
            format!(
                "{} runs' interrupt time (--irq-time) came out longer than the runtime the run gained (the hypervisor stole time inside a handler, or a switch never reached the tracepoint) and was cut to it: on-CPU without interrupts may be high there",
                n(k.irq_capped)
            ),
        ),
        (
            k.trace_events_lost,
            Trace,
            format!(
                "{} of {} trace events lost (trace ring buffer full): the timeline has gaps",
                n(k.trace_events_lost),
                n(k.trace_events_lost.saturating_add(k.trace_events))
            ),
        ),
        (
            k.traced_map_full,
            Trace,
            format!(
                "{} children of traced processes could not be traced (trace table full)",
                n(k.traced_map_full)
            ),
        ),
        (
            extra.taskstats_overflows,
            Taskstats,
            format!(
                "{} taskstats exit messages dropped by the kernel (listener overflow): the taskstats references of exited processes may be short",
                n(extra.taskstats_overflows)
            ),
        ),
        (
            k.switches_unseen,
            Nothing,
            format!(
                "{} switches whose other half never reached the tracepoint: on-CPU time repaired from the kernel's sum_exec_runtime",
                n(k.switches_unseen)
            ),
        ),
        (
            k.unreported_switches,
            Nothing,
            format!(
                "{} switch-outs of a task the ledger had not seen switch in (a switch that never reached the tracepoint: its time comes from the kernel's runtime, as above)",
                n(k.unreported_switches)
            ),
        ),
        (
            k.wakeups_unseen,
            Nothing,
            format!(
                "{} wake-ups the wake-up hook did not see (woken before the probes attached, or an event lost): the wait before them ends at the switch-in",
                n(k.wakeups_unseen)
            ),
        ),
    ];
    let mut out: Vec<Loss> = rows
        .into_iter()
        .filter(|(c, _, _)| *c > 0)
        .map(|(count, affects, text)| Loss {
            count,
            text,
            affects,
        })
        .collect();
    out.sort_by_key(|l| l.affects == Affects::Nothing);
    out
}

/// The note beside a figure `affects` changes, if this window lost any of
/// it: e.g. " [may be short: 3 events lost, see below]".
pub(crate) fn mark(losses: &[Loss], affects: Affects) -> String {
    let lost: u64 = losses
        .iter()
        .filter(|l| l.affects == affects)
        .fold(0u64, |a, l| a.saturating_add(l.count));
    if lost == 0 {
        String::new()
    } else {
        format!(
            " [may be short: {} lost, see below]",
            crate::report::units::grouped(lost)
        )
    }
}

/// The lines of a text report: "lost: nothing" when nothing was lost or
/// repaired, else one line per counter.
pub(crate) fn lines(losses: &[Loss]) -> String {
    if losses.is_empty() {
        return "lost in the kernel: nothing (no kernel event or record lost, nothing repaired)\n"
            .into();
    }
    let mut s = String::new();
    for l in losses {
        let head = if l.affects == Affects::Nothing {
            "repaired"
        } else {
            "LOST"
        };
        s.push_str(&format!("{head}: {}\n", l.text));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a counter left out of the words, a Rust debug dump instead
    /// of a sentence, totals taken from the wrong counter, and a repair
    /// presented as a loss.
    #[test]
    fn every_counter_in_words() {
        let k = KernelStats {
            exit_records_lost: 61_940,
            exit_records: 38_063,
            thread_map_full: 1,
            read_failed: 2,
            lock_contended: 3,
            request_map_full: 4,
            proc_disk_map_full: 5,
            cpu_out_of_range: 6,
            switches: 1_000_000,
            wakeups_unseen: 7,
            unreported_switches: 8,
            switches_unseen: 9,
            trace_events_lost: 10,
            trace_events: 90,
            traced_map_full: 11,
            requests_ended_at_reuse: 15,
            irq_capped: 16,
            // Not a loss: no line.
            requests_in_overflow: 17,
        };
        let extra = Extra {
            vanished_threads: 12,
            recursion_misses: 13,
            taskstats_overflows: 14,
        };
        let l = describe(&k, &extra);
        assert_eq!(l.len(), 17, "{l:#?}");
        let text = lines(&l);
        assert!(
            text.contains("61 940 of 100 003 thread exits lost"),
            "{text}"
        );
        assert!(text.contains("10 of 100 trace events lost"), "{text}");
        for n in 1..=16 {
            assert!(
                l.iter().any(|x| x.count == n),
                "counter with value {n} missing"
            );
        }
        assert!(!text.contains("KernelStats"), "no debug dump: {text}");
        let repaired: Vec<_> = l.iter().filter(|x| x.affects == Affects::Nothing).collect();
        assert_eq!(repaired.len(), 3);
        assert!(
            l.last().unwrap().affects == Affects::Nothing,
            "losses first"
        );
        assert_eq!(mark(&l, Affects::Io), " [may be short: 24 lost, see below]");
        assert_eq!(
            mark(&l, Affects::Processes),
            format!(
                " [may be short: {} lost, see below]",
                crate::report::units::grouped(61_940 + 12 + 1 + 2 + 13 + 16)
            )
        );
    }

    /// Catches a clean window reported with alarming words, or with none.
    #[test]
    fn clean_window() {
        let l = describe(&KernelStats::default(), &Extra::default());
        assert!(l.is_empty());
        assert!(lines(&l).starts_with("lost in the kernel: nothing"));
        assert_eq!(mark(&l, Affects::Processes), "");
    }
}
