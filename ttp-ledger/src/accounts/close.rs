//! A thread's account and a CPU's times closed "as of" a snapshot's
//! instant, by the rule the kernel programs use (ttp_common::clocks).
use serde::{Deserialize, Serialize};
use ttp_common::{
    CpuAccount, ThreadAccount,
    clocks::{Closing, WaitClocks},
};

use crate::probe::Snapshot;

/// One CPU's time, as /proc/stat splits it: busy (not idle), idle, and
/// iowait (idle while tasks that slept on it wait for block I/O).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTimes {
    pub busy_ns: u64,
    pub idle_ns: u64,
    pub iowait_ns: u64,
}

impl CpuTimes {
    pub fn since(&self, e: &Self) -> Self {
        Self {
            busy_ns: self.busy_ns.saturating_sub(e.busy_ns),
            idle_ns: self.idle_ns.saturating_sub(e.idle_ns),
            iowait_ns: self.iowait_ns.saturating_sub(e.iowait_ns),
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
