//! Per-CPU busy, idle and iowait time, the way the kernel computes
//! /proc/stat's iowait: idle time on a CPU while tasks that went to sleep on
//! that CPU wait for I/O (rq->nr_iowait > 0; kernel/sched/core.c and
//! tick_nohz's iowait_sleeptime). Each interval of such time is also split
//! evenly among those tasks (`share_cum_ns`), which gives every task its exact
//! share of the machine's iowait.
use aya_ebpf::{macros::map, maps::Array};
use ttp_common::{CpuAccount, MAX_CPUS, stat};

use crate::lock::{self, Guard};

#[map]
static CPUS: Array<CpuAccount> = Array::with_max_entries(MAX_CPUS, 0);

pub struct LockedCpu {
    pub cpu: u32,
    pub acct: *mut CpuAccount,
    _guard: Guard,
}

/// Locks CPU `cpu`'s account and brings it up to `now`.
#[inline(always)]
pub fn lock_at(cpu: u32, now: u64) -> Option<LockedCpu> {
    let Some(acct) = CPUS.get_ptr_mut(cpu) else {
        crate::count(stat::CPU_OUT_OF_RANGE);
        return None;
    };
    // SAFETY: map value pointer, valid for the program's run.
    let guard = lock::try_lock(unsafe { &raw mut (*acct).lock })?;
    let c = unsafe { &mut *acct };
    if c.valid != 0 && now > c.since_ns {
        let dt = now - c.since_ns;
        if c.idle == 0 {
            c.busy_ns += dt;
        } else if c.nr_iowait > 0 {
            c.iowait_ns += dt;
            c.share_cum_ns += dt / c.nr_iowait as u64;
        } else {
            c.idle_ns += dt;
        }
    }
    if now > c.since_ns {
        c.since_ns = now;
    }
    Some(LockedCpu {
        cpu,
        acct,
        _guard: guard,
    })
}

impl LockedCpu {
    /// The account, writable: holding the guard is what makes the access
    /// exclusive, not the borrow of `self`.
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    pub fn get(&self) -> &mut CpuAccount {
        // SAFETY: held under the lock.
        unsafe { &mut *self.acct }
    }
}

/// (tasks in iowait, idle) of CPU `cpu`, read without the lock: a sample
/// for the trace's counters, where a value one update old is fine.
#[inline(always)]
pub fn peek(cpu: u32) -> Option<(u32, u32)> {
    let c = CPUS.get_ptr(cpu)?;
    // SAFETY: map value pointer; plain reads of two u32s.
    unsafe { Some(((*c).nr_iowait, (*c).idle)) }
}
