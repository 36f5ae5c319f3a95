//! Blame detail: what contention blame needs and the ledger does not keep —
//! each thread's on-CPU time and run-queue wait per CPU, disk bytes and
//! requests per device and owner, and memory stalls (direct reclaim and
//! direct compaction).
//!
//! Only `ttp-ebpf blame` turns this on. Each sched_switch hook tests the
//! read-only global `DETAIL_ENABLED`, which the loader sets to 1 for blame
//! and leaves 0 otherwise, and calls its body, a BPF subprogram, only when it
//! is set. The verifier reads frozen read-only globals as constants and
//! removes the dead calls, and sched_switch's own code is compiled around
//! calls rather than inlined bodies, so the plain ledger runs what it ran
//! before (docs/blame.md, "Overhead", has the measurements). The other
//! programs here are attached only in blame mode, and the loader shrinks
//! these maps to one entry when they are not used.
//!
//! Nothing here changes the ledger's accounts: the hooks read the interval
//! the ledger is about to close (its state and `state_since_ns`), so the
//! per-CPU sums equal the ledger's totals wherever the kernel reports every
//! switch.
use core::intrinsics::{AtomicOrdering::SeqCst, atomic_xadd};

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_get_current_task, bpf_probe_read_kernel},
    macros::{btf_tracepoint, map},
    maps::{HashMap, PerCpuArray},
    programs::BtfTracePointContext,
};
use ttp_common::{
    CpuAccount, ThreadAccount,
    detail::{
        DeviceIo, MAX_DEVICES, MAX_MEM_THREADS, MAX_THREAD_CPUS, MAX_THREAD_DEVS, MINOR_BITS,
        MemStall, ThreadCpu, ThreadCpuKey, ThreadDevIo, ThreadDevKey, stat,
    },
    state,
};

use crate::{
    block,
    kernel::{Request, Task},
    ledger, now_ns,
};

/// Set to 1 by the loader in blame mode (read-only: folded by the verifier).
#[unsafe(no_mangle)]
static DETAIL_ENABLED: u32 = 0;

// compact_control.direct_compaction from the running kernel's BTF
// (ttp-ledger/src/probe/btf.rs, `detail_offsets`), set in blame mode only; the
// request offsets are kernel.rs's (`Request`), which blame mode sets too.
#[unsafe(no_mangle)]
static OFF_CC_DIRECT_COMPACTION: u32 = 0;

#[map]
static THREAD_CPU: HashMap<ThreadCpuKey, ThreadCpu> = HashMap::with_max_entries(MAX_THREAD_CPUS, 0);

#[map]
static THREAD_DEV: HashMap<ThreadDevKey, ThreadDevIo> =
    HashMap::with_max_entries(MAX_THREAD_DEVS, 0);

/// I/O completed on each device without an owner the ledger tracked
/// (requests created before it attached, or by no thread): a device's total
/// is its threads' I/O plus this, consistent by construction.
#[map]
static UNOWNED_IO: HashMap<u32, DeviceIo> = HashMap::with_max_entries(MAX_DEVICES, 0);

#[map]
static MEM_STALL: HashMap<u32, MemStall> = HashMap::with_max_entries(MAX_MEM_THREADS, 0);

#[map]
static DETAIL_STATS: PerCpuArray<u64> = PerCpuArray::with_max_entries(stat::COUNT, 0);

const BPF_NOEXIST: u64 = 1;

#[inline(always)]
fn global(v: &'static u32) -> u32 {
    // SAFETY: a plain read of a global the loader wrote before load; volatile
    // so the compiler does not fold the 0 it was declared with.
    unsafe { core::ptr::read_volatile(v) }
}

#[inline(always)]
pub fn enabled() -> bool {
    global(&DETAIL_ENABLED) != 0
}

#[inline(always)]
fn count(idx: u32) {
    if let Some(p) = DETAIL_STATS.get_ptr_mut(idx) {
        // SAFETY: per-CPU slot, only this CPU writes it.
        unsafe { *p += 1 };
    }
}

