//! `statements` at the client socket: a PostgreSQL statement's boundaries
//! from events that cost tens of nanoseconds instead of a uprobe trap.
//!
//! A backend reads each request from its client socket and writes each
//! reply to it with plain `recv`/`send` (`secure_raw_read/write`, under
//! TLS too). The kernel's `sock_recv_length` and `sock_send_length`
//! tracepoints fire in `sock_recvmsg`/`sock_sendmsg` for every socket of
//! every process; the programs return at once outside the postmaster's
//! children. In a backend thread:
//!
//! - a successful read while no statement is open opens one: the time, the
//!   scheduler's counters (`se.sum_exec_runtime`, `sched_info.run_delay`,
//!   `sched_info.pcount`), delay accounting's block-I/O wait, and the
//!   request's first byte (its message type, read from the syscall's
//!   buffer on a plain-text connection);
//! - a successful write closes it when the backend's own status entry
//!   (`MyBEEntry`, `PgBackendStatus`) says idle again: PostgreSQL sets the
//!   state to idle (or idle in transaction) right before it sends
//!   ReadyForQuery, and keeps it running through every other write of a
//!   reply. Where the entry cannot be read or `track_activities` is off,
//!   the write closes it when its last six bytes are a ReadyForQuery
//!   message (`Z`, length 5, status byte). The record then carries the
//!   text the entry holds (`st_activity_raw`), the query id, database and
//!   user;
//! - a write while none is open but one ended on the thread before, with
//!   no read since, is the reply to a request that was already in the
//!   backend's input buffer (a pipeline): that statement began at the
//!   previous end;
//! - a write that begins with an ErrorResponse (`E`) marks the open
//!   statement as failed (PostgreSQL flushes every error report at once);
//! - `sched_process_exit` sends the statement a backend leaves open when it
//!   exits (killed, or a FATAL error) and drops the thread's state.
//!
//! docs/statements.md says what a statement is in each case of the
//! protocol.
use core::mem::MaybeUninit;

use aya_ebpf::{
    helpers::{
        bpf_get_current_pid_tgid, bpf_get_current_task_btf, bpf_probe_read_user,
        bpf_probe_read_user_buf, bpf_probe_read_user_str_bytes, bpf_task_pt_regs,
    },
    macros::{btf_tracepoint, map},
    maps::PerCpuArray,
    programs::BtfTracePointContext,
};
use ttp_common::statements::{PARTS, Record, TEXT_UNTERMINATED, flag, opened, part, status};

use crate::{
    kernel::BtfTask,
    now_ns, ring,
    statements::{
        STMT_OFF_REAL_PARENT, STMT_POSTMASTER, STMT_RECORDS, StmtState, fill, ledger_parts, state,
        state_or_new, stats,
    },
};

/// Address of the server's global `MyBEEntry` in its backends (they are
/// forks of one postmaster, so it is the same in all); 0: unknown.
#[unsafe(no_mangle)]
static STMT_BEENTRY: u64 = 0;
/// Offsets in `PgBackendStatus` (per server version, set by the loader).
#[unsafe(no_mangle)]
static STMT_OFF_STATE: u32 = 0;
#[unsafe(no_mangle)]
static STMT_OFF_ACTIVITY: u32 = 0;
#[unsafe(no_mangle)]
static STMT_OFF_QUERY_ID: u32 = 0;
/// `st_plan_id` (PostgreSQL 18 and later); 0: the version has none.
#[unsafe(no_mangle)]
static STMT_OFF_PLAN_ID: u32 = 0;
/// How far the version's `BackendState` values lie above 14's (18: 1,
/// its `STATE_STARTING` moved the others up); subtracted from the state
/// read, so the `status::STATE_*` values hold for every version.
#[unsafe(no_mangle)]
static STMT_STATE_SHIFT: u32 = 0;
/// `st_activity_start_timestamp`, followed by `st_state_start_timestamp`,
/// `st_databaseid` and `st_userid`.
#[unsafe(no_mangle)]
static STMT_OFF_ACTIVITY_START: u32 = 0;
/// 1 when the offsets above are known for this server (else no status
/// is read: the bytes decide the end, and there is no text).
#[unsafe(no_mangle)]
static STMT_HAVE_STATUS: u32 = 0;
/// Offsets of `task_struct.sched_info.pcount` and `task_struct.exit_code`.
#[unsafe(no_mangle)]
static STMT_OFF_PCOUNT: u32 = 0;
#[unsafe(no_mangle)]
static STMT_OFF_EXIT_CODE: u32 = 0;
/// 1 when the ledger's programs run (`statements --ledger`): its sleep,
/// blocked and iowait parts are read too.
#[unsafe(no_mangle)]
static STMT_LEDGER: u32 = 0;

