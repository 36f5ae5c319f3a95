//! Block I/O (tp_btf): what each thread submitted (requests, bytes, queue
//! and device time) and the machine's "whose I/O is the disk serving" clock.
//!
//! A request belongs to the thread that created it (block_io_start runs in
//! the submitter's context); bytes are counted per bio at block_bio_queue, in
//! the submitter's context, as /proc/PID/io read_bytes counts them in
//! submit_bio(). A request is in service from block_rq_issue (handed to the
//! driver) to block_io_done. While several processes have requests in
//! service, the disk's time is split evenly among them: the process-level
//! own-I/O clock (`ProcDisk`) advances at 1/n.
use aya_ebpf::{
    btf_maps::Array as BtfArray,
    helpers::bpf_get_current_task,
    macros::{btf_map, btf_tracepoint, map},
    maps::{Array, HashMap},
    programs::BtfTracePointContext,
};
use ttp_common::{
    DiskAccount, MAX_IO_PROCS, MAX_REQUESTS, ProcDisk, RequestInfo, stat, trace::Kind,
};

use core::intrinsics::{AtomicOrdering::SeqCst, atomic_xadd};

use crate::{
    kernel::{Bio, REQ_OP_READ, REQ_OP_WRITE, Request, Task},
    ledger, lock, now_ns, trace,
};

/// Declared with BTF: the verifier finds the value's `bpf_spin_lock` there.
#[btf_map]
static DISK: BtfArray<DiskAccount, 1> = BtfArray::new();

/// A process's own-I/O clock, by tgid, where the thread accounts are in a
/// hash (`ledger::tid_indexed` false). Looked up before the disk lock is
/// taken (no call may run under it); each entry names its process, so an
/// entry removed and reused between the lookup and the lock is told apart.
#[map]
static PROC_DISK: HashMap<u32, ProcDisk> = HashMap::with_max_entries(MAX_IO_PROCS, 0);

/// The same clocks indexed by tgid, where the thread accounts are indexed
/// by tid (`kernel.pid_max` entries, sized by the loader; one entry when
/// unused): an inlined lookup instead of a hashed one, at every issue and
/// completion and at an iowait's switch-out and switch-in
/// (docs/ledger-cost.md). A slot holds a process's clock when its `tgid`
/// is the slot's index, 0 marks it free; it is taken, and freed, under the
/// disk lock. Mappable: userspace scans it in place.
#[map]
static PROC_SLOTS: Array<ProcDisk> = Array::with_max_entries(1, aya_ebpf::bindings::BPF_F_MMAPABLE);

#[map]
pub(crate) static REQUESTS: HashMap<u64, RequestInfo> = HashMap::with_max_entries(MAX_REQUESTS, 0);

/// Entries in `REQUESTS` (added at each insert, taken at each removal).
#[map]
static REQUEST_ENTRIES: Array<u64> = Array::with_max_entries(1, 0);

/// Up to this many entries, a request's entry stays after it ended
/// (`ENDED`), so that the next request in the same `struct request` (the
/// kernel reuses them from a fixed pool per queue) updates it in place: a
/// hash insert at `block_io_start` and a removal at `block_io_done` cost
/// ~100–250 ns each, an update in place a lookup. Beyond it (a machine
/// with more request structs in use than this: many queues, deep tags),
/// entries are removed at the end as before, so the table never fills
/// with ended requests.
const KEEP_ENDED_UP_TO: u64 = MAX_REQUESTS as u64 / 2;

/// Process `tgid`'s own-I/O clock at `now`: the disk time spent on its
/// requests so far (0 for a process without an entry). None only when
/// the disk's account is missing.
#[inline(always)]
pub fn own_clock(tgid: u32, now: u64) -> Option<u64> {
    let d = DISK.get_ptr_mut(0)?;
    let p = proc_slot(tgid, false);
    // SAFETY: map value pointers; the disk's under its lock. An entry of
    // the hash stays readable while the program runs (RCU) even if another
    // CPU removes it; its `tgid` says whether it is still this process's.
    let _g = lock::lock(unsafe { &raw mut (*d).lock });
    let d = unsafe { &mut *d };
    d.advance(now);
    Some(match p {
        Some(p) if unsafe { (*p).tgid } == tgid => unsafe { (*p).own_at(d.g_cum_ns) },
        _ => 0,
    })
}

