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
    helpers::bpf_get_current_task,
    macros::{btf_tracepoint, map},
    maps::{Array, HashMap},
    programs::BtfTracePointContext,
};
use ttp_common::{
    DiskAccount, MAX_IO_PROCS, MAX_REQUESTS, ProcDisk, RequestInfo, stat, trace::Kind,
};

use core::intrinsics::{
    AtomicOrdering::SeqCst,
    {atomic_xadd, atomic_xchg},
};

use crate::{
    kernel::{Bio, REQ_OP_READ, REQ_OP_WRITE, Request, Task},
    ledger, lock, now_ns, trace,
};

#[map]
static DISK: Array<DiskAccount> = Array::with_max_entries(1, 0);

#[map]
static PROC_DISK: HashMap<u32, ProcDisk> = HashMap::with_max_entries(MAX_IO_PROCS, 0);

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
/// requests so far. None when the disk lock stayed contended.
#[inline(always)]
pub fn own_clock(tgid: u32, now: u64) -> Option<u64> {
    let d = DISK.get_ptr_mut(0)?;
    let _g = lock::try_lock(unsafe { &raw mut (*d).lock })?;
    // SAFETY: map value, under the lock.
    let d = unsafe { &mut *d };
    d.advance(now);
    let p = match PROC_DISK.get_ptr(tgid) {
        Some(p) => unsafe { &*p },
        None => return Some(0),
    };
    Some(p.own_at(d.g_cum_ns))
}

/// Marks one more (`start`) or one fewer request of `tgid` in service at
/// `now`. False when the disk lock stayed contended and nothing changed.
#[inline(always)]
fn in_service(tgid: u32, now: u64, start: bool) -> bool {
    let Some(d) = DISK.get_ptr_mut(0) else {
        return false;
    };
    let Some(_g) = lock::try_lock(unsafe { &raw mut (*d).lock }) else {
        return false;
    };
    let d = unsafe { &mut *d };
    d.advance(now);
    let p = match PROC_DISK.get_ptr_mut(tgid) {
        Some(p) => p,
        None if start => {
            if PROC_DISK.insert(tgid, ProcDisk::default(), 0).is_err() {
                crate::count(stat::PROC_DISK_MAP_FULL);
                return true;
            }
            match PROC_DISK.get_ptr_mut(tgid) {
                Some(p) => p,
                None => return true,
            }
        }
        None => return true,
    };
    let p = unsafe { &mut *p };
    let owed = settle(d, p);
    if start {
        if p.inflight == 0 {
            p.g_snap_ns = d.g_cum_ns;
            d.busy_procs += 1;
        }
        p.inflight += 1;
    } else if p.inflight > 0 {
        p.inflight -= 1;
        if p.inflight == 0 {
            p.own_cum_ns += d.g_cum_ns.saturating_sub(p.g_snap_ns);
            d.busy_procs = d.busy_procs.saturating_sub(1);
            if p.gone != 0 {
                // Its main thread exited while this was in service
                // (`process_gone`); nothing of it is left to read the clock.
                let _ = PROC_DISK.remove(tgid);
            }
        }
    } else if owed && p.gone != 0 {
        // The owed ends were its last.
        let _ = PROC_DISK.remove(tgid);
    }
    true
}

/// Takes the ends owed to `p` (completions that found the lock contended,
/// [`defer_end`]) off its requests in service, as of the clock now (caller
/// holds the lock; the clock is advanced).
/// True when that left nothing of it in service.
#[inline(always)]
fn settle(d: &mut DiskAccount, p: &mut ProcDisk) -> bool {
    // SAFETY: a u64 in a map value; the exchange pairs with the add in
    // `defer_end`, which runs without the lock.
    let owed = unsafe { atomic_xchg::<u64, { SeqCst }>(&raw mut p.pending_ends, 0) };
    if owed == 0 || p.inflight == 0 {
        return false;
    }
    p.inflight = p
        .inflight
        .saturating_sub(owed.min(u64::from(u32::MAX)) as u32);
    if p.inflight == 0 {
        p.own_cum_ns += d.g_cum_ns.saturating_sub(p.g_snap_ns);
        d.busy_procs = d.busy_procs.saturating_sub(1);
        return true;
    }
    false
}

/// `issue_ns` of a request whose end is owed ([`defer_end`]): complete,
/// kept only so that its reuse settles its process if nothing else did.
const END_OWED: u64 = u64::MAX;

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

/// Settles process `tgid` at the reuse of a request whose end it owes: a
/// process that does no more I/O (or has exited) is not left in service.
#[inline(always)]
fn settle_at_reuse(tgid: u32, now: u64) {
    let Some(d) = DISK.get_ptr_mut(0) else {
        return;
    };
    let Some(_g) = lock::try_lock(unsafe { &raw mut (*d).lock }) else {
        return;
    };
    // SAFETY: map values, under the disk lock.
    let d = unsafe { &mut *d };
    d.advance(now);
    let Some(p) = PROC_DISK.get_ptr_mut(tgid) else {
        return;
    };
    let p = unsafe { &mut *p };
    if settle(d, p) && p.gone != 0 {
        let _ = PROC_DISK.remove(tgid);
    }
}

