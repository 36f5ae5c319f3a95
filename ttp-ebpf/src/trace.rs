//! `--trace`: a per-event stream for the traced processes only.
//!
//! The ledger programs call the hooks below after they have updated a
//! thread's account, so a record carries the ledger's own state and
//! timestamp and the two can never disagree. Every hook first reads
//! `TRACE_ON`, a read-only global the loader sets: with tracing off the
//! verifier knows it is 0 and removes the rest as dead code, so `attach`
//! without `--trace` runs the ledger alone. With tracing on, a thread of a
//! process not in `TRACED` costs one hash lookup per hook.
//!
//! Records go through their own ring buffer without wakeups (userspace
//! drains it on a timer); a full buffer is counted in
//! `stat::TRACE_EVENT_LOST`, never hidden.
use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_get_current_task, bpf_get_smp_processor_id},
    macros::{btf_tracepoint, map, perf_event},
    maps::{HashMap, PerCpuArray, RingBuf},
    programs::{BtfTracePointContext, PerfEventContext},
};
use ttp_common::{
    TASK_COMM_LEN, ThreadAccount, stat,
    trace::{
        Block, CpuSample, EXIT_GROUP_DEAD, Header, Kind, MAX_TRACED, Proc, SWITCH_PREEMPT, Switch,
        TRACE_RING_BYTES, WAKEUP_NEW, Wakeup,
    },
};

use crate::{
    cpu,
    kernel::{Request, Task},
    now_ns,
};

/// Traced processes (tgid → 1), set by userspace; a process forked by a
/// traced one is added at sched_process_fork.
#[map]
static TRACED: HashMap<u32, u32> = HashMap::with_max_entries(MAX_TRACED, 0);

#[map]
static TRACE_EVENTS: RingBuf = RingBuf::with_byte_size(TRACE_RING_BYTES, 0);

/// The last CPU sample sent from each CPU (packed), so unchanged samples
/// are not sent again.
#[map]
static LAST_SAMPLE: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// bpf_ringbuf_output flag: do not wake the reader (it polls on a timer),
/// which keeps the cost per record to the copy.
const BPF_RB_NO_WAKEUP: u64 = 1;

#[inline(always)]
fn traced(tgid: u32) -> bool {
    crate::config::trace_on() && TRACED.get_ptr(tgid).is_some()
}

#[inline(always)]
fn emit<T>(rec: &T) {
    if TRACE_EVENTS.output::<T>(rec, BPF_RB_NO_WAKEUP).is_ok() {
        crate::count(stat::TRACE_EVENTS);
    } else {
        crate::count(stat::TRACE_EVENT_LOST);
    }
}

#[inline(always)]
fn smp_id() -> u32 {
    // SAFETY: helper without arguments.
    unsafe { bpf_get_smp_processor_id() }
}

#[inline(always)]
fn header(kind: Kind, tid: u32, tgid: u32, cpu: u32, ts_ns: u64) -> Header {
    Header {
        kind: kind as u32,
        tid,
        tgid,
        cpu,
        ts_ns,
    }
}

/// sched_switch, `a` (prev) classified by the ledger: it leaves `cpu` for
/// `a.state`.
#[inline(always)]
pub fn switch_out(
    a: &ThreadAccount,
    cpu: u32,
    now: u64,
    preempt: bool,
    prev_state: u32,
    next: u32,
) {
    if !traced(a.tgid) {
        return;
    }
    emit(&Switch {
        hdr: header(Kind::SwitchOut, a.tid, a.tgid, cpu, now),
        state: a.state,
        other_tid: next,
        prev_state,
        flags: if preempt { SWITCH_PREEMPT } else { 0 },
    });
}

/// sched_switch: `a` (next) starts running on `cpu`.
#[inline(always)]
pub fn switch_in(a: &ThreadAccount, cpu: u32, now: u64, prev: u32) {
    if !traced(a.tgid) {
        return;
    }
    emit(&Switch {
        hdr: header(Kind::SwitchIn, a.tid, a.tgid, cpu, now),
        state: a.state,
        other_tid: prev,
        prev_state: 0,
        flags: 0,
    });
}

/// sched_wakeup / sched_wakeup_new: the ledger made `a` runnable.
#[inline(always)]
pub fn woken(a: &ThreadAccount, now: u64, new: bool) {
    if !traced(a.tgid) {
        return;
    }
    emit(&Wakeup {
        hdr: header(Kind::Wakeup, a.tid, a.tgid, smp_id(), now),
        waker_tid: 0,
        waker_tgid: 0,
        flags: if new { WAKEUP_NEW } else { 0 },
        _pad: 0,
    });
}