/// Where the clock of process `tgid` lives: in the array, its slot,
/// whoever holds it (its `tgid` says; it is taken under the disk lock, see
/// [`in_service`]); in the hash, its entry, created when `create` (an
/// issue). None for tgid 0 (no process: a failed read of the
/// submitter, or the idle task): in the array, slot 0 is the free mark.
#[inline(always)]
fn proc_slot(tgid: u32, create: bool) -> Option<*mut ProcDisk> {
    if tgid == 0 {
        return None;
    }
    if !ledger::tid_indexed() {
        return proc_entry(tgid, create);
    }
    let p = PROC_SLOTS.get_ptr_mut(tgid);
    if p.is_none() && create {
        // A tgid beyond the array: pid_max was raised after load.
        crate::count(stat::PROC_DISK_MAP_FULL);
    }
    p
}

/// The entry of `tgid` in `PROC_DISK`, created when `create` (an issue).
#[inline(always)]
fn proc_entry(tgid: u32, create: bool) -> Option<*mut ProcDisk> {
    if let Some(p) = PROC_DISK.get_ptr_mut(tgid) {
        return Some(p);
    }
    if !create {
        return None;
    }
    let fresh = ProcDisk {
        tgid,
        ..ProcDisk::default()
    };
    // BPF_NOEXIST: an entry another CPU made meanwhile, and perhaps already
    // counted a request in, is kept; the lookup below finds it.
    const BPF_NOEXIST: u64 = 1;
    if PROC_DISK.insert(tgid, fresh, BPF_NOEXIST).is_err() && PROC_DISK.get_ptr(tgid).is_none() {
        crate::count(stat::PROC_DISK_MAP_FULL);
        return None;
    }
    PROC_DISK.get_ptr_mut(tgid)
}

/// Marks one more (`start`) or one fewer request of `tgid` in service at
/// `now`, under the disk lock, which is waited for. False when nothing
/// changed: no entry for the process (its table full, or an end of a
/// process that has none), or, for a start, the process is being
/// forgotten (its main thread exited and nothing of it is in service:
/// its entry is about to be removed, `process_gone`); such a request is
/// not counted in service, and its completion ends nothing.
#[inline(always)]
fn in_service(tgid: u32, now: u64, start: bool) -> bool {
    let Some(d) = DISK.get_ptr_mut(0) else {
        return false;
    };
    let Some(p) = proc_slot(tgid, start) else {
        return false;
    };
    let slots = ledger::tid_indexed();
    let (changed, forget) = {
        // SAFETY: map value pointers, written under the disk lock.
        let _g = lock::lock(unsafe { &raw mut (*d).lock });
        let d = unsafe { &mut *d };
        let p = unsafe { &mut *p };
        d.advance(now);
        if slots && start && p.tgid == 0 {
            // A free slot, taken for the process.
            *p = ProcDisk {
                tgid,
                ..ProcDisk::default()
            };
        }
        if p.tgid != tgid {
            // Removed and taken by another process since the lookup.
            (false, false)
        } else if start {
            if p.gone != 0 && p.inflight == 0 {
                (false, false)
            } else {
                if p.inflight == 0 {
                    p.g_snap_ns = d.g_cum_ns;
                    d.busy_procs += 1;
                }
                p.inflight += 1;
                (true, false)
            }
        } else if p.inflight > 0 {
            p.inflight -= 1;
            let mut forget = false;
            if p.inflight == 0 {
                p.own_cum_ns += d.g_cum_ns.saturating_sub(p.g_snap_ns);
                d.busy_procs = d.busy_procs.saturating_sub(1);
                // Its main thread exited while this was in service
                // (`process_gone`): nothing of it is left to read the clock.
                forget = p.gone != 0;
                if forget && slots {
                    // The slot is free again (userspace skips it).
                    *p = ProcDisk::default();
                }
            }
            (true, forget)
        } else {
            (false, false)
        }
    };
    if forget && !slots {
        // Gone with nothing in service is final: no start counts in it
        // (above), so nothing counted is removed with it.
        let _ = PROC_DISK.remove(tgid);
    }
    changed
}

/// `issue_ns` of a request that ended: its entry is kept for the next
/// request in the same `struct request` (see [`KEEP_ENDED_UP_TO`]).
pub(crate) const ENDED: u64 = u64::MAX - 1;

