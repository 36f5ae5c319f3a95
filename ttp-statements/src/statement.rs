//! One statement as its record came from the kernel, with its parts as
//! the groups read them.
use ttp_common::statements::{PARTS, Record, TEXT_UNTERMINATED, WAITS, flag, part};

/// One statement, as its record came from the kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Statement {
    pub tgid: u32,
    pub tid: u32,
    pub start_ns: u64,
    pub elapsed_ns: u64,
    pub parts: [u64; PARTS],
    pub waits_ns: [u64; WAITS],
    pub waits: [u32; WAITS],
    pub flags: u32,
    pub text: String,
    /// Socket boundaries: switch-ins during the statement, the server's
    /// query id, database and user oids, the request's first byte, the
    /// exit code of a backend that exited with it open (see `Record`).
    pub switches: u32,
    pub query_id: u64,
    pub database: u32,
    pub user: u32,
    pub opened_by: u32,
    pub exit_code: u32,
    /// PostgreSQL 18's plan id (`st_plan_id`; 0: none).
    pub plan_id: u64,
    /// Its parallel workers' shares ([`parallel::join`](super::parallel::join)).
    pub workers: Workers,
}

impl From<&Record> for Statement {
    fn from(r: &Record) -> Self {
        let (len, cut) = match r.text_len {
            TEXT_UNTERMINATED => match r.text.iter().position(|b| *b == 0) {
                Some(n) => (n, false),
                None => (r.text.len() - 1, true),
            },
            n => ((n as usize).min(r.text.len()), false),
        };
        let flags = if cut {
            r.flags | flag::TRUNCATED
        } else {
            r.flags
        };
        Self {
            tgid: r.tgid,
            tid: r.tid,
            start_ns: r.start_ns,
            elapsed_ns: r.elapsed_ns,
            parts: socket_parts(r),
            waits_ns: r.waits_ns,
            waits: r.waits,
            flags,
            // Valid UTF-8 (the server's encoding, almost always) is
            // checked and copied in one pass; the lossy scan only for the
            // rest (a text cut inside a character, another encoding).
            text: match std::str::from_utf8(&r.text[..len]) {
                Ok(t) => t.to_owned(),
                Err(_) => String::from_utf8_lossy(&r.text[..len]).into_owned(),
            },
            switches: r.switches,
            query_id: r.query_id,
            database: r.database,
            user: r.user,
            opened_by: r.opened_by,
            exit_code: r.exit_code,
            plan_id: r.plan_id,
            workers: Workers::default(),
        }
    }
}

/// The parts of a record as the groups read them. A statement with USDT
/// boundaries, or timed beside the ledger, keeps its parts as measured.
/// One timed at the socket without the ledger has the scheduler's and
/// delay accounting's counters only; from them:
/// - on-CPU: the runtime difference, unless the thread was never switched
///   in during the statement (`switches` = 0): then it ran from start to
///   end, and on-CPU is the elapsed time. (The kernel adds a running
///   task's runtime only at ticks and switches, so the difference of a
///   statement shorter than a tick that never left its CPU is often 0.)
/// - iowait: delay accounting's block-I/O wait (TTPv2's BlockIO);
/// - sleep: elapsed − on-CPU − run-queue − iowait, what the thread spent
///   off its CPU otherwise (a lock, a latch, the client's next message of
///   a pipeline); blocked is not told apart from it.
fn socket_parts(r: &Record) -> [u64; PARTS] {
    let mut p = r.sched_ns;
    if r.flags & flag::SOCKET == 0 || r.flags & flag::NO_ACCOUNT == 0 {
        return p;
    }
    if r.switches == 0 && r.flags & flag::EXITED == 0 {
        p[part::ON_CPU] = r.elapsed_ns;
    }
    p[part::IOWAIT] = if r.flags & flag::NO_BLKIO == 0 {
        p[part::BLKIO]
    } else {
        0
    };
    p[part::SLEEP] = r
        .elapsed_ns
        .saturating_sub(p[part::ON_CPU] + p[part::RUNQ] + p[part::IOWAIT]);
    p[part::BLOCKED] = 0;
    p
}

impl Statement {
    /// Whether the record is a statement of the groups: not a connection's
    /// start-up, not one its backend left open when it exited, not a
    /// request that executed nothing (a bare Parse or Describe).
    pub fn is_statement(&self) -> bool {
        self.flags & (flag::STARTUP | flag::EXITED | flag::PREPARE) == 0
    }

    /// Whether its backend exited with it open because a signal killed it
    /// (SIGKILL, a crash): the statement never ended.
    pub fn killed_open(&self) -> bool {
        self.flags & flag::EXITED != 0 && self.exit_code & 0x7f != 0
    }

    /// End of the statement, CLOCK_MONOTONIC ns.
    pub fn done_ns(&self) -> u64 {
        self.start_ns + self.elapsed_ns
    }

    /// Whether it came through the extended query protocol: the executor
    /// pair opened it (USDT boundaries), or its request began with an
    /// extended-protocol message (Parse, Bind, Execute, Describe, Close,
    /// Sync, Flush; socket boundaries, plain-text connections).
    pub fn extended(&self) -> bool {
        self.flags & flag::EXTENDED != 0
            || (self.flags & flag::SOCKET != 0
                && u8::try_from(self.opened_by)
                    .is_ok_and(|b| matches!(b, b'P' | b'B' | b'E' | b'D' | b'C' | b'S' | b'H')))
    }
}

/// The parallel workers' shares joined to one statement.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workers {
    pub count: u32,
    /// Shares the ledger had no account for (their ledger parts are 0).
    pub without_account: u32,
    /// Summed time from each worker's start of its share to its end.
    pub elapsed_ns: u64,
    /// Summed account components (`part`).
    pub parts: [u64; PARTS],
}

impl Workers {
    pub(crate) fn add(&mut self, w: &Statement) {
        self.count += 1;
        self.without_account += u32::from(w.flags & flag::NO_ACCOUNT != 0);
        self.elapsed_ns += w.elapsed_ns;
        for (a, b) in self.parts.iter_mut().zip(w.parts) {
            *a += b;
        }
    }
}
