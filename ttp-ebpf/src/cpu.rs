//! Per-CPU busy, idle and iowait time, the way the kernel computes
//! /proc/stat's iowait: idle time on a CPU while tasks that went to sleep on
//! that CPU wait for I/O (rq->nr_iowait > 0; kernel/sched/core.c and
//! tick_nohz's iowait_sleeptime). Each interval of such time is also split
//! evenly among those tasks (`share_cum_ns`), which gives every task its exact
//! share of the machine's iowait.
use core::intrinsics::{
    AtomicOrdering::SeqCst,
    {atomic_xadd, atomic_xsub},
};

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
        } else {
            // Read once: a contended wakeup may change it without the lock.
            // SAFETY: map value pointer.
            let n = unsafe { core::ptr::read_volatile(&raw const c.nr_iowait) };
            if n > 0 && n < 1 << 63 {
                c.iowait_ns += dt;
                c.share_cum_ns += dt / n as u64;
            } else {
                c.idle_ns += dt;
            }
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

/// One more task in iowait on the CPU (caller holds its lock). Atomic:
/// [`iowait_dec_unlocked`] may change the count without the lock.
#[inline(always)]
pub fn iowait_inc(c: &mut CpuAccount) {
    // SAFETY: map value pointer, valid for the program's run.
    unsafe { atomic_xadd::<u64, u64, { SeqCst }>(&raw mut c.nr_iowait, 1) };
}

/// One task fewer in iowait on the CPU (caller holds its lock).
#[inline(always)]
pub fn iowait_dec(c: &mut CpuAccount) {
    dec(&raw mut c.nr_iowait);
}

/// One task fewer in iowait on CPU `cpu`, without its lock (the lock stayed
/// contended): the count never leaks, whatever else is skipped.
#[inline(always)]
pub fn iowait_dec_unlocked(cpu: u32) {
    if let Some(c) = CPUS.get_ptr_mut(cpu) {
        // SAFETY: map value pointer, valid for the program's run.
        dec(unsafe { &raw mut (*c).nr_iowait });
    }
}

#[inline(always)]
fn dec(n: *mut u64) {
    // SAFETY: `n` points into a map value. Never left below 0 (a wrapped
    // count would make every idle moment iowait): a decrement that found 0
    // is undone.
    unsafe {
        if atomic_xsub::<u64, u64, { SeqCst }>(n, 1) == 0 {
            atomic_xadd::<u64, u64, { SeqCst }>(n, 1);
        }
    }
}

/// (tasks in iowait, idle) of CPU `cpu`, read without the lock: a sample
/// for the trace's counters, where a value one update old is fine.
#[inline(always)]
pub fn peek(cpu: u32) -> Option<(u32, u32)> {
    let c = CPUS.get_ptr(cpu)?;
    // SAFETY: map value pointer; plain reads of two u32s.
    unsafe { Some(((*c).nr_iowait as u32, (*c).idle)) }
}
