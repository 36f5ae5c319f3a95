//! `statements` from the sums the kernel keeps per statement key (the
//! default at the socket; `--each` sends a record a statement instead):
//! the map is read at the window's edges, at the pg_stat_statements reads
//! and every second of `--live`; the key texts are drained every 100 ms.
//! Nothing here grows with the statements: what is held is bounded by the
//! keys (docs/statements.md, "Summed in the kernel").
use std::{
    path::Path,
    time::{Duration, Instant},
};

use ttp_common::sums::key_by as kernel_key_by;

use super::statements::{Args, build_report, live_text, read_pgss};
use crate::{
    probe::statements::StatementProbes,
    protocol::statements::{
        GroupBy, crosscheck,
        document::StatementsReport,
        sums::{self, Snapshot, Texts, Totals},
    },
    sys::signals::StopFlag,
};

/// How the kernel keys the sums for `--by`.
pub(super) fn key_by(by: GroupBy) -> u32 {
    match by {
        GroupBy::Fingerprint => kernel_key_by::QUERY,
        GroupBy::Text => kernel_key_by::TEXT,
        GroupBy::Backend => kernel_key_by::BACKEND,
    }
}

/// Every key's totals now, the texts that came since taken in.
fn read(sp: &mut StatementProbes, texts: &mut Texts) -> Snapshot {
    sp.drain_texts(|r| texts.take(r));
    let mut snap = Snapshot::default();
    sp.sums(|key, per_cpu| {
        snap.0.insert(key, Totals::of(per_cpu));
    });
    // A text sent after the read of its key's first statement.
    sp.drain_texts(|r| texts.take(r));
    snap
}

/// Measures the window (until `args.duration` or Ctrl-C) from the sums and
/// builds the report; `announce` is called with the sites attached once
/// the window starts.
pub(super) fn measure(
    args: &Args,
    binary: &Path,
    sp: &mut StatementProbes,
    stop: &StopFlag,
    pgss: &Option<crate::pg::Session>,
    mut note: Option<String>,
    announce: impl FnOnce(usize),
) -> anyhow::Result<StatementsReport> {
    let mut texts = Texts::default();
    let before = read_pgss(pgss);
    let at_before = read(sp, &mut texts);
    let window_start_ns = crate::sys::clock::monotonic_ns();
    announce(sp.links());
    let started = Instant::now();
    let mut shown = (Instant::now(), at_before.clone());
    loop {
        sp.drain_texts(|r| texts.take(r));
        if args.live && shown.0.elapsed() >= Duration::from_secs(1) {
            let now = read(sp, &mut texts);
            let last = now.since(&shown.1);
            let groups = sums::groups(&last, &texts, args.by, &sp.available);
            let secs = shown.0.elapsed().as_secs_f64();
            print!(
                "\x1b[2J\x1b[H{}",
                live_text(&groups, last.calls(), args.top, secs)
            );
            shown = (Instant::now(), now);
        }
        if stop.raised() || args.duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        let left = args.duration.map_or(Duration::from_millis(100), |d| {
            d.saturating_sub(started.elapsed())
                .min(Duration::from_millis(100))
        });
        stop.sleep(left);
    }
    let window_end_ns = crate::sys::clock::monotonic_ns();
    let at_end = read(sp, &mut texts);
    let after = read_pgss(pgss);
    let stats = sp.stats().map_err(crate::probe::probe_error_ctx)?;
    let mut report = build_report(
        args,
        binary,
        sp,
        Vec::new(),
        stats.workers_unjoined,
        window_start_ns,
        window_end_ns,
    )?;
    // The map began empty at attach: its totals are the window's.
    report.groups = sums::groups(&at_end, &texts, args.by, &sp.available);
    report.statements = at_end.calls();
    report.backends = stats.backends as usize;
    report.boundaries = "socket".into();
    report.ledger = args.ledger;
    report.extended_statements = Some(report.groups.iter().map(|g| g.extended).sum());
    report.counts.killed_open = stats.killed_open;
    report.counts.summed_other = stats.sums_other;
    report.counts.texts_lost = stats.texts_lost;
    report.counts.keys = Some(at_end.0.len() as u64);
    if pgss.is_some() {
        match (before, after) {
            (Ok(b), Ok(a)) if args.by != GroupBy::Backend => {
                let between = at_end.since(&at_before);
                let groups = sums::groups(&between, &texts, GroupBy::Fingerprint, &sp.available);
                report.cross_check = Some(crosscheck::rows(&groups, &b, &a, report.backends));
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
