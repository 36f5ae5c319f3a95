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
pub(crate) mod attribute;
pub(crate) mod baseline;
pub(crate) mod cause;
pub(crate) mod disk_split;
mod error;
pub(crate) mod explain;
pub mod graph;
pub mod input;
pub mod live;
mod options;
pub mod qe;
pub mod report;
pub mod source;
pub(crate) mod summary;
mod units;

#[cfg(test)]
mod tests;

pub use cause::GroupBy;
pub use error::BlameError;
pub use input::{Recording, VictimSpec};
pub use options::{DiskMeasure, Options};
pub use report::BlameReport;
pub use units::fmt_ns;

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
