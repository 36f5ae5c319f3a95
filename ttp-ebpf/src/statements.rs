//! `statements` probes: PostgreSQL's USDT probes (query__start/done and its
//! wait probes), one uprobe program for every site, told apart by the
//! attachment cookie (`ttp_common::statements::cookie`).
//!
//! Per backend thread (LRU hash keyed by tid) the program keeps the open
//! statement: at `query__start` the scheduler's counters of the thread
//! (`se.sum_exec_runtime`, `sched_info.run_delay`) and its ledger account
//! (sleep, blocked, iowait, own iowait, iowait share); at `query__done` the
//! differences go out in one record with the statement's text. The thread
//! is on a CPU at both probes, so every closed interval of the ledger is in
//! its account and none is open but the running one. Wait probes inside a
//! statement add the time from their start to their done.
//!
//! The extended query protocol (Parse/Bind/Execute: most drivers'
//! parameterised queries) fires no `query__start`: its Execute message runs
//! the portal through `PortalRun`, whose executor pair
//! (`query__execute__start/done`) then opens and closes the statement
//! (flag `EXTENDED`), its text read through the server's global
//! `debug_query_string`. Inside a simple-protocol statement the same pair
//! is only a wait.
//!
//! A parallel worker runs a share of its leader's statement in a process of
//! its own that fires no `query__start`: the same program, attached at the
//! entry of `ParallelWorkerMain` and as a uretprobe at its return, opens and
//! closes that share like a statement (flag `WORKER`), its text the
//! worker's name, which holds the leader's pid.
use core::{
    intrinsics::{AtomicOrdering::SeqCst, atomic_xadd},
    mem::MaybeUninit,
    ptr::write_volatile,
};

use aya_ebpf::{
    EbpfContext,
    helpers::{
        bpf_get_current_pid_tgid, bpf_get_current_task, bpf_probe_read_kernel, bpf_probe_read_user,
        bpf_probe_read_user_str_bytes, generated::bpf_get_attach_cookie,
    },
    macros::{map, uprobe},
    maps::{LruHashMap, PerCpuArray, PerCpuHashMap, RingBuf},
    programs::ProbeContext,
};
use ttp_common::statements::{
    PARTS, Record, Stats, TEXT_LEN, Tranche, WAITS, arg, decode_cookie, flag, kind, part, wait,
};

use crate::{kernel::Task, ledger, now_ns, ring};

/// Backend threads with state at once.
const MAX_STMT_THREADS: u32 = 8192;
/// Ring buffer for records (~400 B each): 4 MiB holds ~10000 undrained.
const STMT_RING_BYTES: u32 = 4 << 20;
/// LWLock tranches tracked.
const MAX_TRANCHES: u32 = 1024;
/// Slots of `struct pt_regs` on x86-64.
const PT_REGS_SLOTS: u32 = 21;
/// Slots of `rip` and `rsp` in `struct pt_regs` on x86-64.
const RIP_SLOT: usize = 16;
const RSP_SLOT: usize = 19;

/// The server whose backends are measured: statements start only in its
/// children (set by the loader; 0: any process).
#[unsafe(no_mangle)]
pub(crate) static STMT_POSTMASTER: u32 = 0;
/// Offset of `task_struct.real_parent` (from BTF, set by the loader).
#[unsafe(no_mangle)]
pub(crate) static STMT_OFF_REAL_PARENT: u32 = 0;

/// Whether the current task is a child of the postmaster.
#[inline(always)]
fn is_backend() -> bool {
    // SAFETY: globals set once before load.
    let (pm, off) = unsafe {
        (
            core::ptr::read_volatile(&STMT_POSTMASTER),
            core::ptr::read_volatile(&STMT_OFF_REAL_PARENT),
        )
    };
    if pm == 0 {
        return true;
    }
    // SAFETY: helper without arguments; the fields are read with probe reads.
    let task = unsafe { bpf_get_current_task() } as *const u8;
    let parent = unsafe { bpf_probe_read_kernel(task.add(off as usize) as *const *const u8) };
    match parent {
        Ok(p) => Task(p).tgid() == Ok(pm),
        Err(_) => false,
    }
}

