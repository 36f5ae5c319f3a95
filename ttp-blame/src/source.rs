//! Where windows come from. [`WindowSource`] is implemented on top of the
//! kernel ledger (per-window in-kernel aggregation, [`super::live`], opened
//! by `live::open_live`); [`collect`] turns a
//! source into a [`Recording`], stopping when the victim exits, the
//! duration is reached or the user interrupts.
use std::{
    path::Path,
    sync::atomic::{AtomicBool, Ordering},
};

use super::input::{RECORDING_SCHEMA, Recording, Sources, TaskInfo, VictimSpec, Window};

/// A live producer of windows for one victim.
pub trait WindowSource {
    /// Nominal δt the source aggregates over.
    fn window_ns(&self) -> u64;
    /// Which ledger sources this kernel measures.
    fn sources(&self) -> Sources;
    /// Blocks until the next window closes and returns it. `Ok(None)` once
    /// every victim thread has exited and the last (partial) window, ending
    /// at the exit, has been returned.
    fn next_window(&mut self) -> Result<Option<Window>, SourceError>;
    /// Identity of every thread the windows so far refer to and of every
    /// thread alive during them (idle ones too), with start and exit times
    /// on the windows' clock.
    fn tasks(&self) -> Vec<TaskInfo>;
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("no process with pid {pid}; check it with `ps -p {pid}` and start the victim first")]
    NoSuchProcess { pid: u32 },
    /// Loading or reading the kernel ledger failed.
    #[error(transparent)]
    Probe(#[from] ttp_ledger::probe::ProbeError),
}

/// Why [`collect`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    VictimExited,
    Duration,
    Interrupted,
}

/// Fails with [`SourceError::NoSuchProcess`] unless `pid` exists under
/// `proc_root` (normally `/proc`).
pub fn check_victim(proc_root: &Path, pid: u32) -> Result<(), SourceError> {
    if pid == 0 || !proc_root.join(pid.to_string()).is_dir() {
        return Err(SourceError::NoSuchProcess { pid });
    }
    Ok(())
}

/// Reads windows from `source` until the victim exits, `limit_ns` of
/// windows have been collected, or `stop` is set; `on_window` sees each
/// window as it arrives (for a progress bar).
pub fn collect(
    source: &mut dyn WindowSource,
    victim: VictimSpec,
    limit_ns: Option<u64>,
    stop: &AtomicBool,
    mut on_window: impl FnMut(&Window),
) -> Result<(Recording, StopReason), SourceError> {
    let mut windows: Vec<Window> = Vec::new();
    let mut collected_ns: u64 = 0;
    let reason = loop {
        if stop.load(Ordering::Relaxed) {
            break StopReason::Interrupted;
        }
        let Some(w) = source.next_window()? else {
            break StopReason::VictimExited;
        };
        collected_ns = collected_ns.saturating_add(w.len_ns());
        on_window(&w);
        windows.push(w);
        if limit_ns.is_some_and(|l| collected_ns >= l) {
            break StopReason::Duration;
        }
    };
    let rec = Recording {
        schema: RECORDING_SCHEMA.into(),
        window_ns: source.window_ns(),
        victim,
        sources: source.sources(),
        tasks: source.tasks(),
        windows,
    };
    Ok((rec, reason))
}