/// Adds `delta` (two's complement) to the count of `REQUESTS` entries.
#[inline(always)]
fn count_entries(delta: u64) {
    if let Some(n) = REQUEST_ENTRIES.get_ptr_mut(0) {
        // SAFETY: map value; requests start and end on every CPU.
        unsafe { atomic_xadd::<u64, u64, { SeqCst }>(n, delta) };
    }
}

/// Forgets the own-I/O account of process `tgid` when its main thread
/// exits, so that `PROC_DISK` holds the processes doing I/O now, not every
/// process that ever did (it filled up within hours under `serve`). With
/// requests still in service the entry is marked and forgotten when the
/// last of them ends (`in_service`). While nothing is in service a
/// process's own-I/O clock stands still; what a removal can lose is one
/// case only: a thread that outlives its main thread and waits, at the
/// removal, on a request not yet issued loses the own time of that wait
/// (its clock restarts from 0 below its snapshot; docs/ledger.md).
#[inline(always)]
pub fn process_gone(tgid: u32) {
    let Some(d) = DISK.get_ptr_mut(0) else {
        return;
    };
    let Some(p) = proc_slot(tgid, false) else {
        return;
    };
    let slots = ledger::tid_indexed();
    let now = now_ns();
    let forget = {
        // SAFETY: map value pointers, written under the disk lock.
        let _g = lock::lock(unsafe { &raw mut (*d).lock });
        let d = unsafe { &mut *d };
        let p = unsafe { &mut *p };
        d.advance(now);
        if p.tgid == tgid {
            p.gone = 1;
            let forget = p.inflight == 0;
            if forget && slots {
                *p = ProcDisk::default();
            }
            forget
        } else {
            false
        }
    };
    if forget && !slots {
        let _ = PROC_DISK.remove(tgid);
    }
}

/// The current thread's id (0: an interrupt on an idle CPU).
#[inline(always)]
fn current_tid() -> u32 {
    aya_ebpf::helpers::bpf_get_current_pid_tgid() as u32
}

/// The current thread's account, created if the ledger has not seen it:
/// the task pointer and the clock are read only then.
#[inline(always)]
fn current_account(tid: u32, now: Option<u64>) -> Option<ledger::Acct> {
    if let Some(a) = ledger::lookup(tid) {
        return Some(a);
    }
    // SAFETY: helper without arguments.
    let task = Task(unsafe { bpf_get_current_task() } as *const u8);
    ledger::create(tid, &task, now.unwrap_or_else(now_ns), 0)
}

/// block_bio_queue(struct bio *bio): bytes submitted, per bio.
#[btf_tracepoint(function = "block_bio_queue")]
pub fn block_bio_queue(ctx: BtfTracePointContext) -> i32 {
    crate::count(stat::RUNS_BIO_QUEUE);
    let bio = Bio(ctx.arg::<*const u8>(0));
    let tid = current_tid();
    if tid == 0 {
        return 0;
    }
    let (Ok(op), Ok(size)) = (bio.op(), bio.size()) else {
        crate::count(stat::READ_FAILED);
        return 0;
    };
    if op != REQ_OP_READ && op != REQ_OP_WRITE {
        return 0;
    }
    if let Some(a) = current_account(tid, None) {
        if op == REQ_OP_READ {
            a.io.read_bytes += size as u64;
        } else {
            a.io.write_bytes += size as u64;
        }
    }
    0
}

