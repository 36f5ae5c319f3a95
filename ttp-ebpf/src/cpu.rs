//! Per-CPU busy, idle and iowait time, the way the kernel computes
//! /proc/stat's idle and iowait: a CPU is idle inside its idle state
//! (`power:cpu_idle` entry to exit, see [`cpu_idle`]), and that idle time is
//! iowait while tasks that went to sleep on that CPU wait for I/O
//! (rq->nr_iowait > 0; kernel/sched/core.c and tick_nohz's
//! iowait_sleeptime). Each interval of such time is also split evenly among
//! those tasks (`share_cum_ns`), which gives every task its exact share of
//! the machine's iowait.
use core::intrinsics::{
    AtomicOrdering::SeqCst,
    {atomic_xadd, atomic_xsub},
};

use aya_ebpf::{
    btf_maps::Array,
    macros::{btf_map, btf_tracepoint, map},
    programs::BtfTracePointContext,
};
use ttp_common::{CpuAccount, MAX_CPUS, stat};

use crate::lock::{self, Guard};

/// Declared with BTF: the verifier finds the value's `bpf_spin_lock` there.
#[btf_map]
static CPUS: Array<CpuAccount, { MAX_CPUS as usize }> = Array::new();

pub struct LockedCpu {
    pub acct: *mut CpuAccount,
    _guard: Guard,
}

/// `state` of the cpu_idle tracepoint when the CPU leaves its idle state
/// (include/trace/events/power.h).
const PWR_EVENT_EXIT: u32 = u32::MAX;

/// cpu_idle(unsigned int state, unsigned int cpu_id): the CPU enters idle
/// state `state` (the cpuidle driver's state index; halt, poll) or, with
/// PWR_EVENT_EXIT, leaves it. Fired by the idle task on its own CPU around
/// the halt (`cpuidle_enter_state`, `default_idle_call`, `cpu_idle_poll`),
/// once per halt: every interrupt ends one.
///
/// The CPU's idle interval is this one, not the idle task's run between two
/// `sched_switch`es: the kernel's idle clock (tick_sched's
/// `idle_sleeptime`/`iowait_sleeptime`, /proc/stat) does not count the path
/// into and out of the idle loop (the switch, the tick's stop and restart —
/// VM exits here), which the switches booked as idle (9–12 µs an idle
/// entry under pgbench). A switch the tracepoint missed no longer leaves
/// the CPU's state wrong either: every halt is seen by its own events.
#[btf_tracepoint(function = "cpu_idle")]
pub fn cpu_idle(ctx: BtfTracePointContext) -> i32 {
    crate::count(stat::RUNS_CPU_IDLE);
    let state: u64 = ctx.arg(0);
    let cpu_id: u64 = ctx.arg(1);
    let now = crate::now_ns();
    let Some(acct) = find(cpu_id as u32) else {
        return 0;
    };
    book_own(acct, now, (state as u32 != PWR_EVENT_EXIT) as u32);
    publish(cpu_id as u32, acct);
    0
}

/// Books CPU `acct`'s account up to `now` and gives it idle state `idle`,
/// from an event of that CPU itself (its cpu_idle, its sched_switch).
///
/// Only the end of a wait counted on this CPU writes the account from
/// another CPU, and only while the wait is counted: with no task counted
/// (`nr_iowait` 0) none can, and only this CPU, which is here, raises the
/// count. The account is then booked without the lock. The count is read
/// by an atomic add of 0, a full barrier: what an end of a wait on another
/// CPU booked under the lock before its decrement is seen here. With a
/// task counted, the lock is taken (a plain read of the count decides
/// first, so that path pays no atomic add).
#[inline(always)]
pub fn book_own(acct: *mut CpuAccount, now: u64, idle: u32) {
    // SAFETY: map value pointer, valid for the program's run; an aligned
    // 64-bit load, then the atomic add that confirms a 0.
    let none = unsafe {
        core::ptr::read_volatile(&raw const (*acct).nr_iowait) == 0
            && atomic_xadd::<u64, u64, { SeqCst }>(&raw mut (*acct).nr_iowait, 0) == 0
    };
    if none {
        // SAFETY: as above; no other CPU writes the account (see above).
        let c = unsafe { &mut *acct };
        c.advance(now);
        c.idle = idle;
        return;
    }
    let c = lock_found(acct);
    c.settle(now);
    c.get().idle = idle;
}

