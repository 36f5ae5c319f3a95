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
    maps::{Array, HashMap, PerCpuArray},
    programs::BtfTracePointContext,
};
use ttp_common::{
    DiskAccount, MAX_IO_PROCS, MAX_REQUESTS, ProcDisk, RequestInfo, stat, trace::Kind,
};

use core::intrinsics::{AtomicOrdering::SeqCst, atomic_cxchg, atomic_xadd};

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

/// A request's state while it is in flight, in the slot its address hashes
/// to (`slot_of`). `key` is the request's address while it is in flight,
/// the address with the low bit set once it ended (a `struct request` is
/// 8-aligned), 0 before any use. A start takes a slot whose request ended,
/// or the slot of its own request, by a compare-and-exchange on `key`;
/// only the request in flight changes its slot after that (its issue, its
/// end), so a slot in flight is never taken. One cache line a slot: the
/// first touch of a request costs one miss, where the hash's bucket and
/// then its entry cost two (57 % of `block_io_start` under pgbench TPC-B;
/// docs/ledger-cost.md).
#[repr(C, align(64))]
struct RequestSlot {
    key: u64,
    info: RequestInfo,
}

/// log2 of the slots: 4 096 (256 KiB). A machine has as many `struct
/// request`s as its queues' tags (a virtio disk 2 × 256, an NVMe drive
/// up to 64 × 1 023); a request whose slot is in flight with another is
/// kept in `REQUESTS` instead.
const SLOT_BITS: u32 = 12;

/// Sized by the loader (one entry when no ledger program runs, fewer in
/// the test of the overflow hash).
#[map]
static REQUEST_SLOTS: Array<RequestSlot> = Array::with_max_entries(1 << SLOT_BITS, 0);

/// The slots' count less one (a power of two), set by the loader when it
/// sizes `REQUEST_SLOTS` otherwise.
#[unsafe(no_mangle)]
static REQUEST_SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;

/// Requests in flight whose slot another request in flight held, by
/// address; removed at their end, so that it is empty on most machines and
/// not looked up at all then (`REQUEST_ENTRIES`).
#[map]
static REQUESTS: HashMap<u64, RequestInfo> = HashMap::with_max_entries(MAX_REQUESTS, 0);

/// Entries in `REQUESTS` (added at each insert, taken at each removal).
#[map]
static REQUEST_ENTRIES: Array<u64> = Array::with_max_entries(1, 0);

/// One word a CPU, through which a request's address becomes a number.
#[map]
static ADDRESS: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// The address of the kernel object at `p`, as a number the program may
/// compute with: the verifier allows no arithmetic on a pointer from the
/// tracepoint's arguments, and a word written as a pointer reads back as a
/// number. (The value never leaves the machine's maps; userspace sees
/// request addresses already, in the trace's records.) 0 if the word is
/// missing.
#[inline(always)]
pub(crate) fn address(p: *const u8) -> u64 {
    let Some(w) = ADDRESS.get_ptr_mut(0) else {
        return 0;
    };
    // SAFETY: this CPU's word of a map value; volatile, so that the load
    // is not folded into the store.
    unsafe {
        core::ptr::write_volatile(w.cast::<*const u8>(), p);
        core::ptr::read_volatile(w)
    }
}

/// The slot of request `rq`: a multiplicative hash of its address (the
/// golden ratio's 64-bit fraction; `struct request`s of a queue sit a few
/// hundred bytes apart, which the top bits of the product spread).
#[inline(always)]
fn slot_of(rq: u64) -> Option<*mut RequestSlot> {
    if rq == 0 {
        return None; // `address` failed; 0 is a free slot's key
    }
    // SAFETY: a global the loader wrote before load; volatile so that the
    // compiler does not fold the value it was declared with.
    let mask = unsafe { core::ptr::read_volatile(&REQUEST_SLOT_MASK) };
    let i = (rq.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOT_BITS)) as u32 & mask;
    REQUEST_SLOTS.get_ptr_mut(i)
}

/// Whether `REQUESTS` holds any entry (an atomic count, read-mostly).
#[inline(always)]
fn overflow_used() -> bool {
    REQUEST_ENTRIES.get(0).is_some_and(|n| *n != 0)
}

/// Where request `rq` is: its slot's state while it is in flight there,
/// else its entry in `REQUESTS`. None once it ended (or never started
/// while the ledger ran).
#[inline(always)]
pub(crate) fn find(rq: u64) -> Option<*mut RequestInfo> {
    let s = slot_of(rq)?;
    // SAFETY: map value pointer; `key` is read whole (an aligned word).
    if unsafe { core::ptr::read_volatile(&raw const (*s).key) } == rq {
        return Some(unsafe { &raw mut (*s).info });
    }
    if !overflow_used() {
        return None;
    }
    REQUESTS.get_ptr_mut(rq)
}

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