/// Hook in sched_switch, when the ledger finds that the task it last saw
/// switched in on CPU `cpu` (`current_tid` of its account `c`, a field only
/// that CPU writes, read without the lock) is not `prev_tid`, the task being
/// switched out: an unreported switch.
///
/// Some kernels do not report every switch: on the machines ttp was
/// developed on, the switch-outs of some tasks (a VM agent's threads) never
/// reach the tracepoint, and with them the switch-in of the task that
/// followed. `current_tid` left unseen, and `prev_tid` came in unseen, after
/// it. The one's open interval is closed without further time, the other's
/// is opened at that last reported switch (the hidden task ran briefly; the
/// time goes to the task found running), so that no time is counted twice or
/// left running.
#[inline(always)]
pub fn unreported_switch(cpu: u32, c: &CpuAccount, prev_tid: u32) {
    if enabled() {
        close_unreported(cpu, c, prev_tid);
    }
}

// The hook bodies are BPF subprograms (not inlined): inlined, their dead
// code still changed how sched_switch's live code was compiled (about 60
// more instructions of spills in the plain ledger).
#[inline(never)]
fn close_unreported(cpu: u32, c: &CpuAccount, prev_tid: u32) {
    if c.current_tid != 0
        && let Some(e) = THREAD_CPU.get_ptr_mut(ThreadCpuKey {
            tid: c.current_tid,
            cpu,
        })
    {
        // SAFETY: map value written only by this CPU.
        unsafe { (*e).running_since_ns = 0 };
    }
    if prev_tid != 0
        && let Some(a) = ledger::lookup(prev_tid)
        && let Some(e) = thread_cpu(a, cpu)
        && e.running_since_ns == 0
    {
        e.running_since_ns = c.last_switch_ns;
    }
}

/// Hook in sched_switch, before the ledger closes `a`'s interval: `a` leaves
/// CPU `cpu` at `now` and is charged the time since it was switched in here.
/// A thread the ledger still sees runnable was switched in unseen (see
/// [`switch_seen`], which marked when): its wait ended then.
#[inline(always)]
pub fn switched_out(a: &ThreadAccount, cpu: u32, now: u64) {
    if enabled() {
        charge_run(a, cpu, now);
    }
}

#[inline(never)]
fn charge_run(a: &ThreadAccount, cpu: u32, now: u64) {
    let Some(e) = thread_cpu(a, cpu) else {
        return;
    };
    let start = match e.running_since_ns {
        // Running since before the detail was loaded: the ledger's interval.
        0 if a.state == state::RUNNING => a.state_since_ns,
        0 => now,
        since => {
            if a.state == state::RUNNABLE {
                e.runq_wait_ns += since.saturating_sub(a.state_since_ns);
            }
            since.max(a.state_since_ns)
        }
    };
    e.on_cpu_ns += now.saturating_sub(start);
    e.running_since_ns = 0;
    if e.switched_in_ns < start {
        e.switched_in_ns = start;
    }
}

/// Hook in sched_switch, before the ledger closes `a`'s interval: `a` is
/// switched in on CPU `cpu` at `now`. A run-queue wait is charged to the CPU
/// the thread is switched in on (the queue it left).
#[inline(always)]
pub fn switched_in(a: &ThreadAccount, cpu: u32, now: u64) {
    if enabled() {
        charge_wait(a, cpu, now);
    }
}

#[inline(never)]
fn charge_wait(a: &ThreadAccount, cpu: u32, now: u64) {
    if let Some(e) = thread_cpu(a, cpu) {
        if a.state == state::RUNNABLE {
            e.runq_wait_ns += now.saturating_sub(a.state_since_ns);
        }
        e.running_since_ns = now;
        e.switched_in_ns = now;
    }
}

/// The (thread, CPU) entry of `a`, created or reset for a new thread.
#[inline(always)]
fn thread_cpu(a: &ThreadAccount, cpu: u32) -> Option<&'static mut ThreadCpu> {
    let key = ThreadCpuKey { tid: a.tid, cpu };
    if let Some(p) = THREAD_CPU.get_ptr_mut(key) {
        // SAFETY: map value; only CPU `cpu` writes this key (from its own
        // sched_switch, which does not nest).
        let e = unsafe { &mut *p };
        if e.start_time_ns != a.start_time_ns {
            *e = ThreadCpu {
                start_time_ns: a.start_time_ns,
                ..ThreadCpu::default()
            };
        }
        return Some(e);
    }
    let fresh = ThreadCpu {
        start_time_ns: a.start_time_ns,
        ..ThreadCpu::default()
    };
    if THREAD_CPU.insert(key, fresh, BPF_NOEXIST).is_err() {
        count(stat::THREAD_CPU_FULL);
        return None;
    }
    // SAFETY: as above.
    THREAD_CPU.get_ptr_mut(key).map(|p| unsafe { &mut *p })
}