/// Per-thread state: the open statement.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct StmtState {
    /// 1 while a statement is open.
    pub(crate) open: u32,
    pub(crate) flags: u32,
    pub(crate) start_ns: u64,
    /// Counters at `query__start`, see `part`.
    pub(crate) base: [u64; PARTS],
    /// Socket boundaries (wire.rs): `sched_info.pcount` at the start; the
    /// request's first byte; 1 once a statement ended on the thread (then
    /// `start_ns` and `base` hold that end until the next request's read).
    pub(crate) base_pcount: u64,
    pub(crate) opened_by: u32,
    pub(crate) after: u32,
    /// The request's messages as far as they were walked (wire.rs): 1
    /// while the walk is in step with the stream, the bytes of the last
    /// message still to come in the next read, and what kinds were seen.
    pub(crate) walk: u32,
    pub(crate) msg_left: u32,
    pub(crate) kinds: u32,
    /// The backend's status entry (`MyBEEntry`'s value), once seen.
    pub(crate) entry: u64,
    /// Start of the open wait of each pair (0: none).
    pub(crate) wait_since: [u64; WAITS],
    pub(crate) waits_ns: [u64; WAITS],
    pub(crate) waits: [u32; WAITS],
    text_len: u32,
    /// Tranche-name pointer of the open LWLock wait.
    tranche: u64,
    /// Executor pairs open (`PortalRun`'s, and inside it
    /// `PortalRunMulti`'s per query), and where the outermost started: its
    /// probe address and stack pointer.
    exec_depth: u32,
    exec_rip: u64,
    exec_sp: u64,
    /// Parallel workers' shares ended inside the open statement (summed in
    /// the kernel: sums.rs): count, without a ledger account, elapsed and
    /// parts.
    pub(crate) workers: u32,
    pub(crate) workers_without_account: u32,
    pub(crate) workers_elapsed_ns: u64,
    pub(crate) workers_parts: [u64; PARTS],
    /// 1 once the thread ended a statement (`Stats::backends`).
    pub(crate) counted: u32,
    text: [u8; TEXT_LEN],
}

impl StmtState {
    /// No wait open or counted: a statement begins.
    #[inline(always)]
    pub(crate) fn clear_waits(&mut self) {
        self.tranche = 0;
        // Word stores, not a `memset` (words.rs): once per statement.
        // SAFETY: fields of a map value, 8-aligned u64 arrays.
        unsafe {
            crate::words::zero(&raw mut self.wait_since);
            crate::words::zero(&raw mut self.waits_ns);
        }
        for i in 0..WAITS {
            // SAFETY: an element of the array.
            unsafe { write_volatile(&raw mut self.waits[i], 0) };
        }
        // Volatile: three adjacent plain stores become a 16-byte `memset`
        // call, a byte a loop iteration (seen in the profile of a
        // statement's start, docs/benchmarks.md).
        // SAFETY: fields of a map value.
        unsafe {
            write_volatile(&raw mut self.workers, 0);
            write_volatile(&raw mut self.workers_without_account, 0);
            write_volatile(&raw mut self.workers_elapsed_ns, 0);
        }
        // SAFETY: a field of a map value, an 8-aligned u64 array.
        unsafe { crate::words::zero(&raw mut self.workers_parts) };
    }
}

#[map]
pub(crate) static STMT_THREADS: LruHashMap<u32, StmtState> =
    LruHashMap::with_max_entries(MAX_STMT_THREADS, 0);

#[map]
static STMT_SCRATCH: PerCpuArray<StmtState> = PerCpuArray::with_max_entries(1, 0);

#[map]
pub(crate) static STMT_RECORDS: RingBuf = RingBuf::with_byte_size(STMT_RING_BYTES, 0);

#[map]
static STMT_TRANCHES: PerCpuHashMap<u64, Tranche> =
    PerCpuHashMap::with_max_entries(MAX_TRANCHES, 0);

#[map]
static STMT_STATS: PerCpuArray<Stats> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
pub(crate) fn stats() -> Option<&'static mut Stats> {
    // SAFETY: per-CPU slot, only this CPU writes it.
    STMT_STATS.get_ptr_mut(0).map(|p| unsafe { &mut *p })
}

#[inline(always)]
pub(crate) fn state(tid: u32) -> Option<&'static mut StmtState> {
    // SAFETY: map value; only the thread itself runs probes on its state.
    STMT_THREADS.get_ptr_mut(tid).map(|p| unsafe { &mut *p })
}

