//! `statements` records: per SQL statement of a PostgreSQL backend, from its
//! `query__start` to its `query__done` USDT probe, the elapsed time and where
//! it went: the scheduler's on-CPU and run-queue counters and the ledger's
//! sleep, blocked and iowait accounts read at both probes, plus the time
//! between the server's own wait probes (heavyweight lock, LWLock, buffer
//! read, storage-manager read, WAL write, sort) inside the statement.
//!
//! One uprobe program serves every probe site; the attachment's cookie
//! ([`cookie`]) says which probe it is and where its pointer argument is.
//!
//! By default the statement's boundaries come from the backend's client
//! socket instead ([`flag::SOCKET`]): the request's first successful read
//! opens it, the reply that carries ReadyForQuery closes it (the kernel's
//! `sock_recv_length`/`sock_send_length` tracepoints, no trap in the
//! backend), its text and query id from the backend's own status entry
//! (`PgBackendStatus`, [`status`]).

/// Bytes of query text kept per statement (NUL included); longer texts are
/// cut and flagged [`flag::TRUNCATED`].
pub const TEXT_LEN: usize = 256;

/// `Record::text_len` when the text was copied as a fixed-size block:
/// it ends at the first NUL of `text` (none: cut, [`flag::TRUNCATED`]).
pub const TEXT_UNTERMINATED: u32 = u32::MAX;

/// Bytes of PostgreSQL's `PgBackendStatus` copied at once (socket
/// boundaries): every field read lies below.
pub const STATUS_BYTES: usize = 448;

/// Probe kinds (cookie bits 0..7).
pub mod kind {
    pub const QUERY_START: u32 = 1;
    pub const QUERY_DONE: u32 = 2;
    /// `ParallelWorkerMain` entered: a parallel worker starts its share of
    /// a leader's statement (its text: the worker's `bgw_name`, "parallel
    /// worker for PID <leader>", read through `MyBgworkerEntry`).
    pub const WORKER_START: u32 = 3;
    /// `ParallelWorkerMain` returned (a uretprobe): the worker's share ends.
    pub const WORKER_DONE: u32 = 4;
    /// Paired wait probes: start = `WAIT_BASE + 2 * i`, done = start + 1,
    /// for `i` in 0..[`super::WAITS`] (see [`super::wait`]).
    pub const WAIT_BASE: u32 = 16;
}

/// Wait probe pairs, in [`Record::waits_ns`] order.
pub mod wait {
    /// `lock__wait__start/done`: heavyweight lock.
    pub const LOCK: usize = 0;
    /// `lwlock__wait__start/done`: LWLock (its tranche in `TRANCHES`).
    pub const LWLOCK: usize = 1;
    /// `buffer__read__start/done`: a shared-buffer read (hit or miss).
    pub const BUFFER_READ: usize = 2;
    /// `smgr__md__read__start/done`: a block read from the file.
    pub const SMGR_READ: usize = 3;
    /// `wal__buffer__write__dirty__start/done`: writing WAL to free space.
    pub const WAL_WRITE: usize = 4;
    /// `sort__start/done`.
    pub const SORT: usize = 5;
    /// `query__execute__start/done`: the executor's run of the statement
    /// (pg_stat_statements' `total_exec_time` covers this, not the parse,
    /// analysis and planning before it). Outside a `query__start`, the pair
    /// is itself a statement of the extended query protocol
    /// ([`super::flag::EXTENDED`]).
    pub const EXECUTE: usize = 6;
}

/// Number of wait probe pairs.
pub const WAITS: usize = 7;

/// Account components read at both ends of a statement (`Record::sched_ns`).
pub mod part {
    /// `se.sum_exec_runtime` difference.
    pub const ON_CPU: usize = 0;
    /// `sched_info.run_delay` difference.
    pub const RUNQ: usize = 1;
    /// Ledger `sleep_ns`.
    pub const SLEEP: usize = 2;
    /// Ledger `blocked_ns`.
    pub const BLOCKED: usize = 3;
    /// Ledger `iowait_ns`.
    pub const IOWAIT: usize = 4;
    /// Ledger `iowait_own_ns`.
    pub const IOWAIT_OWN: usize = 5;
    /// Ledger `iowait_share_ns`.
    pub const IOWAIT_SHARE: usize = 6;
    /// Delay accounting's block-I/O wait (`task->delays->blkio_delay`)
    /// difference: the iowait of a statement measured without the ledger
    /// (unless [`super::flag::NO_BLKIO`]).
    pub const BLKIO: usize = 7;
}

/// Number of account components.
pub const PARTS: usize = 8;

