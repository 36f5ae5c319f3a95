//! `ttp-ebpf statements`: every statement of a live PostgreSQL server, timed
//! and explained through the server's own USDT probes (docs/statements.md).
use super::statements_args::{read_pgss, window};
use super::{statements_args::Args, statements_sums};
use crate::report::{
    format::{Outputs, json::Json, svg::Svg},
    render::{self, statements::Statements},
    statements,
};
use ttp_statements::{
    GroupBy, Statement, crosscheck, follow, group, parallel, requested_waits,
    session::{self, Server},
};
use ttp_window::window::session::{MeasurementSession, SessionOptions};

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
        statements_socket: server.socket_statements(summed, args.by, args.duration.is_some()),
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
    let worker = server.worker;
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
    report.counts.killed_open = Some(killed_open);
    if server.socket {
        report.ledger = args.ledger;
    }
    if pgss_session.is_some() {
        match (before, after) {
            (Ok(b), Ok(a)) => {
                let groups = group(&between, GroupBy::Fingerprint, &sp.available);
                // Backends unread: no allowance for statements that
                // straddle the edges, a difference is shown.
                let backends = report.backends.unwrap_or(0);
                report.cross_check = Some(crosscheck::rows(&groups, &b, &a, backends));
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