/// sched_switch with TASK_DEAD, before the ledger retires `a`: the thread's
/// end, and whether its process ended with it.
#[inline(always)]
pub fn exited(a: &ThreadAccount, task: &Task, cpu: u32, now: u64) {
    if !traced(a.tgid) {
        return;
    }
    let group_dead = task.signal_live() == Ok(0);
    if group_dead {
        // The tgid may be reused by an unrelated process.
        let _ = TRACED.remove(a.tgid);
    }
    emit(&Proc {
        hdr: header(Kind::Exit, a.tid, a.tgid, cpu, now),
        other_tid: 0,
        other_tgid: 0,
        flags: if group_dead { EXIT_GROUP_DEAD } else { 0 },
        _pad: 0,
        comm: a.comm,
    });
}

/// sched_process_fork: a child of a traced process is traced too.
#[inline(always)]
pub fn forked(parent: &Task, parent_tgid: u32, child: &Task, child_tid: u32, now: u64) {
    if !traced(parent_tgid) {
        return;
    }
    let (Ok(parent_tid), Ok(child_tgid)) = (parent.pid(), child.tgid()) else {
        crate::count(stat::READ_FAILED);
        return;
    };
    if child_tgid != parent_tgid && TRACED.insert(child_tgid, 1, 0).is_err() {
        crate::count(stat::TRACED_MAP_FULL);
        return;
    }
    emit(&Proc {
        hdr: header(Kind::Fork, child_tid, child_tgid, smp_id(), now),
        other_tid: parent_tid,
        other_tgid: parent_tgid,
        flags: 0,
        _pad: 0,
        comm: child.comm().unwrap_or([0; TASK_COMM_LEN]),
    });
}

/// sched_process_exec: `a` has its new command name.
#[inline(always)]
pub fn exec(a: &ThreadAccount, old_tid: u32, now: u64) {
    if !traced(a.tgid) {
        return;
    }
    emit(&Proc {
        hdr: header(Kind::Exec, a.tid, a.tgid, smp_id(), now),
        other_tid: old_tid,
        other_tgid: 0,
        flags: 0,
        _pad: 0,
        comm: a.comm,
    });
}

/// A block request of thread `tid` of `tgid` was created, issued or
/// completed.
#[inline(always)]
pub fn block(kind: Kind, rq: *const u8, tid: u32, tgid: u32, now: u64) {
    if !traced(tgid) {
        return;
    }
    let req = Request(rq);
    let (major, minor) = req.disk().unwrap_or((0, 0));
    emit(&Block {
        hdr: header(kind, tid, tgid, smp_id(), now),
        rq: rq as u64,
        sector: req.sector().unwrap_or(0),
        bytes: req.data_len().unwrap_or(0),
        op: req.op().unwrap_or(u32::MAX),
        dev_major: major,
        dev_minor: minor,
    });
}

/// sched_waking(struct task_struct *p), in the waker's context (unlike
/// sched_wakeup, which may run on the wakee's CPU): who woke a traced
/// thread. Attached only when tracing.
#[btf_tracepoint(function = "sched_waking")]
pub fn sched_waking(ctx: BtfTracePointContext) -> i32 {
    if !crate::config::trace_on() {
        return 0;
    }
    let p = Task(ctx.arg::<*const u8>(0));
    let Ok(tgid) = p.tgid() else {
        crate::count(stat::READ_FAILED);
        return 0;
    };
    if !traced(tgid) {
        return 0;
    }
    let Ok(tid) = p.pid() else {
        crate::count(stat::READ_FAILED);
        return 0;
    };
    let waker = bpf_get_current_pid_tgid();
    emit(&Wakeup {
        hdr: header(Kind::Waking, tid, tgid, smp_id(), now_ns()),
        waker_tid: waker as u32,
        waker_tgid: (waker >> 32) as u32,
        flags: 0,
        _pad: 0,
    });
    0
}

/// A software cpu-clock perf event on every CPU (attached only when
/// tracing, at a fixed frequency): the CPU's run-queue length and its
/// tasks in iowait, sent when they changed since the last sample.
#[perf_event]
pub fn cpu_sample(_ctx: PerfEventContext) -> u32 {
    if !crate::config::trace_on() {
        return 0;
    }
    let cpu_id = smp_id();
    // SAFETY: helper without arguments.
    let task = Task(unsafe { bpf_get_current_task() } as *const u8);
    let Ok(nr_running) = task.rq_nr_running() else {
        crate::count(stat::READ_FAILED);
        return 0;
    };
    let (nr_iowait, idle) = cpu::peek(cpu_id).unwrap_or((0, 0));
    let packed = ((nr_running as u64) << 32) | ((nr_iowait as u64) << 1) | (idle as u64 & 1);
    if let Some(last) = LAST_SAMPLE.get_ptr_mut(0) {
        // SAFETY: per-CPU slot, only this CPU writes it. Stored with bit 63
        // set, so the slot's initial 0 never matches: the first sample of
        // every CPU is sent.
        unsafe {
            if *last == packed | (1 << 63) {
                return 0;
            }
            *last = packed | (1 << 63);
        }
    }
    emit(&CpuSample {
        hdr: header(Kind::CpuSample, 0, 0, cpu_id, now_ns()),
        nr_running,
        nr_iowait,
        idle,
        _pad: 0,
    });
    0
}
