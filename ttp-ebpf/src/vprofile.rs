//! `vprofile` probes (VProfiler, paper 004, Sec. 3.1): per invocation of a
//! root function, its duration and the summed duration of each measured
//! child slot, one record per invocation through a ring buffer.
//!
//! Attachments (userspace `ttp_vprofile::plan`):
//! - `vprof_root_entry` (uprobe) and `vprof_root_return` (uretprobe) on the
//!   root function;
//! - `vprof_call` (uprobe) on every measured `call` instruction and
//!   `vprof_return` (uprobe) on the instruction after it, each with the
//!   site's cookie (`ttp_common::vprofile::cookie`).
//!
//! Per thread (LRU hash keyed by tid, so threads that exit are recycled),
//! the probes keep the root's nesting depth and a small stack of open calls.
//! A call opens a frame only when it is made in the context its slot
//! expects: a root child's call when no call is open (the root's own code
//! is running), a deeper child's call when its parent slot's frame is on
//! top. A frame closes at the first probe hit at its return address (the
//! probed ip of the call + the call's length): that is the return-site
//! probe, or a call-site probe at the same address (back-to-back calls),
//! whichever runs first, so the order in which the kernel runs two probes
//! at one address does not matter. Only the outermost root activation is
//! measured: in a recursive root, the nested activation's time is inside an
//! open call of the outer one, and its own call sites are ignored. Other
//! threads have their own state, so they never touch these sums.
use aya_ebpf::{
    EbpfContext,
    helpers::{bpf_get_current_pid_tgid, generated::bpf_get_attach_cookie},
    macros::{map, uprobe, uretprobe},
    maps::{LruHashMap, PerCpuArray, RingBuf},
    programs::{ProbeContext, RetProbeContext},
};
use ttp_common::vprofile::{MAX_DEPTH, MAX_SLOTS, PARENT_ROOT, Record, Stats, decode_cookie};

use crate::{now_ns, ring};

/// Threads that can be inside the root at once.
const MAX_VPROF_THREADS: u32 = 4096;
/// Ring buffer for records (~1 KiB each): 4 MiB holds ~4000 undrained.
const RECORD_RING_BYTES: u32 = 4 << 20;

/// One open call.
#[repr(C)]
#[derive(Clone, Copy)]
struct Frame {
    start_ns: u64,
    /// Run-time address the call returns to.
    return_ip: u64,
    slot: u32,
    /// `ThreadState::hits` when the call opened (its own hit included).
    hits0: u32,
}

/// Per-thread state; too large for the 512-byte BPF stack, so it lives in
/// the map and is built in a per-CPU scratch slot.
#[repr(C)]
#[derive(Clone, Copy)]
struct ThreadState {
    /// Root activations on this thread (> 1: recursion).
    depth: u32,
    /// Open calls in `stack`.
    sp: u32,
    untracked: u32,
    /// Probe hits on this thread since the outermost root entry (that
    /// entry not counted).
    hits: u32,
    start_ns: u64,
    stack: [Frame; MAX_DEPTH],
    sums: [u64; MAX_SLOTS],
    /// Per slot: probe costs inside its closed calls (see `Record`).
    hit_sums: [u32; MAX_SLOTS],
}

/// The process measured (set by the loader; 0: any). The attachments are
/// already per process; this guards against pid reuse between rounds.
#[unsafe(no_mangle)]
static VPROF_TGID: u32 = 0;

#[map]
static VPROF_THREADS: LruHashMap<u32, ThreadState> =
    LruHashMap::with_max_entries(MAX_VPROF_THREADS, 0);

#[map]
static VPROF_SCRATCH: PerCpuArray<ThreadState> = PerCpuArray::with_max_entries(1, 0);

#[map]
static VPROF_RECORDS: RingBuf = RingBuf::with_byte_size(RECORD_RING_BYTES, 0);

#[map]
static VPROF_STATS: PerCpuArray<Stats> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
fn stats() -> Option<&'static mut Stats> {
    // SAFETY: per-CPU slot, only this CPU writes it.
    VPROF_STATS.get_ptr_mut(0).map(|p| unsafe { &mut *p })
}

/// (tgid, tid) of the current task, or `None` if it is not the measured
/// process.
#[inline(always)]
fn current() -> Option<(u32, u32)> {
    let id = bpf_get_current_pid_tgid();
    let (tgid, tid) = ((id >> 32) as u32, id as u32);
    // SAFETY: a global set once before load.
    let want = unsafe { core::ptr::read_volatile(&VPROF_TGID) };
    (want == 0 || want == tgid).then_some((tgid, tid))
}

#[inline(always)]
fn state(tid: u32) -> Option<&'static mut ThreadState> {
    // SAFETY: map value; only the thread itself runs probes on its state
    // (a thread cannot hit two uprobes at once).
    VPROF_THREADS.get_ptr_mut(tid).map(|p| unsafe { &mut *p })
}

/// Counts one probe run and the time spent in it.
#[inline(always)]
fn account(started: u64) {
    if let Some(s) = stats() {
        s.hits += 1;
        s.probe_ns += now_ns().saturating_sub(started);
    }
}

/// `i` if below `n` (a power of two), masked after an optimisation
/// barrier so that the verifier sees the bound on the very register used to
/// index: LLVM otherwise drops the mask as redundant and may check one copy
/// of the value while indexing with another.
#[inline(always)]
fn bounded(i: usize, n: usize) -> Option<usize> {
    if i < n {
        Some(core::hint::black_box(i) & (n - 1))
    } else {
        None
    }
}

