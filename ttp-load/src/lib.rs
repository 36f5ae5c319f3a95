//! Latency under load without coordinated omission (Friedrich, Wingerath,
//! Ritter: "Coordinated Omission in NoSQL Database Benchmarking").
//!
//! Data flow: [`schedule`] (intended start times) → [`models`] (open or
//! closed loop, on a [`clock`]) → a [`targets::Target`] (the [`simulator`],
//! a process per request, …) → [`histograms`] (HdrHistograms, timeline) →
//! [`output`] (distributions, .hgrm) → [`document`] (`ttp.load/1`, printed
//! and saved) and `report::load`'s SVG. [`driver`] runs a phase
//! per model; [`analytic`] is the simulator's known answer.
pub mod analytic;
pub mod clock;
pub mod document;
pub mod driver;
pub mod histograms;
pub mod ledger;
pub(crate) mod models;
pub mod output;
pub mod pool;
pub mod schedule;
pub(crate) mod sender;
pub mod simulator;
pub mod targets;
pub mod tcp;

#[cfg(test)]
mod scenario_tests;

use clock::ClockError;
use schedule::Arrivals;
use targets::TargetError;

/// The load model of one phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Model {
    /// Open system model (Sec. 3): requests sent at their intended times.
    Open,
    /// Closed system model (Sec. 2): YCSB's loop of Listing 1.
    Closed,
}

/// What one phase does. Times are nanoseconds from the phase start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhasePlan {
    pub rate_per_s: f64,
    pub arrivals: Arrivals,
    /// Seed of the Poisson schedule (unused, but recorded, for uniform).
    pub seed: u64,
    /// Requests intended before this are sent but not measured.
    pub warmup_ns: u64,
    /// Measured span after the warm-up.
    pub duration_ns: u64,
    /// After the schedule ends, how long the run still sends requests that
    /// were due before its end (late) and waits for responses; then the
    /// unsent ones count as `not_sent` (closed model: omitted) and those in
    /// flight as `unfinished`.
    pub grace_ns: u64,
    /// Per-request timeout (error kind `timeout`), if any.
    pub timeout_ns: Option<u64>,
    /// Open model: most requests in flight at once.
    pub max_in_flight: usize,
    /// Closed model: number of connections (YCSB client threads).
    pub connections: usize,
    /// `--latency-limit` (pgbench's): requests whose latency from their
    /// intended start exceeds it are counted late; in the open model a
    /// request already later than this when it would be sent is skipped
    /// (not sent, counted).
    pub latency_limit_ns: Option<u64>,
    /// Open model on the real clock: run the sender thread under SCHED_FIFO
    /// (`--realtime-sender`), so ordinary tasks cannot delay its sends.
    pub realtime_sender: bool,
}

/// Failures that end a load run.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("could not start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error(transparent)]
    Clock(#[from] ClockError),
    #[error(transparent)]
    Target(#[from] TargetError),
}
