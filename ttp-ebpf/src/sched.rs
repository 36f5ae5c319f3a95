//! Scheduler tracepoints (tp_btf): every thread's on-CPU, run-queue wait,
//! sleep, blocked and iowait time, its switches and wakeups.
//!
//! On-CPU time and run-queue wait are the scheduler's own counters
//! (`se.sum_exec_runtime`, `sched_info.run_delay`), read at the switches
//! and taken by one rule (`ThreadAccount::take_sched_counters`,
//! ttp_common::clocks), so a switch the tracepoint missed cannot add or
//! lose time. The wall-clock
//! states: a sleep (S), a block (D) or an iowait (D with `in_iowait`: delay
//! accounting's blkio delay, TTPv2's BlockIO) runs from the switch-out to
//! the wake-up. By default no program runs at wake-ups: the switch-in that
//! follows ends the sleep, back-dated to the wake-up by the kernel's own
//! counters (`wake_instant`). `sched_wakeup` is loaded only where a measure
//! needs the wake-up itself (`--wake-latency`, trace): then the wake
//! latency, wall clock from a wakeup or a preemption to the switch-in, is
//! measured. A switch is voluntary when the task blocks (nvcsw),
//! involuntary when it is preempted or yields while runnable (nivcsw).
use aya_ebpf::{macros::btf_tracepoint, programs::BtfTracePointContext};
use ttp_common::{ClockOffset, ThreadAccount, flag, stat, state};

use crate::{
    block,
    closing::{close_interval, close_interval_at_switch},
    cpu, detail, irq,
    kernel::{
        BtfTask, TASK_DEAD, TASK_INTERRUPTIBLE, TASK_NOLOAD, TASK_RUNNING, TASK_UNINTERRUPTIBLE,
        Task, wake_hook,
    },
    ledger, now_ns, trace,
};

