//! `ttp-ebpf check`: the set-up steps of EMPv1–v4 (paper 001, Sec. 4.1–4.4,
//! Fig. 8 Step 1) and TTPv2 Step 0 (paper 000, Sec. 8.1 (3)), each judged
//! pass / warn / fail with its remedy. Nothing is changed unless fixes are
//! applied explicitly ([`fix::apply`]).
//!
//! Every reader takes a root path so the checks run on fixture trees; what
//! cannot be read from files (adjtimex, the taskstats netlink family,
//! systemd-detect-virt, USER_HZ, the sampling pause) goes through
//! [`Probes`], which tests replace.
mod clock;
mod cpu;
pub mod fix;
mod kernel;
pub mod live;
mod procs;
pub mod read;
mod virt;

use std::{path::PathBuf, time::Duration};

use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "ttp.check/1";

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
    fn new(id: &str, title: &str, source: &str, status: Status, detail: impl Into<String>) -> Self {
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

    fn remedy(mut self, r: impl Into<String>) -> Self {
        self.remedy = Some(r.into());
        self
    }

    fn fix(mut self, f: Fix) -> Self {
        self.fix = Some(f);
        self
    }
}

/// The outcome of one applied fix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FixOutcome {
    pub item: String,
    pub action: String,
    /// `None` on success, else the error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    pub schema: String,
    pub root: PathBuf,
    /// Length of the window CPU use and steal time were sampled over, in ms.
    pub sample_ms: u64,
    pub items: Vec<CheckItem>,
    /// Fixes applied before these items were (re)checked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fixes: Vec<FixOutcome>,
    /// Settings a ttp instance changed and did not restore (it was killed),
    /// found before the checks ran, and what was done about each.
    #[serde(default)]
    pub leftovers: Vec<super::run_state::Leftover>,
}

impl CheckReport {
    pub fn count(&self, s: Status) -> usize {
        self.items.iter().filter(|i| i.status == s).count()
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

/// Runs every check against `root`. CPU use and steal time are sampled
/// over `sample` (about 1 s).
pub fn run_checks(root: PathBuf, probes: &dyn Probes, sample: Duration) -> CheckReport {
    let r = read::Root(root.clone());
    let release = r.line("proc/sys/kernel/osrelease");
    let kconfig = r.kernel_config(release.as_deref());

    // One sampling window for steal time and per-process CPU.
    let window = procs::sample(&r, probes, sample);

    let mut items = vec![
        kernel::release(release.as_deref()),
        kernel::btf(&r),
        kernel::tracefs(&r),
        kernel::taskstats(probes, kconfig.as_ref().map(|k| &k.1)),
        kernel::delay_accounting(&r, release.as_deref(), kconfig.as_ref().map(|k| &k.1)),
        kernel::hz(probes, kconfig.as_ref()),
        kernel::bpf_stats(&r, probes),
    ];
    items.extend(cpu::items(&r));
    items.push(clock::sync(probes, &window.after));
    items.push(virt::virtualization(&r, probes));
    items.push(virt::steal(&window));
    items.push(procs::daemons(&window.after));
    items.push(procs::busy(&window, probes));
    CheckReport {
        schema: SCHEMA.to_string(),
        root,
        sample_ms: window.elapsed.as_millis() as u64,
        items,
        fixes: Vec::new(),
        leftovers: Vec::new(),
    }
}

#[cfg(test)]
mod tests;