/// `PgBackendStatus.st_procpid`'s offset (its second field in every
/// version).
const OFF_PROCPID: u32 = 4;
/// x86-64 syscall numbers whose second argument is the data's buffer.
const SYS_READ: u64 = 0;
const SYS_WRITE: u64 = 1;
const SYS_SENDTO: u64 = 44;
const SYS_RECVFROM: u64 = 45;
/// `struct pt_regs` slots (x86-64): `si` (the second argument) and
/// `orig_ax` (the syscall number).
const REGS_SI: usize = 13;
const REGS_ORIG_AX: usize = 15;
const MSG_PEEK: u32 = 2;

#[inline(always)]
fn global<T: Copy>(v: &'static T) -> T {
    // SAFETY: a plain read of a global the loader wrote before load;
    // volatile so the compiler does not fold the value it was declared with.
    unsafe { core::ptr::read_volatile(v) }
}

/// The current task, if it is a child of the measured postmaster.
#[inline(always)]
fn backend() -> Option<BtfTask> {
    // SAFETY: helper without arguments; a pointer the verifier types.
    let task = BtfTask(unsafe { bpf_get_current_task_btf() } as *const u8);
    let parent = task.task_at(&STMT_OFF_REAL_PARENT).ok()?;
    (parent.tgid().ok()? == global(&STMT_POSTMASTER)).then_some(task)
}

/// The buffer of the socket syscall under way, if it is one whose second
/// argument is the buffer (read, write, recvfrom, sendto).
#[inline(always)]
fn syscall_buffer(task: BtfTask) -> Option<u64> {
    // SAFETY: the helper returns the task's saved user registers, a
    // pointer the verifier types as `struct pt_regs`; its fields are plain
    // loads at constant offsets.
    let regs = unsafe { bpf_task_pt_regs(task.0 as *mut _) } as *const u64;
    if regs.is_null() {
        return None;
    }
    let (nr, si) = unsafe {
        (
            core::ptr::read_volatile(regs.add(REGS_ORIG_AX)),
            core::ptr::read_volatile(regs.add(REGS_SI)),
        )
    };
    matches!(nr, SYS_READ | SYS_WRITE | SYS_SENDTO | SYS_RECVFROM).then_some(si)
}

/// The byte at `addr` in the current process.
#[inline(always)]
fn user_byte(addr: u64) -> Option<u8> {
    // SAFETY: a user-memory read; a bad address fails.
    unsafe { bpf_probe_read_user(addr as *const u8) }.ok()
}

/// The scheduler's and delay accounting's counters of `task` now, and
/// the ledger's with `statements --ledger`; the flags to add.
#[inline(always)]
fn counters(task: BtfTask, tid: u32, out: &mut [u64; PARTS], pcount: &mut u64) -> u32 {
    let mut flags = flag::SOCKET;
    out[part::ON_CPU] = task.sum_exec_runtime().unwrap_or(0);
    match task.run_delay() {
        Some(r) => out[part::RUNQ] = r,
        None => flags |= flag::NO_RUNQ,
    }
    match task.blkio_delay() {
        Some(b) => out[part::BLKIO] = b,
        None => flags |= flag::NO_BLKIO,
    }
    *pcount = task.field::<u64>(&STMT_OFF_PCOUNT).unwrap_or(0);
    if global(&STMT_LEDGER) != 0 {
        flags |= ledger_parts(tid, out);
    } else {
        flags |= flag::NO_ACCOUNT;
    }
    flags
}

