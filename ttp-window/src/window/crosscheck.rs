//! How far the ledger agrees with the kernel's own counters over the same
//! window. Each comparison names its reference and tolerance and is flagged
//! when outside it; comparisons that cannot hold by construction (buffered
//! writes, threads that exited inside the window) are marked informational
//! with the reason, never silently passed.
use serde::Serialize;

use super::{
    bracket::Bracket,
    procs::{ProcCounters, TaskstatsCounters},
};
use ttp_ledger::{
    accounts::{CpuTimes, LedgerMeasures},
    collect::proc_stat::StatDelta,
};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agreement {
    /// The ledger measure.
    pub measure: &'static str,
    pub ledger: u64,
    /// The kernel counter it is compared with.
    pub reference: &'static str,
    /// The reference, converted to the ledger's unit.
    pub kernel: u64,
    /// (ledger − kernel) / kernel; 0 when both are 0.
    pub rel_diff: f64,
    /// The larger of a relative and an absolute tolerance, in the ledger's unit.
    pub tolerance: u64,
    /// For a counter that only grows, read around the ledger's images
    /// (window/bracket.rs): the least and the most the kernel's counter can
    /// have grown between the ledger's two reads. `within` then holds when
    /// the ledger lies in `[kernel_low − tolerance, kernel_high + tolerance]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_low: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_high: Option<u64>,
    pub within: bool,
    /// Set when the comparison cannot be expected to hold, with why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub informational: Option<&'static str>,
}

impl Agreement {
    fn new(
        measure: &'static str,
        ledger: u64,
        reference: &'static str,
        kernel: u64,
        rel: f64,
        abs: u64,
    ) -> Self {
        let tolerance = ((kernel as f64 * rel) as u64).max(abs);
        let diff = ledger as f64 - kernel as f64;
        Self {
            measure,
            ledger,
            reference,
            kernel,
            rel_diff: if kernel == 0 {
                if ledger == 0 { 0.0 } else { f64::INFINITY }
            } else {
                diff / kernel as f64
            },
            tolerance,
            kernel_low: None,
            kernel_high: None,
            within: diff.abs() <= tolerance as f64,
            informational: None,
        }
    }

    /// The kernel's reference was read after the ledger's images: at the
    /// window's start up to `start` ns of growth later (the reference's
    /// start is high, the difference low), at its end up to `end` ns later
    /// (the difference high). The ledger is compared with that range.
    pub(crate) fn bracketed(mut self, start: u64, end: u64) -> Self {
        if start == 0 && end == 0 {
            return self;
        }
        self.kernel_low = Some(self.kernel.saturating_sub(end));
        self.kernel_high = Some(self.kernel.saturating_add(start));
        self.recheck();
        self
    }

    /// The kernel's counter grew by `lo..=hi` between the ledger's own
    /// reads (read right before and right after each image): the ledger is
    /// compared with that range.
    pub(crate) fn in_range(mut self, lo: u64, hi: u64) -> Self {
        self.kernel_low = Some(lo);
        self.kernel_high = Some(hi.max(lo));
        self.recheck();
        self
    }

    /// `within` again after the tolerance changed.
    pub fn recheck(&mut self) {
        let lo = self.kernel_low.unwrap_or(self.kernel);
        let hi = self.kernel_high.unwrap_or(self.kernel);
        self.within = self.ledger.saturating_add(self.tolerance) >= lo
            && self.ledger <= hi.saturating_add(self.tolerance);
    }

    fn info(mut self, why: &'static str) -> Self {
        self.informational = Some(why);
        self
    }

    /// Outside tolerance on a comparison that should hold.
    pub fn flagged(&self) -> bool {
        !self.within && self.informational.is_none()
    }
}

const MS: u64 = 1_000_000;

/// Why a whole-process /proc/PID/io figure is no reference for the
/// process's own accounts.
pub(crate) const REAPED_IO: &str = "/proc/PID/io adds the I/O of the children this process reaped and of its exited threads (wait_task_zombie, __exit_signal); its threads' own I/O is compared above";