/// block_io_start(struct request *rq): a request is created for the
/// submitting thread.
#[btf_tracepoint(function = "block_io_start")]
pub fn block_io_start(ctx: BtfTracePointContext) -> i32 {
    crate::count(stat::RUNS_IO_START);
    let rq_ptr = ctx.arg::<*const u8>(0);
    let tid = current_tid();
    // The task and the clock as before, read at every run: the lazy form
    // of `block_bio_queue` here (with the request's operation by a plain
    // load) made the trace test's Running slices of a forked child overlap
    // its parent's on one CPU, 4 runs of 4, cause not established.
    // SAFETY: helper without arguments.
    let task = Task(unsafe { bpf_get_current_task() } as *const u8);
    let now = now_ns();
    let Some(a) = ledger::get_or_create(tid, &task, now, 0) else {
        return 0;
    };
    match Request(rq_ptr).op() {
        Ok(REQ_OP_READ) => a.io.read_requests += 1,
        Ok(REQ_OP_WRITE) => a.io.write_requests += 1,
        Ok(_) => {}
        Err(_) => crate::count(stat::READ_FAILED),
    }
    // A request is reused only after it ended. One still in service here
    // ended without `block_io_done` (the kernel does not emit it for every
    // request it issued: seen beside an O_DIRECT writer); left in service,
    // its process would count in the disk's n for good and shrink every
    // process's own-I/O time (docs/ledger.md). It ends now.
    let info = RequestInfo {
        tid,
        tgid: a.tgid,
        thread_start_ns: a.start_time_ns,
        start_ns: now,
        issue_ns: 0,
    };
    if let Some(slot) = REQUESTS.get_ptr_mut(rq_ptr as u64) {
        // SAFETY: map value pointer, copied. Nothing else touches the entry
        // of a request that has not started yet.
        let old = unsafe { *slot };
        if old.issue_ns != 0 && old.issue_ns != ENDED && in_service(old.tgid, now, false) {
            crate::count(stat::REQUEST_END_AT_REUSE);
        }
        // SAFETY: as above; both 8-aligned RequestInfo.
        unsafe { crate::words::copy(slot, &info) };
    } else if REQUESTS.insert(rq_ptr as u64, info, 0).is_err() {
        crate::count(stat::REQUEST_MAP_FULL);
    } else {
        count_entries(1);
    }
    trace::block(Kind::BlockSubmit, rq_ptr, tid, info.tgid, now);
    0
}

/// The account of a request's owner, if that thread still exists.
#[inline(always)]
fn owner(info: &RequestInfo) -> Option<ledger::Acct> {
    ledger::lookup(info.tid).filter(|a| a.start_time_ns == info.thread_start_ns)
}

/// block_rq_issue(struct request *rq): handed to the driver.
#[btf_tracepoint(function = "block_rq_issue")]
pub fn block_rq_issue(ctx: BtfTracePointContext) -> i32 {
    crate::count(stat::RUNS_RQ_ISSUE);
    let rq = ctx.arg::<*const u8>(0) as u64;
    let Some(info) = REQUESTS.get_ptr_mut(rq) else {
        return 0;
    };
    // SAFETY: map value pointer.
    let info = unsafe { &mut *info };
    if info.issue_ns != 0 {
        return 0; // requeued and issued again: in service since the first issue
    }
    let now = now_ns();
    info.issue_ns = now;
    if let Some(a) = owner(info) {
        a.io.queue_ns += now.saturating_sub(info.start_ns);
    }
    if !in_service(info.tgid, now, true) {
        // Not counted in service (`in_service`): its completion must not
        // take another request's place. Its queue time so far is booked: if
        // it is issued again, only the time since counts.
        info.issue_ns = 0;
        info.start_ns = now;
    }
    trace::block(Kind::BlockIssue, rq as *const u8, info.tid, info.tgid, now);
    0
}

/// block_io_done(struct request *rq): the request is complete.
#[btf_tracepoint(function = "block_io_done")]
pub fn block_io_done(ctx: BtfTracePointContext) -> i32 {
    crate::count(stat::RUNS_IO_DONE);
    let rq = ctx.arg::<*const u8>(0) as u64;
    let Some(entry) = REQUESTS.get_ptr_mut(rq) else {
        return 0;
    };
    // SAFETY: map value pointer; copied before the entry is changed.
    let info = unsafe { *entry };
    if info.issue_ns == ENDED {
        return 0; // complete already
    }
    let now = now_ns();
    if info.issue_ns != 0 {
        if let Some(a) = owner(&info) {
            a.io.device_ns += now.saturating_sub(info.issue_ns);
        }
        in_service(info.tgid, now, false);
    }
    trace::block(
        Kind::BlockComplete,
        rq as *const u8,
        info.tid,
        info.tgid,
        now,
    );
    let kept = REQUEST_ENTRIES
        .get(0)
        .is_some_and(|n| *n <= KEEP_ENDED_UP_TO);
    if kept {
        // SAFETY: map value pointer.
        unsafe { (*entry).issue_ns = ENDED };
    } else if REQUESTS.remove(rq).is_ok() {
        count_entries(u64::MAX);
    }
    0
}
