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
mod item;
mod kernel;
pub mod live;
mod procs;
pub mod read;
mod virt;

use std::{path::PathBuf, time::Duration};

use serde::{Deserialize, Serialize};

pub use item::{CheckItem, ClockState, Fix, Probes, Status};

pub const SCHEMA: &str = "ttp.check/1";

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
    items.push(virt::page_reporting(&r));
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
