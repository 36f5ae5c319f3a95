//! `ttp-ebpf statements`: every statement of a live PostgreSQL server, timed
//! and explained through the server's own USDT probes (docs/statements.md).
use std::{path::PathBuf, time::Duration};

use super::statements_sums;
use crate::report::{
    format::{Outputs, json::Json, svg::Svg},
    render::{self, statements::Statements},
    statements,
};
use ttp_statements::{
    Detail, GroupBy, Statement, crosscheck, follow, group, parallel, requested_waits,
    session::{self, Server},
};
use ttp_sys::sys::signals::StopFlag;
use ttp_window::window::session::{MeasurementSession, SessionOptions};

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
pub struct Args {
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

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut server = Server::find(args.pid, args.binary.as_deref(), !args.usdt)?;
    let summed = server.summed(args.summed(), args.by);
    for note in server.notes.drain(..) {
        eprintln!("statements: {note}");
    }
    // The session checks privileges, restores what a killed instance left
    // and (with the ledger) seeds it with the threads already running. At
    // the socket it switches delay accounting on for the statements'
    // iowait, and leaves the ledger's programs and the BPF statistics off
    // unless --ledger: no other process of the machine pays for them.
    let mut session = MeasurementSession::open(SessionOptions {
        statements_of: Some(args.pid),
        statements_socket: server.socket_statements(summed, args.by),
        no_ledger_programs: server.socket && !args.ledger,
        no_bpf_stats: server.socket && !args.ledger,
        delay_accounting: server.socket,
        // Without the ledger's programs no thread's exit is recorded: the
        // ring's smallest size (as serve's statements), not the 16 MiB
        // `attach --all` needs, which the kernel zeroes at load.
        exit_ring_bytes: (server.socket && !args.ledger)
            .then(|| ttp_ledger::probe::exits::ring_bytes(1, 1)),
        ..Default::default()
    })?;
    let stop = session.stop_flag()?;
    let worker = parallel::worker_site(&server.binary);
    let mut sp = server.attach(
        &mut session.ledger,
        &requested_waits(&args.detail, args.simple_only || server.socket),
        worker,
    )?;
    if let Some(e) = &sp.worker_error {
        eprintln!("statements: parallel workers not measured: {e}");
    }
    let (pgss_session, mut note) = pgss_connect(args.pgss.as_deref());
    if summed {
        let report = statements_sums::measure(
            &args,
            &server,
            &mut sp,
            &stop,
            &pgss_session,
            note,
            |links| announce(&args, &server, links),
        )?;
        drop(sp);
        drop(session);
        return write_outputs(&args, Statements(report, args.top));
    }
    let before = read_pgss(&pgss_session);
    let pgss_from_ns = ttp_sys::sys::clock::monotonic_ns();
    let window_start_ns = ttp_sys::sys::clock::monotonic_ns();
    announce(&args, &server, sp.links());
    let mut live =
        |groups: &[_], statements, secs| statements::live::show(groups, statements, args.top, secs);
    let mut statements = follow::records(&mut sp, window(&args, &stop, &mut live));
    let window_end_ns = ttp_sys::sys::clock::monotonic_ns();
    let after = read_pgss(&pgss_session);
    sp.drain(|r| statements.push(Statement::from(r)));
    let killed_open = statements.iter().filter(|s| s.killed_open()).count() as u64;
    statements.retain(Statement::is_statement);
    let (statements, unjoined) = parallel::join(statements);
    let unjoined = unjoined.len() as u64;
    // The cross-check compares the statements done between the two reads.
    let between: Vec<Statement> = statements
        .iter()
        .filter(|s| s.done_ns() >= pgss_from_ns && s.done_ns() <= window_end_ns)
        .cloned()
        .collect();
    let mut report = session::report(
        &server,
        args.by,
        &sp,
        statements,
        unjoined,
        window_start_ns,
        window_end_ns,
    )?;
    report.counts.killed_open = killed_open;
    if server.socket {
        report.ledger = args.ledger;
    }
    if pgss_session.is_some() {
        match (before, after) {
            (Ok(b), Ok(a)) => {
                let groups = group(&between, GroupBy::Fingerprint, &sp.available);
                report.cross_check = Some(crosscheck::rows(&groups, &b, &a, report.backends));
                note = None;
            }
            (Err(e), _) | (_, Err(e)) => note = Some(e),
        }
    }
    report.cross_check_note = note;
    drop(sp);
    drop(session);
    write_outputs(&args, Statements(report, args.top))
}

/// The connection for the pg_stat_statements cross-check, or the note that
/// says why there is none: a failing cross-check never costs the
/// measurement.
fn pgss_connect(conninfo: Option<&str>) -> (Option<crate::pg::Session>, Option<String>) {
    match conninfo {
        None => (None, Some("not read (give --pgss CONNINFO)".to_string())),
        Some(conninfo) => match crate::pg::Pg::new(conninfo).and_then(|pg| pg.connect()) {
            Ok(s) => (Some(s), None),
            Err(e) => (None, Some(format!("cannot connect: {e}"))),
        },
    }
}

/// The line that says what is measured, where, and for how long.
fn announce(args: &Args, server: &Server, links: usize) {
    eprintln!(
        "statements: {}, {} probe sites in {}; measuring{}",
        if !server.socket {
            "ledger attached, boundaries at the USDT probes"
        } else if args.ledger {
            "boundaries at the client socket, ledger attached"
        } else {
            "boundaries at the client socket"
        },
        links,
        server.binary.display(),
        match args.duration {
            Some(d) => format!(" for {}", humantime::format_duration(d)),
            None => " until Ctrl-C".into(),
        }
    );
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

/// The text report, then the JSON and SVG where asked, written atomically.
fn write_outputs(args: &Args, doc: Statements) -> anyhow::Result<()> {
    render::print(&doc);
    Outputs::default()
        .add(args.json.as_deref(), Json(&doc.0))
        .add(args.svg.as_deref(), Svg::Statements(&doc.0, args.top))
        .write()?;
    Ok(())
}
