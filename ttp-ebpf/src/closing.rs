//! A thread's open interval closed at the kernel's events, by the rule
//! shared with userspace (ttp_common::clocks), over the per-CPU clocks
//! (cpu.rs) and the disk's own-I/O clock (block.rs) as the programs hold
//! them.
use ttp_common::{
    ThreadAccount,
    clocks::{Closing, WaitClocks},
};

use crate::{block, cpu};

/// Closes the open interval of `a` at `now` by the shared rule
/// (ttp_common::clocks, which userspace uses to close an image). A running
/// interval adds nothing: on-CPU time is the kernel's runtime, taken at the
/// switches (sched.rs). Ending an iowait interval reads its share of the
/// CPU's iowait under the lock of the CPU the wait was counted on, and
/// drops that CPU's count (no caller holds a lock: a program holds one at
/// a time, lock.rs).
#[inline(always)]
pub fn close_interval(a: &mut ThreadAccount, now: u64) {
    close(a, now, None);
}

/// [`close_interval`] from `sched_switch` on CPU `cpu`, once that CPU's
/// account is out of its idle state: a wait counted on this CPU ends
/// without its lock (`KernelClocks`).
#[inline(always)]
pub fn close_interval_at_switch(a: &mut ThreadAccount, now: u64, cpu: u32) {
    close(a, now, Some(cpu));
}

#[inline(always)]
fn close(a: &mut ThreadAccount, now: u64, switching_cpu: Option<u32>) {
    let how = Closing {
        on_cpu_by_clock: false,
        // No CONFIG_SCHED_INFO: the wall-clock wait stands in for
        // run_delay (docs/ledger.md).
        runq_by_clock: !crate::kernel::have_run_delay(),
    };
    a.close_interval(now, how, &mut KernelClocks { switching_cpu });
}

/// The per-CPU and disk clocks as the programs hold them.
struct KernelClocks {
    /// The CPU whose `sched_switch` closes the interval, if any.
    switching_cpu: Option<u32>,
}

impl WaitClocks for KernelClocks {
    #[inline(always)]
    fn end_iowait_share(&mut self, cpu: u32, now: u64) -> Option<u64> {
        let acct = cpu::find(cpu)?;
        if self.switching_cpu == Some(cpu) {
            // The wait was counted on the CPU that is switching: that CPU
            // is busy (sched_switch left its idle state first), so its share
            // clock stands still and booking it up to `now` would only move
            // busy time between two of its bookings (the same sum). Only
            // the count drops, by an atomic add as every change of it; the
            // clock is read without the lock, since another CPU's end of a
            // wait books it only while it is idle (settle) and only this
            // CPU leaves or enters that state.
            // SAFETY: map value pointer, valid for the program's run.
            let c = unsafe { &mut *acct };
            cpu::iowait_dec(c);
            // SAFETY: an aligned 64-bit load of a field of `c`.
            let share = unsafe { core::ptr::read_volatile(&raw const c.share_cum_ns) };
            cpu::publish(cpu, acct);
            return Some(share);
        }
        // The CPU's time up to now is booked with the count that held
        // until now (cpu.rs `settle`), then the count drops.
        let share = {
            let c = cpu::lock_found(acct);
            c.settle(now);
            let c = c.get();
            cpu::iowait_dec(c);
            c.share_cum_ns
        };
        cpu::publish(cpu, acct);
        Some(share)
    }

    #[inline(always)]
    fn own_clock(&mut self, tgid: u32, now: u64) -> Option<u64> {
        block::own_clock(tgid, now)
    }
}