/// The whole disk of `rq` as a kernel dev_t (major << MINOR_BITS | first
/// minor of `rq->q->disk`); None for a request without a disk.
#[inline(always)]
fn disk_of(rq: &Request) -> Result<Option<u32>, i32> {
    match rq.disk()? {
        (0, 0) => Ok(None),
        (major, minor) => Ok(Some((major << MINOR_BITS) | minor)),
    }
}

#[inline(always)]
fn add(io: *mut DeviceIo, bytes: u64, requests: u64) {
    // SAFETY: map value pointer; atomic adds because requests complete on
    // any CPU (BPF_ATOMIC | BPF_ADD).
    unsafe {
        atomic_xadd::<u64, u64, { SeqCst }>(&raw mut (*io).bytes, bytes);
        atomic_xadd::<u64, u64, { SeqCst }>(&raw mut (*io).requests, requests);
    }
}

/// block_rq_complete(struct request *rq, blk_status_t error, unsigned int
/// nr_bytes): `nr_bytes` of `rq` completed (blk_update_request). The request
/// is finished when they cover what remained of it (rq->__data_len, not yet
/// decreased at this point). Bytes and requests go to the thread that
/// created the request (the ledger's state of it, `block::find`), else to the device's
/// unowned I/O.
#[btf_tracepoint(function = "block_rq_complete")]
pub fn detail_block_rq_complete(ctx: BtfTracePointContext) -> i32 {
    let rq_ptr = ctx.arg::<*const u8>(0);
    let rq = Request(rq_ptr);
    let nr_bytes = ctx.arg::<u64>(2) as u32;
    let dev = match disk_of(&rq) {
        Ok(Some(dev)) => dev,
        Ok(None) => return 0,
        Err(_) => {
            count(stat::READ_FAILED);
            return 0;
        }
    };
    let remaining = match rq.data_len() {
        Ok(r) => r,
        Err(_) => {
            count(stat::READ_FAILED);
            return 0;
        }
    };
    let requests = (nr_bytes >= remaining) as u64;
    let bytes = nr_bytes as u64;
    if let Some(info) = block::find(block::address(rq_ptr)) {
        // SAFETY: map value pointer, copied at once.
        let info = unsafe { *info };
        if let Some(e) = thread_dev(info.tid, info.thread_start_ns, dev) {
            add(&raw mut e.io, bytes, requests);
            return 0;
        }
    }
    match UNOWNED_IO.get_ptr_mut(dev) {
        Some(d) => add(d, bytes, requests),
        None => {
            let _ = UNOWNED_IO.insert(dev, DeviceIo::default(), BPF_NOEXIST);
            match UNOWNED_IO.get_ptr_mut(dev) {
                Some(d) => add(d, bytes, requests),
                None => count(stat::DEVICE_FULL),
            }
        }
    }
    0
}

/// The (thread, device) entry of a request's owner, created or reset for a
/// new thread under a reused tid.
#[inline(always)]
fn thread_dev(tid: u32, start: u64, dev: u32) -> Option<&'static mut ThreadDevIo> {
    let key = ThreadDevKey { tid, dev };
    let e = match THREAD_DEV.get_ptr_mut(key) {
        Some(e) => e,
        None => {
            let fresh = ThreadDevIo {
                start_time_ns: start,
                io: DeviceIo::default(),
            };
            // Another CPU may insert the same key at once: NOEXIST, then
            // look up whichever entry won.
            let _ = THREAD_DEV.insert(key, fresh, BPF_NOEXIST);
            match THREAD_DEV.get_ptr_mut(key) {
                Some(e) => e,
                None => {
                    count(stat::THREAD_DEV_FULL);
                    return None;
                }
            }
        }
    };
    // SAFETY: map value pointer. A reset races only with another completion
    // of the same new thread's requests (rare; both are small).
    let e = unsafe { &mut *e };
    if e.start_time_ns != start {
        *e = ThreadDevIo {
            start_time_ns: start,
            io: DeviceIo::default(),
        };
    }
    Some(e)
}

