//! `statements` from the sums the kernel keeps per statement key (the
//! default at the socket; `--each` sends a record a statement instead):
//! the map is read at the window's edges, at the pg_stat_statements reads
//! and every second of `--live`; the key texts are drained every 100 ms
//! (`ttp_statements::follow::sums`).
//! Nothing here grows with the statements: what is held is bounded by the
//! keys (docs/statements.md, "Summed in the kernel"). The reading and the
//! document are the statements session's (ttp-statements/src/session.rs).
use super::statements_args::{Args, read_pgss, window};
use crate::report::statements::live;
use ttp_ledger::probe::statements::StatementProbes;
use ttp_statements::{
    Group, GroupBy, crosscheck,
    document::StatementsReport,
    follow::{self, SumsWindow},
    session::{self, Server, SumsReader},
    sums,
};
use ttp_sys::sys::signals::StopFlag;

/// Measures the window (until `args.duration` or Ctrl-C) from the sums and
/// builds the report; `announce` is called with the sites attached once
/// the window starts.
pub(super) fn measure(
    args: &Args,
    server: &Server,
    sp: &mut StatementProbes,
    stop: &StopFlag,
    pgss: &Option<crate::pg::Session>,
    mut note: Option<String>,
    announce: impl FnOnce(usize),
) -> anyhow::Result<StatementsReport> {
    let mut reader = SumsReader::default();
    let before = read_pgss(pgss);
    let mut show =
        |groups: &[Group], statements, secs| live::show(groups, statements, args.top, secs);
    let SumsWindow {
        window,
        start_ns: window_start_ns,
        end_ns: window_end_ns,
    } = follow::sums(&mut reader, sp, window(args, stop, &mut show), announce);
    let after = read_pgss(pgss);
    let mut report = session::sums_report(
        server,
        args.by,
        sp,
        &reader,
        &window,
        window_start_ns,
        window_end_ns,
    )?;
    report.ledger = args.ledger;
    report.counts.keys = Some(reader.kernel_keys);
    if let Some(e) = &reader.last_error {
        if reader.read_errors > 0 {
            eprintln!(
                "statements: {} reads of a key of the kernel's sums failed (last: {e}); those keys' figures over the window may be off",
                reader.read_errors
            );
        }
        if reader.remove_errors > 0 {
            eprintln!(
                "statements: {} exited backends' keys could not be taken out of the kernel's map (last: {e}); they stay there, counted, and take its room",
                reader.remove_errors
            );
        }
    }
    if pgss.is_some() {
        match (before, after) {
            (Ok(b), Ok(a)) if args.by != GroupBy::Backend => {
                let groups =
                    sums::groups(&window, &reader.texts, GroupBy::Fingerprint, &sp.available);
                // Backends unread: no allowance for statements that
                // straddle the edges, a difference is shown.
                let backends = report.backends.unwrap_or(0);
                report.cross_check = Some(crosscheck::rows(&groups, &b, &a, backends));
                note = None;
            }
            (Ok(_), Ok(_)) => {
                note = Some(
                    "with --by backend the kernel sums per backend, not per statement: the cross-check needs --by fingerprint or text (or --each)".into(),
                );
            }
            (Err(e), _) | (_, Err(e)) => note = Some(e),
        }
    }
    report.cross_check_note = note;
    Ok(report)
}