/// CPU `cpu`'s account, not locked. Only CPU `cpu` writes its
/// `current_tid`, `switch_seen` and `last_switch_ns` (from its own
/// sched_switch, which does not nest), so it needs no lock for them; the
/// others are written under the lock, except by this CPU's own events when
/// no task is counted ([`book_own`]) and `nr_iowait`, which only changes by
/// atomic adds.
#[inline(always)]
pub fn find(cpu: u32) -> Option<*mut CpuAccount> {
    let acct = CPUS.get_ptr_mut(cpu);
    if acct.is_none() {
        crate::count(stat::CPU_OUT_OF_RANGE);
    }
    acct
}

/// Locks an account found by [`find`], waiting for it. Nothing is
/// booked: see [`LockedCpu::settle`].
#[inline(always)]
pub fn lock_found(acct: *mut CpuAccount) -> LockedCpu {
    // SAFETY: map value pointer, valid for the program's run.
    let guard = lock::lock(unsafe { &raw mut (*acct).lock });
    LockedCpu {
        acct,
        _guard: guard,
    }
}

impl LockedCpu {
    /// Books the account up to `now`: busy time, or, in the idle state,
    /// idle or iowait by the count of tasks in iowait that held since the
    /// last booking; the tasks' shares grow by that time over the count.
    /// Called at every event of the CPU itself and at every wake-up that
    /// lowers its count (from any CPU, under the lock), so the split follows
    /// the count as it changes. The kernel instead classifies a whole
    /// stretch by the count at its end (`tick_nohz_stop_idle`); a
    /// stretch-end rule was tried and left the tasks' shares short of the
    /// machine's iowait (5.6 against 9.4 ms in the two-reader test; cause
    /// not established), so the ledger keeps this one (docs/ledger.md).
    #[inline(always)]
    pub fn settle(&self, now: u64) {
        self.get().advance(now);
    }

    /// The account, writable: holding the guard is what makes the access
    /// exclusive, not the borrow of `self`.
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    pub fn get(&self) -> &mut CpuAccount {
        // SAFETY: held under the lock.
        unsafe { &mut *self.acct }
    }
}

/// One more task in iowait on the CPU, by the switch-out on that busy CPU
/// without its lock (the count is only read while the CPU is idle), so
/// atomic: the end of a wait may lower it from another CPU meanwhile.
#[inline(always)]
pub fn iowait_inc(c: &mut CpuAccount) {
    // SAFETY: map value pointer, valid for the program's run.
    unsafe { atomic_xadd::<u64, u64, { SeqCst }>(&raw mut c.nr_iowait, 1) };
}

/// One task fewer in iowait on the CPU: by the end of a wait, under the
/// CPU's lock, or without it at a switch of that CPU itself (see
/// `closing::KernelClocks`).
#[inline(always)]
pub fn iowait_dec(c: &mut CpuAccount) {
    dec(&raw mut c.nr_iowait);
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

/// (tasks in iowait) << 1 | idle of each CPU, as last published, for the
/// trace's sampler: a perf-event program may not use a map whose values
/// hold a `bpf_spin_lock` (the verifier: "tracing progs cannot use
/// bpf_spin_lock yet"), so it reads this copy.
#[map]
static CPU_PEEK: aya_ebpf::maps::Array<u64> = aya_ebpf::maps::Array::with_max_entries(MAX_CPUS, 0);

/// Copies CPU `cpu`'s count of tasks in iowait and its idle flag where the
/// sampler reads them ([`peek`]), after a change and outside the lock (no
/// call may run under it). Only while tracing: the verifier drops it
/// otherwise. Two CPUs publishing at once may leave the older value until
/// the next change: the sample is a counter for the trace's view, where a
/// value one update old is fine.
#[inline(always)]
pub fn publish(cpu: u32, acct: *const CpuAccount) {
    if !crate::config::trace_on() {
        return;
    }
    if let Some(slot) = CPU_PEEK.get_ptr_mut(cpu) {
        // SAFETY: map value pointers; plain reads and a store of aligned
        // words. A count above 2^63 is a decrement being undone (`dec`).
        unsafe {
            let n = core::ptr::read_volatile(&raw const (*acct).nr_iowait);
            let n = if n >= 1 << 63 {
                0
            } else {
                n.min(u32::MAX as u64)
            };
            let idle = core::ptr::read_volatile(&raw const (*acct).idle) as u64 & 1;
            *slot = (n << 1) | idle;
        }
    }
}

/// (tasks in iowait, idle) of CPU `cpu` as last published: a sample for
/// the trace's counters.
#[inline(always)]
pub fn peek(cpu: u32) -> Option<(u32, u32)> {
    let v = *CPU_PEEK.get(cpu)?;
    Some(((v >> 1) as u32, (v & 1) as u32))
}