/// Closes the top frame if it returns to `ip`.
#[inline(always)]
fn close_at(st: &mut ThreadState, ip: u64, now: u64) {
    let Some(i) = bounded((st.sp as usize).wrapping_sub(1), MAX_DEPTH) else {
        return;
    };
    let top = st.stack[i];
    if top.return_ip != ip {
        return;
    }
    if let Some(s) = bounded(top.slot as usize, MAX_SLOTS) {
        st.sums[s] += now.saturating_sub(top.start_ns);
        // Hits after the opening one, the closing one included: the hits
        // inside the call plus one for its two boundaries.
        st.hit_sums[s] += st.hits.wrapping_sub(top.hits0);
    }
    st.sp -= 1;
}

#[uprobe]
pub fn vprof_root_entry(_ctx: ProbeContext) -> u32 {
    let now = now_ns();
    let Some((_, tid)) = current() else { return 0 };
    let st = match state(tid) {
        Some(st) => st,
        None => {
            let Some(scratch) = VPROF_SCRATCH.get_ptr_mut(0) else {
                return 0;
            };
            // SAFETY: per-CPU scratch slot; zeroed before use.
            let fresh = unsafe { &mut *scratch };
            fresh.depth = 0;
            // By reference: a copy would not fit on the BPF stack.
            let built: &ThreadState = fresh;
            if VPROF_THREADS.insert(tid, built, 0).is_err() {
                if let Some(s) = stats() {
                    s.no_thread_state += 1;
                }
                return 0;
            }
            match state(tid) {
                Some(st) => st,
                None => return 0,
            }
        }
    };
    if st.depth == 0 {
        st.start_ns = now;
        st.sp = 0;
        st.untracked = 0;
        st.hits = 0;
        for sum in st.sums.iter_mut() {
            *sum = 0;
        }
        for h in st.hit_sums.iter_mut() {
            *h = 0;
        }
    } else {
        st.hits += 1;
        if let Some(s) = stats() {
            s.nested_roots += 1;
        }
    }
    st.depth += 1;
    account(now);
    0
}

#[uretprobe]
pub fn vprof_root_return(_ctx: RetProbeContext) -> u32 {
    let now = now_ns();
    let Some((tgid, tid)) = current() else {
        return 0;
    };
    let Some(st) = state(tid) else { return 0 };
    if st.depth == 0 {
        return 0; // entered before the probes were attached
    }
    st.depth -= 1;
    if st.depth > 0 {
        st.hits += 1;
        account(now);
        return 0;
    }
    // Frames still open were abandoned (longjmp, exception).
    st.untracked += st.sp;
    let s = stats();
    // SAFETY (inside): reserved ring-buffer memory of the size of Record,
    // every field written.
    let sent = ring::emit::<Record>(&VPROF_RECORDS, |rec| unsafe {
        (*rec).tgid = tgid;
        (*rec).tid = tid;
        (*rec).start_ns = st.start_ns;
        (*rec).root_ns = now.saturating_sub(st.start_ns);
        (*rec).untracked_calls = st.untracked;
        (*rec).slots = MAX_SLOTS as u32;
        ring::copy(&mut (*rec).children_ns, &st.sums);
        (*rec).root_hits = st.hits + 1;
        (*rec)._pad = 0;
        ring::copy(&mut (*rec).children_hits, &st.hit_sums);
    });
    if let Some(s) = s {
        if sent {
            s.invocations += 1;
            s.untracked_calls += u64::from(st.untracked);
        } else {
            s.lost_records += 1;
        }
    }
    account(now);
    0
}

/// Probed ip (the kernel sets it to the breakpoint address before running
/// uprobe handlers) and cookie.
#[inline(always)]
fn site(ctx: &ProbeContext) -> (u64, u64) {
    // SAFETY: ctx.regs is the kernel's pt_regs for this hit.
    let ip = unsafe { (*ctx.regs).rip };
    // SAFETY: helper on the program's own context.
    let cookie = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    (ip, cookie)
}

#[uprobe]
pub fn vprof_call(ctx: ProbeContext) -> u32 {
    let now = now_ns();
    let Some((_, tid)) = current() else { return 0 };
    let Some(st) = state(tid) else { return 0 };
    if st.depth == 0 {
        return 0; // outside the root
    }
    st.hits += 1;
    if st.depth != 1 {
        account(now);
        return 0; // in a nested activation
    }
    let (ip, cookie) = site(&ctx);
    // A call right at the return address of the open call closes it first.
    close_at(st, ip, now);
    let (_site, call_len, parent, slot) = decode_cookie(cookie);
    let sp = st.sp as usize;
    let context = if sp == 0 {
        PARENT_ROOT
    } else {
        match bounded(sp - 1, MAX_DEPTH) {
            Some(i) => st.stack[i].slot,
            None => return 0,
        }
    };
    if context != parent {
        account(now);
        return 0; // made by the child function from another context
    }
    let Some(top) = bounded(sp, MAX_DEPTH) else {
        st.untracked += 1;
        account(now);
        return 0;
    };
    let frame = &mut st.stack[top];
    *frame = Frame {
        start_ns: now,
        return_ip: ip + u64::from(call_len),
        slot,
        hits0: st.hits,
    };
    st.sp += 1;
    account(now);
    0
}

#[uprobe]
pub fn vprof_return(ctx: ProbeContext) -> u32 {
    let now = now_ns();
    let Some((_, tid)) = current() else { return 0 };
    let Some(st) = state(tid) else { return 0 };
    if st.depth == 0 {
        return 0; // outside the root
    }
    st.hits += 1;
    if st.depth != 1 {
        account(now);
        return 0; // a nested root activation returning to the same site
    }
    let (ip, _) = site(&ctx);
    close_at(st, ip, now);
    account(now);
    0
}
