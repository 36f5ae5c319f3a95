//! The arguments of `ttp-ebpf statements`, and what both ways of measuring
//! (a record a statement, statements.rs; the kernel's sums,
//! statements_sums.rs) take from them.
use std::{path::PathBuf, time::Duration};

use ttp_statements::{Detail, GroupBy, crosscheck, follow};
use ttp_sys::sys::signals::StopFlag;

/// Time every SQL statement of a running PostgreSQL server, and say where
/// its time went: on CPU, waiting for a CPU, for a lock, for the disk.
///
/// A statement runs from the backend's read of the request to its reply
/// that carries ReadyForQuery, seen at the client socket by kernel
/// tracepoints (no trap in the server), its text and query id read from
/// the backend's own status entry. Where the binary has USDT probes
/// (--enable-dtrace; Debian's has), the lock, WAL-write and sort waits
/// come from them, which fire only when a statement waits. `--usdt` times
/// statements by the probes instead, as before.
///
/// Example: `sudo ttp-ebpf statements --pid $(head -1 /var/lib/postgresql/15/main/postmaster.pid) --duration 10s`
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The postmaster (its backends, present and future, are measured).
    #[arg(long)]
    pub pid: u32,
    /// The server binary (default: the postmaster's executable).
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// Measure for this long (e.g. 10s); default: until Ctrl-C.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,
    /// Groups shown in the text report and the chart.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Group statements by normalised text, exact text or backend.
    #[arg(long, value_enum, default_value = "fingerprint")]
    pub by: GroupBy,
    /// Write the result (JSON `ttp.statements/1`) here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the stacked time per statement (SVG) here.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Show the top groups of every last second while measuring.
    #[arg(long)]
    pub live: bool,
    /// Read pg_stat_statements through this connection (e.g.
    /// `host=/var/run/postgresql dbname=postgres`) at both ends of the
    /// window and show its calls and execution time beside ttp's.
    #[arg(long, value_name = "CONNINFO")]
    pub pgss: Option<String>,
    /// Also attach the wait probes that fire per page or per contended lock
    /// (buffer reads, LWLock waits, storage-manager reads). Each hit costs
    /// a uprobe trap: without them a pgbench -S statement has 4 hits, with
    /// all about 15 (docs/benchmarks.md). Comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "LIST")]
    pub detail: Vec<Detail>,
    /// See only the simple query protocol (query__start/done): leaves out
    /// the executor pair, and with it every statement of the extended
    /// protocol (Parse/Bind/Execute: prepared statements and most drivers'
    /// parameterised queries), for 2 uprobe hits a statement instead of 4.
    #[arg(long, conflicts_with = "pgss", requires = "usdt")]
    pub simple_only: bool,
    /// Time statements by the server's USDT probes (query__start/done and
    /// the executor pair: a uprobe trap at each, 1–3 µs of the backend's
    /// CPU a statement) instead of at the client socket; loads the ledger.
    #[arg(long)]
    pub usdt: bool,
    /// Run the ledger beside the socket boundaries: its sleep, blocked
    /// and own/others' iowait per statement, at the cost of its programs
    /// on every context switch and disk request of the machine.
    #[arg(long, conflicts_with = "usdt")]
    pub ledger: bool,
    /// Send a record a statement to ttp, as before the kernel summed them:
    /// every statement then crosses the ring (with its text) and is kept
    /// in ttp's memory until the report, for a per-statement trace or
    /// export. Its cost, measured at pgbench -S: ~0.6 µs a statement more
    /// in the programs, ~2 µs of ttp's CPU and ~1 KB of ttp's memory a
    /// statement (170 MB after 100 000 statements). Without it the kernel
    /// sums the statements per key and ttp reads the sums: the key is the
    /// query id where the server computes one (compute_query_id), else
    /// the fingerprint, computed in the kernel (~7 ns a byte of text and
    /// ~0.25 µs a statement).
    #[arg(long)]
    pub each: bool,
}

impl Args {
    /// Whether the kernel sums the statements (socket boundaries without
    /// `--each`); else a record a statement.
    pub(crate) fn summed(&self) -> bool {
        !self.usdt && !self.each
    }
}

/// pg_stat_statements at one instant, or why it could not be read.
pub(super) fn read_pgss(
    session: &Option<crate::pg::Session>,
) -> Result<std::collections::BTreeMap<String, (u64, f64)>, String> {
    let s = session.as_ref().ok_or("no connection")?;
    match s.scalar(crosscheck::PGSS_QUERY) {
        Ok(v) => Ok(crosscheck::parse_pgss(&v.unwrap_or_default())),
        Err(e) => Err(format!("reading pg_stat_statements failed: {e}")),
    }
}

/// The window `args` ask for: their duration (or until Ctrl-C), their
/// grouping, and `--live`'s screen every second.
pub(super) fn window<'a>(
    args: &Args,
    stop: &'a StopFlag,
    live: &'a mut follow::EachSecond<'a>,
) -> follow::Window<'a> {
    follow::Window {
        duration: args.duration,
        stop,
        by: args.by,
        each_second: args.live.then_some(live),
    }
}
