//! The record of one query execution (QE) as TTPv2's Fig. 5 sequence
//! (window/qe.rs) fills it: every process seen with its class (Sec. 4) and
//! its measures over the QE (Sec. 3.5), the overall /proc/stat measures
//! (Sec. 3.6), the process sets of App. B and, where the eBPF ledger ran,
//! the exact measures in ns. The protocols read it (`ttp_ttpv2`
//! checks and analyses it, `ttp_emp` reads its runs off it); it lives
//! here, below them, because the window that measures it builds it.
//!
//! Every measure is the change over the QE (after image − before image; the
//! final value for a process that started during the QE). A measure that
//! could not be read is `None`: absent is not zero.
use serde::{Deserialize, Serialize};

use crate::window::{blame_record::BlameSummary, cold_cache::ColdCacheStep};
use ttp_ledger::accounts::LedgerColumns;

/// The role of a process in a QE (Sec. 4: query, utility and daemon
/// processes; Sec. 3.3: the EXECUTOR doing the timing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProcessClass {
    /// The process(es) executing the query (Sec. 7.2).
    Query,
    /// Other processes of the measured program or DBMS (Sec. 3.3).
    Utility,
    /// The measuring tool itself.
    Executor,
    /// Everything else running on the machine.
    Daemon,
}

impl ProcessClass {
    pub const ALL: [ProcessClass; 4] = [
        ProcessClass::Query,
        ProcessClass::Utility,
        ProcessClass::Executor,
        ProcessClass::Daemon,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ProcessClass::Query => "query",
            ProcessClass::Utility => "utility",
            ProcessClass::Executor => "executor",
            ProcessClass::Daemon => "daemon",
        }
    }
}

/// Whether `processes` lists real processes or, for external data, one
/// pseudo-process per class holding that class's totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessDetail {
    /// One entry per process (a live run).
    #[default]
    PerProcess,
    /// One entry per class with the class's summed measures (a CSV):
    /// checks that need single processes say so.
    ClassTotals,
}

/// The numeric measures of one process over one QE. Ticks are USER_HZ
/// ticks as /proc reports them (10 ms at USER_HZ = 100).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Measures {
    /// User-mode ticks (/proc/PID/stat utime), Sec. 3.5 (c).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub u_ticks: Option<u64>,
    /// System-mode ticks (stime), Sec. 3.5 (d).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s_ticks: Option<u64>,
    /// U + S when only the sum is known (external data such as the SU rows
    /// of Table IX); leave `None` when `u_ticks` and `s_ticks` are given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub su_ticks: Option<u64>,
    /// BlockIO delay ticks, Sec. 3.5 (i): the time the process waited for
    /// block I/O. In a live run, from the kernel ledger's `iowait_ns`
    /// (truncated to ticks as /proc does); /proc's delayacct_blkio_ticks is
    /// kept in `blkio_proc_ticks` (see docs/ttpv2.md for why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blkio_ticks: Option<u64>,
    /// /proc's delayacct_blkio_ticks over the QE, for comparison.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blkio_proc_ticks: Option<u64>,
    /// Guest ticks, Sec. 3.5 (e).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_ticks: Option<u64>,
    /// Children's guest ticks, Sec. 3.5 (f).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cguest_ticks: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minflt: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub majflt: Option<u64>,
    /// Voluntary context switches, Sec. 3.5 (g).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vol_cs: Option<u64>,
    /// Involuntary context switches, Sec. 3.5 (h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invol_cs: Option<u64>,
    /// Read system calls (/proc/PID/io syscr), Sec. 3.5 (j).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_syscalls: Option<u64>,
    /// Write system calls (syscw), Sec. 3.5 (k).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_syscalls: Option<u64>,
    /// User time in ns (taskstats ac_utime or the ledger).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub u_ns: Option<u64>,
    /// System time in ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s_ns: Option<u64>,
    /// BlockIO delay in ns (taskstats blkio_delay_total).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blkio_ns: Option<u64>,
    /// The kernel ledger's counters (on-CPU, run-queue wait — the
    /// per-process "waiting mode" Sec. 7.3 says Linux does not record —,
    /// iowait and its own/share split Sec. 12 asks for, block I/O), under
    /// their ledger names; `None` when the ledger did not measure them.
    #[serde(flatten)]
    pub ledger: LedgerColumns,
}

/// Adds two optional measures: known only when both are known.
fn add(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    Some(a?.saturating_add(b?))
}

