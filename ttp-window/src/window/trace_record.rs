//! Recording `--trace`: the trace ring buffer drained on its own thread
//! while a command measures, from the moment the first process is traced
//! to [`Recorder::finish`]. The [`Recording`] is data; `report::trace`
//! turns it into a timeline and a Chrome-format file.
use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use ttp_ledger::{
    accounts::comm,
    probe::{KernelStats, Ledger, ProbeError, ThreadState, TraceEvent, trace::TraceReader},
};
use ttp_sys::sys::clock::monotonic_ns;

/// How often the reader thread drains the ring buffer. The kernel does not
/// wake it (records are sent without wakeups, which keeps them cheap), and
/// at this period an 8 MiB buffer holds ~170 000 records per drain.
const DRAIN_PERIOD: Duration = Duration::from_millis(10);

/// Why a trace could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error("cannot start the trace reader thread")]
    Thread(#[source] std::io::Error),
    #[error("the trace reader thread panicked; the trace is lost")]
    ReaderPanicked,
}

/// A traced thread's state when tracing started, from its ledger account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seed {
    pub tid: u32,
    pub tgid: u32,
    pub state: ThreadState,
    /// When the ledger saw it enter `state` (CLOCK_MONOTONIC ns).
    pub since_ns: u64,
    pub comm: String,
}

/// Everything recorded, ready to become a trace (`report::trace::Trace`).
#[derive(Debug, Clone, Default)]
pub struct Recording {
    /// CLOCK_MONOTONIC ns when tracing started and ended.
    pub start_ns: u64,
    pub end_ns: u64,
    pub events: Vec<TraceEvent>,
    /// Traced threads' states when they started being traced.
    pub seeds: Vec<Seed>,
    /// (tgid, tid) → comm, from the ledger at the end.
    pub names: BTreeMap<(u32, u32), String>,
    /// Processes named for tracing (their children are traced too).
    pub roots: Vec<u32>,
    /// Kernel-side counters over the recording (trace losses among them).
    pub stats: KernelStats,
    /// Records the reader could not decode.
    pub undecodable: u64,
}

/// Drains the trace ring buffer of a ledger loaded with tracing on
/// (`Ledger::attach_with(&AttachOptions { trace: true, ..Default::default() })`).
pub struct Recorder {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<(Vec<TraceEvent>, TraceReader)>>,
    start_ns: u64,
    start_stats: KernelStats,
    seeds: Vec<Seed>,
    roots: Vec<u32>,
}

impl Recorder {
    /// Starts tracing `tgids` (may be empty; see [`Recorder::add_process`])
    /// and draining on a thread.
    pub fn start(ledger: &mut Ledger, tgids: &[u32]) -> Result<Self, RecordError> {
        // Counters from before the first traced event, so that the trace's
        // `kernel.trace_events` counts every record it received.
        let start_stats = ledger.snapshot()?.stats;
        let start_ns = monotonic_ns();
        for &t in tgids {
            ledger.trace_process(t)?;
        }
        let mut reader = ledger.trace_reader()?;
        let seeds = seeds_of(&ledger.snapshot()?.threads, tgids);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("ttp-trace".into())
            .spawn(move || {
                let mut events = Vec::new();
                loop {
                    // Read the flag before draining: the last drain then
                    // comes after `finish` took the end of the trace.
                    let last = flag.load(Ordering::SeqCst);
                    reader.drain(&mut events);
                    if last {
                        return (events, reader);
                    }
                    std::thread::sleep(DRAIN_PERIOD);
                }
            })
            .map_err(RecordError::Thread)?;
        Ok(Self {
            stop,
            handle: Some(handle),
            start_ns,
            start_stats,
            seeds,
            roots: tgids.to_vec(),
        })
    }

    /// Traces one more process from now on (e.g. a QE's process that `run`
    /// started, before it executes the workload).
    pub(crate) fn add_process(
        &mut self,
        ledger: &mut Ledger,
        tgid: u32,
    ) -> Result<(), RecordError> {
        ledger.trace_process(tgid)?;
        let snap = ledger.snapshot()?;
        self.seeds.extend(seeds_of(&snap.threads, &[tgid]));
        self.roots.push(tgid);
        Ok(())
    }

    /// Ends the trace now: stops the reader after a last drain and reads
    /// the names and counters from the ledger.
    pub fn finish(mut self, ledger: &Ledger) -> Result<Recording, RecordError> {
        let end_ns = monotonic_ns();
        self.stop.store(true, Ordering::SeqCst);
        let (events, reader) = self
            .handle
            .take()
            .expect("joined once")
            .join()
            .map_err(|_| RecordError::ReaderPanicked)?;
        let snap = ledger.snapshot()?;
        let names = snap
            .threads
            .iter()
            .map(|a| ((a.tgid, a.tid), comm(a)))
            .collect();
        Ok(Recording {
            start_ns: self.start_ns,
            end_ns,
            events,
            seeds: std::mem::take(&mut self.seeds),
            names,
            roots: std::mem::take(&mut self.roots),
            stats: snap.stats.since(&self.start_stats),
            undecodable: reader.undecodable,
        })
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // Dropped without finish (an error path): stop the thread anyway.
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn seeds_of(threads: &[ttp_common::ThreadAccount], tgids: &[u32]) -> Vec<Seed> {
    threads
        .iter()
        .filter(|a| tgids.contains(&a.tgid))
        .map(|a| Seed {
            tid: a.tid,
            tgid: a.tgid,
            state: ThreadState::from_ledger(a.state),
            since_ns: a.state_since_ns,
            comm: comm(a),
        })
        .collect()
}

impl crate::window::context::FollowProcess for Recorder {
    fn follow(
        &mut self,
        ledger: &mut Ledger,
        tgid: u32,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        Ok(self.add_process(ledger, tgid)?)
    }
}
