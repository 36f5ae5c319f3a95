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
use crate::{
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
    pub fn bracketed(mut self, start: u64, end: u64) -> Self {
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
pub const REAPED_IO: &str = "/proc/PID/io adds the I/O of the children this process reaped and of its exited threads (wait_task_zombie, __exit_signal); its threads' own I/O is compared above";

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
            out.push(delay(partial(Agreement::new(
                "iowait_ns",
                k.iowait_ns,
                "delayacct_blkio_ticks",
                b * tick_ns,
                0.05,
                2 * tick_ns,
            ))));
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
            // file never holds less than its live threads.
            let beyond_threads = p
                .threads_read_bytes
                .is_none_or(|t| r > t.saturating_add(a.tolerance));
            out.push(if beyond_threads && !a.within {
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
            out.push(delay(Agreement::new(
                "iowait_ns",
                k.iowait_ns,
                "taskstats blkio_delay_total",
                b,
                0.05,
                2 * MS,
            )));
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

/// Why a delay-accounting figure cannot be the process's.
pub const IMPOSSIBLE_DELAY: &str = "the kernel's blkio delay exceeds the window times the threads: a wait charged from time 0 (a delay record without its start, docs/ttpv2.md), not a wait of this window";

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
/// against /proc/stat. `lost_updates` is the window's count of per-CPU
/// updates that gave up on a contended lock (`lock_contended`): each leaves
/// one stretch of a CPU, up to its next idle entry or exit, booked in the
/// state before it, busy as idle or idle as busy, by an amount the ledger
/// cannot know. Outside tolerance with such losses, the comparison cannot
/// tell them from a fault: informational, with the count.
pub fn machine(
    cpu: &CpuTimes,
    ncpus: usize,
    stat: &StatDelta,
    tick_ns: u64,
    lost_updates: u64,
) -> Vec<Agreement> {
    let mut out = Vec::new();
    let abs = 2 * tick_ns * ncpus.max(1) as u64;
    let lost = |a: Agreement| {
        if lost_updates > 0 && !a.within {
            a.info(LOST_CPU_UPDATES)
        } else {
            a
        }
    };
    if let Some(idle) = stat.total.idle {
        out.push(lost(Agreement::new(
            "idle_ns",
            cpu.idle_ns,
            "/proc/stat idle",
            idle * tick_ns,
            0.03,
            abs,
        )));
    }
    if let Some(iowait) = stat.total.iowait {
        out.push(lost(Agreement::new(
            "iowait_ns",
            cpu.iowait_ns,
            "/proc/stat iowait",
            iowait * tick_ns,
            0.05,
            abs,
        )));
    }
    out
}

/// Why a machine comparison outside tolerance is not a fault when per-CPU
/// updates were lost.
pub const LOST_CPU_UPDATES: &str = "per-CPU updates gave up on a contended lock in this window (see LOST): each leaves a stretch of a CPU booked in the wrong state";

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
mod tests {
    use super::*;

    /// Catches tolerance arithmetic that passes everything or nothing: 1 %
    /// of 300 ms is 3 ms, so 303 ms agrees and 310 ms does not; the 2 ms
    /// floor applies to small values.
    #[test]
    fn tolerances_are_the_larger_of_relative_and_absolute() {
        let a = Agreement::new("on_cpu_ns", 303 * MS, "ref", 300 * MS, 0.01, 2 * MS);
        assert!(a.within && !a.flagged());
        let b = Agreement::new("on_cpu_ns", 310 * MS, "ref", 300 * MS, 0.01, 2 * MS);
        assert!(!b.within && b.flagged());
        let c = Agreement::new("on_cpu_ns", 11 * MS, "ref", 10 * MS, 0.01, 2 * MS);
        assert!(c.within);
        assert!((b.rel_diff - 10.0 / 300.0).abs() < 1e-9);
    }

    /// Recorded from `attach --pid POSTMASTER --children --duration 5s`
    /// beside `pgbench -c 6` and two CPU burners: a backend's ledger on-CPU
    /// 246 914 429 ns; schedstat read after the images grew by 253 055 781
    /// ns (−2.4 %: flagged when compared as read); the runtime grew by
    /// 7 689 923 ns between the reads around the last image and by
    /// 88 075 around the first. Catches a comparison of different instants
    /// (the backend is flagged), a range that swallows a wrong figure (5 %
    /// over the top or 2 % under the bottom is flagged) and a bracket that
    /// changes a comparison read at one instant.
    #[test]
    fn a_reference_read_after_the_images_is_compared_with_its_range() {
        let (ledger, kernel) = (246_914_429, 253_055_781);
        let as_read = Agreement::new("on_cpu_ns", ledger, "ref", kernel, 0.01, 2 * MS);
        assert!(as_read.flagged());
        let b = Bracket {
            start: super::super::bracket::Slack {
                run_ns: 88_075,
                wait_ns: 0,
                switches: 0,
                read_bytes: 0,
            },
            end: super::super::bracket::Slack {
                run_ns: 7_689_923,
                wait_ns: 0,
                switches: 0,
                read_bytes: 0,
            },
            ..Default::default()
        };
        let rows = process(
            &LedgerMeasures {
                on_cpu_ns: ledger,
                ..Default::default()
            },
            Some(&ProcCounters {
                schedstat_run_ns: Some(kernel),
                ..Default::default()
            }),
            None,
            1,
            10 * MS,
            true,
            0.0,
        );
        let rows = at_the_ledgers_reads(rows, &b);
        let r = &rows[0];
        assert_eq!(r.reference, "schedstat sum_exec_runtime");
        assert_eq!(
            (r.kernel_low, r.kernel_high),
            (Some(245_365_858), Some(253_143_856))
        );
        assert!(r.within && !r.flagged());
        let high = Agreement::new(
            "on_cpu_ns",
            253_143_856 * 105 / 100,
            "ref",
            kernel,
            0.01,
            2 * MS,
        )
        .bracketed(88_075, 7_689_923);
        assert!(high.flagged(), "{high:?}");
        let low = Agreement::new(
            "on_cpu_ns",
            245_365_858 * 98 / 100,
            "ref",
            kernel,
            0.01,
            2 * MS,
        )
        .bracketed(88_075, 7_689_923);
        assert!(low.flagged(), "{low:?}");
        let same = Agreement::new("on_cpu_ns", ledger, "ref", kernel, 0.01, 2 * MS).bracketed(0, 0);
        assert_eq!(same, as_read);
        // Read right around the images, schedstat takes that range instead
        // (here 1.5 ms wide); the other references keep the slack.
        let tight = Bracket {
            runtime: Some((246_100_000, 247_600_000)),
            ..b
        };
        let rows = at_the_ledgers_reads(
            vec![
                Agreement::new(
                    "on_cpu_ns",
                    ledger,
                    "schedstat sum_exec_runtime",
                    kernel,
                    0.01,
                    2 * MS,
                ),
                Agreement::new(
                    "on_cpu_ns",
                    ledger,
                    "taskstats cpu_run_virtual_total",
                    kernel,
                    0.01,
                    2 * MS,
                ),
                Agreement::new(
                    "on_cpu_ns",
                    252_000_000,
                    "schedstat sum_exec_runtime",
                    kernel,
                    0.01,
                    2 * MS,
                ),
            ],
            &tight,
        );
        assert_eq!(
            (rows[0].kernel_low, rows[0].kernel_high),
            (Some(246_100_000), Some(247_600_000))
        );
        assert!(rows[0].within);
        assert_eq!(rows[1].kernel_low, Some(245_365_858));
        // 4.4 ms above the range, tolerance 2.5 ms: flagged, though within
        // the slack of the later references.
        assert!(rows[2].flagged(), "{:?}", rows[2]);
    }

    /// Catches a cross-check that flags what cannot agree by construction:
    /// buffered write bytes differ and are informational, never flagged.
    #[test]
    fn buffered_writes_are_informational() {
        let k = LedgerMeasures::default();
        let p = ProcCounters {
            write_bytes: Some(1 << 20),
            ..Default::default()
        };
        let rows = process(&k, Some(&p), None, 1, 10 * MS, true, 0.0);
        let w = rows.iter().find(|r| r.measure == "io.write_bytes").unwrap();
        assert!(!w.within && !w.flagged() && w.informational.is_some());
    }

    /// The postmaster of a PostgreSQL server under pgbench read nothing
    /// itself while /proc/PID/io grew by the 634 880 bytes of children it
    /// reaped. Catches that comparison flagged (a healthy server, a shell,
    /// make), and a per-thread reference that hides a real fault: the
    /// ledger short of the threads' own bytes, or above the whole
    /// process's, is still flagged.
    #[test]
    fn reaped_childrens_io_is_not_the_processs_own() {
        let rows = |ledger: u64, whole: u64, threads: u64| {
            let k = LedgerMeasures {
                io: crate::accounts::IoMeasures {
                    read_bytes: ledger,
                    ..Default::default()
                },
                ..Default::default()
            };
            let p = ProcCounters {
                read_bytes: Some(whole),
                threads_read_bytes: Some(threads),
                ..Default::default()
            };
            process(&k, Some(&p), None, 1, 10 * MS, true, 0.0)
        };
        let find = |r: &[Agreement], reference: &str| {
            r.iter().find(|a| a.reference == reference).unwrap().clone()
        };
        let healthy = rows(0, 634_880, 0);
        assert!(healthy.iter().all(|a| !a.flagged()), "{healthy:?}");
        assert!(find(&healthy, "/proc/PID/task/*/io read_bytes").within);
        let whole = find(&healthy, "/proc/PID/io read_bytes");
        assert_eq!(whole.informational, Some(REAPED_IO));
        // No child reaped: the whole-process file is a plain comparison.
        let plain = rows(1 << 20, 1 << 20, 1 << 20);
        assert!(
            plain
                .iter()
                .all(|a| a.informational.is_none() || a.measure != "io.read_bytes")
        );
        assert!(plain.iter().all(|a| !a.flagged()));
        // The ledger missed the process's own reads: flagged by its threads.
        let short = rows(0, 1 << 20, 1 << 20);
        assert!(find(&short, "/proc/PID/task/*/io read_bytes").flagged());
        // The ledger above everything the kernel counted: flagged by both.
        let over = rows(2 << 20, 1 << 20, 1 << 20);
        assert!(find(&over, "/proc/PID/task/*/io read_bytes").flagged());
        assert!(find(&over, "/proc/PID/io read_bytes").flagged());
    }

    /// From the run: the ledger's idle 3.97 % under /proc/stat's
    /// (tolerance 3 %) in a window whose per-CPU updates gave up on a
    /// contended lock. Catches that loss shown as a fault, and a loss-free
    /// window (or one within tolerance) losing its flag.
    #[test]
    fn machine_comparisons_with_lost_cpu_updates_are_informational() {
        let stat = StatDelta {
            total: crate::collect::proc_stat::CpuTicks {
                idle: Some(1000),
                iowait: Some(10),
                ..Default::default()
            },
            per_cpu: Vec::new(),
            ctxt: None,
            processes: None,
            went_backwards: Vec::new(),
        };
        let cpu = CpuTimes {
            idle_ns: 9_603 * MS,
            iowait_ns: 100 * MS,
            ..Default::default()
        };
        let clean = machine(&cpu, 2, &stat, 10 * MS, 0);
        assert!(clean[0].flagged(), "{:?}", clean[0]);
        assert!(!clean[1].flagged());
        let lossy = machine(&cpu, 2, &stat, 10 * MS, 18);
        assert!(!lossy[0].flagged());
        assert_eq!(lossy[0].informational, Some(LOST_CPU_UPDATES));
        assert!(lossy[1].informational.is_none(), "within: stays a check");
    }

    /// The pgbench backend of `attach --children`: the ledger's 663 552
    /// read bytes against 671 744 in its /proc files read after the image
    /// (−1.2 %, two pages; tolerance 4 KiB), while its threads' own
    /// /proc/TID/io grew by 8 192 bytes between the reads around the last
    /// image and after the references. Catches read bytes compared as read
    /// at another instant (flagged), and a bracket that swallows a larger
    /// shortfall.
    #[test]
    fn read_bytes_are_compared_at_the_ledgers_reads() {
        let rows = |ledger: u64| {
            let k = LedgerMeasures {
                io: crate::accounts::IoMeasures {
                    read_bytes: ledger,
                    ..Default::default()
                },
                ..Default::default()
            };
            let p = ProcCounters {
                read_bytes: Some(671_744),
                threads_read_bytes: Some(671_744),
                ..Default::default()
            };
            process(&k, Some(&p), None, 1, 10 * MS, true, 0.0)
        };
        let b = Bracket {
            end: super::super::bracket::Slack {
                read_bytes: 8_192,
                ..Default::default()
            },
            ..Default::default()
        };
        let as_read = rows(663_552);
        assert!(as_read.iter().any(Agreement::flagged));
        let bracketed = at_the_ledgers_reads(as_read, &b);
        assert!(bracketed.iter().all(|a| !a.flagged()), "{bracketed:?}");
        let short = at_the_ledgers_reads(rows(663_552 - 8_192), &b);
        assert!(short.iter().any(Agreement::flagged));
    }

    /// Two `cc` of a shell's build under `attach --children`: the ledger's
    /// 0.2 ms of I/O wait against an exit record's blkio delay of 3 488 s,
    /// the machine's uptime, in a 6 s window. Catches that reference
    /// flagged as the ledger's fault, and a figure a window can hold (or a
    /// ledger short of it) losing its flag.
    #[test]
    fn an_uptime_sized_delay_is_the_references_fault() {
        let row = |kernel: u64| {
            Agreement::new(
                "iowait_ns",
                208_420,
                "taskstats blkio_delay_total",
                kernel,
                0.05,
                2 * MS,
            )
        };
        let rows = impossible_delays(vec![row(3_487_950_166_808), row(500 * MS)], 6_000 * MS, 1);
        assert_eq!(rows[0].informational, Some(IMPOSSIBLE_DELAY));
        assert!(!rows[0].flagged());
        assert!(rows[1].flagged(), "{:?}", rows[1]);
    }
}
