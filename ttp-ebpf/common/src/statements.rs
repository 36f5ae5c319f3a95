//! `statements` records: per SQL statement of a PostgreSQL backend, from its
//! `query__start` to its `query__done` USDT probe, the elapsed time and where
//! it went: the scheduler's on-CPU and run-queue counters and the ledger's
//! sleep, blocked and iowait accounts read at both probes, plus the time
//! between the server's own wait probes (heavyweight lock, LWLock, buffer
//! read, storage-manager read, WAL write, sort) inside the statement.
//!
//! One uprobe program serves every probe site; the attachment's cookie
//! ([`cookie`]) says which probe it is and where its pointer argument is.

/// Bytes of query text kept per statement (NUL included); longer texts are
/// cut and flagged [`flag::TRUNCATED`].
pub const TEXT_LEN: usize = 256;

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
    pub _pad: u32,
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
        == 4 + 4 + 8 + 8 + 8 * PARTS + 8 * WAITS + 4 * WAITS + 4 + 4 + 4 + TEXT_LEN
);
const _: () = assert!(core::mem::size_of::<Tranche>() == 24);
const _: () = assert!(core::mem::size_of::<Stats>() == 10 * 8);

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