/// sched_switch(bool preempt, struct task_struct *prev,
///              struct task_struct *next, unsigned int prev_state)
#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch(ctx: BtfTracePointContext) -> i32 {
    let preempt: u64 = ctx.arg(0);
    let prev = BtfTask(ctx.arg::<*const u8>(1));
    let next = BtfTask(ctx.arg::<*const u8>(2));
    let prev_state: u64 = ctx.arg(3);
    let prev_state = prev_state as u32;
    let now = now_ns();
    // SAFETY: helper without arguments.
    let cpu_id = unsafe { aya_ebpf::helpers::bpf_get_smp_processor_id() };
    crate::count(stat::SWITCHES);

    let (Ok(prev_tid), Ok(next_tid)) = (prev.pid(), next.pid()) else {
        crate::count(stat::READ_FAILED);
        return 0;
    };
    // One lookup of the CPU's account. The common path takes no lock: the
    // CPU is busy at a switch, so booking its busy time can wait for the
    // next event that changes its state (cpu_idle entry) or for the reader,
    // which closes the open interval (accounts::close_cpu); the fields only
    // this CPU writes need no lock (cpu.rs `find`). The lock is taken only
    // where the account's shared state must change here: the CPU is still
    // marked idle (an idle exit the tracepoint missed: a switch is never
    // inside the idle state), or the account is new.
    // After this the CPU's state is busy, so that a task going to sleep in
    // iowait can be counted and its share clock read without the lock
    // (the share clock only moves while the CPU is idle).
    let acct = cpu::find(cpu_id);
    if let Some(p) = acct {
        // SAFETY: map value pointer, valid for the program's run; `idle` is
        // written only by this CPU (cpu_idle, this switch: cpu.rs
        // `book_own`).
        if unsafe { (*p).idle != 0 || (*p).valid == 0 } {
            cpu::book_own(p, now, 0);
            cpu::publish(cpu_id, p);
        }
        // SAFETY: as above; the lock, if taken, is released.
        let c = unsafe { &*p };
        // Some switches may never reach the tracepoint (seen on VMs): a
        // task leaving this CPU that is not the one last seen arriving is
        // counted, so reports show how often the ledger's view of a CPU had
        // a gap.
        if c.switch_seen != 0 && c.current_tid != prev_tid {
            crate::count(stat::UNREPORTED_SWITCH);
            detail::unreported_switch(cpu_id, c, prev_tid);
        }
    }

    // The idle task is pid 0 on every CPU: it has no account; its time is
    // the CPU's idle time.
    if prev_tid != 0
        && let Some(a) = ledger::get_or_create(prev_tid, &prev.task(), now, 0)
    {
        detail::switched_out(a, cpu_id, now);
        let ran = take_counters_at_switch_out(a, &prev, cpu_id, now);
        irq::switched_out(a, cpu_id, now, ran);
        close_interval_at_switch(a, now, cpu_id);
        if prev_state & TASK_DEAD != 0 {
            trace::exited(a, &prev.task(), cpu_id, now);
            if prev_tid == a.tgid {
                block::process_gone(a.tgid);
            }
            ledger::retire(prev_tid, a, now);
        } else {
            if preempt & 1 != 0 || prev_state == TASK_RUNNING {
                a.state = state::RUNNABLE;
                a.involuntary_switches += 1;
            } else {
                a.voluntary_switches += 1;
                if prev.in_iowait().unwrap_or(false) {
                    a.state = state::IOWAIT;
                    // Where the wait will end, by delay accounting (see
                    // `wake_instant`). Only a wait delay accounting
                    // records from here: `delayacct_blkio_start` ran in
                    // this `__schedule`, after its rq clock update. A task
                    // whose dequeue the scheduler deferred (EEVDF's
                    // DELAY_DEQUEUE) has its start recorded later, in the
                    // context of another task, so its own start is stale
                    // (older than the rq clock) and the wait is placed by
                    // the rq clock instead.
                    a.flags &= !flag::BLKIO_SNAP;
                    if let (Some((start, d)), Some(clock)) = (prev.blkio(), prev.rq_clock())
                        && start >= clock
                    {
                        a.blkio_snap_lo = d as u32;
                        a.flags |= flag::BLKIO_SNAP;
                    }
                    if let Some(p) = acct {
                        // SAFETY: map value pointer; busy, see `acct` above.
                        let c = unsafe { &mut *p };
                        cpu::iowait_inc(c);
                        cpu::publish(cpu_id, p);
                        a.iowait_cpu = cpu_id;
                        // SAFETY: an aligned 64-bit load; written only by
                        // settle while the CPU is idle, which it is not.
                        a.share_snap =
                            unsafe { core::ptr::read_volatile(&raw const c.share_cum_ns) };
                        match block::own_clock(a.tgid, now) {
                            Some(own) => {
                                a.own_snap = own;
                                a.flags &= !flag::OWN_UNKNOWN;
                            }
                            // Never 0 as a stand-in: that would credit the
                            // process's whole own-I/O history at wakeup.
                            None => a.flags |= flag::OWN_UNKNOWN,
                        }
                        a.flags |= flag::IOWAIT_COUNTED;
                    }
                } else if prev_state & TASK_UNINTERRUPTIBLE != 0 && prev_state & TASK_NOLOAD == 0 {
                    a.state = state::BLOCKED;
                } else {
                    // TASK_INTERRUPTIBLE, TASK_IDLE (D | NOLOAD: idle kernel
                    // threads, not counted in the load average), stopped, traced.
                    let _ = TASK_INTERRUPTIBLE;
                    a.state = state::SLEEPING;
                }
            }
            trace::switch_out(a, cpu_id, now, preempt & 1 != 0, prev_state, next_tid);
        }
    }

    if next_tid != 0
        && let Some(a) = ledger::get_or_create(next_tid, &next.task(), now, 0)
    {
        match a.state {
            state::RUNNING => recover_unseen_switch_out(a, &next),
            state::SLEEPING | state::BLOCKED | state::IOWAIT => {
                // SAFETY: map value pointer; `clock_off` is written only by
                // this CPU's sched_switch.
                let off = acct.map(|p| unsafe { &mut (*p).clock_off });
                end_sleep_at_switch_in(a, &next, cpu_id, now, off)
            }
            _ => {}
        }
        // After the sleep ended at its wake-up: the blame detail charges
        // the wait for the CPU from there (runnable since `woke`).
        detail::switched_in(a, cpu_id, now);
        close_interval_at_switch(a, now, cpu_id);
        a.state = state::RUNNING;
        a.run_cpu = cpu_id;
        irq::switched_in(a);
        trace::switch_in(a, cpu_id, now, prev_tid);
    }

    if let Some(p) = acct {
        // SAFETY: map value pointer; fields only this CPU writes.
        let c = unsafe { &mut *p };
        c.switch_seen = 1;
        c.current_tid = next_tid;
        c.last_switch_ns = now;
    }
    0
}