/// The probe's pointer argument, per the cookie's mode.
#[inline(always)]
fn argument(ctx: &ProbeContext, mode: u32, slot: u32, offset: i32) -> Option<u64> {
    if mode == arg::NONE || slot >= PT_REGS_SLOTS {
        return None;
    }
    let regs = ctx.regs as *const u64;
    // SAFETY: slot < 21, inside the kernel's pt_regs of this hit.
    let reg = unsafe { bpf_probe_read_kernel(regs.add(slot as usize)) }.ok()?;
    if mode == arg::REGISTER {
        return Some(reg);
    }
    let at = reg.wrapping_add(offset as i64 as u64) as *const u64;
    // SAFETY: a user-memory read; a bad address fails and returns None.
    unsafe { bpf_probe_read_user(at) }.ok()
}

/// Register `slot` (< [`PT_REGS_SLOTS`]) at the probe (0 if unreadable).
#[inline(always)]
fn register(ctx: &ProbeContext, slot: usize) -> u64 {
    let regs = ctx.regs as *const u64;
    // SAFETY: slot < 21, inside the kernel's pt_regs of this hit.
    unsafe { bpf_probe_read_kernel(regs.add(slot)) }.unwrap_or(0)
}

/// The executor pair (`query__execute__start/done`). PostgreSQL fires it
/// in `PortalRun` and again, nested, in `PortalRunMulti` for each query of
/// a multi-query portal (DML): only the outermost pair counts, as the
/// `execute` wait of a simple-protocol statement, or, outside one, as a
/// statement of the extended query protocol of its own. A start at the
/// outermost pair's site and stack depth is not nested but the next run
/// after an error left the pair open: it restarts (as `query__start`
/// does).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn execute_probe(
    ctx: &ProbeContext,
    tgid: u32,
    tid: u32,
    now: u64,
    done: bool,
    mode: u32,
    slot: u32,
    offset: i32,
) {
    let i = wait::EXECUTE;
    if !done {
        let (rip, sp) = (register(ctx, RIP_SLOT), register(ctx, RSP_SLOT));
        if let Some(st) = state(tid)
            && st.open != 0
            && st.exec_depth > 0
            && (rip != st.exec_rip || sp < st.exec_sp)
        {
            st.exec_depth += 1;
            return;
        }
        let in_simple = state(tid).is_some_and(|st| st.open != 0 && st.flags & flag::EXTENDED == 0);
        if !in_simple {
            query_start(ctx, tid, now, mode, slot, offset, flag::EXTENDED);
        }
        if let Some(st) = state(tid)
            && st.open != 0
        {
            st.exec_depth = 1;
            st.exec_rip = rip;
            st.exec_sp = sp;
            st.wait_since[i] = if in_simple { now } else { st.start_ns };
        }
        return;
    }
    let Some(st) = state(tid) else { return };
    if st.open == 0 || st.exec_depth == 0 {
        return;
    }
    st.exec_depth -= 1;
    if st.exec_depth > 0 {
        return;
    }
    let since = st.wait_since[i];
    st.wait_since[i] = 0;
    if since != 0 {
        st.waits_ns[i] += now.saturating_sub(since);
        st.waits[i] += 1;
    }
    if st.flags & flag::EXTENDED != 0 {
        query_done(tgid, tid, now);
    }
}

/// The counters of `part` for the current thread now.
#[inline(always)]
fn counters(tid: u32, out: &mut [u64; PARTS]) -> u32 {
    let mut flags = flag::NO_BLKIO;
    // SAFETY: helper without arguments; the task is read with probe reads.
    let task = Task(unsafe { bpf_get_current_task() } as *const u8);
    out[part::ON_CPU] = task.sum_exec_runtime().unwrap_or(0);
    match task.run_delay() {
        Some(r) => out[part::RUNQ] = r,
        None => flags |= flag::NO_RUNQ,
    }
    flags | ledger_parts(tid, out)
}