/// A completion of `tgid`'s request that found the disk lock contended:
/// its end is owed to the process's account, taken by the next holder of
/// the lock that touches it ([`settle`]). Left in service, the request
/// would keep the process counted until its `struct request` was reused,
/// and every other process's own-I/O clock would run at 1/n too slow
/// meanwhile. False when the process has no account.
#[inline(always)]
fn defer_end(tgid: u32) -> bool {
    let Some(p) = PROC_DISK.get_ptr_mut(tgid) else {
        return false;
    };
    // SAFETY: map value pointer; the entry stays while this request is
    // counted in it (only `in_service` and `process_gone` remove it, and
    // only with nothing in service). An atomic add, since a holder of the
    // lock may be settling it.
    unsafe { atomic_xadd::<u64, u64, { SeqCst }>(&raw mut (*p).pending_ends, 1) };
    true
}

/// Forgets the own-I/O account of process `tgid` when its main thread
/// exits, so that `PROC_DISK` holds the processes doing I/O now, not every
/// process that ever did (it filled up within hours under `serve`). With
/// requests still in service the entry is marked and forgotten when the
/// last of them ends (`in_service`). While nothing is in service a
/// process's own-I/O clock stands still; what a removal can lose is one
/// case only: a thread that outlives its main thread and waits, at the
/// removal, on a request not yet issued loses the own time of that wait
/// (its clock restarts from 0 below its snapshot; docs/ledger.md). Kept
/// when the lock stays contended.
#[inline(always)]
pub fn process_gone(tgid: u32) {
    let Some(d) = DISK.get_ptr_mut(0) else {
        return;
    };
    let Some(_g) = lock::try_lock(unsafe { &raw mut (*d).lock }) else {
        return;
    };
    let Some(p) = PROC_DISK.get_ptr_mut(tgid) else {
        return;
    };
    // SAFETY: map value pointer, under the disk lock.
    let d = unsafe { &mut *d };
    d.advance(now_ns());
    let _ = settle(d, unsafe { &mut *p });
    if unsafe { (*p).inflight } == 0 {
        let _ = PROC_DISK.remove(tgid);
    } else {
        unsafe { (*p).gone = 1 };
    }
}

#[inline(always)]
fn current() -> (u32, Task) {
    // SAFETY: helper without arguments.
    let task = Task(unsafe { bpf_get_current_task() } as *const u8);
    let tid = aya_ebpf::helpers::bpf_get_current_pid_tgid() as u32;
    (tid, task)
}

/// block_bio_queue(struct bio *bio): bytes submitted, per bio.
#[btf_tracepoint(function = "block_bio_queue")]
pub fn block_bio_queue(ctx: BtfTracePointContext) -> i32 {
    crate::count(stat::RUNS_BIO_QUEUE);
    let bio = Bio(ctx.arg::<*const u8>(0));
    let (tid, task) = current();
    if tid == 0 {
        return 0;
    }
    let (Ok(op), Ok(size)) = (bio.op(), bio.size()) else {
        crate::count(stat::READ_FAILED);
        return 0;
    };
    if let Some(a) = ledger::get_or_create(tid, &task, now_ns(), 0) {
        match op {
            REQ_OP_READ => a.io.read_bytes += size as u64,
            REQ_OP_WRITE => a.io.write_bytes += size as u64,
            _ => {}
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
    let (tid, task) = current();
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
        // Counted only when it did end: a contended lock leaves it in
        // service (counted in `lock_contended`). One that did end but whose
        // end is still owed settles its process now.
        if old.issue_ns == END_OWED {
            settle_at_reuse(old.tgid, now);
        } else if old.issue_ns != 0 && old.issue_ns != ENDED && in_service(old.tgid, now, false) {
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
        // Not counted in service (lock_contended): its completion must not
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
    if info.issue_ns == END_OWED || info.issue_ns == ENDED {
        return 0; // complete already
    }
    let now = now_ns();
    if info.issue_ns != 0 {
        if let Some(a) = owner(&info) {
            a.io.device_ns += now.saturating_sub(info.issue_ns);
        }
        if !in_service(info.tgid, now, false) {
            // Lock contended. With an account to owe the end to, the next
            // holder of the lock that touches the process settles it, or at
            // the latest this request's reuse; without, the request ends at
            // its reuse (`block_io_start`), not never. The entry stays.
            if defer_end(info.tgid) {
                // SAFETY: map value pointer.
                unsafe { (*entry).issue_ns = END_OWED };
            }
            trace::block(
                Kind::BlockComplete,
                rq as *const u8,
                info.tid,
                info.tgid,
                now,
            );
            return 0;
        }
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