/// Bits of `Record::flags`.
pub mod flag {
    /// The thread had no ledger account at one end: the ledger parts are 0
    /// and not measured.
    pub const NO_ACCOUNT: u32 = 1;
    /// The text was cut at [`super::TEXT_LEN`] - 1 bytes.
    pub const TRUNCATED: u32 = 2;
    /// The scheduler's run-queue counter could not be read.
    pub const NO_RUNQ: u32 = 4;
    /// A `query__start` came while a statement was open on the thread (the
    /// earlier one never reached `query__done`: an error ended it).
    pub const RESTARTED: u32 = 8;
    /// A parallel worker's share of a statement ([`super::kind::WORKER_START`]
    /// to [`super::kind::WORKER_DONE`]), not a statement of its own.
    pub const WORKER: u32 = 16;
    /// A statement of the extended query protocol: the executor pair
    /// (`query__execute__start/done`, inside `PortalRun`) outside any
    /// `query__start`, its text the server's `debug_query_string` (which
    /// `exec_execute_message` points at the portal's source text).
    pub const EXTENDED: u32 = 32;
    /// Boundaries from the client socket: opened by the first read of a
    /// request, closed by the reply whose backend status says idle again
    /// (it carries ReadyForQuery).
    pub const SOCKET: u32 = 64;
    /// Opened at the previous statement's end, not by a read: its request
    /// was already in the backend's input buffer (a pipeline).
    pub const PIPELINED: u32 = 128;
    /// The reply carried an ErrorResponse (a send beginning with `E`; seen
    /// on a plain-text connection only).
    pub const ERROR: u32 = 256;
    /// The backend exited while the statement was open (killed, or a
    /// FATAL error); [`super::Record::exit_code`] says how.
    pub const EXITED: u32 = 512;
    /// Delay accounting could not be read at one end (no `delays`): the
    /// [`super::part::BLKIO`] part is not measured.
    pub const NO_BLKIO: u32 = 1024;
    /// The backend's status entry could not be read at the end: no text,
    /// query id, database or user.
    pub const NO_STATUS: u32 = 2048;
    /// The connection's start-up (authentication up to the first
    /// ReadyForQuery), not a statement: its status entry had run no
    /// statement yet.
    pub const STARTUP: u32 = 4096;
    /// The request asked for no execution: its messages (walked on a
    /// plain-text connection) held no Execute, Query or function call,
    /// e.g. a Parse (prepare) or Describe followed by Sync. Not a
    /// statement's execution.
    pub const PREPARE: u32 = 8192;
}

/// Where the fields `statements` reads of PostgreSQL's `PgBackendStatus`
/// lie (the backend's `MyBEEntry` points at it). Userspace sets them per
/// server version (ttp-ledger/src/probe/pg_status.rs) as globals.
pub mod status {
    /// `BackendState` values (utils/backend_status.h).
    pub const STATE_IDLE: u32 = 1;
    pub const STATE_RUNNING: u32 = 2;
    pub const STATE_IDLE_IN_TRANSACTION: u32 = 3;
    pub const STATE_FASTPATH: u32 = 4;
    pub const STATE_IDLE_IN_TRANSACTION_ABORTED: u32 = 5;
    pub const STATE_DISABLED: u32 = 6;
}

/// The first byte a request's read brought, as [`Record::opened_by`]: the
/// frontend message type (`Q` simple query, `P`/`B`/`E`/`S`/… extended, `X`
/// terminate), 0 for a start-up or SSL request packet (they begin with a
/// length), a TLS record type (22, 23) on an encrypted connection.
pub mod opened {
    /// Not opened by a read (pipelined), or the read's buffer was not
    /// readable.
    pub const UNKNOWN: u32 = 0x100;
}

/// Cookie argument modes (bits 8..15).
pub mod arg {
    pub const NONE: u32 = 0;
    /// The argument is the register's value.
    pub const REGISTER: u32 = 1;
    /// The argument is the u64 at register + offset (user memory). With the
    /// register `rip` at a function's entry, that is a global variable at a
    /// fixed distance from the function in the same binary.
    pub const MEMORY: u32 = 2;
}

/// One finished statement on one backend thread.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Record {
    pub tgid: u32,
    pub tid: u32,
    /// `query__start`, CLOCK_MONOTONIC ns.
    pub start_ns: u64,
    pub elapsed_ns: u64,
    /// See [`part`].
    pub sched_ns: [u64; PARTS],
    /// Time between each wait pair's start and done, see [`wait`].
    pub waits_ns: [u64; WAITS],
    /// Number of waits of each pair.
    pub waits: [u32; WAITS],
    pub flags: u32,
    /// Bytes of `text` in use (NUL excluded).
    pub text_len: u32,
    /// Switch-ins of the thread during the statement
    /// (`sched_info.pcount` difference; socket boundaries only): 0 means
    /// it ran on its CPU from start to end.
    pub switches: u32,
    /// PostgreSQL's query id of the statement (`st_query_id`; 0 when the
    /// server computes none, or with USDT boundaries).
    pub query_id: u64,
    /// The backend's database and user (`st_databaseid`, `st_userid`).
    pub database: u32,
    pub user: u32,
    /// See [`opened`].
    pub opened_by: u32,
    /// With [`flag::EXITED`]: the task's `exit_code` (a signal number in
    /// its low 7 bits when it was killed).
    pub exit_code: u32,
    /// PostgreSQL 18's plan id of the statement (`st_plan_id`; 0 when no
    /// extension computes plan ids, and before 18).
    pub plan_id: u64,
    pub text: [u8; TEXT_LEN],
}