/// The ledger's parts of the thread's account into `out` (and the running
/// stretch the kernel has not yet added to `out[ON_CPU]`); the flags to
/// add ([`flag::NO_ACCOUNT`] without an account).
#[inline(always)]
pub(crate) fn ledger_parts(tid: u32, out: &mut [u64; PARTS]) -> u32 {
    match ledger::lookup(tid) {
        Some(a) => {
            out[part::ON_CPU] += running_lag(a, out[part::ON_CPU]);
            out[part::SLEEP] = a.sleep_ns;
            out[part::BLOCKED] = a.blocked_ns;
            out[part::IOWAIT] = a.iowait_ns;
            out[part::IOWAIT_OWN] = a.iowait_own_ns;
            out[part::IOWAIT_SHARE] = a.iowait_share_ns;
            0
        }
        None => flag::NO_ACCOUNT,
    }
}

/// Longest stretch of running the kernel can have left out of
/// `sum_exec_runtime` (its tick adds it at least every 1/HZ, 4 ms at
/// HZ = 250, 10 ms at HZ = 100); a longer gap means the ledger missed a
/// switch of this thread, and nothing is added.
const MAX_LAG_NS: u64 = 10_000_000;

/// The running stretch the kernel has not yet added to the thread's
/// runtime: the kernel adds it at ticks and switches (`update_curr`), so a
/// statement shorter than a tick would show almost no CPU. Since its
/// switch-in (`state_since_ns`, the ledger's clock), the thread has run
/// `now - state_since_ns`, of which the kernel has counted `exec -
/// exec_snap_ns` (the runtime at its last switch-out, which is the runtime
/// at this switch-in). Only while the ledger saw the thread switch in on
/// this CPU.
#[inline(always)]
fn running_lag(a: &ttp_common::ThreadAccount, exec: u64) -> u64 {
    // SAFETY: helper without arguments.
    let cpu = unsafe { aya_ebpf::helpers::bpf_get_smp_processor_id() };
    if a.state != ttp_common::state::RUNNING
        || a.run_cpu != cpu
        || a.flags & ttp_common::flag::SCHED_SNAP == 0
    {
        return 0;
    }
    let ran = now_ns().saturating_sub(a.state_since_ns);
    let counted = exec.saturating_sub(a.exec_snap_ns);
    let lag = ran.saturating_sub(counted);
    if ran > counted + MAX_LAG_NS { 0 } else { lag }
}

#[uprobe]
pub fn stmt_usdt(ctx: ProbeContext) -> u32 {
    let t0 = now_ns();
    // SAFETY: helper on the program's own context.
    let cookie = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    let (k, mode, slot, offset) = decode_cookie(cookie);
    let id = bpf_get_current_pid_tgid();
    let (tgid, tid) = ((id >> 32) as u32, id as u32);
    match k {
        kind::QUERY_START => query_start(&ctx, tid, t0, mode, slot, offset, 0),
        kind::QUERY_DONE | kind::WORKER_DONE => query_done(tgid, tid, t0),
        kind::WORKER_START => query_start(&ctx, tid, t0, mode, slot, offset, flag::WORKER),
        _ => wait_probe(&ctx, tgid, tid, t0, k, mode, slot, offset),
    }
    if let Some(s) = stats() {
        s.hits += 1;
        s.probe_ns += now_ns().saturating_sub(t0);
    }
    0
}

/// The thread's state, created (no statement open) if it has none.
#[inline(always)]
pub(crate) fn state_or_new(tid: u32) -> Option<&'static mut StmtState> {
    if let Some(st) = state(tid) {
        return Some(st);
    }
    let scratch = STMT_SCRATCH.get_ptr_mut(0)?;
    // SAFETY: per-CPU scratch slot.
    let fresh = unsafe { &mut *scratch };
    fresh.open = 0;
    fresh.after = 0;
    fresh.entry = 0;
    fresh.counted = 0;
    let built: &StmtState = fresh;
    if STMT_THREADS.insert(tid, built, 0).is_err() {
        if let Some(s) = stats() {
            s.no_state += 1;
        }
        return None;
    }
    state(tid)
}

