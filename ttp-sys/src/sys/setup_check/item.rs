//! One check's verdict ([`CheckItem`]: its status, what was found, the
//! remedy, a fix that applies it) and what the checks read beyond files
//! ([`Probes`]): the types the check files share.
use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pass,
    Warn,
    Fail,
}

/// A change `--fix` can make. Each persists until reboot (or until changed
/// back by hand); `--fix` does not restore them, that is its purpose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fix {
    /// `mount -t tracefs nodev /sys/kernel/tracing`.
    MountTracefs,
    /// `sysctl -w kernel.task_delayacct=1`.
    EnableDelayAccounting,
    /// Write `performance` to these CPUs' scaling_governor.
    GovernorPerformance { cpus: Vec<u32> },
    /// Write `value` to `path` (intel_pstate/no_turbo = 1, cpufreq/boost = 0).
    DisableTurbo { path: String, value: String },
}

impl Fix {
    pub fn describe(&self) -> String {
        match self {
            Fix::MountTracefs => "mount tracefs on /sys/kernel/tracing".into(),
            Fix::EnableDelayAccounting => "set kernel.task_delayacct = 1 (until reboot)".into(),
            Fix::GovernorPerformance { cpus } => {
                format!("set the cpufreq governor of CPUs {cpus:?} to performance (until reboot)")
            }
            Fix::DisableTurbo { path, value } => {
                format!("write {value} to {path} (turbo off until reboot)")
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckItem {
    /// Stable identifier (`kernel`, `btf`, `tracefs`, …).
    pub id: String,
    pub title: String,
    /// The protocol step that asks for it.
    pub source: String,
    pub status: Status,
    /// What was found.
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedy: Option<String>,
    /// What `--fix` would do for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fix>,
}

impl CheckItem {
    pub(super) fn new(
        id: &str,
        title: &str,
        source: &str,
        status: Status,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            title: title.into(),
            source: source.into(),
            status,
            detail: detail.into(),
            remedy: None,
            fix: None,
        }
    }

    pub(super) fn remedy(mut self, r: impl Into<String>) -> Self {
        self.remedy = Some(r.into());
        self
    }

    pub(super) fn fix(mut self, f: Fix) -> Self {
        self.fix = Some(f);
        self
    }
}

/// The clock discipline state from adjtimex(2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockState {
    /// adjtimex's return value (TIME_OK = 0 … TIME_ERROR = 5).
    pub state: i32,
    /// `timex.status` bits (STA_UNSYNC = 0x40).
    pub status: i32,
    pub maxerror_us: i64,
    pub esterror_us: i64,
}

/// What the checks need beyond files.
pub trait Probes {
    fn adjtimex(&self) -> Option<ClockState>;
    /// The generic netlink family id of TASKSTATS, or why not.
    fn taskstats_family(&self) -> Result<u16, String>;
    /// Output of systemd-detect-virt; `None` when the tool is absent.
    fn detect_virt(&self) -> Option<String>;
    /// sysconf(_SC_CLK_TCK).
    fn user_hz(&self) -> Option<u64>;
    /// Waits out the sampling window; returns how long it really was.
    fn pause(&self, d: Duration) -> Duration;
    /// This process, left out of the busy-process list.
    fn own_pid(&self) -> u32;
    /// Whether the kernel accepts BPF_ENABLE_STATS (the probes' own cost),
    /// or why not.
    fn bpf_stats(&self) -> Result<(), String>;
}