/// Opens a statement on the thread now.
#[inline(always)]
fn open(st: &mut StmtState, task: BtfTask, tid: u32, opened_by: u32) {
    st.open = 1;
    st.opened_by = opened_by;
    st.clear_waits();
    st.flags = counters(task, tid, &mut st.base, &mut st.base_pcount);
    // The statement starts after the reads above: their cost is outside
    // it at this end and inside it at the other, once per statement.
    st.start_ns = now_ns();
}

/// sock_recv_length(struct sock *sk, int ret, int flags)
#[btf_tracepoint(function = "sock_recv_length")]
pub fn stmt_sock_recv(ctx: BtfTracePointContext) -> i32 {
    let ret = ctx.arg::<u64>(1) as i32;
    let flags = ctx.arg::<u64>(2) as u32;
    if ret <= 0 || flags & MSG_PEEK != 0 {
        return 0;
    }
    let Some(task) = backend() else { return 0 };
    let tid = bpf_get_current_pid_tgid() as u32;
    if let Some(s) = stats() {
        s.socket_events += 1;
    }
    let Some(st) = state_or_new(tid) else {
        return 0;
    };
    let buf = syscall_buffer(task);
    if st.open == 0 {
        // The request's first message header: its type opens the
        // statement, and the walk goes on after it.
        let head = buf.and_then(|b| {
            // SAFETY: a user-memory read; a bad address fails.
            unsafe { bpf_probe_read_user(b as *const [u8; 5]) }.ok()
        });
        let first = match head {
            Some(h) => u32::from(h[0]),
            None => buf.and_then(user_byte).map_or(opened::UNKNOWN, u32::from),
        };
        open(st, task, tid, first);
        st.kinds = 0;
        st.msg_left = 0;
        st.walk = 0;
        if let (Some(h), Some(b)) = (head, buf)
            && frontend_message(first)
        {
            st.walk = 1;
            let size = u32::from_be_bytes([h[1], h[2], h[3], h[4]]);
            if size < 4 {
                st.walk = 0;
            } else {
                st.kinds = kind_of(h[0]);
                st.msg_left = size + 1;
                walk(st, b, ret as u32);
            }
        }
        return 0;
    }
    // More of a request already opened: the walk follows its messages.
    if st.walk != 0 {
        match buf {
            Some(b) => walk(st, b, ret as u32),
            None => st.walk = 0,
        }
    }
    0
}

/// [`KIND_EXECUTES`] for a message that executes something (Query,
/// Execute, FunctionCall), else [`KIND_OTHER`].
#[inline(always)]
fn kind_of(t: u8) -> u32 {
    if matches!(t, b'Q' | b'E' | b'F') {
        KIND_EXECUTES
    } else {
        KIND_OTHER
    }
}

/// Whether `b` is the type byte of a message a client sends after its
/// start-up (docs: "Message Formats").
#[inline(always)]
fn frontend_message(b: u32) -> bool {
    matches!(
        u8::try_from(b),
        Ok(b'Q'
            | b'P'
            | b'B'
            | b'E'
            | b'D'
            | b'C'
            | b'S'
            | b'H'
            | b'F'
            | b'X'
            | b'd'
            | b'c'
            | b'f'
            | b'p')
    )
}

/// Kinds of messages a request holds ([`StmtState::kinds`]): one that
/// executes something (Query, Execute, FunctionCall) and any other.
const KIND_EXECUTES: u32 = 1;
const KIND_OTHER: u32 = 2;
/// Messages walked per read at most; a read holding more stops the walk.
const WALK_MESSAGES: u32 = 16;