impl Measures {
    /// Computation ticks S + U (Sec. 7.2).
    pub fn su_ticks(&self) -> Option<u64> {
        match (self.u_ticks, self.s_ticks) {
            (Some(u), Some(s)) => Some(u.saturating_add(s)),
            _ => self.su_ticks,
        }
    }

    /// Process time in ticks as App. E (2) defines it: user + system +
    /// BlockIO delay.
    pub fn process_ticks(&self) -> Option<u64> {
        add(self.su_ticks(), self.blkio_ticks)
    }

    /// Total context switches, voluntary + involuntary.
    pub fn context_switches(&self) -> Option<u64> {
        add(self.vol_cs, self.invol_cs)
    }

    /// Field-wise sum; a field is known in the sum only when it is known
    /// in both.
    pub fn plus(&self, o: &Measures) -> Measures {
        // U+S survives when one side has only the sum.
        let su = if self.u_ticks.is_some()
            && self.s_ticks.is_some()
            && o.u_ticks.is_some()
            && o.s_ticks.is_some()
        {
            None
        } else {
            add(self.su_ticks(), o.su_ticks())
        };
        Measures {
            u_ticks: add(self.u_ticks, o.u_ticks),
            s_ticks: add(self.s_ticks, o.s_ticks),
            su_ticks: su,
            blkio_ticks: add(self.blkio_ticks, o.blkio_ticks),
            blkio_proc_ticks: add(self.blkio_proc_ticks, o.blkio_proc_ticks),
            guest_ticks: add(self.guest_ticks, o.guest_ticks),
            cguest_ticks: add(self.cguest_ticks, o.cguest_ticks),
            minflt: add(self.minflt, o.minflt),
            majflt: add(self.majflt, o.majflt),
            vol_cs: add(self.vol_cs, o.vol_cs),
            invol_cs: add(self.invol_cs, o.invol_cs),
            read_syscalls: add(self.read_syscalls, o.read_syscalls),
            write_syscalls: add(self.write_syscalls, o.write_syscalls),
            u_ns: add(self.u_ns, o.u_ns),
            s_ns: add(self.s_ns, o.s_ns),
            blkio_ns: add(self.blkio_ns, o.blkio_ns),
            ledger: self.ledger.plus(&o.ledger),
        }
    }

    /// The identity of [`Measures::plus`]: every measure known and zero.
    pub fn zero() -> Measures {
        let z = Some(0);
        Measures {
            u_ticks: z,
            s_ticks: z,
            su_ticks: None,
            blkio_ticks: z,
            blkio_proc_ticks: None,
            guest_ticks: z,
            cguest_ticks: z,
            minflt: z,
            majflt: z,
            vol_cs: z,
            invol_cs: z,
            read_syscalls: z,
            write_syscalls: z,
            u_ns: z,
            s_ns: z,
            blkio_ns: z,
            ledger: LedgerColumns::zero(),
        }
    }
}

/// One process seen in a QE.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcessMeasures {
    /// Process id (tgid); `None` for the class totals of external data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Start time of the process (ns, the clock the ledger keys processes
    /// by); with `pid` it tells a reused pid from its predecessor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time_ns: Option<u64>,
    pub comm: String,
    pub class: ProcessClass,
    /// Seen only through its exit record (it stopped during the QE).
    #[serde(default)]
    pub stopped: bool,
    #[serde(flatten)]
    pub m: Measures,
}

impl ProcessMeasures {
    pub fn key(&self) -> Option<ProcKey> {
        Some(ProcKey {
            pid: self.pid?,
            start_time_ns: self.start_time_ns.unwrap_or(0),
        })
    }
}

/// Identity of a process across images: pid plus start time (pid reuse safe).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProcKey {
    pub pid: u32,
    pub start_time_ns: u64,
}

/// The four process sets of App. B, by process identity.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessSets {
    /// M1: live processes in the before image.
    pub m1: Vec<ProcKey>,
    /// M2: live processes in the after image.
    pub m2: Vec<ProcKey>,
    /// Processes whose exit was recorded while listening (exit records).
    pub stopped: Vec<ProcKey>,
    /// Processes still alive when listening stopped. `None`: App. B's
    /// definition `M2 − Stopped` is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuing: Option<Vec<ProcKey>>,
}

/// Overall (machine-wide, all CPUs summed) /proc/stat deltas in ticks
/// (Sec. 3.6), plus the ledger's machine iowait in ns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OverallMeasures {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_ticks: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nice_ticks: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_ticks: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_ticks: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iowait_ticks: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq_ticks: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub softirq_ticks: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_ticks: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_ticks: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_nice_ticks: Option<u64>,
    /// Forks during the QE (/proc/stat processes), Sec. 3.6 (k).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forks: Option<u64>,
    /// Ledger: the machine's iowait (idle CPU time with tasks in iowait),
    /// all CPUs summed, in ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iowait_ns: Option<u64>,
}

