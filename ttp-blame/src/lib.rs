//! Contention blame: which concurrent processes slowed a victim process, by
//! how much and through which resource (iQCAR, shared paper 002, adapted
//! from a Spark cluster to one Linux host; docs/blame.md maps each equation).
//!
//! Data flow: [`input::Recording`] (windows of ledger data) →
//! [`attribute`] (RATP, blame, slowdown per window, Sec. 3) → [`graph`]
//! (BC, Impact Factor, DOR, Sec. 4.1–4.2) → [`explain`] (ranked
//! explanations) and [`baseline`] (overlap method, Sec. 6.1) →
//! [`report::BlameReport`] (JSON `ttp.blame/1`; `report::blame` renders
//! it as text and DOT).
//! [`source`] is where windows come from; [`live`] measures them; [`qe`]
//! measures them beside each QE of `run --blame`.
pub mod attribute;
pub mod baseline;
pub mod cause;
pub mod disk_split;
pub mod explain;
pub mod graph;
pub mod input;
pub mod live;
pub mod qe;
pub mod report;
pub mod source;
pub mod summary;

#[cfg(test)]
mod tests;

pub use attribute::DiskMeasure;
pub use cause::GroupBy;
pub use input::{Recording, VictimSpec};
pub use report::BlameReport;

/// Errors of the blame analysis.
#[derive(Debug, thiserror::Error)]
pub enum BlameError {
    #[error("the recording is not valid: {what}; re-record it with `ttp-ebpf blame --record`")]
    InvalidRecording { what: String },
    #[error(
        "window {window} lists task {task}, which is not in the recording's tasks; \
         every task a window refers to needs an entry in `tasks`"
    )]
    UnknownTask { window: usize, task: u32 },
    #[error(
        "no thread of pid {pid} in the recording; pass the victim's pid with --pid \
         (the recording's tasks list the pids it saw)"
    )]
    NoVictim { pid: u32 },
    #[error(
        "the recording has no windows: the victim exited (or the measurement stopped) \
         before the first window closed; use a shorter --window"
    )]
    NoWindows,
    #[error(
        "--window {asked_ns} ns is not a multiple of the recorded window {recorded_ns} ns; \
         choose a multiple of it"
    )]
    WindowNotMultiple { asked_ns: u64, recorded_ns: u64 },
}

/// Choices left to the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub disk_by: DiskMeasure,
    pub group_by: GroupBy,
    /// Process-name prefixes treated as known causes (Sec. 5.1), besides
    /// kernel threads.
    pub known_comms: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            disk_by: DiskMeasure::Bytes,
            group_by: GroupBy::Unit,
            known_comms: Vec::new(),
        }
    }
}

/// Runs the whole analysis on a recording.
pub fn analyze(rec: &Recording, opts: &Options) -> Result<BlameReport, BlameError> {
    rec.validate()?;
    if rec.windows.is_empty() {
        return Err(BlameError::NoWindows);
    }
    let victim = rec.victim_tasks(&rec.victim)?;
    let cls = cause::Classifier::new(&rec.tasks, victim, &opts.known_comms, opts.group_by);
    let attr = attribute::attribute(rec, &cls, opts);
    let victim_label = match cls.process_task(rec.victim.pid) {
        Some(t) => format!("victim {} pid {}", t.process_name(), rec.victim.pid),
        None => format!("victim pid {}", rec.victim.pid),
    };
    let graph = graph::build(&attr, &cls, &victim_label);
    let explanations = explain::explain(&attr, &cls);
    let blocked_total: f64 = attr.rows.iter().map(|r| r.blocked_ns as f64).sum();
    let baseline = baseline::deep_overlap(rec, &cls, blocked_total);
    Ok(report::assemble(
        rec,
        opts,
        &cls,
        attr,
        graph,
        explanations,
        baseline,
    ))
}

/// A duration in ns, for people: `1.20 s`, `12.3 ms`, `45 µs`.
pub fn fmt_ns(ns: f64) -> String {
    // −0.0 (an empty f64 sum) prints as 0.
    let ns = if ns == 0.0 { 0.0 } else { ns };
    let a = ns.abs();
    if a >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if a >= 1e6 {
        format!("{:.1} ms", ns / 1e6)
    } else if a >= 1e3 {
        format!("{:.0} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}