/// Walks the messages of the `len` bytes a read brought into `buf`: each
/// is a type byte and a big-endian length that counts itself. A message
/// may go on into the next read (`msg_left`); a header split between two
/// reads, a length below 4 or more than [`WALK_MESSAGES`] messages stop
/// the walk, and the request then counts as one that executes.
#[inline(always)]
fn walk(st: &mut StmtState, buf: u64, len: u32) {
    let mut pos = u64::from(st.msg_left);
    let len = u64::from(len);
    for _ in 0..WALK_MESSAGES {
        if pos >= len {
            st.msg_left = (pos - len) as u32;
            return;
        }
        if pos + 5 > len {
            break;
        }
        // SAFETY: a user-memory read; a bad address fails.
        let Ok(head) = (unsafe { bpf_probe_read_user((buf + pos) as *const [u8; 5]) }) else {
            break;
        };
        let size = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
        if size < 4 {
            break;
        }
        st.kinds |= kind_of(head[0]);
        pos += 1 + u64::from(size);
    }
    if pos >= len {
        st.msg_left = (pos - len) as u32;
        return;
    }
    st.walk = 0;
}

/// Whether `state` (a `BackendState`) is one of the states PostgreSQL
/// sets right before ReadyForQuery.
#[inline(always)]
fn idle(state: u32) -> bool {
    state == status::STATE_IDLE
        || state == status::STATE_IDLE_IN_TRANSACTION
        || state == status::STATE_IDLE_IN_TRANSACTION_ABORTED
}

/// Bytes of `PgBackendStatus` read at once: every field `statements`
/// reads lies below (userspace checks the offsets against it).
pub(crate) const STATUS_BYTES: usize = ttp_common::statements::STATUS_BYTES;

/// The fields of a backend's status entry, read in one copy.
#[derive(Clone, Copy)]
struct Status {
    state: u32,
    /// `st_activity_start_timestamp` (0: no statement timed yet).
    activity_start: u64,
    database: u32,
    user: u32,
    activity: u64,
    query_id: u64,
    /// 0 where the version has no `st_plan_id`.
    plan_id: u64,
}

/// Room for one copy of the entry, too large for the BPF stack.
#[map]
static STMT_STATUS: PerCpuArray<[u8; STATUS_BYTES]> = PerCpuArray::with_max_entries(1, 0);

/// A field of `T` at `off` in the copy.
#[inline(always)]
fn field<T: Copy + Default>(copy: &[u8; STATUS_BYTES], off: u32) -> T {
    let off = off as usize;
    if off + core::mem::size_of::<T>() > STATUS_BYTES {
        return T::default();
    }
    // SAFETY: inside the copy (checked above); unaligned read.
    unsafe { core::ptr::read_unaligned(copy.as_ptr().add(off) as *const T) }
}

/// The backend's status entry, when the server's layout is known and the
/// entry is in use (`st_procpid` set: from the end of the connection's
/// start-up on): one copy of its first [`STATUS_BYTES`]. The entry's
/// address is kept in the thread's state once seen (`MyBEEntry` does not
/// change for a backend's life).
#[inline(always)]
fn status(st: &mut StmtState) -> Option<Status> {
    if global(&STMT_HAVE_STATUS) == 0 {
        return None;
    }
    if st.entry == 0 {
        // SAFETY: a user-memory read; a bad address fails.
        st.entry = unsafe { bpf_probe_read_user(global(&STMT_BEENTRY) as *const u64) }.ok()?;
        if st.entry == 0 {
            return None;
        }
    }
    let copy = STMT_STATUS.get_ptr_mut(0)?;
    // SAFETY: this CPU's scratch; a user-memory read that fails on a bad
    // address.
    let copy = unsafe { &mut *copy };
    let read = unsafe {
        aya_ebpf::helpers::generated::bpf_probe_read_user(
            copy.as_mut_ptr() as *mut _,
            STATUS_BYTES as u32,
            st.entry as *const _,
        )
    };
    if read != 0 {
        return None;
    }
    if field::<i32>(copy, OFF_PROCPID) == 0 {
        // Not in use yet: the entry may be another backend's next.
        st.entry = 0;
        return None;
    }
    let start = global(&STMT_OFF_ACTIVITY_START);
    Some(Status {
        state: field::<u32>(copy, global(&STMT_OFF_STATE))
            .saturating_sub(global(&STMT_STATE_SHIFT)),
        activity_start: field(copy, start),
        database: field(copy, start + 16),
        user: field(copy, start + 20),
        activity: field(copy, global(&STMT_OFF_ACTIVITY)),
        query_id: field(copy, global(&STMT_OFF_QUERY_ID)),
        plan_id: match global(&STMT_OFF_PLAN_ID) {
            0 => 0,
            off => field(copy, off),
        },
    })
}

