//! A window of statements followed until it ends (its duration, or
//! Ctrl-C): the probes drained every 100 ms, and with `--live`, every
//! second, the groups of the last second handed to whoever shows them.
//! Two ways, as the session attaches: a record a statement
//! ([`records`]), or the kernel's sums read at the window's edges with
//! the key texts drained between ([`sums`]). Nothing here prints: the
//! live screen is the report's (ttp-user's `report/statements/live.rs`).
use std::time::{Duration, Instant};

use ttp_ledger::probe::statements::StatementProbes;
use ttp_sys::sys::signals::StopFlag;

use crate::{
    Group, GroupBy, Statement, group, parallel,
    session::SumsReader,
    sums::{self, Snapshot},
};

/// `--live`: sees every second the groups of the last second, the
/// statements in it and its length in seconds.
pub type EachSecond<'a> = dyn FnMut(&[Group], u64, f64) + 'a;

/// How long a window lasts, and who sees each second of it.
pub struct Window<'a> {
    /// Until then; `None`: until `stop`.
    pub duration: Option<Duration>,
    pub stop: &'a StopFlag,
    /// How statements are grouped.
    pub by: GroupBy,
    /// `--live`: who sees each second.
    pub each_second: Option<&'a mut EachSecond<'a>>,
}

impl Window<'_> {
    /// Whether the window is over, `started` at that instant.
    fn over(&self, started: Instant) -> bool {
        self.stop.raised() || self.duration.is_some_and(|d| started.elapsed() >= d)
    }

    /// Sleeps until the next drain: 100 ms, or what is left of the window.
    fn pause(&self, started: Instant) {
        let left = self.duration.map_or(Duration::from_millis(100), |d| {
            d.saturating_sub(started.elapsed())
                .min(Duration::from_millis(100))
        });
        self.stop.sleep(left);
    }
}

/// Drains a record a statement until the window ends; every second of
/// `--live` the statements of the last second are grouped and shown (a
/// parallel worker's share waits for its leader's statement, at most a
/// minute). The statements of the whole window, in the order drained.
pub fn records(sp: &mut StatementProbes, mut window: Window<'_>) -> Vec<Statement> {
    let started = Instant::now();
    let mut out = Vec::new();
    let mut shown = (Instant::now(), 0usize);
    // Workers' shares drained before their leader's statement: joined in a
    // later second.
    let mut waiting: Vec<Statement> = Vec::new();
    loop {
        sp.drain(|r| out.push(Statement::from(r)));
        if let Some(each_second) = window.each_second.as_mut()
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
            let groups = group(&last, window.by, &sp.available);
            each_second(&groups, last.len() as u64, secs);
            shown = (Instant::now(), out.len());
        }
        if window.over(started) {
            break;
        }
        window.pause(started);
    }
    sp.drain(|r| out.push(Statement::from(r)));
    out
}

/// A window of the kernel's sums, its edges on the monotonic clock.
pub struct SumsWindow {
    /// What the keys added between the window's two reads (statements
    /// that ended between the attach and the window's start are not in
    /// it).
    pub window: Snapshot,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Reads the sums at the window's start, drains the key texts until it
/// ends (with `--by backend` taking exited backends' keys out of the
/// kernel's map every second), and reads them again. Every second of
/// `--live` the groups of the sums added in the last second are shown.
/// `started_at` is called with the sites attached once the window starts.
pub fn sums(
    reader: &mut SumsReader,
    sp: &mut StatementProbes,
    mut window: Window<'_>,
    started_at: impl FnOnce(usize),
) -> SumsWindow {
    let at_before = reader.read(sp);
    let start_ns = ttp_sys::sys::clock::monotonic_ns();
    started_at(sp.links());
    let started = Instant::now();
    let mut shown = (Instant::now(), at_before.clone());
    let mut evicted = Instant::now();
    loop {
        reader.drain_texts(sp);
        if window.by == GroupBy::Backend && evicted.elapsed() >= Duration::from_secs(1) {
            reader.evict_exited(sp);
            evicted = Instant::now();
        }
        if let Some(each_second) = window.each_second.as_mut()
            && shown.0.elapsed() >= Duration::from_secs(1)
        {
            let now = reader.read(sp);
            let last = now.since(&shown.1);
            let groups = sums::groups(&last, &reader.texts, window.by, &sp.available);
            let secs = shown.0.elapsed().as_secs_f64();
            each_second(&groups, last.calls(), secs);
            shown = (Instant::now(), now);
        }
        if window.over(started) {
            break;
        }
        window.pause(started);
    }
    let end_ns = ttp_sys::sys::clock::monotonic_ns();
    if window.by == GroupBy::Backend {
        reader.evict_exited(sp);
    }
    let at_end = reader.read(sp);
    SumsWindow {
        window: at_end.since(&at_before),
        start_ns,
        end_ns,
    }
}