/// One process: ledger measures against /proc and taskstats.
/// `delayacct_covers` is false when delay accounting was off when the
/// process started (the kernel allocates a task's delay record at fork only
/// while it is on), so its blkio references stay 0.
pub fn process(
    k: &LedgerMeasures,
    p: Option<&ProcCounters>,
    ts: Option<&TaskstatsCounters>,
    threads: u32,
    tick_ns: u64,
    delayacct_covers: bool,
    steal_fraction: f64,
) -> Vec<Agreement> {
    let mut out = Vec::new();
    // on_cpu_ns is the kernel's sum_exec_runtime read at the switches
    // (docs/ledger.md), so schedstat and taskstats' runtime agree without
    // any allowance for steal. utime+stime are tick samples: a tick the
    // hypervisor stole is moved out of them in whole ticks, so that
    // comparison keeps the machine's steal share over the window, twice
    // (steal is uneven).
    let steal = |rel: f64| rel + 2.0 * steal_fraction;
    let delay = |a: Agreement| {
        if delayacct_covers {
            a
        } else {
            a.info("delay accounting was off when this process started: its blkio delay is not recorded")
        }
    };
    let exited = p.is_some_and(|p| p.threads_exited > 0);
    let partial = |a: Agreement| {
        if exited {
            a.info("threads exited inside the window: /proc's per-thread sums miss them")
        } else {
            a
        }
    };
    if let Some(p) = p {
        if let Some(run) = p.schedstat_run_ns {
            out.push(partial(Agreement::new(
                "on_cpu_ns",
                k.on_cpu_ns,
                "schedstat sum_exec_runtime",
                run,
                0.01,
                2 * MS,
            )));
        }
        if let (Some(u), Some(s)) = (p.utime_ticks, p.stime_ticks) {
            // utime+stime are tick samples rescaled to sum_exec_runtime at
            // each read; each read can be up to a tick off per thread.
            let abs = 2 * tick_ns * threads.max(1) as u64;
            out.push(Agreement::new(
                "on_cpu_ns",
                k.on_cpu_ns,
                "utime+stime ticks",
                (u + s) * tick_ns,
                steal(0.02),
                abs,
            ));
        }
        if let Some(wait) = p.schedstat_wait_ns {
            out.push(partial(Agreement::new(
                "runq_wait_ns",
                k.runq_wait_ns,
                "schedstat run_delay",
                wait,
                0.05,
                2 * MS,
            )));
        }
        if let Some(b) = p.blkio_ticks {
            out.push(delay(partial(
                Agreement::new(
                    "iowait_ns",
                    k.iowait_ns,
                    "delayacct_blkio_ticks",
                    b * tick_ns,
                    0.05,
                    2 * tick_ns,
                )
                .in_range(b * tick_ns, blkio_high(b * tick_ns, k)),
            )));
        }
        // /proc/PID/task/TID/io counts only that thread's own I/O, as the
        // ledger's per-thread accounts do; /proc/PID/io adds the I/O of
        // the children the process reaped and of its exited threads
        // (kernel/exit.c wait_task_zombie, __exit_signal), which the
        // ledger books to those children (docs/attach.md).
        if let Some(r) = p.threads_read_bytes {
            out.push(partial(Agreement::new(
                "io.read_bytes",
                k.io.read_bytes,
                "/proc/PID/task/*/io read_bytes",
                r,
                0.001,
                4096,
            )));
        }
        if let Some(r) = p.read_bytes {
            let a = Agreement::new(
                "io.read_bytes",
                k.io.read_bytes,
                "/proc/PID/io read_bytes",
                r,
                0.001,
                4096,
            );
            // More than the threads' own: reaped children or exited
            // threads, which the whole-process file counts and a process's
            // own accounts do not. Less stays a comparison: the process
            // file never holds less than its live threads, and a ledger
            // above the whole process is a fault whatever the threads say.
            let beyond_threads = p
                .threads_read_bytes
                .is_none_or(|t| r > t.saturating_add(a.tolerance));
            out.push(if beyond_threads && !a.within && k.io.read_bytes < r {
                a.info(REAPED_IO)
            } else {
                a
            });
        }
        if let Some(w) = p.write_bytes {
            out.push(
                Agreement::new("io.write_bytes", k.io.write_bytes, "/proc/PID/io write_bytes", w, 0.001, 4096)
                    .info("buffered writes are counted when pages are dirtied, and submitted later by writeback threads"),
            );
        }
        if let (Some(v), Some(i)) = (p.voluntary_switches, p.involuntary_switches) {
            let ledger = k.voluntary_switches + k.involuntary_switches;
            out.push(partial(Agreement::new(
                "switches",
                ledger,
                "/proc status ctxt_switches",
                v + i,
                0.02,
                4,
            )));
        }
    }
    if let Some(t) = ts {
        if let Some(b) = t.blkio_delay_total_ns {
            out.push(delay(
                Agreement::new(
                    "iowait_ns",
                    k.iowait_ns,
                    "taskstats blkio_delay_total",
                    b,
                    0.05,
                    2 * MS,
                )
                .in_range(b, blkio_high(b, k)),
            ));
        }
        if let Some(run) = t.cpu_run_virtual_total_ns {
            out.push(partial(Agreement::new(
                "on_cpu_ns",
                k.on_cpu_ns,
                "taskstats cpu_run_virtual_total",
                run,
                0.01,
                2 * MS,
            )));
        }
    }
    out
}

