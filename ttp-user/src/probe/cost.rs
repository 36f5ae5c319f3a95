//! The probes' own cost, from the kernel's BPF statistics.
//!
//! The kernel counts, per loaded program, how often it ran (`run_cnt`), for
//! how long (`run_time_ns`, the program alone, measured around its call),
//! and how often a run was skipped because the program was already running
//! on that CPU (`recursion_misses`: an event the ledger never saw). The
//! first two are only counted while BPF statistics are enabled. ttp enables
//! them with the fd-based `BPF_ENABLE_STATS` command (kernel ≥ 5.8), held
//! for the life of the loaded ledger: closing the fd switches the counting
//! off again, and the `kernel.bpf_stats_enabled` sysctl (a separate switch
//! of the same counting) is never written, so nothing is left changed.
//!
//! Two [`CostSnapshot`]s around a window give a [`ProbeCost`]: per program,
//! runs, CPU time and mean ns a run, and their total as a share of the
//! window.
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use serde::{Deserialize, Serialize};

use super::Ledger;

/// Why the probes' cost cannot be measured on this machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CostUnavailable(pub String);

/// Enables the kernel's BPF run-time statistics for as long as the returned
/// fd is open.
pub fn enable_stats() -> Result<OwnedFd, CostUnavailable> {
    aya::sys::enable_stats(aya::sys::Stats::RunTime).map_err(|e| {
        CostUnavailable(format!(
            "the kernel refused BPF_ENABLE_STATS ({e}): the probes' own cost is not measured (needs kernel ≥ 5.8 and CAP_SYS_ADMIN)"
        ))
    })
}

/// One program's counters as the kernel keeps them (since it was loaded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProgramCounters {
    pub run_count: u64,
    pub run_time_ns: u64,
    pub recursion_misses: u64,
}

/// The counters of a loaded program, by BPF_OBJ_GET_INFO_BY_FD (aya's
/// `ProgramInfo` has no accessor for `recursion_misses`). The kernel fills
/// in as much of `bpf_prog_info` as both sides know; a kernel older than
/// 5.12 leaves `recursion_misses` zero.
pub fn program_counters(fd: BorrowedFd<'_>) -> std::io::Result<ProgramCounters> {
    use aya_obj::generated::{bpf_attr, bpf_cmd, bpf_prog_info};
    // SAFETY: both are plain C structs for which all-zero is valid.
    let mut info: bpf_prog_info = unsafe { std::mem::zeroed() };
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    attr.info.bpf_fd = fd.as_raw_fd() as u32;
    attr.info.info = std::ptr::from_mut(&mut info) as u64;
    attr.info.info_len = size_of::<bpf_prog_info>() as u32;
    // SAFETY: bpf(2) with a valid attr whose `info` points at a buffer of
    // `info_len` bytes that outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            bpf_cmd::BPF_OBJ_GET_INFO_BY_FD as libc::c_long,
            std::ptr::from_mut(&mut attr),
            size_of::<bpf_attr>(),
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(ProgramCounters {
        run_count: info.run_cnt,
        run_time_ns: info.run_time_ns,
        recursion_misses: info.recursion_misses,
    })
}

/// Every loaded program's counters at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CostSnapshot {
    /// CLOCK_MONOTONIC ns when the counters were read.
    pub at_ns: u64,
    /// (program name, counters), sorted by name.
    pub programs: Vec<(String, ProgramCounters)>,
}

impl Ledger {
    /// The counters of every program of the ledger that is loaded (with
    /// `--trace` and in blame mode, theirs too).
    pub fn cost_snapshot(&self) -> Result<CostSnapshot, CostUnavailable> {
        if let Err(e) = &self.bpf_stats {
            return Err(e.clone());
        }
        let mut programs = Vec::new();
        for (name, program) in self._ebpf.programs() {
            // Programs of the object that were not loaded (a detail part
            // this kernel cannot run) have no fd and never run.
            let Ok(fd) = program.fd() else { continue };
            let counters = program_counters(fd.as_fd()).map_err(|e| {
                CostUnavailable(format!("cannot read the BPF statistics of {name}: {e}"))
            })?;
            programs.push((name.to_string(), counters));
        }
        programs.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(CostSnapshot {
            at_ns: crate::sys::clock::monotonic_ns(),
            programs,
        })
    }

    /// Whether the kernel counts the probes' cost, and why not.
    pub fn cost_available(&self) -> Result<(), CostUnavailable> {
        self.bpf_stats.as_ref().map(|_| ()).map_err(Clone::clone)
    }
}

/// One program's cost over a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgramCost {
    /// The program (the tracepoint it handles, for the ledger's own).
    pub program: String,
    pub runs: u64,
    /// CPU time spent in the program, over every CPU.
    pub run_time_ns: u64,
    /// Mean ns a run; `None` when it did not run.
    pub ns_per_run: Option<f64>,
    /// Runs the kernel skipped because the program was already running on
    /// that CPU: events the ledger never saw.
    pub recursion_misses: u64,
}

impl ProgramCost {
    fn new(program: String, runs: u64, run_time_ns: u64, recursion_misses: u64) -> Self {
        Self {
            program,
            runs,
            run_time_ns,
            ns_per_run: (runs > 0).then(|| run_time_ns as f64 / runs as f64),
            recursion_misses,
        }
    }
}

/// The probes' own cost over one window (`probe_cost` in the JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeCost {
    /// Where the figures come from.
    pub source: String,
    /// Length of the window (CLOCK_MONOTONIC ns between the two reads).
    pub window_ns: u64,
    /// Per program, most expensive first.
    pub programs: Vec<ProgramCost>,
    /// Sum over the programs (`program` is "total").
    pub total: ProgramCost,
    /// total.run_time_ns / window_ns: the probes' CPU time (summed over
    /// CPUs) against the window's elapsed time. On n CPUs the share of the
    /// machine's capacity is this divided by n.
    pub share_of_window: f64,
}

