//! `run --blame`: contention blame (iQCAR, shared paper 002) of each QE's
//! command tree over the QE's own time, so that a slow execution comes with
//! the processes that slowed it.
//!
//! The command is the victim (with its children) from the moment it is
//! held before `execve`: a thread opens the blame's live window source on
//! it (its own ledger instance with the blame detail, docs/blame.md) and
//! collects δt windows until the command has exited; [`QeBlame::finish`]
//! analyses them. The second ledger instance costs the QE its probe time
//! once more; the QE's own measures still come from the run's ledger.
use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use crate::{
    Options, Recording, VictimSpec, live,
    source::{self, SourceError},
};
use ttp_window::window::blame_record::BlameSummary;
use ttp_window::window::{
    context::{BesideQe, RunningBeside},
    session::MeasurementSession,
};

/// Explanations and culprits kept per QE.
const TOP: usize = 5;
/// How long after the command's exit its windows may take to close.
const CLOSE_WAIT: Duration = Duration::from_secs(3);

/// `run --blame`: starts a [`QeBlame`] on each QE's command, in windows of
/// `window_ns` (the δt of `--blame-window`).
pub struct QeBlameStarter {
    pub window_ns: u64,
}

impl BesideQe for QeBlameStarter {
    fn start(&self, pid: u32) -> Result<Box<dyn RunningBeside>, String> {
        Ok(Box::new(QeBlame::start(pid, self.window_ns)?))
    }
}

impl RunningBeside for QeBlame {
    fn finish(self: Box<Self>) -> Result<BlameSummary, String> {
        QeBlame::finish(*self)
    }
}

/// The blame measurement of one QE, running beside it.
pub(crate) struct QeBlame {
    stop: Arc<AtomicBool>,
    /// Taken by `finish`; a QeBlame dropped without it (the QE failed)
    /// stops its thread.
    handle: Option<JoinHandle<Result<Recording, String>>>,
}

impl Drop for QeBlame {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl QeBlame {
    /// Starts measuring process `pid` (held, not yet released) and its
    /// children in windows of `window_ns`; returns once the first window
    /// has begun, or why the source could not open.
    pub fn start(pid: u32, window_ns: u64) -> Result<QeBlame, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let (opened_tx, opened_rx) = mpsc::sync_channel(1);
        let victim = VictimSpec {
            pid,
            children: true,
        };
        let thread_stop = stop.clone();
        let handle = std::thread::Builder::new()
            .name("ttp-qe-blame".into())
            .spawn(move || {
                // Errors as one line with their causes (anyhow's `{:#}`).
                let text = |e: SourceError| format!("{:#}", anyhow::Error::new(e));
                let session = match MeasurementSession::open_blame() {
                    Ok(s) => s,
                    Err(e) => {
                        let msg = format!("{e:#}");
                        let _ = opened_tx.send(Err(msg.clone()));
                        return Err(msg);
                    }
                };
                let mut src = match live::open_live(session, &victim, window_ns) {
                    Ok(s) => s,
                    Err(e) => {
                        let msg = text(e);
                        let _ = opened_tx.send(Err(msg.clone()));
                        return Err(msg);
                    }
                };
                let _ = opened_tx.send(Ok(()));
                source::collect(src.as_mut(), victim, None, &thread_stop, |_| {})
                    .map(|(rec, _)| rec)
                    .map_err(text)
            })
            .map_err(|e| format!("starting the blame thread: {e}"))?;
        let opened = opened_rx
            .recv()
            .unwrap_or_else(|_| Err("the blame thread ended before its source opened".into()));
        match opened {
            Ok(()) => Ok(QeBlame {
                stop,
                handle: Some(handle),
            }),
            Err(msg) => {
                let _ = handle.join();
                Err(msg)
            }
        }
    }

    /// After the command has exited: waits for its last windows, then
    /// analyses them. An error is kept in the QE's record as text.
    pub fn finish(mut self) -> Result<BlameSummary, String> {
        let Some(handle) = self.handle.take() else {
            return Err("the blame measurement was already finished".into());
        };
        let deadline = Instant::now() + CLOSE_WAIT;
        while !handle.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        // Still running: the exit was not seen (a child that outlived the
        // command keeps the victim alive); analyse what was measured.
        self.stop.store(true, Ordering::Relaxed);
        let rec = match handle.join() {
            Ok(Ok(rec)) => rec,
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err("the blame thread panicked".into()),
        };
        crate::analyze(&rec, &Options::default())
            .map(|r| r.summary(TOP))
            .map_err(|e| e.to_string())
    }
}