/// The most the ledger's iowait can exceed the kernel's blkio delay `b`
/// by: delay accounting ends a wait at its wake-up (try_to_wake_up), the
/// ledger without the wake-up hook at the switch-in (docs/ledger.md), so
/// its iowait also holds the run-queue wait after each I/O's wake-up, at
/// most the thread's whole run-queue wait (the kernel's run_delay).
fn blkio_high(b: u64, k: &LedgerMeasures) -> u64 {
    b.saturating_add(k.runq_wait_ns)
}

/// Why a delay-accounting figure cannot be the process's.
pub(crate) const IMPOSSIBLE_DELAY: &str = "the kernel's blkio delay exceeds the window times the threads: a wait charged from time 0 (a delay record without its start, docs/ttpv2.md), not a wait of this window";

/// The blkio delay comparisons of `rows` whose kernel figure no wait of
/// the window can make: `threads` threads cannot have waited longer than
/// `window_ns` each. The kernel's delay accounting sometimes charges a wait
/// as `now − 0` (an uptime-sized delay, docs/ttpv2.md, "BlockIO comes from
/// the ledger"): the reference is wrong, not the ledger, so the row is
/// informational with the reason. A possible figure stays a comparison.
pub fn impossible_delays(rows: Vec<Agreement>, window_ns: u64, threads: u32) -> Vec<Agreement> {
    let most = window_ns.saturating_mul(u64::from(threads.max(1)));
    rows.into_iter()
        .map(|a| {
            let delay = matches!(
                a.reference,
                "taskstats blkio_delay_total" | "delayacct_blkio_ticks"
            );
            if delay && a.informational.is_none() && a.kernel > most.saturating_add(a.tolerance) {
                a.info(IMPOSSIBLE_DELAY)
            } else {
                a
            }
        })
        .collect()
}

/// Why a process's switch count falls short of the kernel's on a machine
/// whose switch tracepoint did not fire for every switch.
pub(crate) const MISSED_SWITCHES: &str = "the switch tracepoint never fired for some of this machine's switches in the window (counted as repaired; docs/ledger.md, \"Known limits\"): the ledger's count is short by no more than those";