impl ProbeCost {
    /// The cost between two snapshots of the same loaded ledger. A program
    /// present in only one of them (not possible for one ledger) is left
    /// out; counters that went backwards count as zero.
    pub fn between(before: &CostSnapshot, after: &CostSnapshot) -> Self {
        let mut programs: Vec<ProgramCost> = after
            .programs
            .iter()
            .filter_map(|(name, a)| {
                let (_, b) = before.programs.iter().find(|(n, _)| n == name)?;
                Some(ProgramCost::new(
                    name.clone(),
                    a.run_count.saturating_sub(b.run_count),
                    a.run_time_ns.saturating_sub(b.run_time_ns),
                    a.recursion_misses.saturating_sub(b.recursion_misses),
                ))
            })
            .collect();
        programs.sort_by(|a, b| {
            b.run_time_ns
                .cmp(&a.run_time_ns)
                .then_with(|| a.program.cmp(&b.program))
        });
        let total = ProgramCost::new(
            "total".into(),
            programs.iter().map(|p| p.runs).sum(),
            programs.iter().map(|p| p.run_time_ns).sum(),
            programs.iter().map(|p| p.recursion_misses).sum(),
        );
        let window_ns = after.at_ns.saturating_sub(before.at_ns);
        Self {
            source: "kernel BPF statistics (BPF_ENABLE_STATS: run_cnt, run_time_ns, recursion_misses of each program)".into(),
            window_ns,
            share_of_window: if window_ns == 0 {
                0.0
            } else {
                total.run_time_ns as f64 / window_ns as f64
            },
            programs,
            total,
        }
    }

    /// The row of `program`, if it was loaded.
    pub fn program(&self, program: &str) -> Option<&ProgramCost> {
        self.programs.iter().find(|p| p.program == program)
    }

    /// Events the kernel did not deliver to a program (recursion misses).
    pub fn lost_events(&self) -> u64 {
        self.total.recursion_misses
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(at_ns: u64, rows: &[(&str, u64, u64, u64)]) -> CostSnapshot {
        CostSnapshot {
            at_ns,
            programs: rows
                .iter()
                .map(|&(n, c, t, m)| {
                    (
                        n.to_string(),
                        ProgramCounters {
                            run_count: c,
                            run_time_ns: t,
                            recursion_misses: m,
                        },
                    )
                })
                .collect(),
        }
    }

    /// Catches a cost taken from the counters since load instead of the
    /// window's difference, a mean over the wrong count, a total that
    /// misses a program, and a share against the wrong time.
    #[test]
    fn window_differences_means_and_share() {
        let before = snap(
            1_000_000_000,
            &[
                ("sched_switch", 1_000, 300_000, 0),
                ("sched_wakeup", 500, 100_000, 1),
                ("block_io_done", 7, 7_000, 0),
            ],
        );
        let after = snap(
            3_000_000_000,
            &[
                ("sched_switch", 13_345, 1_472_775, 2),
                ("sched_wakeup", 5_932, 426_000, 1),
                ("block_io_done", 7, 7_000, 0),
            ],
        );
        let c = ProbeCost::between(&before, &after);
        assert_eq!(c.window_ns, 2_000_000_000);
        let sw = c.program("sched_switch").unwrap();
        assert_eq!(
            (sw.runs, sw.run_time_ns, sw.recursion_misses),
            (12_345, 1_172_775, 2)
        );
        assert_eq!(sw.ns_per_run, Some(95.0));
        let wk = c.program("sched_wakeup").unwrap();
        assert_eq!(
            (wk.runs, wk.run_time_ns, wk.recursion_misses),
            (5_432, 326_000, 0)
        );
        assert_eq!(wk.ns_per_run, Some(326_000.0 / 5_432.0));
        let idle = c.program("block_io_done").unwrap();
        assert_eq!((idle.runs, idle.ns_per_run), (0, None));
        assert_eq!(
            c.programs[0].program, "sched_switch",
            "most expensive first"
        );
        assert_eq!(c.total.runs, 12_345 + 5_432);
        assert_eq!(c.total.run_time_ns, 1_172_775 + 326_000);
        assert_eq!(c.lost_events(), 2);
        assert!((c.share_of_window - 1_498_775.0 / 2e9).abs() < 1e-12);
    }

    /// Catches an underflow panic or a huge figure when a counter reads
    /// lower afterwards, and a division by a zero-length window.
    #[test]
    fn backwards_counters_and_empty_window() {
        let before = snap(5, &[("sched_switch", 10, 1_000, 0)]);
        let after = snap(5, &[("sched_switch", 9, 900, 0), ("new", 1, 1, 0)]);
        let c = ProbeCost::between(&before, &after);
        assert_eq!(c.programs.len(), 1, "a program missing before is left out");
        assert_eq!(c.total.runs, 0);
        assert_eq!(c.share_of_window, 0.0);
    }

    /// Catches a JSON field renamed without the reader following.
    #[test]
    fn json_round_trip() {
        let c = ProbeCost::between(
            &snap(0, &[("sched_switch", 0, 0, 0)]),
            &snap(10, &[("sched_switch", 2, 190, 0)]),
        );
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["programs"][0]["ns_per_run"], 95.0);
        assert_eq!(v["total"]["runs"], 2);
        let back: ProbeCost = serde_json::from_value(v).unwrap();
        assert_eq!(back, c);
    }
}
