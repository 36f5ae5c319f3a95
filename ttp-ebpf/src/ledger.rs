//! The per-thread accounts and the exit records. An account lives in
//! `THREAD_SLOTS`, an array indexed by tid, where the loader found
//! `kernel.pid_max` small enough (`TID_INDEXED`), else in `THREADS`, a hash
//! keyed by tid: an array lookup is a few instructions the verifier
//! inlines, a hash lookup a call that hashes the key (≈ 4 against ≈ 37 ns
//! here, docs/ledger-cost.md "Per-event cost").
use aya_ebpf::{
    macros::map,
    maps::{Array, HashMap, PerCpuArray, RingBuf},
};
use ttp_common::{EXIT_RING_BYTES, ExitRecord, MAX_THREADS, ThreadAccount, flag, stat, state};

use crate::kernel::Task;

/// Allocated on insert (BPF_F_NO_PREALLOC): a preallocated 32768-entry map
/// costs ~9 MiB and tens of ms at load; threads are created far less often
/// than they are looked up.
#[map]
pub static THREADS: HashMap<u32, ThreadAccount> =
    HashMap::with_max_entries(MAX_THREADS, aya_ebpf::bindings::BPF_F_NO_PREALLOC);

/// One account per possible tid (`kernel.pid_max` entries, sized by the
/// loader; one entry when unused). A slot holds an account when its `tid`
/// is the slot's index; 0 marks it free. Mappable: userspace scans it in
/// place (ttp-ledger/src/probe/slots.rs).
#[map]
pub static THREAD_SLOTS: Array<ThreadAccount> =
    Array::with_max_entries(1, aya_ebpf::bindings::BPF_F_MMAPABLE);

/// 1 when the accounts are in `THREAD_SLOTS` (read-only, set by the
/// loader: the verifier keeps only the path in use).
#[unsafe(no_mangle)]
static TID_INDEXED: u32 = 0;

#[inline(always)]
pub(crate) fn tid_indexed() -> bool {
    // SAFETY: a plain read of a global the loader wrote before load;
    // volatile so the compiler does not fold the 0 it was declared with.
    unsafe { core::ptr::read_volatile(&TID_INDEXED) != 0 }
}

#[map]
static EXITS: RingBuf = RingBuf::with_byte_size(EXIT_RING_BYTES, 0);

/// Room to build a new account: it is too large for the 512-byte BPF stack
/// alongside the callers' frames.
#[map]
static SCRATCH: PerCpuArray<ThreadAccount> = PerCpuArray::with_max_entries(1, 0);

pub type Acct = &'static mut ThreadAccount;

#[inline(always)]
pub fn lookup(tid: u32) -> Option<Acct> {
    // SAFETY: map value pointer; a thread's account is only updated by events
    // the scheduler serialises for that thread (its own switches, its wakeup
    // once it is off the CPU), so no two programs write it at once.
    if tid_indexed() {
        let a = unsafe { &mut *THREAD_SLOTS.get_ptr_mut(tid)? };
        return (a.tid == tid && tid != 0).then_some(a);
    }
    THREADS.get_ptr_mut(tid).map(|p| unsafe { &mut *p })
}

/// The account of `task`, created (state unknown) if the ledger has not seen
/// it yet.
#[inline(always)]
pub fn get_or_create(tid: u32, task: &Task, now: u64, parent_tgid: u32) -> Option<Acct> {
    if let Some(a) = lookup(tid) {
        return Some(a);
    }
    create(tid, task, now, parent_tgid)
}

#[inline(always)]
pub fn create(tid: u32, task: &Task, now: u64, parent_tgid: u32) -> Option<Acct> {
    // Built in place in its slot, or in the per-CPU scratch for the hash.
    let room = if tid_indexed() {
        match THREAD_SLOTS.get_ptr_mut(tid) {
            Some(p) => p,
            None => {
                // A tid beyond the array: pid_max was raised after load.
                crate::count(stat::THREAD_MAP_FULL);
                return None;
            }
        }
    } else {
        SCRATCH.get_ptr_mut(0)?
    };
    // SAFETY: map value pointer (the thread's slot, or the per-CPU scratch);
    // all-zero is `ThreadAccount::zeroed()` (the state UNKNOWN is 0,
    // common/src/lib.rs).
    unsafe { crate::words::zero(room) };
    // SAFETY: as above.
    let a = unsafe { &mut *room };
    a.tid = tid;
    match (task.tgid(), task.start_time()) {
        (Ok(tgid), Ok(start)) => {
            a.tgid = tgid;
            a.start_time_ns = start;
        }
        _ => crate::count(stat::READ_FAILED),
    }
    if let Ok(comm) = task.comm() {
        a.comm = comm;
    }
    // The scheduler's counters now: on-CPU and run-queue wait count from
    // here on.
    if let Ok(exec) = task.sum_exec_runtime() {
        a.exec_snap_ns = exec;
        a.run_delay_snap_ns = task.run_delay().unwrap_or(0);
        a.flags |= flag::SCHED_SNAP;
    }
    a.parent_tgid = parent_tgid;
    a.first_seen_ns = now;
    a.state_since_ns = now;
    if tid_indexed() {
        return Some(a);
    }
    let built: &ThreadAccount = a;
    if THREADS.insert(tid, built, 0).is_err() {
        crate::count(stat::THREAD_MAP_FULL);
        return None;
    }
    lookup(tid)
}

/// Sends the final account of a thread and forgets it.
#[inline(always)]
pub fn retire(tid: u32, a: &mut ThreadAccount, now: u64) {
    a.state = state::DEAD;
    // Filled, then the account freed, then sent: a reader that has the
    // record can no longer find the account, so an image taken after the
    // record arrived never holds the thread twice (cli/attach.rs,
    // `await_target_exit`).
    let mut slot = EXITS.reserve::<ExitRecord>(0);
    if let Some(slot) = slot.as_mut() {
        let r: *mut ExitRecord = slot.as_mut_ptr();
        // SAFETY: the reserved record, 8-aligned in the ring; the account
        // is a map value, not in the ring.
        unsafe {
            (*r).exit_ns = now;
            crate::words::copy(&raw mut (*r).account, a);
        }
    }
    if tid_indexed() {
        // The slot is free again (userspace skips it).
        a.tid = 0;
    } else {
        let _ = THREADS.remove(tid);
    }
    match slot {
        Some(slot) => {
            slot.submit(0);
            crate::count(stat::EXIT_RECORDS);
        }
        None => crate::count(stat::EXIT_RECORD_LOST),
    }
}