/// Ends request `rq` if it is still in service: it is starting again, so
/// it ended without `block_io_done` (the kernel does not emit it for every
/// request it issued: seen beside an O_DIRECT writer); left in service,
/// its process would count in the disk's n for good and shrink every
/// process's own-I/O time (docs/ledger.md).
#[inline(always)]
fn end_at_reuse(old: &RequestInfo, now: u64) {
    if old.issue_ns != 0 && in_service(old.tgid, now, false) {
        crate::count(stat::REQUEST_END_AT_REUSE);
    }
}

/// Records request `rq` as started with `info`: in its slot when the slot
/// is free, ended, or already its own (a request reused before its end
/// was seen), else in `REQUESTS`.
#[inline(always)]
fn start_request(rq: u64, info: &RequestInfo, now: u64) {
    let Some(s) = slot_of(rq) else {
        return;
    };
    // SAFETY: map value pointer; `key` is only changed whole, by the
    // atomic below or by the request in flight that holds the slot.
    let key = unsafe { core::ptr::read_volatile(&raw const (*s).key) };
    let mine = if key == rq {
        // SAFETY: as above; this request's own state, copied.
        end_at_reuse(&unsafe { (*s).info }, now);
        true
    } else {
        // Free (0) or ended (low bit): taken unless another start took it
        // first. A key that changed since the read (the ended request
        // started again) fails the exchange, so a slot in flight is never
        // taken.
        (key == 0 || key & 1 != 0)
            // SAFETY: an aligned word of a map value.
            && unsafe { atomic_cxchg::<u64, { SeqCst }, { SeqCst }>(&raw mut (*s).key, key, rq) }.1
    };
    if mine {
        // SAFETY: the slot is this request's; nothing reads its state
        // before the request is issued.
        unsafe { crate::words::copy(&raw mut (*s).info, info) };
    }
    if !overflow_used() {
        if !mine {
            insert_overflow(rq, info);
        }
        return;
    }
    match REQUESTS.get_ptr_mut(rq) {
        Some(e) => {
            // SAFETY: map value pointer, copied; nothing else touches the
            // entry of a request that has not started yet.
            end_at_reuse(&unsafe { *e }, now);
            if mine {
                // It moved to its slot; the entry is stale.
                if REQUESTS.remove(rq).is_ok() {
                    count_entries(u64::MAX);
                }
            } else {
                // SAFETY: as above; both 8-aligned RequestInfo.
                unsafe { crate::words::copy(e, info) };
            }
        }
        None if !mine => insert_overflow(rq, info),
        None => {}
    }
}

/// Puts request `rq` in `REQUESTS` (its slot is in flight with another).
#[inline(always)]
fn insert_overflow(rq: u64, info: &RequestInfo) {
    if REQUESTS.insert(rq, *info, 0).is_err() {
        crate::count(stat::REQUEST_MAP_FULL);
    } else {
        count_entries(1);
        crate::count(stat::REQUEST_OVERFLOW);
    }
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
    match Request(rq_ptr).op_btf() {
        Ok(REQ_OP_READ) => a.io.read_requests += 1,
        Ok(REQ_OP_WRITE) => a.io.write_requests += 1,
        Ok(_) => {}
        Err(_) => crate::count(stat::READ_FAILED),
    }
    let info = RequestInfo {
        tid,
        tgid: a.tgid,
        thread_start_ns: a.start_time_ns,
        start_ns: now,
        issue_ns: 0,
    };
    start_request(address(rq_ptr), &info, now);
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
    let rq = address(ctx.arg::<*const u8>(0));
    let Some(info) = find(rq) else {
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
    let rq = address(ctx.arg::<*const u8>(0));
    let Some(entry) = find(rq) else {
        return 0; // ended already, or started before the ledger ran
    };
    // SAFETY: map value pointer; copied before the request is ended.
    let info = unsafe { *entry };
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
    end_request(rq);
    0
}

/// Marks request `rq` ended: its slot keeps the address with the low bit
/// set (free for the next start that hashes there), an entry of
/// `REQUESTS` is removed.
#[inline(always)]
fn end_request(rq: u64) {
    if let Some(s) = slot_of(rq) {
        // SAFETY: map value pointer. Only the request in flight ends its
        // slot, and a start takes a slot only from an ended key, by a
        // compare-and-exchange: a plain store is enough.
        unsafe {
            if core::ptr::read_volatile(&raw const (*s).key) == rq {
                core::ptr::write_volatile(&raw mut (*s).key, rq | 1);
                return;
            }
        }
    }
    if overflow_used() && REQUESTS.remove(rq).is_ok() {
        count_entries(u64::MAX);
    }
}
