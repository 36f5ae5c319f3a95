//! `ttp.load/1`: a load run as one typed document. `load` builds it from
//! its [`LoadReport`], prints it through the renderer `report` uses for the
//! saved file (report/render/load_report.rs) and writes it; `report` and
//! `compare` read it back with the same type. Fields added after the first
//! files were written carry `#[serde(default)]`, so those files still load.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    Model,
    clock::ClockKind,
    histograms::{SecondRow, Stats},
    output::{LoadReport, OutputFiles},
    schedule::Arrivals,
    sender::SenderStats,
};

/// Value of [`LoadDocument::schema`].
pub(crate) const LOAD_SCHEMA: &str = "ttp.load/1";

/// A whole load run: what was asked, and one phase per model (fields
/// serialise in declaration order, "schema" first).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadDocument {
    pub schema: String,
    /// The target as its factory describes it (`kind` and its settings).
    pub target: serde_json::Value,
    /// The terminal's line for the target (absent from files written
    /// before it was saved: the renderer words `target` then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_summary: Option<String>,
    pub clock: ClockKind,
    pub requested_rate_per_s: f64,
    pub arrivals: Arrivals,
    /// The Poisson schedule's seed (recorded for uniform arrivals too).
    #[serde(default)]
    pub seed: Option<u64>,
    pub warmup_s: f64,
    pub duration_s: f64,
    #[serde(default)]
    pub grace_s: f64,
    #[serde(default)]
    pub timeout_s: Option<f64>,
    #[serde(default)]
    pub max_in_flight: Option<usize>,
    /// Closed model: connections, one request in flight on each.
    #[serde(default)]
    pub connections: Option<usize>,
    /// `--latency-limit`, when given.
    #[serde(default)]
    pub latency_limit_s: Option<f64>,
    pub phases: Vec<PhaseDocument>,
    /// The simulator's queue model, computed (open model, on time).
    #[serde(default)]
    pub expected_open_latency_ns: Option<Stats>,
    /// Result files written beside the document.
    #[serde(default)]
    pub files: OutputFiles,
}

/// One phase (one load model) of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseDocument {
    pub model: Model,
    pub scheduled: u64,
    pub sent: u64,
    pub completed_ok: u64,
    #[serde(default)]
    pub failed: u64,
    /// Closed model: requests never sent (coordinated omission).
    #[serde(default)]
    pub omitted: u64,
    /// `--latency-limit`: measured successes later than the limit, and
    /// (open model) requests skipped because they were already that late.
    #[serde(default)]
    pub late: u64,
    #[serde(default)]
    pub skipped: u64,
    #[serde(default)]
    pub errors: BTreeMap<String, u64>,
    #[serde(default)]
    pub error_total: u64,
    #[serde(default)]
    pub requested_rate_per_s: f64,
    #[serde(default)]
    pub sent_rate_per_s: f64,
    pub achieved_rate_per_s: f64,
    #[serde(default)]
    pub elapsed_s: f64,
    /// Absent from files written before it existed.
    #[serde(default)]
    pub send_lag_ns: Option<Stats>,
    /// Open model, real clock: each send's lag minus the sender thread's
    /// CPU wait and CPU time since it was last on schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_lag_unexplained_ns: Option<Stats>,
    /// The open model's sender thread on the real clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<SenderStats>,
    /// Latency distributions by series key (`output::Series::key`).
    pub series: BTreeMap<String, Stats>,
    /// Requests and latency per second of the phase.
    #[serde(default)]
    pub timeline: Vec<SecondRow>,
    /// Per-second samplers (`--attach-pid`: "ledger", the server's ledger).
    #[serde(default)]
    pub samplers: BTreeMap<String, Vec<serde_json::Value>>,
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

impl LoadReport {
    /// The run's document, with the result files written beside it.
    pub fn document(&self, files: OutputFiles) -> LoadDocument {
        let p = &self.plan;
        LoadDocument {
            schema: LOAD_SCHEMA.into(),
            target: self.target.clone(),
            target_summary: Some(self.target_summary.clone()),
            clock: self.clock,
            requested_rate_per_s: p.rate_per_s,
            arrivals: p.arrivals,
            seed: Some(p.seed),
            warmup_s: secs(p.warmup_ns),
            duration_s: secs(p.duration_ns),
            grace_s: secs(p.grace_ns),
            timeout_s: p.timeout_ns.map(secs),
            max_in_flight: Some(p.max_in_flight),
            connections: Some(p.connections),
            latency_limit_s: p.latency_limit_ns.map(secs),
            phases: self
                .phases
                .iter()
                .map(|ph| PhaseDocument {
                    model: ph.model,
                    scheduled: ph.counts.scheduled,
                    sent: ph.recorder.sent,
                    completed_ok: ph.recorder.ok,
                    failed: ph.recorder.failed,
                    omitted: ph.counts.omitted,
                    late: ph.recorder.late,
                    skipped: ph.counts.skipped,
                    errors: ph.recorder.errors.clone(),
                    error_total: ph.error_total(),
                    requested_rate_per_s: p.rate_per_s,
                    sent_rate_per_s: ph.sent_rate_per_s(),
                    achieved_rate_per_s: ph.achieved_rate_per_s(),
                    elapsed_s: secs(ph.counts.elapsed_ns),
                    send_lag_ns: Some(Stats::of(&ph.recorder.send_lag)),
                    send_lag_unexplained_ns: ph
                        .counts
                        .sender
                        .map(|_| Stats::of(&ph.recorder.send_lag_unexplained)),
                    sender: ph.counts.sender,
                    series: ph
                        .series()
                        .iter()
                        .map(|(s, h)| (s.key().to_string(), Stats::of(h)))
                        .collect(),
                    timeline: ph.recorder.timeline.clone(),
                    samplers: ph.samples.clone(),
                })
                .collect(),
            expected_open_latency_ns: self.expected_stats(),
            files,
        }
    }
}