/// Whether the `len` bytes written from `buf` end with a ReadyForQuery
/// message: `Z`, the length 5 (big-endian), the transaction status.
#[inline(always)]
fn ends_with_ready_for_query(buf: u64, len: u64) -> bool {
    if len < 6 {
        return false;
    }
    // SAFETY: a user-memory read; a bad address fails.
    let Ok(tail) = (unsafe { bpf_probe_read_user((buf + len - 6) as *const [u8; 6]) }) else {
        return false;
    };
    tail[0] == b'Z'
        && tail[1..5] == [0, 0, 0, 5]
        && (tail[5] == b'I' || tail[5] == b'T' || tail[5] == b'E')
}

/// sock_send_length(struct sock *sk, int ret, int flags)
#[btf_tracepoint(function = "sock_send_length")]
pub fn stmt_sock_send(ctx: BtfTracePointContext) -> i32 {
    let ret = ctx.arg::<u64>(1) as i32;
    if ret <= 0 {
        return 0;
    }
    let Some(task) = backend() else { return 0 };
    let id = bpf_get_current_pid_tgid();
    let (tgid, tid) = ((id >> 32) as u32, id as u32);
    if let Some(s) = stats() {
        s.socket_events += 1;
    }
    let Some(st) = state(tid) else { return 0 };
    if st.open == 0 {
        if st.after == 0 {
            return 0; // a reply to a request read before the programs
        }
        // A reply without a read since the last end: its request was
        // already buffered; the statement began at that end.
        st.open = 1;
        st.opened_by = opened::UNKNOWN;
        st.flags |= flag::PIPELINED;
        st.clear_waits();
    }
    let entry = status(st);
    // The write's bytes are read only where the entry does not decide.
    let (end, buf) = match entry {
        Some(e) if e.state != status::STATE_DISABLED => (idle(e.state), None),
        _ => {
            let buf = syscall_buffer(task);
            (
                buf.is_some_and(|b| ends_with_ready_for_query(b, ret as u64)),
                buf,
            )
        }
    };
    if !end {
        if buf.or_else(|| syscall_buffer(task)).and_then(user_byte) == Some(b'E') {
            st.flags |= flag::ERROR;
        }
        return 0;
    }
    close(task, st, tgid, tid, entry, 0, 0);
    0
}