/// At a switch-out, the thread takes the scheduler's own counters
/// (`ThreadAccount::take_sched_counters`, ttp_common::clocks). The tracepoint
/// runs after `update_curr()` charged the ending run (put_prev_task /
/// dequeue in `__schedule`), and every earlier wait was added to
/// `run_delay` at the switch-in that ended it (`sched_info_arrive`, in
/// `prepare_task_switch`, after this tracepoint): both are complete here,
/// whatever switches of this thread the tracepoint missed.
///
/// A thread the ledger does not have on a CPU had its switch-in missed
/// (seen on these VMs): the runtime since the last read is how long it ran,
/// so the open interval up to `now − ran` stays in its state (a CPU-bound
/// run would otherwise be booked entirely as waiting); the caller closes the
/// rest as on-CPU.
///
/// Returns the runtime the run that ends gained, where the ledger saw it
/// begin and the counters had a base (the interrupt time of the run is
/// never more: irq.rs `switched_out`).
#[inline(always)]
fn take_counters_at_switch_out(
    a: &mut ThreadAccount,
    task: &BtfTask,
    cpu_id: u32,
    now: u64,
) -> Option<u64> {
    let Ok(exec) = task.sum_exec_runtime() else {
        crate::count(stat::READ_FAILED);
        return None;
    };
    let ran = a.take_sched_counters(exec, task.run_delay());
    if a.state == state::RUNNING {
        return ran;
    }
    if let Some(ran) = ran
        && a.state != state::UNKNOWN
        && ran > 0
    {
        let ran = ran.min(now.saturating_sub(a.state_since_ns));
        close_interval_at_switch(a, now - ran, cpu_id);
        a.state = state::RUNNING;
        // The trace gets the switch-in the tracepoint missed, at the
        // latest time it can have happened.
        trace::switch_in(a, cpu_id, now - ran, 0);
        crate::count(stat::SWITCH_UNSEEN);
    }
    None
}

/// A thread switching in that the ledger still has on a CPU: its last
/// switch-out never reached the tracepoint. Its runtime and run-queue wait
/// since the last read are taken now (`take_sched_counters`; the runtime
/// is stable while it is off the CPU); the rest of the open interval (off the CPU, but waiting or
/// sleeping is unknown) is left unattributed rather than guessed.
#[inline(always)]
fn recover_unseen_switch_out(a: &mut ThreadAccount, task: &BtfTask) {
    crate::count(stat::SWITCH_UNSEEN);
    let Ok(exec) = task.sum_exec_runtime() else {
        return;
    };
    a.take_sched_counters(exec, task.run_delay());
    // Closed as nothing: the caller's close_interval of a RUNNING account
    // adds no time.
}

/// A thread switched in from a sleep: without the wake-up hook (the
/// default), this is where its sleep, blocked or iowait interval ends,
/// back-dated to the wake-up by the kernel's own clocks (`wake_instant`);
/// the rest, up to now, is its wait for the CPU. With the hook loaded, a
/// sleeping thread here is one whose wake-up the hook never saw (woken
/// before the probes attached, or an event lost): counted, and its wait
/// closed at the switch-in, so that `wake_latency_ns` holds only wall
/// clock from seen wake-ups.
#[inline(always)]
fn end_sleep_at_switch_in(
    a: &mut ThreadAccount,
    task: &BtfTask,
    cpu_id: u32,
    now: u64,
    clock_off: Option<&mut ClockOffset>,
) {
    if wake_hook() {
        crate::count(stat::WAKEUP_UNSEEN);
        return;
    }
    // Seeded from /proc as D at attach: in_iowait is still set here
    // (io_schedule_finish runs after the task resumes).
    if a.state == state::BLOCKED && a.flags & flag::SEEDED != 0 && task.in_iowait().unwrap_or(false)
    {
        a.state = state::IOWAIT;
    }
    let woke = wake_instant(a, task, now, clock_off);
    close_interval_at_switch(a, woke, cpu_id);
    a.wakeups += 1;
    a.state = state::RUNNABLE;
}

/// When the sleep of a thread being switched in ended, from the kernel's
/// counters, never later than `now` nor earlier than the sleep began:
/// - iowait, with delay accounting on: `delays->blkio_delay` grew by
///   exactly the wait that ended (`delayacct_blkio_end` at the wake-up,
///   local_clock since the switch-out), so the wait ended at its
///   start + that growth. The snapshot keeps 32 bits, so the growth is
///   known modulo 2^32 ns (4.3 s): the largest value that still fits in
///   the interval is taken, exact unless the thread then waited 4.3 s or
///   more for a CPU.
/// - otherwise (sleep, blocked, iowait without delay accounting): the
///   wait for the CPU this switch-in ends is `rq->clock − last_queued`
///   (what `sched_info_arrive` will add to run_delay right after the
///   tracepoint, both in the rq clock), so the wake-up was that long ago;
///   it is also a sample of the CPU's offset between this clock and the
///   rq clock (`ClockOffset`).
/// - when the wake-up preempted the CPU's current task (idle or not),
///   `wakeup_preempt` had the kernel skip `__schedule`'s clock update
///   (RQCF_ACT_SKIP): the rq clock is still the enqueue's, equal to
///   `last_queued`, and says nothing of the time since. The enqueue's
///   instant in this clock is then `last_queued` + the offset: never
///   early, late by the kept sample's distance from an update of the rq
///   clock (sub-microsecond where the last second had a switch-in whose
///   clock `__schedule` updated) and the clocks' drift since
///   (docs/ledger.md).
#[inline(always)]
fn wake_instant(
    a: &ThreadAccount,
    task: &BtfTask,
    now: u64,
    clock_off: Option<&mut ClockOffset>,
) -> u64 {
    let since = a.state_since_ns;
    let span = now.saturating_sub(since);
    if a.state == state::IOWAIT
        && a.flags & flag::BLKIO_SNAP != 0
        && let Some(d) = task.blkio_delay()
    {
        let grew = (d as u32).wrapping_sub(a.blkio_snap_lo) as u64;
        if grew > 0 {
            if grew > span {
                return now;
            }
            return since + grew + (((span - grew) >> 32) << 32);
        }
        // No growth: delay accounting is off; the rq clock below.
    }
    if let (Some(queued), Some(clock)) = (task.last_queued(), task.rq_clock())
        && queued != 0
    {
        if clock > queued {
            if let Some(off) = clock_off {
                off.sample(now, clock);
            }
            return now - (clock - queued).min(span);
        }
        // Before the sleep began or after now, the offset is wrong: the
        // switch-in, as without one.
        if clock == queued
            && let Some(woke) = clock_off.and_then(|off| off.monotonic(queued))
            && woke >= since
            && woke <= now
        {
            return woke;
        }
    }
    now
}

