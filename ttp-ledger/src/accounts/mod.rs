//! Accounts: the ledger's thread accounts closed "as of" an instant, keyed
//! safely against pid reuse, and aggregated into processes.
//!
//! A thread's account holds closed intervals plus the open one (its state
//! since `state_since_ns`). [`close`] adds the open interval up to the
//! snapshot's instant, including the part of an open iowait interval that
//! is the CPU's iowait share and the process's own-I/O time, computed from
//! the same per-CPU and disk clocks the kernel programs use.
mod image;
mod measures;
mod rows;
mod running;

pub use image::{CpuTimes, Image, ProcessDelta, Window};
pub use measures::{IoMeasures, LedgerColumns, LedgerMeasures};
pub use running::{ClosedWindow, DEFAULT_KEEP_EXITED, ExitedGroup, ProcKey, RunningWindow};

use ttp_common::{
    CpuAccount, ThreadAccount,
    clocks::{Closing, WaitClocks},
};

use crate::probe::Snapshot;

/// A thread, told apart from a later thread that reuses its tid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadKey {
    pub tid: u32,
    pub start: u64,
}

impl ThreadKey {
    pub fn of(a: &ThreadAccount) -> Self {
        Self {
            tid: a.tid,
            start: a.start_time_ns,
        }
    }
}

/// The per-CPU and disk clocks of a snapshot, brought up to an instant
/// on copies by the rule the kernel programs use (ttp_common::clocks).
struct SnapshotClocks<'a>(&'a Snapshot);

impl WaitClocks for SnapshotClocks<'_> {
    fn end_iowait_share(&mut self, cpu: u32, now: u64) -> Option<u64> {
        let (_, c) = self.0.cpus.iter().find(|(id, _)| *id == cpu)?;
        let mut c = *c;
        c.advance(now);
        Some(c.share_cum_ns)
    }

    fn own_clock(&mut self, tgid: u32, now: u64) -> Option<u64> {
        let mut d = self.0.disk;
        d.advance(now);
        Some(
            self.0
                .proc_disk
                .get(&tgid)
                .map_or(0, |p| p.own_at(d.g_cum_ns)),
        )
    }
}

/// `a` with its open interval closed at the snapshot's instant, by the
/// kernel programs' rule (ttp_common::clocks). A snapshot already took a
/// running thread's kernel runtime as of its instant (probe::read), so
/// the clock adds nothing there; an account built by hand closes by the
/// clock. The open run-queue wait is not in the kernel's run_delay until
/// the switch-in ends it: as of now it shows only as wake latency.
pub fn close(a: &ThreadAccount, snap: &Snapshot) -> ThreadAccount {
    let mut c = *a;
    let how = Closing {
        on_cpu_by_clock: true,
        runq_by_clock: false,
    };
    c.close_interval(snap.at_ns, how, &mut SnapshotClocks(snap));
    c
}

/// One CPU's busy / idle / iowait closed at `now`.
pub fn close_cpu(c: &CpuAccount, now: u64) -> CpuTimes {
    let mut c = *c;
    if c.valid != 0 {
        c.advance(now);
    }
    CpuTimes {
        busy_ns: c.busy_ns,
        idle_ns: c.idle_ns,
        iowait_ns: c.iowait_ns,
    }
}

/// The comm bytes of an account as text.
pub fn comm(a: &ThreadAccount) -> String {
    let end = a.comm.iter().position(|&b| b == 0).unwrap_or(a.comm.len());
    String::from_utf8_lossy(&a.comm[..end]).into_owned()
}

#[cfg(test)]
mod tests;
