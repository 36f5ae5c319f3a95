//! `--trace FILE`: a timeline of the measured processes that Perfetto
//! (ui.perfetto.dev) and chrome://tracing open as it is.
//!
//! The data flows probe → `window::trace_record::Recorder` (ring buffer
//! drained on a thread) → [`Recording`] → [`Timeline`] (states, I/O, wakeups, counters) →
//! [`Trace`] (plus the protocol's QE slices) → Chrome Trace Event Format
//! JSON (`report/format/chrome.rs`), written atomically.
//!
//! How a command uses it (these items are the crate's own, so the example
//! is not compiled as a doctest; `cli/run.rs` does the same):
//!
//! ```text
//! use ttp_ledger::probe::{AttachOptions, Ledger};
//! use ttp_user::report::trace::{QeSlice, Trace};
//! use ttp_window::window::trace_record::Recorder;
//! let mut ledger = Ledger::attach_with(&AttachOptions { trace: true, ..Default::default() })?;
//! let mut rec = Recorder::start(&mut ledger, &[])?;
//! // for each QE: start its process held before exec, then
//! rec.add_process(&mut ledger, 4242)?;
//! // … the QE runs …
//! let recording = rec.finish(&ledger)?;
//! let mut trace = Trace::new(recording, "ttp run");
//! trace.add_qe(QeSlice {
//!     name: "QE 1".into(),
//!     start_ns: 1_000,
//!     end_ns: 2_000_000,
//!     time_meas_ms: 2.0,
//!     time_calc_ms: Some(1.9),
//!     dropped: None,
//! })?;
//! use ttp_user::report::format::{chrome::Chrome, write};
//! write(std::path::Path::new("run.trace.json"), &Chrome(&trace))?;
//! ```
mod timeline;

pub use timeline::{
    CpuCounter, Flow, IoRequest, Mark, MarkKind, StateSlice, Timeline, TimelineStats, Waker,
};

use ttp_ledger::probe::trace::SAMPLE_HZ;
use ttp_window::window::trace_record::Recording;

#[derive(Debug, thiserror::Error)]
pub(crate) enum TraceError {
    #[error("QE slice {name:?} ends at {end_ns} ns, before its start at {start_ns} ns")]
    BackwardsSlice {
        name: String,
        start_ns: u64,
        end_ns: u64,
    },
}

/// One query execution on the protocol track (the `run` command).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct QeSlice {
    /// Shown on the slice (e.g. "QE 3").
    pub name: String,
    /// CLOCK_MONOTONIC ns: the slice's extent (its duration should be the
    /// QE's elapsed time).
    pub start_ns: u64,
    pub end_ns: u64,
    /// TTPv2's measured time of the QE.
    pub time_meas_ms: f64,
    /// TTPv2's calculated time (eq. 3), when computed.
    pub time_calc_ms: Option<f64>,
    /// Why the QE was dropped (TTPv2 Steps 2–3), or None when kept.
    pub dropped: Option<String>,
}

/// A trace ready to be written: the recording's timeline plus the
/// protocol's QE slices.
pub struct Trace {
    recording: Recording,
    timeline: Timeline,
    command: String,
    qes: Vec<QeSlice>,
}

impl Trace {
    /// Builds the timeline of `recording`; `command` names what recorded
    /// it (e.g. "ttp attach", "ttp run (TTPv2)").
    pub fn new(recording: Recording, command: &str) -> Self {
        let timeline = Timeline::build(
            &recording.events,
            &recording.seeds,
            &recording.names,
            recording.start_ns,
            recording.end_ns,
        );
        Self {
            recording,
            timeline,
            command: command.into(),
            qes: Vec::new(),
        }
    }

    pub(crate) fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// The QE slices of the protocol track.
    pub(crate) fn qes(&self) -> &[QeSlice] {
        &self.qes
    }

    /// What recorded the trace (e.g. "ttp attach").
    pub(crate) fn command(&self) -> &str {
        &self.command
    }

    /// Adds one QE slice to the protocol track.
    pub(crate) fn add_qe(&mut self, qe: QeSlice) -> Result<(), TraceError> {
        if qe.end_ns < qe.start_ns {
            return Err(TraceError::BackwardsSlice {
                name: qe.name,
                start_ns: qe.start_ns,
                end_ns: qe.end_ns,
            });
        }
        self.qes.push(qe);
        Ok(())
    }

    /// Lost or undecodable records, as sentences (empty: nothing lost).
    pub(crate) fn warnings(&self) -> Vec<String> {
        let r = &self.recording;
        let mut w = Vec::new();
        if r.stats.trace_events_lost > 0 {
            w.push(format!(
                "{} trace events lost (ring buffer full): some slices are merged or missing",
                r.stats.trace_events_lost
            ));
        }
        if r.stats.traced_map_full > 0 {
            w.push(format!(
                "{} forked processes not traced (more than {} traced processes)",
                r.stats.traced_map_full,
                ttp_common::trace::MAX_TRACED
            ));
        }
        if r.undecodable > 0 {
            w.push(format!(
                "{} trace records could not be decoded",
                r.undecodable
            ));
        }
        w
    }

    /// The trace's "metadata" object.
    pub(crate) fn metadata(&self) -> serde_json::Value {
        let r = &self.recording;
        let m = TraceMetadata {
            schema: TRACE_SCHEMA.into(),
            command: self.command.clone(),
            clock: "CLOCK_MONOTONIC".into(),
            ts_unit: "us".into(),
            start_ns: r.start_ns,
            end_ns: r.end_ns,
            duration_ns: r.end_ns.saturating_sub(r.start_ns),
            traced_pids: r.roots.clone(),
            processes: self.timeline.processes().into_iter().collect(),
            events: r.events.len() as u64,
            events_lost: r.stats.trace_events_lost,
            undecodable: r.undecodable,
            cpu_sample_hz: SAMPLE_HZ,
            timeline: self.timeline.stats,
            kernel: r.stats,
            qes: self.qes.len() as u64,
            warnings: self.warnings(),
        };
        // Through a Value: keys sorted, as the files have always been written.
        serde_json::to_value(m).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;

/// Schema of a `--trace` file.
pub(crate) const TRACE_SCHEMA: &str = "ttp.trace/1";

/// The "metadata" object of a `--trace` file, written by [`Trace`] and read
/// back by `report` (report/render/trace.rs). Every field is
/// `#[serde(default)]`, so files written before a field existed still load.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub(crate) struct TraceMetadata {
    pub schema: String,
    /// What recorded the trace (e.g. "ttp run (TTPv2)").
    pub command: String,
    pub clock: String,
    /// Unit of the events' `ts` and `dur`.
    pub ts_unit: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub duration_ns: u64,
    pub traced_pids: Vec<u32>,
    /// Processes (tgids) that appear in the trace.
    pub processes: Vec<u32>,
    pub events: u64,
    pub events_lost: u64,
    pub undecodable: u64,
    pub cpu_sample_hz: u64,
    pub timeline: TimelineStats,
    pub kernel: ttp_ledger::probe::KernelStats,
    pub qes: u64,
    pub warnings: Vec<String>,
}
