//! The thread that takes the sampling windows of the kernel's BPF
//! statistics (docs/ledger-cost.md, "The ledger's own cost"): every
//! [`PERIOD`] it enables them for [`SAMPLE`], reads every program's run
//! count and run time at the window's two ends, and closes the fd again.
use std::{
    collections::BTreeMap,
    os::fd::{AsFd, OwnedFd},
    sync::{Arc, Condvar, Mutex},
};

use super::counters::{
    CostUnavailable, PERIOD, ProgramCounters, SAMPLE, enable_stats, program_counters,
};

/// What the sampling windows saw of one program, summed since load: the
/// runs and run time inside the windows, the windows in which it ran, and
/// the sum and sum of squares of their per-window ns a run (for the
/// standard error of the mean).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sampled {
    pub runs: u64,
    pub run_time_ns: u64,
    pub windows: u64,
    pub mean_sum: f64,
    pub mean_sq_sum: f64,
    /// Runs estimated over the time outside the windows too: each
    /// window's runs × (time since the previous window's end) / (window
    /// length). For programs the ledger does not count itself.
    pub runs_scaled: f64,
}

impl Sampled {
    pub(super) fn minus(&self, b: &Sampled) -> Sampled {
        Sampled {
            runs: self.runs.saturating_sub(b.runs),
            run_time_ns: self.run_time_ns.saturating_sub(b.run_time_ns),
            windows: self.windows.saturating_sub(b.windows),
            mean_sum: self.mean_sum - b.mean_sum,
            mean_sq_sum: self.mean_sq_sum - b.mean_sq_sum,
            runs_scaled: self.runs_scaled - b.runs_scaled,
        }
    }

    /// Mean ns a run over the windows' runs.
    pub(super) fn ns_per_run(&self) -> Option<f64> {
        (self.runs > 0).then(|| self.run_time_ns as f64 / self.runs as f64)
    }

    /// Standard error of the per-window means (two windows at least).
    pub(super) fn stderr(&self) -> Option<f64> {
        if self.windows < 2 {
            return None;
        }
        let n = self.windows as f64;
        let var = (self.mean_sq_sum - self.mean_sum * self.mean_sum / n) / (n - 1.0);
        Some((var.max(0.0) / n).sqrt())
    }
}

/// The sampler's state, shared with its thread.
#[derive(Default)]
pub(super) struct Shared {
    /// The programs to sample (their fds duplicated, so a window never
    /// reads a closed one), refreshed at every snapshot.
    programs: Vec<(String, Arc<OwnedFd>)>,
    pub(super) sampled: BTreeMap<String, Sampled>,
    /// Windows taken, and the time the statistics were on, in all.
    pub(super) windows: u64,
    pub(super) stats_on_ns: u64,
    /// Why the last window failed, if it did.
    error: Option<String>,
    stop: bool,
    /// Per program, the runs at the last snapshot and the run time
    /// accumulated up to it ([`super::ProgramSnapshot::run_time_ns`]).
    accrued: BTreeMap<String, (u64, f64)>,
}

