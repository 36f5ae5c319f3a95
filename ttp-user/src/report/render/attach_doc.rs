//! The attach summary's document (`ttp.attach/1`): the types written by
//! `attach --json` and read back by `report`.
use serde::{Deserialize, Serialize};

use ttp_ledger::{
    accounts::{CpuTimes, ExitedGroup, LedgerMeasures},
    collect::proc_stat::{CpuLine, CpuTicks},
    probe::{KernelStats, cost::ProbeCost},
};
use ttp_window::window::{
    crosscheck::Agreement,
    procs::{ProcCounters, TaskstatsCounters},
};

/// Schema of the attach summary.
pub(crate) const ATTACH_SCHEMA: &str = "ttp.attach/1";

/// The attach summary (`attach --json`), written and read by this one type.
/// Fields added after the first files were written are `#[serde(default)]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AttachDoc {
    pub schema: String,
    #[serde(default)]
    pub kernel_release: Option<String>,
    /// Kernel tick rate (CONFIG_HZ), when known.
    #[serde(default)]
    pub hz: Option<u64>,
    /// USER_HZ, the unit of /proc's tick counters.
    #[serde(default)]
    pub user_hz: Option<u64>,
    /// CPUs the ledger saw.
    #[serde(default)]
    pub cpus: Option<u64>,
    pub window: WindowView,
    pub lost: LostView,
    pub processes: Vec<ProcessView>,
    /// Ended processes beyond `attach --keep-exited`, summed by command
    /// name (docs/attach.md); empty when every process has its row.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exited_groups: Vec<ExitedGroup>,
    pub overall: OverallView,
    #[serde(default)]
    pub taskstats_exit_records: Option<u64>,
    #[serde(default)]
    pub notes: Vec<String>,
    /// The probes' own cost (absent in files written before it existed, or
    /// when the kernel refused BPF statistics: a note says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_cost: Option<ProbeCost>,
    /// Whether the wake-up hook was loaded (`attach --wake-latency`, or
    /// `--trace`): without it every process's `kernel.wake_latency_ns` is
    /// written as null, the measure not taken (docs/ledger.md). Absent in
    /// files written before the hook became optional (they measured it,
    /// and their summary had no line about it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_latency_measured: Option<bool>,
    /// Whether the interrupt programs were loaded (`attach --irq-time`):
    /// without them every process's `kernel.irq_ns` is written as null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq_time_measured: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WindowView {
    pub start_ns: u64,
    pub end_ns: u64,
    #[serde(default)]
    pub duration_ns: u64,
    #[serde(default)]
    pub clock: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LostView {
    pub kernel: KernelStats,
    /// Threads in the first image with no end (lost records).
    #[serde(default)]
    pub vanished_threads: u32,
    #[serde(default)]
    pub taskstats_listener_overflows: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcessView {
    pub pid: u32,
    /// Tells apart two processes given the same pid within the window (a
    /// later one has a larger key): the start of its main thread as the
    /// ledger keys it, CLOCK_MONOTONIC ns, or /proc starttime ticks for a
    /// process older than the probes. Absent when the main thread was not
    /// seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_key: Option<u64>,
    pub comm: String,
    /// Parent tgid when the ledger saw the fork.
    #[serde(default)]
    pub parent_pid: Option<u32>,
    #[serde(default)]
    pub exited: bool,
    #[serde(default)]
    pub threads: u32,
    pub kernel: LedgerMeasures,
    /// /proc counters over the window (None: the process was gone).
    #[serde(default)]
    pub proc: Option<ProcCounters>,
    #[serde(default)]
    pub taskstats: Option<TaskstatsCounters>,
    #[serde(default)]
    pub agreement: Vec<AgreementView>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OverallView {
    pub kernel: MachineView,
    /// /proc/stat over the window, all CPUs and per CPU.
    #[serde(default)]
    pub proc_stat: Option<CpuTicks>,
    #[serde(default)]
    pub proc_stat_per_cpu: Option<Vec<CpuLine>>,
    #[serde(default)]
    pub agreement: Vec<AgreementView>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MachineView {
    pub cpus: Vec<CpuView>,
    pub total: CpuTimes,
}

/// One CPU's busy / idle / iowait time from the ledger.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CpuView {
    pub cpu: u32,
    pub busy_ns: u64,
    pub idle_ns: u64,
    pub iowait_ns: u64,
}

/// One cross-check row (window/crosscheck.rs `Agreement`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgreementView {
    pub measure: String,
    pub ledger: u64,
    pub reference: String,
    pub kernel: u64,
    /// null in the file when the reference is 0 and the ledger is not.
    pub rel_diff: Option<f64>,
    pub tolerance: u64,
    /// The range the kernel's counter can have grown by between the
    /// ledger's own reads (docs/ledger.md, "Cross-check"); absent when the
    /// reference was compared as read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_low: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_high: Option<u64>,
    pub within: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub informational: Option<String>,
}

impl AgreementView {
    /// Outside tolerance and not informational.
    pub(crate) fn flagged(&self) -> bool {
        !self.within && self.informational.is_none()
    }
}

impl From<&Agreement> for AgreementView {
    fn from(a: &Agreement) -> Self {
        Self {
            measure: a.measure.into(),
            ledger: a.ledger,
            reference: a.reference.into(),
            kernel: a.kernel,
            // JSON has no infinity: serde_json writes a non-finite float as null.
            rel_diff: a.rel_diff.is_finite().then_some(a.rel_diff),
            tolerance: a.tolerance,
            kernel_low: a.kernel_low,
            kernel_high: a.kernel_high,
            within: a.within,
            informational: a.informational.map(String::from),
        }
    }
}