/// An LWLock tranche's waits (per CPU, keyed by the tranche-name pointer,
/// which the backends share: they are forks of one postmaster).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Tranche {
    pub waits: u64,
    pub wait_ns: u64,
    /// A backend whose memory holds the name.
    pub tgid: u32,
    pub _pad: u32,
}

/// Counters kept by the probes (per CPU, summed by userspace).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    pub hits: u64,
    pub statements: u64,
    /// Records dropped because the ring buffer was full.
    pub lost_records: u64,
    /// `query__done` without an open statement (it began before attach).
    pub done_without_start: u64,
    /// Threads that could not get state (map full).
    pub no_state: u64,
    /// Query texts that could not be read.
    pub text_unread: u64,
    /// Statements restarted (see [`flag::RESTARTED`]).
    pub restarted: u64,
    /// Time inside the probe programs, ns.
    pub probe_ns: u64,
    /// `query__start` (or `ParallelWorkerMain`) hits in processes that
    /// are not the postmaster's children (another server running the same
    /// binary): not recorded.
    pub other_processes: u64,
    /// Parallel workers' shares sent (records with [`flag::WORKER`]; not
    /// in `statements`).
    pub workers: u64,
    /// Socket tracepoint runs in the server's backends (socket boundaries).
    pub socket_events: u64,
    /// Connection start-ups sent ([`flag::STARTUP`]; not in `statements`).
    pub connections: u64,
    /// Statements open when their backend exited ([`flag::EXITED`]).
    pub exited_open: u64,
    /// Requests that asked for no execution ([`flag::PREPARE`]; not in
    /// `statements`).
    pub prepares: u64,
    /// Of `exited_open`, those whose backend a signal ended.
    pub killed_open: u64,
    /// Statements summed under the `other` key because the sums map was
    /// full (crate::sums).
    pub sums_other: u64,
    /// Key texts the text ring could not take (sent again at the key's
    /// next statement on that CPU).
    pub texts_lost: u64,
    /// Backend threads that ended a statement.
    pub backends: u64,
    /// Parallel workers' shares whose leader had no open statement
    /// (summed in the kernel; the records' join counts its own).
    pub workers_unjoined: u64,
}

/// Attachment cookie: probe kind (bits 0..7), argument mode (8..15),
/// pt_regs slot of the argument's register (16..23), memory offset
/// (32..63, signed).
pub const fn cookie(kind: u32, mode: u32, slot: u32, offset: i32) -> u64 {
    ((offset as u32 as u64) << 32)
        | (((slot & 0xff) as u64) << 16)
        | (((mode & 0xff) as u64) << 8)
        | (kind & 0xff) as u64
}

/// (kind, mode, slot, offset) of a cookie.
pub const fn decode_cookie(c: u64) -> (u32, u32, u32, i32) {
    (
        (c & 0xff) as u32,
        ((c >> 8) & 0xff) as u32,
        ((c >> 16) & 0xff) as u32,
        (c >> 32) as u32 as i32,
    )
}

#[cfg(feature = "user")]
unsafe impl aya::Pod for Record {}
#[cfg(feature = "user")]
unsafe impl aya::Pod for Tranche {}
#[cfg(feature = "user")]
unsafe impl aya::Pod for Stats {}

const _: () = assert!(
    core::mem::size_of::<Record>()
        == 4 + 4 + 8 + 8 + 8 * PARTS + 8 * WAITS + 4 * WAITS + 4 + 4 + 4 + 8 + 4 * 4 + 8 + TEXT_LEN
);
const _: () = assert!(core::mem::size_of::<Tranche>() == 24);
const _: () = assert!(core::mem::size_of::<Stats>() == 19 * 8);

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches fields overlapping in the cookie, and a lost offset sign.
    #[test]
    fn cookie_round_trip() {
        assert_eq!(
            decode_cookie(cookie(2, arg::MEMORY, 4, -144)),
            (2, 2, 4, -144)
        );
        assert_eq!(
            decode_cookie(cookie(27, arg::REGISTER, 14, 0)),
            (27, 1, 14, 0)
        );
    }
}