/// Closes the thread's open statement now and sends its record; `entry`:
/// the backend's status entry, where read; `extra`/`exit_code`:
/// [`flag::EXITED`] and the task's exit code when the backend exits with
/// it open.
#[inline(always)]
fn close(
    task: BtfTask,
    st: &mut StmtState,
    tgid: u32,
    tid: u32,
    entry: Option<Status>,
    extra: u32,
    exit_code: u32,
) {
    let now = now_ns();
    st.open = 0;
    let mut end = MaybeUninit::uninit();
    let end = crate::words::zeroed_words::<PARTS>(&mut end);
    let mut pcount = 0u64;
    let mut flags = st.flags | extra | counters(task, tid, end, &mut pcount);
    if entry.is_none() {
        flags |= flag::NO_STATUS;
    }
    // The connection's start-up: its first read was the start-up (or SSL
    // request) packet, which begins with a length, not a message type; or
    // the entry has timed no statement yet (with `track_activities` on:
    // off, the state reads disabled and the timestamp stays 0).
    let untimed = entry.is_some_and(|e| e.activity_start == 0 && e.state != status::STATE_DISABLED);
    if st.opened_by == 0 || untimed {
        flags |= flag::STARTUP;
    }
    if st.walk != 0 && st.kinds & KIND_EXECUTES == 0 && st.flags & flag::PIPELINED == 0 {
        flags |= flag::PREPARE;
    }
    let statement = flags & (flag::STARTUP | flag::PREPARE | flag::EXITED) == 0;
    let switches = pcount.saturating_sub(st.base_pcount) as u32;
    if statement {
        if st.counted == 0 {
            st.counted = 1;
            if let Some(s) = stats() {
                s.backends += 1;
            }
        }
        let mut diff = MaybeUninit::uninit();
        let diff = crate::words::zeroed_words::<PARTS>(&mut diff);
        for i in 0..PARTS {
            diff[i] = end[i].saturating_sub(st.base[i]);
        }
        if !crate::sums::on() {
            if let Some(s) = stats() {
                s.statements += 1;
            }
        } else {
            crate::sums::add(&crate::sums::Ended {
                tgid,
                st,
                elapsed_ns: now.saturating_sub(st.start_ns),
                diff,
                switches,
                flags,
                entry: entry.map(|e| (e.database, e.user, e.query_id, e.activity)),
                plan_id: entry.map_or(0, |e| e.plan_id),
            });
        }
    }
    if let Some(s) = stats() {
        if flags & flag::STARTUP != 0 {
            s.connections += 1;
        } else if flags & flag::PREPARE != 0 {
            s.prepares += 1;
        } else if flags & flag::EXITED != 0 {
            s.statements += 1;
            s.exited_open += 1;
            if exit_code & 0x7f != 0 {
                s.killed_open += 1;
            }
        }
    }
    // A record a statement only with `--each` (and for `serve`).
    if crate::config::statements_each() {
        // SAFETY (inside): reserved ring-buffer memory of the size of
        // Record; `fill` writes every field but the text, which is written
        // up to `text_len` (userspace reads no further).
        let sent = ring::emit::<Record>(&STMT_RECORDS, |rec| unsafe {
            fill(rec, tgid, tid, st, now, end, flags);
            (*rec).switches = switches;
            (*rec).opened_by = st.opened_by;
            (*rec).exit_code = exit_code;
            (*rec).text[0] = 0;
            if let Some(e) = entry {
                (*rec).query_id = e.query_id;
                (*rec).plan_id = e.plan_id;
                (*rec).database = e.database;
                (*rec).user = e.user;
                // One fixed-size copy (a string copy costs ~4× as much
                // here); userspace finds the NUL. Near the end of a
                // mapping the copy fails: then the string copy.
                let p = e.activity as *const u8;
                if bpf_probe_read_user_buf(p, &mut (*rec).text).is_ok() {
                    (*rec).text_len = TEXT_UNTERMINATED;
                } else if let Ok(t) = bpf_probe_read_user_str_bytes(p, &mut (*rec).text) {
                    (*rec).text_len = t.len() as u32;
                }
            }
        });
        if !sent && let Some(s) = stats() {
            s.lost_records += 1;
        }
    }
    // The next statement begins here if its request is already buffered.
    st.after = 1;
    st.start_ns = now;
    // SAFETY: a map value's field and a stack array, both [u64; PARTS].
    unsafe { crate::words::copy(&raw mut st.base, end) };
    st.base_pcount = pcount;
    st.flags = 0;
    st.walk = 0;
}

/// sched_process_exit(struct task_struct *p, ...): a backend thread that
/// exits with a statement open sends it, flagged, and its state goes.
#[btf_tracepoint(function = "sched_process_exit")]
pub fn stmt_exit(_ctx: BtfTracePointContext) -> i32 {
    let id = bpf_get_current_pid_tgid();
    let (tgid, tid) = ((id >> 32) as u32, id as u32);
    let Some(st) = state(tid) else { return 0 };
    if st.open != 0 {
        // SAFETY: helper without arguments; a pointer the verifier types.
        let task = BtfTask(unsafe { bpf_get_current_task_btf() } as *const u8);
        let code = task.field::<u32>(&STMT_OFF_EXIT_CODE).unwrap_or(0);
        // The process' memory is gone by now: no status entry.
        close(task, st, tgid, tid, None, flag::EXITED, code);
    }
    let _ = crate::statements::STMT_THREADS.remove(tid);
    0
}
