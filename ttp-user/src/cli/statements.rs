//! `ttp-ebpf statements`: every statement of a live PostgreSQL server, timed
//! and explained through the server's own USDT probes (docs/statements.md).
use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use super::statements_sums;
use crate::report::{
    format::{Outputs, json::Json, svg::Svg},
    render::{self, statements::Statements},
};
use ttp_ledger::probe::statements::StatementProbes;
use ttp_statements::{
    Detail, GroupBy, Statement, crosscheck, group, parallel, requested_waits,
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
    let mut statements = collect(
        &mut sp,
        args.live.then_some((args.by, args.top)),
        args.duration,
        &stop,
    );
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

/// The text report, then the JSON and SVG where asked, written atomically.
fn write_outputs(args: &Args, doc: Statements) -> anyhow::Result<()> {
    render::print(&doc);
    Outputs::default()
        .add(args.json.as_deref(), Json(&doc.0))
        .add(args.svg.as_deref(), Svg::Statements(&doc.0, args.top))
        .write()?;
    Ok(())
}

/// Drains records until the duration ends or Ctrl-C.
/// With `live`, every second the groups of the last second are shown, top
/// first, on a cleared terminal (a `top`-like view); the final report
/// covers the whole window as without it.
fn collect(
    sp: &mut StatementProbes,
    live: Option<(GroupBy, usize)>,
    duration: Option<Duration>,
    stop: &StopFlag,
) -> Vec<Statement> {
    let started = Instant::now();
    let mut out = Vec::new();
    let mut shown = (Instant::now(), 0usize);
    // Workers' shares drained before their leader's statement: joined in a
    // later second.
    let mut waiting: Vec<Statement> = Vec::new();
    loop {
        sp.drain(|r| out.push(Statement::from(r)));
        if let Some((by, top)) = live
            && shown.0.elapsed() >= Duration::from_secs(1)
        {
            let mut last = std::mem::take(&mut waiting);
            last.extend(out[shown.1..].iter().filter(|s| s.is_statement()).cloned());
            let (last, unjoined) = parallel::join(last);
            // A share waits at most a minute for its leader's statement.
            let now = ttp_sys::sys::clock::monotonic_ns();
            waiting = unjoined
                .into_iter()
                .filter(|w| now.saturating_sub(w.done_ns()) < 60_000_000_000)
                .collect();
            let secs = shown.0.elapsed().as_secs_f64();
            let groups = group(&last, by, &sp.available);
            print!(
                "\x1b[2J\x1b[H{}",
                live_text(&groups, last.len() as u64, top, secs)
            );
            shown = (Instant::now(), out.len());
        }
        if stop.raised() || duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        let left = duration.map_or(Duration::from_millis(100), |d| {
            d.saturating_sub(started.elapsed())
                .min(Duration::from_millis(100))
        });
        stop.sleep(left);
    }
    sp.drain(|r| out.push(Statement::from(r)));
    out
}

/// One screen of `--live`: calls per second and time per call of the
/// groups of the last interval.
pub(super) fn live_text(
    groups: &[ttp_statements::Group],
    statements: u64,
    top: usize,
    secs: f64,
) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "ttp statements --live: {statements} statements in the last {secs:.1} s (Ctrl-C ends and prints the whole window)"
    );
    let _ = writeln!(
        o,
        "{:>9} {:>10} {:>10} {:>10} {:>10}  statement",
        "calls/s", "ms/call", "on-CPU", "runq", "iowait"
    );
    for g in groups.iter().take(top) {
        let per = |v: u64| v as f64 / 1e6 / g.calls.max(1) as f64;
        let mut key = g.key.clone();
        if key.len() > 70 {
            let mut cut = 67;
            while !key.is_char_boundary(cut) {
                cut -= 1;
            }
            key.truncate(cut);
            key.push_str("...");
        }
        let _ = writeln!(
            o,
            "{:>9.1} {:>10.3} {:>10.3} {:>10.3} {:>10.3}  {key}",
            g.calls as f64 / secs,
            per(g.elapsed_ns),
            per(g.on_cpu_ns),
            per(g.runq_wait_ns),
            per(g.iowait_ns),
        );
    }
    o
}
