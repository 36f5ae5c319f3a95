//! The probes' own cost, from the kernel's BPF statistics taken in short
//! sampling windows.
//!
//! The kernel counts, per loaded program, how often it ran (`run_cnt`) and
//! for how long (`run_time_ns`, the program alone, measured around its
//! call), but only while BPF statistics are enabled, and they cost every
//! run of every program of the machine about 20 ns (two `sched_clock()`
//! reads; kernel commit 492ecee892c2 says to enable them "for a few
//! seconds"). So ttp does not hold them on: a [`CostSampler`] thread
//! enables them with the fd-based `BPF_ENABLE_STATS` (kernel ≥ 5.8) for
//! [`SAMPLE`] every [`PERIOD`] (bpftop's way, in short windows), reads
//! every program's counters at the window's two ends and closes the fd
//! again. The `kernel.bpf_stats_enabled` sysctl (a separate switch of the
//! same counting) is never written, so nothing is left changed.
//!
//! - **ns a run**: the program's run time over its runs inside the
//!   sampling windows, with the standard error of the per-window means.
//! - **runs**: counted by the ledger itself (`stat::runs_of`: one per-CPU
//!   add a run), exact over any window; a program without its own counter
//!   (`--trace`, blame's detail) has its sampled runs scaled by the time
//!   the statistics were off, and says so (`runs_counted: false`).
//! - **recursion misses** (a run skipped because the program was already
//!   running on that CPU: an event never seen) are counted by the kernel
//!   whether the statistics are on or not: exact.
//!
//! Two [`CostSnapshot`]s around a window give a [`ProbeCost`]: per
//! program, runs, CPU time, mean ns a run and its uncertainty, and their
//! total as a share of the window.
use std::{collections::BTreeMap, os::fd::AsFd, sync::Arc};

use serde::{Deserialize, Serialize};

use super::Ledger;

mod counters;
mod sampler;
use counters::program_counters;
pub use counters::{CostUnavailable, PERIOD, ProgramCounters, SAMPLE, enable_stats};
pub use sampler::{CostSampler, Sampled};

/// One program in a [`CostSnapshot`]: its exact counts and what the
/// sampling windows saw of it, cumulative since load.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProgramSnapshot {
    /// Runs: the ledger's own count where it keeps one (`counted`), else
    /// the windows' runs scaled to the time between them.
    pub runs: u64,
    pub counted: bool,
    /// Runs the kernel skipped (exact: counted whether the statistics are
    /// on or not).
    pub recursion_misses: u64,
    pub sampled: Sampled,
    /// Run time since load: at each snapshot the runs since the previous
    /// one at the mean ns a run of every window so far (never decreases).
    pub run_time_ns: u64,
}

impl ProgramSnapshot {
    /// The cumulative counters serve exports.
    pub fn counters(&self) -> ProgramCounters {
        ProgramCounters {
            run_count: self.runs,
            run_time_ns: self.run_time_ns,
            recursion_misses: self.recursion_misses,
        }
    }
}

/// Every loaded program's counters at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CostSnapshot {
    /// CLOCK_MONOTONIC ns when the counters were read.
    pub at_ns: u64,
    /// (program name, counters), sorted by name.
    pub programs: Vec<(String, ProgramSnapshot)>,
    /// Sampling windows taken since load, and the time the statistics
    /// were on in them.
    pub windows: u64,
    pub stats_on_ns: u64,
}

