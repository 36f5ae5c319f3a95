//! What one EMP measurement gives the protocol: per run (one execution of the
//! program under test, Sec. 3.3 Fig. 5) the elapsed time, the program's
//! process time, and the process time of every other process that ran
//! during the run (the "daemons", Sec. 4.5.1 Step 4), plus flags set by the
//! run loop for runs that must not be used.
//!
//! These types are filled by the live `run --protocol emp` and `calibrate`
//! loops and can be recorded and read back (`ttp.emp-runs/1`) so every
//! analysis here also works offline on measured data.
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::EmpError;

/// Schema tag of a recorded run set.
pub(crate) const RUNS_SCHEMA: &str = "ttp.emp-runs/1";

/// The program's process time (PT) in one run, from the three sources ttp
/// has. Any may be absent; absent is not zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramTime {
    /// taskstats `ac_utime + ac_stime` summed over the program's processes,
    /// in microseconds (Sec. 3.1–3.2: µs is the resolution taskstats gives).
    pub taskstats_us: Option<u64>,
    /// On-CPU time of the program's threads from the kernel ledger, in ns.
    /// It is wall time between context switches, so it includes time a
    /// hypervisor stole from the virtual CPU while the program was on it.
    pub ledger_on_cpu_ns: Option<u64>,
    /// The scheduler's own runtime of the program's threads
    /// (`se.sum_exec_runtime`, taskstats `cpu_run_virtual_total` of their
    /// exit records), in ns: exact, and without stolen time where the kernel
    /// accounts steal (CONFIG_PARAVIRT_TIME_ACCOUNTING).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_ns: Option<u64>,
}

/// One execution of a process other than the program's during a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonExec {
    /// The process name as the kernel knows it (`comm`, at most 15 bytes).
    pub name: String,
    pub pid: u32,
    /// Process time this process used inside the run's window, in ns.
    pub pt_ns: u64,
}

/// Reasons the run loop already knows a run must not be used.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFlags {
    /// The discarded warm-up execution (Sec. 4: the first measurement is
    /// thrown out because it includes reading code and input).
    #[serde(default)]
    pub warm_up: bool,
    /// The program failed (e.g. "exit status 1", "killed by signal 9").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// Ledger records lost during the run: its daemon list may be incomplete.
    #[serde(default)]
    pub lost_records: u64,
}

/// One run (one execution of the program under test).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmpRun {
    /// Position in the measurement, 0-based, consecutive (pairs for the
    /// dual-execution analysis are formed from consecutive indices).
    pub index: u32,
    /// Elapsed (wall) time of the run, in ns.
    pub et_ns: u64,
    /// Start of the run relative to the start of the first run, in ns
    /// (monotonic clock); used to turn a periodicity in runs into time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_offset_ns: Option<u64>,
    pub pt: ProgramTime,
    /// Every other process that used CPU during the run.
    #[serde(default)]
    pub daemons: Vec<DaemonExec>,
    #[serde(default)]
    pub flags: RunFlags,
}

/// A recorded set of runs of one program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmpRuns {
    pub schema: String,
    /// The command that was measured, as given.
    pub command: Vec<String>,
    pub runs: Vec<EmpRun>,
}

impl EmpRuns {
    pub fn new(command: Vec<String>, runs: Vec<EmpRun>) -> Self {
        Self {
            schema: RUNS_SCHEMA.to_string(),
            command,
            runs,
        }
    }

    /// Writes `runs` of `command` as a recorded run set (`ttp.emp-runs/1`,
    /// this type's layout) atomically, without copying them: what `run
    /// --protocol emp --record` and `calibrate --record` write.
    pub fn write(path: &Path, command: &[String], runs: &[EmpRun]) -> Result<(), EmpError> {
        #[derive(Serialize)]
        struct Record<'a> {
            schema: &'static str,
            command: &'a [String],
            runs: &'a [EmpRun],
        }
        let record = Record {
            schema: RUNS_SCHEMA,
            command,
            runs,
        };
        ttp_sys::sys::atomic::write_json(path, &record).map_err(|source| EmpError::RunsWrite {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Reads a recorded run set (`ttp.emp-runs/1`), as `analyze` and
    /// `calibrate --from` do.
    pub fn load(path: &Path) -> Result<Self, EmpError> {
        let bytes = std::fs::read(path).map_err(|source| EmpError::RunsRead {
            path: path.to_path_buf(),
            source,
        })?;
        let runs: EmpRuns =
            serde_json::from_slice(&bytes).map_err(|source| EmpError::RunsParse {
                path: path.to_path_buf(),
                source,
            })?;
        if runs.schema != RUNS_SCHEMA {
            return Err(EmpError::RunsSchema {
                path: path.to_path_buf(),
                found: runs.schema,
                expected: RUNS_SCHEMA,
            });
        }
        Ok(runs)
    }
}

/// Which PT source a protocol uses for all runs of a set (one source for the
/// whole set: the two account time differently, see docs/emp.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum PtSource {
    /// The scheduler's runtime if every usable run has it; else the ledger
    /// if every usable run has it, else taskstats if every usable run has
    /// it, else whichever of the two more runs have.
    #[default]
    Auto,
    /// taskstats ac_utime + ac_stime (µs; tick-sampled).
    Taskstats,
    /// The kernel ledger's on-CPU time (ns; includes stolen time).
    Ledger,
    /// The scheduler's runtime, se.sum_exec_runtime (ns; steal excluded).
    Runtime,
}

impl ProgramTime {
    /// PT in ns from the chosen source (`Auto` is resolved by the caller).
    pub(crate) fn ns(&self, source: PtSource) -> Option<u64> {
        match source {
            PtSource::Taskstats => self.taskstats_us.map(|us| us.saturating_mul(1_000)),
            PtSource::Ledger => self.ledger_on_cpu_ns,
            PtSource::Runtime => self.runtime_ns,
            PtSource::Auto => self
                .runtime_ns
                .or(self.ledger_on_cpu_ns)
                .or(self.taskstats_us.map(|us| us.saturating_mul(1_000))),
        }
    }
}

/// Resolves `Auto` over a set of runs (see [`PtSource::Auto`]).
pub(crate) fn resolve_pt_source<'a>(
    runs: impl IntoIterator<Item = &'a EmpRun>,
    wanted: PtSource,
) -> PtSource {
    if wanted != PtSource::Auto {
        return wanted;
    }
    let (mut n, mut ledger, mut taskstats, mut runtime) = (0usize, 0usize, 0usize, 0usize);
    for r in runs {
        n += 1;
        ledger += usize::from(r.pt.ledger_on_cpu_ns.is_some());
        taskstats += usize::from(r.pt.taskstats_us.is_some());
        runtime += usize::from(r.pt.runtime_ns.is_some());
    }
    if n > 0 && runtime == n {
        PtSource::Runtime
    } else if ledger == n || ledger >= taskstats {
        PtSource::Ledger
    } else {
        PtSource::Taskstats
    }
}