/// The thread that takes the sampling windows.
pub struct CostSampler {
    shared: Arc<(Mutex<Shared>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CostSampler {
    /// Checks that the kernel lets ttp enable the statistics (on and off
    /// again at once) and starts the thread; its first window begins when
    /// [`CostSampler::set_programs`] first names programs.
    pub fn start() -> Result<CostSampler, CostUnavailable> {
        drop(enable_stats()?);
        let shared = Arc::new((Mutex::new(Shared::default()), Condvar::new()));
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("ttp-cost".into())
            .spawn(move || sample_loop(&s))
            .map_err(|e| CostUnavailable(format!("cannot start the cost sampler: {e}")))?;
        Ok(CostSampler {
            shared,
            thread: Some(thread),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The programs to sample from now on (wakes the thread for its first
    /// window).
    pub(crate) fn set_programs(&self, programs: Vec<(String, Arc<OwnedFd>)>) {
        let mut s = self.lock();
        let first = s.programs.is_empty();
        s.programs = programs;
        if first {
            self.shared.1.notify_all();
        }
    }

    /// What the windows saw so far, per program; windows and time on.
    pub(super) fn sampled(&self) -> (BTreeMap<String, Sampled>, u64, u64, Option<String>) {
        let s = self.lock();
        (s.sampled.clone(), s.windows, s.stats_on_ns, s.error.clone())
    }

    /// Run time accrued by `program` up to `runs` runs: the previous
    /// figure plus the runs since at `ns_per_run`. Never goes back, so
    /// serve can export it as a counter.
    pub(super) fn accrue(&self, program: &str, runs: u64, ns_per_run: f64) -> u64 {
        let mut s = self.lock();
        let e = s.accrued.entry(program.to_string()).or_insert((0, 0.0));
        if runs > e.0 {
            e.1 += (runs - e.0) as f64 * ns_per_run;
            e.0 = runs;
        }
        e.1 as u64
    }

    /// Takes one window now and waits for it (serve, before it drops the
    /// privilege BPF_ENABLE_STATS needs).
    pub(crate) fn sample_now(&self) -> Result<(), CostUnavailable> {
        let programs = self.lock().programs.clone();
        let (sampled, on_ns) = one_window(&programs, || std::thread::sleep(SAMPLE))?;
        let mut s = self.lock();
        fold(&mut s, sampled, on_ns, None);
        Ok(())
    }
}

impl Drop for CostSampler {
    fn drop(&mut self) {
        self.lock().stop = true;
        self.shared.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Every program's counters now, by name.
fn read_all(programs: &[(String, Arc<OwnedFd>)]) -> std::io::Result<Vec<ProgramCounters>> {
    programs
        .iter()
        .map(|(_, fd)| program_counters(fd.as_fd()))
        .collect()
}

/// Per program of one window: (name, runs, run time ns).
type WindowRows = Vec<(String, u64, u64)>;

/// One window: the statistics on, the counters read, read again after
/// `pause` (~[`SAMPLE`]), the statistics off. Its rows and how long it
/// lasted.
fn one_window(
    programs: &[(String, Arc<OwnedFd>)],
    pause: impl FnOnce(),
) -> Result<(WindowRows, u64), CostUnavailable> {
    let unreadable = |e: std::io::Error| {
        CostUnavailable(format!("cannot read the programs' BPF statistics: {e}"))
    };
    let on = enable_stats()?;
    let t0 = ttp_sys::sys::clock::monotonic_ns();
    let before = read_all(programs).map_err(unreadable)?;
    pause();
    let after = read_all(programs).map_err(unreadable)?;
    let t1 = ttp_sys::sys::clock::monotonic_ns();
    drop(on);
    let rows = programs
        .iter()
        .zip(before.iter().zip(&after))
        .map(|((name, _), (b, a))| {
            (
                name.clone(),
                a.run_count.saturating_sub(b.run_count),
                a.run_time_ns.saturating_sub(b.run_time_ns),
            )
        })
        .collect();
    Ok((rows, t1.saturating_sub(t0)))
}

/// Adds one window to the sums; `off_ns`: the time since the previous
/// window's end, over which its runs are scaled.
pub(super) fn fold(s: &mut Shared, rows: WindowRows, on_ns: u64, off_ns: Option<u64>) {
    s.windows += 1;
    s.stats_on_ns += on_ns;
    for (name, runs, ns) in rows {
        let e = s.sampled.entry(name).or_default();
        e.runs += runs;
        e.run_time_ns += ns;
        if on_ns > 0 {
            let scale = (on_ns + off_ns.unwrap_or(0)) as f64 / on_ns as f64;
            e.runs_scaled += runs as f64 * scale;
        }
        if runs > 0 {
            let m = ns as f64 / runs as f64;
            e.windows += 1;
            e.mean_sum += m;
            e.mean_sq_sum += m * m;
        }
    }
}

fn sample_loop(shared: &(Mutex<Shared>, Condvar)) {
    let (lock, wake) = shared;
    fn guard(m: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
        m.lock().unwrap_or_else(|p| p.into_inner())
    }
    // Wait for the first programs.
    {
        let mut s = guard(lock);
        while s.programs.is_empty() && !s.stop {
            s = wake.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }
    let mut last_end: Option<u64> = None;
    loop {
        let programs = {
            let s = guard(lock);
            if s.stop {
                return;
            }
            s.programs.clone()
        };
        // The window's pause ends early when the sampler stops, so that
        // dropping the ledger does not wait for it.
        let result = one_window(&programs, || {
            wait_unless_stopped(lock, wake, SAMPLE);
        });
        let end = ttp_sys::sys::clock::monotonic_ns();
        {
            let mut s = guard(lock);
            match result {
                Ok((rows, on_ns)) => {
                    let off = last_end.map(|e| end.saturating_sub(e).saturating_sub(on_ns));
                    fold(&mut s, rows, on_ns, off);
                    s.error = None;
                }
                Err(e) => s.error = Some(e.0),
            }
        }
        last_end = Some(end);
        wait_unless_stopped(lock, wake, PERIOD.saturating_sub(SAMPLE));
    }
}

/// Waits `d`, or less if the sampler is told to stop meanwhile.
fn wait_unless_stopped(lock: &Mutex<Shared>, wake: &Condvar, d: std::time::Duration) {
    let until = std::time::Instant::now() + d;
    let mut s = lock.lock().unwrap_or_else(|p| p.into_inner());
    while !s.stop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        s = wake
            .wait_timeout(s, left)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}
