//! `ttp-ebpf statements`: every statement of a live PostgreSQL server, timed
//! and explained through the server's own USDT probes (docs/statements.md).
use std::{
    collections::{BTreeSet, HashMap},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use ttp_common::statements::{flag, wait};

use super::statements_sums;
use crate::{
    error::usage,
    probe::{
        SocketStatements,
        pg_status::{self, StatusSource},
        probe_error_ctx,
        statements::{StatementProbes, StatementsProbeError, WORKER_FUNCTION},
        usdt::{self, UsdtError},
    },
    protocol::statements::{
        Detail, GroupBy, SCHEMA, Statement, WAIT_PROBES, crosscheck, detail_of,
        document::{ProbeAvailability, ProbeCounts, StatementsReport, TrancheRow},
        extended, group, parallel, requested_waits,
    },
    report::{
        atomic,
        render::{self, statements::Statements},
        statements::svg,
    },
    sys::signals::StopFlag,
    window::session::{MeasurementSession, SessionOptions},
};

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

/// The statements' boundaries asked for, and what the socket programs need.
struct Boundaries {
    socket: bool,
    status: Option<StatusSource>,
    /// Whether the server computes query ids (None: not known).
    query_ids: Option<bool>,
    /// Where the status entries were found, or why not (socket only).
    status_note: Option<String>,
}

impl Boundaries {
    fn of(args: &Args, binary: &Path) -> anyhow::Result<Self> {
        if args.usdt {
            return Ok(Self {
                socket: false,
                status: None,
                query_ids: None,
                status_note: None,
            });
        }
        if let Some(why) = pg_status::not_a_server(binary) {
            return usage(why);
        }
        Ok(match pg_status::find(args.pid, binary) {
            Ok(s) => {
                if s.assumed_from.is_some() {
                    eprintln!("statements: {}", s.describe());
                }
                Self {
                    socket: true,
                    status_note: Some(s.describe()),
                    status: Some(s),
                    query_ids: pg_status::query_ids_computed(args.pid, binary),
                }
            }
            Err(e) => {
                eprintln!(
                    "statements: the backends' status entries cannot be read: {e}; statements end at their reply's ReadyForQuery bytes and have no text"
                );
                Self {
                    socket: true,
                    status: None,
                    query_ids: None,
                    status_note: Some(format!("not read: {e}")),
                }
            }
        })
    }

    /// Whether the kernel sums the statements: as asked (`--each`,
    /// `--usdt`). On a server that computes no query ids, statements
    /// grouped by fingerprint are keyed by their fingerprint, computed in
    /// the kernel (docs/statements.md, "Summed in the kernel"); the status
    /// note says so.
    fn summed(&mut self, args: &Args) -> bool {
        let no_query_ids = self.status.is_some() && self.query_ids == Some(false);
        if args.summed()
            && no_query_ids
            && matches!(args.by, GroupBy::Fingerprint)
            && let Some(note) = &mut self.status_note
        {
            note.push_str("; no query ids: keyed by the fingerprint computed in the kernel");
        }
        args.summed()
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
    let binary = match &args.binary {
        Some(b) => b.clone(),
        None => server_binary(args.pid)?,
    };
    let mut boundaries = Boundaries::of(&args, &binary)?;
    let summed = boundaries.summed(&args);
    let probes = usdt_probes(&binary, boundaries.socket)?;
    // The session checks privileges, restores what a killed instance left
    // and (with the ledger) seeds it with the threads already running. At
    // the socket it switches delay accounting on for the statements'
    // iowait, and leaves the ledger's programs and the BPF statistics off
    // unless --ledger: no other process of the machine pays for them.
    let mut session = MeasurementSession::open(SessionOptions {
        statements_of: Some(args.pid),
        statements_socket: boundaries.socket.then_some(SocketStatements {
            status: boundaries.status,
            each: !summed,
            key_by: statements_sums::key_by(args.by),
            sums: summed,
        }),
        no_ledger_programs: boundaries.socket && !args.ledger,
        no_bpf_stats: boundaries.socket && !args.ledger,
        delay_accounting: boundaries.socket,
        ..Default::default()
    })?;
    let stop = session.stop_flag()?;
    let worker = parallel::worker_site(&binary);
    let mut sp = match StatementProbes::attach(
        &mut session.ledger,
        &binary,
        &probes,
        &WAIT_PROBES,
        &requested_waits(&args.detail, args.simple_only || boundaries.socket),
        worker,
        extended::query_text_global(&binary),
        boundaries.socket,
    ) {
        Ok(sp) => sp,
        Err(e @ StatementsProbeError::Missing { .. }) => return usage(e.to_string()),
        Err(StatementsProbeError::Probe(e)) => return Err(probe_error_ctx(e)),
        Err(e) => return Err(e.into()),
    };
    if let Some(e) = &sp.worker_error {
        eprintln!("statements: parallel workers not measured: {e}");
    }
    let (pgss_session, mut note) = pgss_connect(args.pgss.as_deref());
    if summed {
        let report = statements_sums::measure(
            &args,
            &binary,
            &mut sp,
            &stop,
            &pgss_session,
            note,
            |links| announce(&args, &boundaries, links, &binary),
        )?;
        let mut report = report;
        report.status_entry = boundaries.status_note;
        drop(sp);
        drop(session);
        return write_outputs(&args, Statements(report, args.top));
    }
    let before = read_pgss(&pgss_session);
    let pgss_from_ns = crate::sys::clock::monotonic_ns();
    let window_start_ns = crate::sys::clock::monotonic_ns();
    announce(&args, &boundaries, sp.links(), &binary);
    let mut statements = collect(
        &mut sp,
        args.live.then_some((args.by, args.top)),
        args.duration,
        &stop,
    );
    let window_end_ns = crate::sys::clock::monotonic_ns();
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
    let mut report = build_report(
        &args,
        &binary,
        &sp,
        statements,
        unjoined,
        window_start_ns,
        window_end_ns,
    )?;
    report.counts.killed_open = killed_open;
    if boundaries.socket {
        report.boundaries = "socket".into();
        report.status_entry = boundaries.status_note;
        report.ledger = args.ledger;
        report.extended_statements = Some(report.groups.iter().map(|g| g.extended).sum::<u64>());
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

/// The server binary's USDT probes; at the socket, a binary without notes
/// is measured without the wait columns (no probes).
fn usdt_probes(binary: &Path, socket: bool) -> anyhow::Result<Vec<usdt::UsdtProbe>> {
    match usdt::read_probes(binary) {
        Ok(p) => Ok(p),
        Err(UsdtError::NoNotes { .. }) if socket => Ok(Vec::new()),
        Err(
            e @ (UsdtError::NoNotes { .. } | UsdtError::NotElf { .. } | UsdtError::Read { .. }),
        ) => usage(e.to_string()),
        Err(e) => Err(e.into()),
    }
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
fn announce(args: &Args, boundaries: &Boundaries, links: usize, binary: &Path) {
    eprintln!(
        "statements: {}, {} probe sites in {}; measuring{}",
        if !boundaries.socket {
            "ledger attached, boundaries at the USDT probes"
        } else if args.ledger {
            "boundaries at the client socket, ledger attached"
        } else {
            "boundaries at the client socket"
        },
        links,
        binary.display(),
        match args.duration {
            Some(d) => format!(" for {}", humantime::format_duration(d)),
            None => " until Ctrl-C".into(),
        }
    );
}

/// The text report, then the JSON and SVG where asked, written atomically.
fn write_outputs(args: &Args, doc: Statements) -> anyhow::Result<()> {
    render::print(&doc);
    if let Some(path) = &args.json {
        atomic::write_json_result(path, &doc.0)?;
    }
    if let Some(path) = &args.svg {
        let text = svg::stacked(&doc.0, args.top).map_err(anyhow::Error::msg)?;
        atomic::write_result(path, text.as_bytes())?;
    }
    Ok(())
}

/// The executable of `pid`, or a usage error saying what to do.
fn server_binary(pid: u32) -> anyhow::Result<PathBuf> {
    let exe = PathBuf::from(format!("/proc/{pid}/exe"));
    match std::fs::read_link(&exe) {
        Ok(p) => {
            let s = p.to_string_lossy();
            match s.strip_suffix(" (deleted)") {
                Some(_) => usage(format!(
                    "the executable of process {pid} was replaced since it started ({s}); restart the server or give --binary"
                )),
                None => Ok(p),
            }
        }
        Err(e) => usage(format!(
            "cannot read the executable of process {pid} ({e}): give the postmaster's pid (first line of postmaster.pid) and run with sudo"
        )),
    }
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
            let now = crate::sys::clock::monotonic_ns();
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
    groups: &[crate::protocol::statements::Group],
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

/// A NUL-terminated string at `addr` in process `pid`'s memory.
fn read_c_string(pid: u32, addr: u64) -> Option<String> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut buf = [0u8; 64];
    let n = f.read_at(&mut buf, addr).ok()?;
    let end = buf[..n].iter().position(|b| *b == 0).unwrap_or(n);
    Some(String::from_utf8_lossy(&buf[..end]).into_owned())
}

pub(super) fn build_report(
    args: &Args,
    binary: &Path,
    sp: &StatementProbes,
    statements: Vec<Statement>,
    unjoined: u64,
    window_start_ns: u64,
    window_end_ns: u64,
) -> anyhow::Result<StatementsReport> {
    let stats = sp.stats().map_err(probe_error_ctx)?;
    let backends: BTreeSet<u32> = statements.iter().map(|s| s.tgid).collect();
    let groups = group(&statements, args.by, &sp.available);
    let mut names: HashMap<u64, String> = HashMap::new();
    let mut tranches: Vec<TrancheRow> = Vec::new();
    for (ptr, t) in sp.tranches() {
        let name = names
            .entry(ptr)
            .or_insert_with(|| {
                read_c_string(t.tgid, ptr)
                    .or_else(|| read_c_string(args.pid, ptr))
                    .unwrap_or_else(|| format!("tranche at {ptr:#x}"))
            })
            .clone();
        match tranches.iter_mut().find(|r| r.tranche == name) {
            Some(r) => {
                r.waits += t.waits;
                r.wait_ns += t.wait_ns;
            }
            None => tranches.push(TrancheRow {
                tranche: name,
                waits: t.waits,
                wait_ns: t.wait_ns,
            }),
        }
    }
    tranches.sort_by_key(|t| std::cmp::Reverse(t.wait_ns));
    let mut probes: Vec<ProbeAvailability> = sp
        .sites
        .iter()
        .map(|s| ProbeAvailability {
            name: s.name.clone(),
            sites: s.sites,
            available: s.sites > 0,
            not_measured_without: (s.sites > 0 && !s.attached)
                .then(|| {
                    WAIT_PROBES
                        .iter()
                        .find(|(_, a, b)| *a == s.name || *b == s.name)
                        .and_then(|(label, _, _)| detail_of(label))
                        .map(str::to_string)
                })
                .flatten(),
        })
        .collect();
    probes.push(ProbeAvailability {
        name: WORKER_FUNCTION.into(),
        sites: usize::from(sp.workers),
        available: sp.workers,
        not_measured_without: None,
    });
    Ok(StatementsReport {
        schema: SCHEMA.into(),
        postmaster: args.pid,
        binary: binary.display().to_string(),
        boundaries: "usdt".into(),
        status_entry: None,
        ledger: true,
        semaphores: "kernel uprobe reference counter (ref_ctr_offset)".into(),
        by: args.by,
        window_start_ns,
        window_end_ns,
        backends: backends.len(),
        statements: statements.len() as u64,
        extended_statements: sp.available[wait::EXECUTE].then(|| {
            statements
                .iter()
                .filter(|s| s.flags & flag::EXTENDED != 0)
                .count() as u64
        }),
        probes,
        counts: ProbeCounts {
            hits: stats.hits,
            records: stats.statements,
            records_lost: stats.lost_records,
            done_without_start: stats.done_without_start,
            other_processes: stats.other_processes,
            no_state: stats.no_state,
            text_unread: stats.text_unread,
            restarted: stats.restarted,
            mean_probe_ns: if stats.hits > 0 {
                stats.probe_ns as f64 / stats.hits as f64
            } else {
                0.0
            },
            worker_shares: stats.workers,
            worker_shares_unjoined: unjoined,
            socket_events: stats.socket_events,
            connections: stats.connections,
            exited_open: stats.exited_open,
            killed_open: 0,
            prepares: stats.prepares,
            keys: None,
            summed_other: 0,
            texts_lost: 0,
        },
        groups,
        tranches,
        cross_check: None,
        cross_check_note: None,
    })
}
