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
pub use running::{
    ClosedWindow, DEFAULT_KEEP_EXITED, ExitedGroup, MAX_GROUPS, OTHER_COMMS, ProcKey, RunningWindow,
};

use ttp_common::{CpuAccount, ThreadAccount, flag, state};

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

/// The per-task iowait share clock of `cpu` at `now` (see
/// `CpuAccount::share_cum_ns`).
fn share_clock(c: &CpuAccount, now: u64) -> u64 {
    let dt = now.saturating_sub(c.since_ns);
    if c.valid != 0 && c.idle != 0 && c.nr_iowait > 0 {
        c.share_cum_ns + dt / c.nr_iowait
    } else {
        c.share_cum_ns
    }
}

/// Process `tgid`'s own-I/O clock at `now` (see `DiskAccount`).
fn own_clock(snap: &Snapshot, tgid: u32, now: u64) -> u64 {
    let d = &snap.disk;
    let g_now = if d.busy_procs > 0 {
        d.g_cum_ns + now.saturating_sub(d.last_ns) / d.busy_procs as u64
    } else {
        d.g_cum_ns
    };
    match snap.proc_disk.get(&tgid) {
        Some(p) if p.inflight > 0 => p.own_cum_ns + g_now.saturating_sub(p.g_snap_ns),
        Some(p) => p.own_cum_ns,
        None => 0,
    }
}

/// `a` with its open interval closed at the snapshot's instant.
pub fn close(a: &ThreadAccount, snap: &Snapshot) -> ThreadAccount {
    let now = snap.at_ns;
    let mut c = *a;
    let dt = now.saturating_sub(a.state_since_ns);
    match a.state {
        // A snapshot already took a running thread's kernel runtime as of
        // its instant (probe::read); constructed accounts close by the clock.
        state::RUNNING => c.on_cpu_ns += dt,
        // The open wait is not in the kernel's run_delay until the switch-in
        // ends it: as of now it shows only as wake latency.
        state::RUNNABLE => c.wake_latency_ns += dt,
        state::SLEEPING => c.sleep_ns += dt,
        state::BLOCKED => c.blocked_ns += dt,
        state::IOWAIT => {
            c.iowait_ns += dt;
            if a.flags & flag::IOWAIT_COUNTED != 0 {
                if let Some((_, cpu)) = snap.cpus.iter().find(|(id, _)| *id == a.iowait_cpu) {
                    c.iowait_share_ns += share_clock(cpu, now).saturating_sub(a.share_snap);
                }
                if a.flags & flag::OWN_UNKNOWN == 0 {
                    c.iowait_own_ns += own_clock(snap, a.tgid, now).saturating_sub(a.own_snap);
                }
            }
        }
        _ => {}
    }
    c.state_since_ns = now;
    c
}

/// One CPU's busy / idle / iowait closed at `now`.
pub fn close_cpu(c: &CpuAccount, now: u64) -> CpuTimes {
    let mut t = CpuTimes {
        busy_ns: c.busy_ns,
        idle_ns: c.idle_ns,
        iowait_ns: c.iowait_ns,
    };
    if c.valid != 0 {
        let dt = now.saturating_sub(c.since_ns);
        if c.idle == 0 {
            t.busy_ns += dt;
        } else if c.nr_iowait > 0 {
            t.iowait_ns += dt;
        } else {
            t.idle_ns += dt;
        }
    }
    t
}

/// The comm bytes of an account as text.
pub fn comm(a: &ThreadAccount) -> String {
    let end = a.comm.iter().position(|&b| b == 0).unwrap_or(a.comm.len());
    String::from_utf8_lossy(&a.comm[..end]).into_owned()
}

#[cfg(test)]
mod tests;