impl Ledger {
    /// The counters of every program of the ledger that is loaded (with
    /// `--trace` and in blame mode, theirs too). Also hands the sampler
    /// the programs loaded since the last call.
    pub fn cost_snapshot(&self) -> Result<CostSnapshot, CostUnavailable> {
        let sampler = self.bpf_stats.as_ref().map_err(Clone::clone)?;
        let mut fds = Vec::new();
        let mut misses = BTreeMap::new();
        for (name, program) in self._ebpf.programs() {
            // Programs of the object that were not loaded (a detail part
            // this kernel cannot run) have no fd and never run.
            let Ok(fd) = program.fd() else { continue };
            let counters = program_counters(fd.as_fd()).map_err(|e| {
                CostUnavailable(format!("cannot read the BPF statistics of {name}: {e}"))
            })?;
            misses.insert(name.to_string(), counters.recursion_misses);
            let dup = fd.as_fd().try_clone_to_owned().map_err(|e| {
                CostUnavailable(format!("cannot hold the program {name} to sample it: {e}"))
            })?;
            fds.push((name.to_string(), Arc::new(dup)));
        }
        sampler.set_programs(fds);
        let (sampled, windows, stats_on_ns, error) = sampler.sampled();
        if windows == 0
            && let Some(e) = error
        {
            return Err(CostUnavailable(e));
        }
        let counted = self.run_counters();
        let programs = misses
            .into_iter()
            .map(|(name, recursion_misses)| {
                let sampled = sampled.get(&name).copied().unwrap_or_default();
                let own = ttp_common::stat::runs_of(&name).and_then(|i| counted.get(i as usize));
                let (runs, counted) = match own {
                    Some(&n) => (n, true),
                    None => (sampled.runs_scaled.round() as u64, false),
                };
                let run_time_ns = sampler.accrue(&name, runs, sampled.ns_per_run().unwrap_or(0.0));
                let snap = ProgramSnapshot {
                    runs,
                    counted,
                    recursion_misses,
                    sampled,
                    run_time_ns,
                };
                (name, snap)
            })
            .collect();
        Ok(CostSnapshot {
            at_ns: ttp_sys::sys::clock::monotonic_ns(),
            programs,
            windows,
            stats_on_ns,
        })
    }

    /// The ledger's per-CPU counters, summed (`stat::COUNT` of them; zeros
    /// where unreadable).
    fn run_counters(&self) -> Vec<u64> {
        (0..ttp_common::stat::COUNT)
            .map(|i| self.stats.get(&i, 0).map_or(0, |v| v.iter().sum()))
            .collect()
    }

    /// The kernel's own counters of one loaded program now (its runs and run
    /// time count only while some BPF statistics fd is open).
    pub fn kernel_counters(&self, program: &str) -> Option<ProgramCounters> {
        let fd = self._ebpf.program(program)?.fd().ok()?;
        program_counters(fd.as_fd()).ok()
    }

    /// Whether the kernel counts the probes' cost, and why not.
    pub fn cost_available(&self) -> Result<(), CostUnavailable> {
        self.bpf_stats.as_ref().map(|_| ()).map_err(Clone::clone)
    }

    /// Takes one sampling window now (the statistics on for [`SAMPLE`]).
    pub fn sample_cost_now(&self) -> Result<(), CostUnavailable> {
        self.cost_snapshot()?;
        self.bpf_stats.as_ref().map_err(Clone::clone)?.sample_now()
    }
}

/// One program's cost over a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgramCost {
    /// The program (the tracepoint it handles, for the ledger's own).
    pub program: String,
    pub runs: u64,
    /// Whether `runs` is the ledger's own exact count (else the sampling
    /// windows' runs scaled to the window).
    #[serde(default = "yes")]
    pub runs_counted: bool,
    /// CPU time spent in the program, over every CPU: runs × ns a run.
    pub run_time_ns: u64,
    /// Mean ns a run inside the sampling windows; `None` when it did not
    /// run in any.
    pub ns_per_run: Option<f64>,
    /// Standard error of that mean (over the windows' means; two windows
    /// at least).
    #[serde(default)]
    pub ns_per_run_stderr: Option<f64>,
    /// Sampling windows the mean comes from, and runs inside them.
    #[serde(default)]
    pub sample_windows: u64,
    #[serde(default)]
    pub sampled_runs: u64,
    /// Runs the kernel skipped because the program was already running on
    /// that CPU: events the ledger never saw.
    pub recursion_misses: u64,
}