/// Opens a statement on the thread (`flags`: [`flag::WORKER`] for a
/// parallel worker's share, whose "text" is its worker name;
/// [`flag::EXTENDED`] for an executor run outside a simple-protocol
/// statement).
#[inline(always)]
fn query_start(
    ctx: &ProbeContext,
    tid: u32,
    now: u64,
    mode: u32,
    slot: u32,
    offset: i32,
    flags: u32,
) {
    if !is_backend() {
        if let Some(s) = stats() {
            s.other_processes += 1;
        }
        return;
    }
    let Some(st) = state_or_new(tid) else {
        return;
    };
    st.flags = flags;
    if st.open != 0 {
        st.flags |= flag::RESTARTED;
        if let Some(s) = stats() {
            s.restarted += 1;
        }
    }
    st.open = 1;
    st.start_ns = now;
    st.clear_waits();
    st.exec_depth = 0;
    st.text_len = 0;
    st.text[0] = 0;
    match argument(ctx, mode, slot, offset) {
        // SAFETY: a user-memory string read into the map value, bounded by
        // the buffer.
        Some(p) => match unsafe { bpf_probe_read_user_str_bytes(p as *const u8, &mut st.text) } {
            Ok(s) => {
                st.text_len = s.len() as u32;
                if s.len() >= TEXT_LEN - 1 {
                    st.flags |= flag::TRUNCATED;
                }
            }
            Err(_) => {
                if let Some(s) = stats() {
                    s.text_unread += 1;
                }
            }
        },
        None => {
            if let Some(s) = stats() {
                s.text_unread += 1;
            }
        }
    }
    st.flags |= counters(tid, &mut st.base);
    // The statement starts after the reads above: their cost is outside it
    // at this end and inside it at the other, once per statement.
    st.start_ns = now_ns();
}

#[inline(always)]
fn query_done(tgid: u32, tid: u32, now: u64) {
    // No state: a statement of another server's process (counted at its
    // start), or of a backend that began before the probes.
    let Some(st) = state(tid) else {
        return;
    };
    if st.open == 0 {
        if let Some(s) = stats() {
            s.done_without_start += 1;
        }
        return;
    }
    st.open = 0;
    let mut end = MaybeUninit::uninit();
    let end = crate::words::zeroed_words::<PARTS>(&mut end);
    let flags = st.flags | counters(tid, end);
    if flags & flag::WORKER != 0 && !crate::config::statements_each() {
        // Summed in the kernel: the share goes into its leader's open
        // statement, summed with it at its end (sums.rs).
        to_leader(st, now, end, flags);
        let _ = STMT_THREADS.remove(tid);
        return;
    }
    let s = stats();
    // SAFETY (inside): reserved ring-buffer memory of the size of Record,
    // every field written.
    let sent = ring::emit::<Record>(&STMT_RECORDS, |rec| unsafe {
        fill(rec, tgid, tid, st, now, end, flags);
        (*rec).text_len = st.text_len;
        ring::copy(&mut (*rec).text, &st.text);
    });
    if let Some(s) = s {
        if sent && flags & flag::WORKER != 0 {
            s.workers += 1;
        } else if sent {
            s.statements += 1;
        } else {
            s.lost_records += 1;
        }
    }
    // A parallel worker exits after its share: its state would only take a
    // place a backend's open statement may need (the map is an LRU).
    if flags & flag::WORKER != 0 {
        let _ = STMT_THREADS.remove(tid);
    }
}

/// The leader's pid in a parallel worker's name, "parallel worker for PID
/// <leader>" (`bgw_name`): the digits after its 24th byte.
#[inline(always)]
fn leader_pid(st: &StmtState) -> Option<u32> {
    const PREFIX: usize = 24;
    if st.text[0] != b'p' || st.text[PREFIX - 4] != b'P' || st.text[PREFIX - 1] != b' ' {
        return None;
    }
    let mut pid = 0u32;
    for i in PREFIX..PREFIX + 10 {
        let c = st.text[i];
        if !c.is_ascii_digit() {
            break;
        }
        pid = pid.wrapping_mul(10).wrapping_add(u32::from(c - b'0'));
    }
    (pid != 0).then_some(pid)
}