#[inline(always)]
fn on_wakeup(task: BtfTask, new: bool) -> i32 {
    let Ok(tid) = task.pid() else {
        crate::count(stat::READ_FAILED);
        return 0;
    };
    if tid == 0 {
        return 0;
    }
    let a = match ledger::lookup(tid) {
        Some(a) => a,
        None => {
            if !new {
                crate::count(stat::WAKEUP_UNSEEN);
            }
            match ledger::create(tid, &task.task(), now_ns(), 0) {
                Some(a) => a,
                None => return 0,
            }
        }
    };
    match a.state {
        // Already runnable or on a CPU (ttwu of a task that had not yet
        // switched out): no state change, and no clock read.
        state::RUNNING | state::RUNNABLE => return 0,
        // Seeded from /proc as D at attach: in_iowait is still set at
        // wakeup time (io_schedule_finish runs after the task resumes).
        state::BLOCKED if a.flags & flag::SEEDED != 0 && task.in_iowait().unwrap_or(false) => {
            a.state = state::IOWAIT;
        }
        _ => {}
    }
    let now = now_ns();
    close_interval(a, now);
    if !new {
        a.wakeups += 1;
    }
    a.state = state::RUNNABLE;
    trace::woken(a, now, new);
    0
}

/// sched_wakeup(struct task_struct *p)
#[btf_tracepoint(function = "sched_wakeup")]
pub fn sched_wakeup(ctx: BtfTracePointContext) -> i32 {
    crate::count(stat::RUNS_WAKEUP);
    on_wakeup(BtfTask(ctx.arg::<*const u8>(0)), false)
}

/// sched_wakeup_new(struct task_struct *p): a new task's first enqueue.
#[btf_tracepoint(function = "sched_wakeup_new")]
pub fn sched_wakeup_new(ctx: BtfTracePointContext) -> i32 {
    crate::count(stat::RUNS_WAKEUP_NEW);
    on_wakeup(BtfTask(ctx.arg::<*const u8>(0)), true)
}

/// sched_process_fork(struct task_struct *parent, struct task_struct *child):
/// the child's account starts here, with its parent's tgid so userspace can
/// follow process trees even when the child is gone before it looks.
#[btf_tracepoint(function = "sched_process_fork")]
pub fn sched_process_fork(ctx: BtfTracePointContext) -> i32 {
    crate::count(stat::RUNS_FORK);
    let parent = Task(ctx.arg::<*const u8>(0));
    let child = Task(ctx.arg::<*const u8>(1));
    let now = now_ns();
    let (Ok(parent_tgid), Ok(child_tid)) = (parent.tgid(), child.pid()) else {
        crate::count(stat::READ_FAILED);
        return 0;
    };
    // A stale account under this tid (an exit the ledger missed) is replaced.
    let _ = ledger::create(child_tid, &child, now, parent_tgid);
    trace::forked(&parent, parent_tgid, &child, child_tid, now);
    0
}

/// sched_process_exec(struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm):
/// the command name changes.
#[btf_tracepoint(function = "sched_process_exec")]
pub fn sched_process_exec(ctx: BtfTracePointContext) -> i32 {
    crate::count(stat::RUNS_EXEC);
    let task = Task(ctx.arg::<*const u8>(0));
    if let Ok(tid) = task.pid()
        && let Some(a) = ledger::lookup(tid)
        && let Ok(comm) = task.comm()
    {
        a.comm = comm;
        trace::exec(a, ctx.arg::<u64>(1) as u32, now_ns());
    }
    0
}