impl OverallMeasures {
    /// Overall user ticks, normal and low priority (App. E (5)).
    pub fn user_all_ticks(&self) -> Option<u64> {
        add(self.user_ticks, self.nice_ticks)
    }
}

/// One query execution (QE) and everything measured around it (Fig. 5).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QeRecord {
    /// 1-based number of the QE within its Q@C.
    pub qe: u32,
    /// Time_meas: elapsed time between the two time reads, in ms.
    pub time_meas_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_meas_ns: Option<u64>,
    /// Wall-clock (CLOCK_REALTIME) start and end of the QE, ns since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_unix_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_unix_ns: Option<u64>,
    /// Exit code of the command (`None` if killed by a signal or not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Why the command could not be started, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawn_error: Option<String>,
    /// The QE hit the timeout (`None`: not known, external data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_out: Option<bool>,
    /// Query plan text printed before the QE (`--plan-cmd`), Sec. 3.2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    #[serde(default)]
    pub detail: ProcessDetail,
    /// Every process seen in the QE, with its class.
    #[serde(default)]
    pub processes: Vec<ProcessMeasures>,
    #[serde(default)]
    pub overall: OverallMeasures,
    /// The App. B sets; `None` when not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_sets: Option<ProcessSets>,
    /// Count of ephemeral processes given by external data without the
    /// sets; ignored when `process_sets` is present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral_count: Option<u32>,
    /// With `run --blame`: which processes slowed the command during this
    /// QE (iQCAR, shared paper 002; docs/blame.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blame: Option<BlameSummary>,
    /// Why the blame of this QE could not be computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blame_error: Option<String>,
    /// The ledger probes' own cost over this QE (kernel BPF statistics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_cost: Option<ttp_ledger::probe::cost::ProbeCost>,
    /// The most threads of the query that were alive and ran at once
    /// (kernel ledger): how many CPUs the query could use together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_threads_max: Option<u32>,
    /// Thread exit records the kernel ledger could not deliver during the
    /// QE (its ring buffer was full): check XQE1. `None`: not recorded
    /// (external data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_records_lost: Option<u64>,
    /// With a cold cache: what was done before this QE to empty the caches
    /// (Sec. 3.1), and when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_cache: Option<ColdCacheStep>,
    /// The query class is a measured command's process tree (summed), not
    /// one query process (Sec. 7.2); `None` in files that predate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_is_tree: Option<bool>,
}

impl QeRecord {
    /// An empty QE (no processes, nothing measured) to fill in.
    pub fn new(qe: u32, time_meas_ms: f64) -> QeRecord {
        QeRecord {
            qe,
            time_meas_ms,
            time_meas_ns: None,
            start_unix_ns: None,
            end_unix_ns: None,
            exit_code: None,
            signal: None,
            spawn_error: None,
            timed_out: None,
            plan: None,
            detail: ProcessDetail::PerProcess,
            processes: Vec::new(),
            overall: OverallMeasures::default(),
            process_sets: None,
            ephemeral_count: None,
            blame: None,
            blame_error: None,
            probe_cost: None,
            query_threads_max: None,
            exit_records_lost: None,
            cold_cache: None,
            query_is_tree: None,
        }
    }

    pub fn of_class(&self, class: ProcessClass) -> impl Iterator<Item = &ProcessMeasures> {
        self.processes.iter().filter(move |p| p.class == class)
    }

    pub fn has_query_process(&self) -> bool {
        self.of_class(ProcessClass::Query).next().is_some()
    }

    /// Summed measures of one class (per-type measures, Sec. 4); every
    /// measure zero when the class has no process.
    pub fn class_totals(&self, class: ProcessClass) -> Measures {
        self.of_class(class)
            .fold(Measures::zero(), |acc, p| acc.plus(&p.m))
    }

    /// The query measures: the sum over the query process(es), `None` when
    /// the QE has no query process.
    pub fn query(&self) -> Option<Measures> {
        self.has_query_process()
            .then(|| self.class_totals(ProcessClass::Query))
    }

    /// The command did not run to a successful end (App. E X1).
    pub fn missing(&self) -> bool {
        self.spawn_error.is_some()
            || self.signal.is_some() && self.timed_out != Some(true)
            || self.exit_code.is_some_and(|c| c != 0)
    }
}