/// Adds a parallel worker's share (its state `st`, ending at `now` with
/// the counters `end`) into its leader's open statement (the leader waits
/// for its workers before its statement ends: docs/statements.md). A share
/// whose leader has no open statement is counted as unjoined.
#[inline(always)]
fn to_leader(st: &StmtState, now: u64, end: &[u64; PARTS], flags: u32) {
    let leader = leader_pid(st).and_then(state);
    // A share that began before the leader's open statement belongs to an
    // earlier one (as userspace's join of records required).
    let Some(l) = leader.filter(|l| l.open != 0 && st.start_ns >= l.start_ns) else {
        if let Some(s) = stats() {
            s.workers_unjoined += 1;
        }
        return;
    };
    if let Some(s) = stats() {
        s.workers += 1;
    }
    // Workers of one Gather end on several CPUs at once: atomic adds.
    // SAFETY: fields of the leader's map value, live for this program run.
    unsafe {
        atomic_xadd::<u32, u32, { SeqCst }>(&raw mut l.workers, 1);
        atomic_xadd::<u32, u32, { SeqCst }>(
            &raw mut l.workers_without_account,
            u32::from(flags & flag::NO_ACCOUNT != 0),
        );
        atomic_xadd::<u64, u64, { SeqCst }>(
            &raw mut l.workers_elapsed_ns,
            now.saturating_sub(st.start_ns),
        );
        for ((w, e), b) in l.workers_parts.iter_mut().zip(end).zip(&st.base) {
            atomic_xadd::<u64, u64, { SeqCst }>(w, e.saturating_sub(*b));
        }
    }
}

/// Writes every field of `rec` but the text: the statement `st` opened,
/// ending at `now` with the counters `end`. The socket boundaries' fields
/// are zero here; wire.rs sets them after.
///
/// # Safety
/// `rec` points at a reserved ring-buffer record.
#[inline(always)]
pub(crate) unsafe fn fill(
    rec: *mut Record,
    tgid: u32,
    tid: u32,
    st: &StmtState,
    now: u64,
    end: &[u64; PARTS],
    flags: u32,
) {
    unsafe {
        (*rec).tgid = tgid;
        (*rec).tid = tid;
        (*rec).start_ns = st.start_ns;
        (*rec).elapsed_ns = now.saturating_sub(st.start_ns);
        for ((d, e), b) in (*rec)
            .sched_ns
            .iter_mut()
            .zip(end.iter())
            .zip(st.base.iter())
        {
            *d = e.saturating_sub(*b);
        }
        ring::copy(&mut (*rec).waits_ns, &st.waits_ns);
        ring::copy(&mut (*rec).waits, &st.waits);
        (*rec).flags = flags;
        // Volatile: adjacent zero stores would merge into a byte-wise
        // `memset` call, run once per statement (words.rs).
        write_volatile(&raw mut (*rec).text_len, 0);
        write_volatile(&raw mut (*rec).switches, 0);
        write_volatile(&raw mut (*rec).query_id, 0);
        write_volatile(&raw mut (*rec).plan_id, 0);
        write_volatile(&raw mut (*rec).database, 0);
        write_volatile(&raw mut (*rec).user, 0);
        (*rec).opened_by = ttp_common::statements::opened::UNKNOWN;
        write_volatile(&raw mut (*rec).exit_code, 0);
    }
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn wait_probe(
    ctx: &ProbeContext,
    tgid: u32,
    tid: u32,
    now: u64,
    k: u32,
    mode: u32,
    slot: u32,
    offset: i32,
) {
    if k < kind::WAIT_BASE {
        return;
    }
    let i = ((k - kind::WAIT_BASE) / 2) as usize;
    let done = (k - kind::WAIT_BASE) % 2 == 1;
    if i >= WAITS {
        return;
    }
    if i == wait::EXECUTE {
        return execute_probe(ctx, tgid, tid, now, done, mode, slot, offset);
    }
    let Some(st) = state(tid) else { return };
    if st.open == 0 {
        return; // outside a statement
    }
    if !done {
        st.wait_since[i] = now;
        if i == wait::LWLOCK {
            st.tranche = argument(ctx, mode, slot, offset).unwrap_or(0);
        }
        return;
    }
    let since = st.wait_since[i];
    if since == 0 {
        return; // its start came before the statement's
    }
    st.wait_since[i] = 0;
    let dt = now.saturating_sub(since);
    st.waits_ns[i] += dt;
    st.waits[i] += 1;
    if i == wait::LWLOCK && st.tranche != 0 {
        let key = st.tranche;
        match STMT_TRANCHES.get_ptr_mut(key) {
            // SAFETY: this CPU's value.
            Some(t) => unsafe {
                (*t).waits += 1;
                (*t).wait_ns += dt;
            },
            None => {
                let t = Tranche {
                    waits: 1,
                    wait_ns: dt,
                    tgid,
                    _pad: 0,
                };
                let _ = STMT_TRANCHES.insert(key, t, 0);
            }
        }
    }
}