fn yes() -> bool {
    true
}

impl ProgramCost {
    fn new(program: String, runs: u64, counted: bool, s: &Sampled, recursion_misses: u64) -> Self {
        let ns_per_run = s.ns_per_run();
        Self {
            program,
            runs,
            runs_counted: counted,
            run_time_ns: (runs as f64 * ns_per_run.unwrap_or(0.0)).round() as u64,
            ns_per_run,
            ns_per_run_stderr: s.stderr(),
            sample_windows: s.windows,
            sampled_runs: s.runs,
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
    /// Sampling windows whose figures are used, and the time the kernel's
    /// statistics were on in them (outside the window when it held none:
    /// then the means of every window since load).
    #[serde(default)]
    pub sample_windows: u64,
    #[serde(default)]
    pub stats_on_ns: u64,
    /// No sampling window fell inside this window: the means are those of
    /// every window since load.
    #[serde(default)]
    pub means_since_load: bool,
    /// Per program, most expensive first.
    pub programs: Vec<ProgramCost>,
    /// Sum over the programs (`program` is "total"; its ns a run is the
    /// total's run time over its runs, its error the programs' combined).
    pub total: ProgramCost,
    /// total.run_time_ns / window_ns: the probes' CPU time (summed over
    /// CPUs) against the window's elapsed time. On n CPUs the share of the
    /// machine's capacity is this divided by n.
    pub share_of_window: f64,
}

impl ProbeCost {
    /// The cost between two snapshots of the same loaded ledger: runs over
    /// the window, ns a run from the sampling windows inside it, or from
    /// every window since load when it holds none (a short window). A
    /// program present in only one of them (loaded in between) is left
    /// out; counters that went backwards count as zero.
    pub fn between(before: &CostSnapshot, after: &CostSnapshot) -> Self {
        let inside = after.windows > before.windows;
        let mut programs: Vec<ProgramCost> = after
            .programs
            .iter()
            .filter_map(|(name, a)| {
                let (_, b) = before.programs.iter().find(|(n, _)| n == name)?;
                let sampled = if inside {
                    a.sampled.minus(&b.sampled)
                } else {
                    a.sampled
                };
                Some(ProgramCost::new(
                    name.clone(),
                    a.runs.saturating_sub(b.runs),
                    a.counted,
                    &sampled,
                    a.recursion_misses.saturating_sub(b.recursion_misses),
                ))
            })
            .collect();
        programs.sort_by(|a, b| {
            b.run_time_ns
                .cmp(&a.run_time_ns)
                .then_with(|| a.program.cmp(&b.program))
        });
        let runs: u64 = programs.iter().map(|p| p.runs).sum();
        let run_time_ns: u64 = programs.iter().map(|p| p.run_time_ns).sum();
        // Each program's run time is runs × its mean: their errors add in
        // quadrature.
        let err_ns: Option<f64> = programs
            .iter()
            .filter(|p| p.runs > 0)
            .map(|p| p.ns_per_run_stderr.map(|e| (e * p.runs as f64).powi(2)))
            .sum::<Option<f64>>()
            .map(f64::sqrt);
        let (sample_windows, stats_on_ns) = if inside {
            (
                after.windows - before.windows,
                after.stats_on_ns.saturating_sub(before.stats_on_ns),
            )
        } else {
            (after.windows, after.stats_on_ns)
        };
        let total = ProgramCost {
            program: "total".into(),
            runs,
            runs_counted: programs.iter().all(|p| p.runs_counted),
            run_time_ns,
            ns_per_run: (runs > 0).then(|| run_time_ns as f64 / runs as f64),
            ns_per_run_stderr: err_ns.filter(|_| runs > 0).map(|e| e / runs as f64),
            sample_windows,
            sampled_runs: programs.iter().map(|p| p.sampled_runs).sum(),
            recursion_misses: programs.iter().map(|p| p.recursion_misses).sum(),
        };
        let window_ns = after.at_ns.saturating_sub(before.at_ns);
        Self {
            source: format!(
                "kernel BPF statistics (BPF_ENABLE_STATS) on in sampling windows of {} ms every {} s, off in between: ns a run from {}; runs counted by the ledger",
                SAMPLE.as_millis(),
                PERIOD.as_secs(),
                if inside {
                    "the windows inside this one"
                } else {
                    "every window since load (none fell inside this one)"
                }
            ),
            window_ns,
            sample_windows,
            stats_on_ns,
            means_since_load: !inside,
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
    use super::{
        sampler::{Shared, fold},
        *,
    };

    /// (program, runs counted, (runs, run time) of each window, misses).
    type Row<'a> = (&'a str, u64, &'a [(u64, u64)], u64);

    /// A snapshot whose programs ran `runs` (counted) and whose windows
    /// saw (runs, run time) per window as listed.
    fn snap(at_ns: u64, rows: &[Row]) -> CostSnapshot {
        let mut s = Shared::default();
        for &(name, _, windows, _) in rows {
            for &(r, ns) in windows {
                fold(&mut s, vec![(name.to_string(), r, ns)], 0, None);
            }
        }
        CostSnapshot {
            at_ns,
            programs: rows
                .iter()
                .map(|&(n, runs, _, m)| {
                    (
                        n.to_string(),
                        ProgramSnapshot {
                            runs,
                            counted: true,
                            recursion_misses: m,
                            sampled: s.sampled.get(n).copied().unwrap_or_default(),
                            run_time_ns: 0,
                        },
                    )
                })
                .collect(),
            windows: rows.iter().map(|r| r.2.len() as u64).max().unwrap_or(0),
            stats_on_ns: 0,
        }
    }

    /// Catches runs taken from the windows instead of the ledger's count,
    /// a mean over every window since load when windows fell inside, run
    /// time that is not runs × mean, a total that misses a program, and a
    /// share against the wrong time.
    #[test]
    fn runs_from_the_ledger_means_from_the_windows_inside() {
        let before = snap(
            1_000_000_000,
            &[
                ("sched_switch", 1_000, &[(100, 30_000)], 0),
                ("sched_wakeup", 500, &[(10, 1_000)], 1),
                ("block_io_done", 7, &[(0, 0)], 0),
            ],
        );
        // Two more windows: sched_switch at 90 and 100 ns a run.
        let after = snap(
            3_000_000_000,
            &[
                (
                    "sched_switch",
                    13_345,
                    &[(100, 30_000), (100, 9_000), (300, 30_000)],
                    2,
                ),
                (
                    "sched_wakeup",
                    5_932,
                    &[(10, 1_000), (50, 3_000), (50, 3_000)],
                    1,
                ),
                ("block_io_done", 7, &[(0, 0), (0, 0), (0, 0)], 0),
            ],
        );
        let c = ProbeCost::between(&before, &after);
        assert_eq!(c.window_ns, 2_000_000_000);
        assert_eq!(c.sample_windows, 2);
        let sw = c.program("sched_switch").unwrap();
        assert_eq!((sw.runs, sw.recursion_misses), (12_345, 2));
        assert_eq!(sw.ns_per_run, Some(39_000.0 / 400.0));
        assert_eq!(sw.run_time_ns, (12_345.0f64 * 97.5).round() as u64);
        assert_eq!((sw.sample_windows, sw.sampled_runs), (2, 400));
        // Means 90 and 100: sd 7.07, standard error 5.
        assert!((sw.ns_per_run_stderr.unwrap() - 5.0).abs() < 1e-9, "{sw:?}");
        let wk = c.program("sched_wakeup").unwrap();
        assert_eq!((wk.runs, wk.ns_per_run), (5_432, Some(60.0)));
        assert_eq!(wk.recursion_misses, 0);
        let idle = c.program("block_io_done").unwrap();
        assert_eq!((idle.runs, idle.ns_per_run, idle.run_time_ns), (0, None, 0));
        assert_eq!(
            c.programs[0].program, "sched_switch",
            "most expensive first"
        );
        assert_eq!(c.total.runs, 12_345 + 5_432);
        assert_eq!(c.total.run_time_ns, sw.run_time_ns + wk.run_time_ns);
        assert!((c.share_of_window - c.total.run_time_ns as f64 / 2e9).abs() < 1e-12);
        assert!(
            !c.means_since_load && c.source.contains("inside this one"),
            "{}",
            c.source
        );
    }

    /// A window shorter than the sampling period holds no sampling window:
    /// the means of every window since load, said so in the source.
    #[test]
    fn a_window_without_samples_uses_every_window_since_load() {
        let rows: &[Row] = &[("sched_switch", 100, &[(10, 800), (30, 3_000)], 0)];
        let before = snap(0, rows);
        let mut after = snap(500_000_000, rows);
        after.programs[0].1.runs = 1_100;
        let c = ProbeCost::between(&before, &after);
        let sw = c.program("sched_switch").unwrap();
        assert_eq!(sw.runs, 1_000);
        assert_eq!(sw.ns_per_run, Some(3_800.0 / 40.0));
        assert_eq!(c.sample_windows, 2);
        assert!(
            c.means_since_load && c.source.contains("since load"),
            "{}",
            c.source
        );
    }

    /// Catches an underflow panic or a huge figure when a counter reads
    /// lower afterwards, and a division by a zero-length window.
    #[test]
    fn backwards_counters_and_empty_window() {
        let before = snap(5, &[("sched_switch", 10, &[(1, 100)], 0)]);
        let after = snap(
            5,
            &[
                ("sched_switch", 9, &[(1, 100)], 0),
                ("new", 1, &[(1, 1)], 0),
            ],
        );
        let c = ProbeCost::between(&before, &after);
        assert_eq!(c.programs.len(), 1, "a program missing before is left out");
        assert_eq!(c.total.runs, 0);
        assert_eq!(c.share_of_window, 0.0);
    }

    /// A program the ledger does not count: each window's runs scaled by
    /// the time since the previous window's end over its length.
    #[test]
    fn uncounted_runs_are_scaled_to_the_time_between_windows() {
        let mut s = Shared::default();
        fold(&mut s, vec![("trace".into(), 50, 5_000)], 200, None);
        fold(&mut s, vec![("trace".into(), 40, 4_000)], 200, Some(1_800));
        let t = s.sampled["trace"];
        assert_eq!(t.runs_scaled, 50.0 + 40.0 * 10.0);
        assert_eq!((s.windows, s.stats_on_ns), (2, 400));
        assert_eq!(t.ns_per_run(), Some(100.0));
    }

    /// Catches a JSON field renamed without the reader following, and an
    /// older file (no sampling fields) that no longer reads.
    #[test]
    fn json_round_trip() {
        let c = ProbeCost::between(
            &snap(0, &[("sched_switch", 0, &[(0, 0)], 0)]),
            &snap(10, &[("sched_switch", 2, &[(0, 0), (2, 190)], 0)]),
        );
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["programs"][0]["ns_per_run"], 95.0);
        assert_eq!(v["total"]["runs"], 2);
        let back: ProbeCost = serde_json::from_value(v).unwrap();
        assert_eq!(back, c);
        let old = serde_json::json!({
            "source": "kernel BPF statistics", "window_ns": 10, "share_of_window": 0.0,
            "programs": [], "total": {"program": "total", "runs": 0, "run_time_ns": 0,
            "ns_per_run": null, "recursion_misses": 0}
        });
        let o: ProbeCost = serde_json::from_value(old).unwrap();
        assert!(o.total.runs_counted && o.sample_windows == 0);
    }
}