/// The switch comparisons of `rows` that fall short of the kernel by no
/// more than `repaired`, the window's switches whose other half never
/// reached the tracepoint (machine-wide `switches_unseen`). A switch the
/// kernel does not emit is one the ledger cannot count; it sees the gap at
/// the thread's next switch in and counts it there, so every switch of a
/// process the tracepoint missed adds one to that count (seen on these
/// VMs: a host agent's switches out, and pid 1's, never fire; docs/ledger.md).
/// Such a row is informational with the reason: the ledger is short of a
/// counter the kernel did not report to any tracer. The count is the
/// machine's, so on a busy machine it bounds loosely; a shortfall beyond it,
/// or a ledger above the kernel, stays a fault.
pub fn missed_switches(rows: Vec<Agreement>, repaired: u64) -> Vec<Agreement> {
    rows.into_iter()
        .map(|a| {
            let short = a.kernel_low.unwrap_or(a.kernel).saturating_sub(a.ledger);
            if a.reference == "/proc status ctxt_switches"
                && a.flagged()
                && short > 0
                && short <= repaired.saturating_add(a.tolerance)
            {
                a.info(MISSED_SWITCHES)
            } else {
                a
            }
        })
        .collect()
}

/// The runtime and run_delay comparisons of `rows` held to the range the
/// kernel's counters can have had at the ledger's own reads
/// (window/bracket.rs; docs/ledger.md, "Cross-check").
pub fn at_the_ledgers_reads(rows: Vec<Agreement>, b: &Bracket) -> Vec<Agreement> {
    rows.into_iter()
        .map(|a| match (a.reference, b.runtime, b.run_delay) {
            // Read right before and right after the images: the kernel
            // at the ledger's reads.
            ("schedstat sum_exec_runtime", Some((lo, hi)), _)
            | ("schedstat run_delay", _, Some((lo, hi))) => a.in_range(lo, hi),
            // Read later, anywhere up to the reads after the references.
            // utime+stime: the process's runtime at the read, in ticks
            // (cputime_adjust scales the tick samples to it).
            (
                "schedstat sum_exec_runtime"
                | "taskstats cpu_run_virtual_total"
                | "utime+stime ticks",
                ..,
            ) => a.bracketed(b.start.run_ns, b.end.run_ns),
            ("schedstat run_delay", ..) => a.bracketed(b.start.wait_ns, b.end.wait_ns),
            ("/proc status ctxt_switches", ..) => a.bracketed(b.start.switches, b.end.switches),
            // Read bytes grow at each read the process issues, between the
            // image and the /proc read as between two schedstat reads.
            ("/proc/PID/task/*/io read_bytes" | "/proc/PID/io read_bytes", ..) => {
                a.bracketed(b.start.read_bytes, b.end.read_bytes)
            }
            _ => a,
        })
        .collect()
}

/// The machine: the ledger's per-CPU idle and iowait summed over CPUs
/// against /proc/stat.
pub fn machine(cpu: &CpuTimes, ncpus: usize, stat: &StatDelta, tick_ns: u64) -> Vec<Agreement> {
    let mut out = Vec::new();
    let abs = 2 * tick_ns * ncpus.max(1) as u64;
    if let Some(idle) = stat.total.idle {
        out.push(Agreement::new(
            "idle_ns",
            cpu.idle_ns,
            "/proc/stat idle",
            idle * tick_ns,
            0.03,
            abs,
        ));
    }
    if let Some(iowait) = stat.total.iowait {
        out.push(Agreement::new(
            "iowait_ns",
            cpu.iowait_ns,
            "/proc/stat iowait",
            iowait * tick_ns,
            0.05,
            abs,
        ));
    }
    out
}

/// The share of CPU time the hypervisor stole over a window (/proc/stat).
pub fn steal_fraction(stat: &StatDelta) -> f64 {
    let t = &stat.total;
    let all: u64 = [
        t.user, t.nice, t.system, t.idle, t.iowait, t.irq, t.softirq, t.steal,
    ]
    .iter()
    .map(|v| v.unwrap_or(0))
    .sum();
    if all == 0 {
        0.0
    } else {
        t.steal.unwrap_or(0) as f64 / all as f64
    }
}

#[cfg(test)]
#[path = "crosscheck_tests.rs"]
mod tests;