/// The memory-stall account of the current thread, created or reset.
#[inline(always)]
fn current_stall(now: u64) -> Option<&'static mut MemStall> {
    let tid = bpf_get_current_pid_tgid() as u32;
    if tid == 0 {
        return None;
    }
    // SAFETY: helper without arguments.
    let task = Task(unsafe { bpf_get_current_task() } as *const u8);
    // The ledger's start time, so the key matches its account (seeded
    // accounts carry /proc's start time).
    let start = ledger::get_or_create(tid, &task, now, 0)?.start_time_ns;
    if let Some(p) = MEM_STALL.get_ptr_mut(tid) {
        // SAFETY: map value; only the thread itself writes its entry.
        let e = unsafe { &mut *p };
        if e.start_time_ns != start {
            *e = MemStall {
                start_time_ns: start,
                ..MemStall::default()
            };
        }
        return Some(e);
    }
    let fresh = MemStall {
        start_time_ns: start,
        ..MemStall::default()
    };
    if MEM_STALL.insert(tid, fresh, BPF_NOEXIST).is_err() {
        count(stat::MEM_FULL);
        return None;
    }
    // SAFETY: as above.
    MEM_STALL.get_ptr_mut(tid).map(|p| unsafe { &mut *p })
}

#[inline(always)]
fn stall_begin() -> i32 {
    let now = now_ns();
    if let Some(e) = current_stall(now) {
        if e.depth == 0 {
            e.since_ns = now;
        }
        e.depth += 1;
    }
    0
}

#[inline(always)]
fn stall_end() -> i32 {
    let tid = bpf_get_current_pid_tgid() as u32;
    let Some(p) = MEM_STALL.get_ptr_mut(tid) else {
        return 0; // began before the programs were attached
    };
    // SAFETY: map value; only the thread itself writes its entry.
    let e = unsafe { &mut *p };
    if e.depth == 0 {
        return 0;
    }
    e.depth -= 1;
    if e.depth == 0 {
        e.stall_ns += now_ns().saturating_sub(e.since_ns);
    }
    0
}

/// Whether compaction runs for an allocation (compact_control.direct_compaction),
/// not for kcompactd or a proactive request.
#[inline(always)]
fn direct_compaction(ctx: &BtfTracePointContext) -> bool {
    let cc = ctx.arg::<*const u8>(0);
    let field = cc.wrapping_add(global(&OFF_CC_DIRECT_COMPACTION) as usize);
    // SAFETY: bpf_probe_read_kernel checks the address.
    match unsafe { bpf_probe_read_kernel(field) } {
        Ok(v) => v != 0,
        Err(_) => {
            count(stat::READ_FAILED);
            false
        }
    }
}

/// mm_vmscan_direct_reclaim_begin(int order, gfp_t gfp_flags)
#[btf_tracepoint(function = "mm_vmscan_direct_reclaim_begin")]
pub fn detail_reclaim_begin(_ctx: BtfTracePointContext) -> i32 {
    stall_begin()
}

/// mm_vmscan_direct_reclaim_end(unsigned long nr_reclaimed)
#[btf_tracepoint(function = "mm_vmscan_direct_reclaim_end")]
pub fn detail_reclaim_end(_ctx: BtfTracePointContext) -> i32 {
    stall_end()
}

/// mm_vmscan_memcg_reclaim_begin(int order, gfp_t gfp_flags): reclaim in the
/// allocating task because its cgroup hit its limit.
#[btf_tracepoint(function = "mm_vmscan_memcg_reclaim_begin")]
pub fn detail_memcg_reclaim_begin(_ctx: BtfTracePointContext) -> i32 {
    stall_begin()
}

/// mm_vmscan_memcg_reclaim_end(unsigned long nr_reclaimed)
#[btf_tracepoint(function = "mm_vmscan_memcg_reclaim_end")]
pub fn detail_memcg_reclaim_end(_ctx: BtfTracePointContext) -> i32 {
    stall_end()
}

/// mm_compaction_begin(struct compact_control *cc, unsigned long zone_start,
/// unsigned long zone_end, bool sync)
#[btf_tracepoint(function = "mm_compaction_begin")]
pub fn detail_compaction_begin(ctx: BtfTracePointContext) -> i32 {
    if direct_compaction(&ctx) {
        stall_begin();
    }
    0
}

/// mm_compaction_end(struct compact_control *cc, unsigned long zone_start,
/// unsigned long zone_end, bool sync, int status)
#[btf_tracepoint(function = "mm_compaction_end")]
pub fn detail_compaction_end(ctx: BtfTracePointContext) -> i32 {
    if direct_compaction(&ctx) {
        stall_end();
    }
    0
}