/// The name under which a daemon's executions are grouped across runs.
///
/// Kernel worker threads rename themselves after the work item they run
/// (`kworker/0:1-events` → `kworker/0:1-mm_percpu_wq`); the suffix after the
/// first '-' is dropped so one worker is one daemon. Every other name is kept
/// as the kernel reports it (already truncated to 15 bytes, as the paper's
/// `rhsmcertd-worke` shows).
pub(crate) fn daemon_key(name: &str) -> &str {
    if name.starts_with("kworker/") {
        name.split_once('-').map_or(name, |(k, _)| k)
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(i: u32, ts: Option<u64>, l: Option<u64>) -> EmpRun {
        EmpRun {
            index: i,
            et_ns: 1,
            start_offset_ns: None,
            pt: ProgramTime {
                taskstats_us: ts,
                ledger_on_cpu_ns: l,
                runtime_ns: None,
            },
            daemons: vec![],
            flags: RunFlags::default(),
        }
    }

    /// Catches a unit slip between taskstats µs and ns.
    #[test]
    fn taskstats_microseconds_become_nanoseconds() {
        let pt = ProgramTime {
            taskstats_us: Some(1_234),
            ledger_on_cpu_ns: None,
            runtime_ns: None,
        };
        assert_eq!(pt.ns(PtSource::Taskstats), Some(1_234_000));
        assert_eq!(pt.ns(PtSource::Ledger), None);
    }

    /// Catches Auto picking a source that some runs lack when another source
    /// covers every run.
    #[test]
    fn auto_prefers_a_source_every_run_has() {
        let runs = [run(0, Some(1), None), run(1, Some(1), Some(5))];
        assert_eq!(
            resolve_pt_source(&runs, PtSource::Auto),
            PtSource::Taskstats
        );
        let mut runs = [run(0, Some(1), Some(5)), run(1, Some(1), Some(5))];
        assert_eq!(resolve_pt_source(&runs, PtSource::Auto), PtSource::Ledger);
        // The scheduler's runtime wins only when every run has it.
        runs[0].pt.runtime_ns = Some(4);
        assert_eq!(resolve_pt_source(&runs, PtSource::Auto), PtSource::Ledger);
        runs[1].pt.runtime_ns = Some(4);
        assert_eq!(resolve_pt_source(&runs, PtSource::Auto), PtSource::Runtime);
        assert_eq!(runs[1].pt.ns(PtSource::Runtime), Some(4));
    }

    /// Catches kworkers being split into one daemon per work item.
    #[test]
    fn kworker_suffix_is_dropped() {
        assert_eq!(daemon_key("kworker/0:1-events"), "kworker/0:1");
        assert_eq!(daemon_key("rhsmcertd-worke"), "rhsmcertd-worke");
    }

    /// A recorded run set reads back as written, and a file that is not
    /// one is refused with what to do. Catches a layout the reader does
    /// not take, and a run file of another schema read as runs.
    #[test]
    fn a_recorded_run_set_reads_back_and_others_are_refused() {
        let dir = std::env::temp_dir().join(format!("ttp-emp-runs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("runs.json");
        EmpRuns::write(&path, &["prog".to_string(), "-x".to_string()], &[]).unwrap();
        let back = EmpRuns::load(&path).unwrap();
        assert_eq!(
            back,
            EmpRuns::new(vec!["prog".into(), "-x".into()], Vec::new())
        );

        std::fs::write(
            &path,
            r#"{"schema": "ttp.run/1", "command": [], "runs": []}"#,
        )
        .unwrap();
        let e = EmpRuns::load(&path).unwrap_err();
        assert!(matches!(e, EmpError::RunsSchema { .. }), "{e}");
        assert!(e.to_string().contains("written by --record"), "{e}");

        std::fs::write(&path, "not json").unwrap();
        let e = EmpRuns::load(&path).unwrap_err();
        assert!(e.to_string().contains("is not a recorded run set"), "{e}");
        assert!(
            e.to_string().contains("--record FILE"),
            "says how to make one: {e}"
        );

        let e = EmpRuns::load(&dir.join("missing.json")).unwrap_err();
        assert!(e.to_string().starts_with("cannot read "), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
