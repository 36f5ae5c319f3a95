//! The results of a load run: its phases' distributions by series, and
//! `.hgrm` files; the `ttp.load/1` document is built from it in
//! [`super::document`], and printed by the renderer `report` uses.
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::{Model, PhasePlan, clock::ClockKind, driver::PhaseResult, histograms::Stats};

/// One latency distribution a run can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Series {
    /// Open model: completion − intended start.
    OpenLatency,
    /// Open model: completion − actual send.
    OpenServiceTime,
    /// Closed model, YCSB's plain measurement: completion − actual send.
    ClosedUncorrected,
    /// Closed model, YCSB's intended-latency correction (Sec. 2.1):
    /// completion − deadline.
    ClosedIntended,
    /// The simulator's queue model, computed (open model, on time).
    Expected,
}

impl Series {
    pub fn key(self) -> &'static str {
        match self {
            Series::OpenLatency => "open_latency",
            Series::OpenServiceTime => "open_service_time",
            Series::ClosedUncorrected => "closed_uncorrected",
            Series::ClosedIntended => "closed_intended",
            Series::Expected => "expected_open_latency",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Series::OpenLatency => "open model latency",
            Series::OpenServiceTime => "open model service time",
            Series::ClosedUncorrected => "closed model, uncorrected",
            Series::ClosedIntended => "closed model, YCSB intended",
            Series::Expected => "queue model (expected)",
        }
    }
}

impl PhaseResult {
    /// The phase's two histograms under the names its model gives them.
    pub fn series(&self) -> [(Series, &Histogram<u64>); 2] {
        let r = &self.recorder;
        match self.model {
            Model::Open => [
                (Series::OpenLatency, &r.from_intended),
                (Series::OpenServiceTime, &r.service),
            ],
            Model::Closed => [
                (Series::ClosedUncorrected, &r.service),
                (Series::ClosedIntended, &r.from_intended),
            ],
        }
    }

    pub(crate) fn error_total(&self) -> u64 {
        self.recorder
            .errors
            .values()
            .fold(0u64, |a, &e| a.saturating_add(e))
    }

    /// Successful measured requests per second of the measured span (the
    /// duration, stretched to the last measured completion if that came
    /// later), so a generator that only caught up in the grace period does
    /// not claim the requested rate.
    pub(crate) fn achieved_rate_per_s(&self) -> f64 {
        per_second(self.recorder.ok, self.recorder.measured_span_ns())
    }

    /// Measured requests sent per second of the measured duration.
    pub(crate) fn sent_rate_per_s(&self) -> f64 {
        per_second(self.recorder.sent, self.plan.duration_ns)
    }
}

fn per_second(n: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        n as f64 / (ns as f64 / 1e9)
    }
}

/// A whole run: what was asked, and one result per model.
#[derive(Debug, Clone)]
pub struct LoadReport {
    pub target: serde_json::Value,
    pub target_summary: String,
    pub clock: ClockKind,
    pub plan: PhasePlan,
    pub phases: Vec<PhaseResult>,
    /// The simulator's exact open-model latencies (sorted), when known.
    pub expected_ns: Option<Vec<u64>>,
}

/// Result files written, for the JSON's `files`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OutputFiles {
    pub hgrm: Vec<PathBuf>,
    pub svg: Option<PathBuf>,
}

impl LoadReport {
    pub(crate) fn expected_stats(&self) -> Option<Stats> {
        self.expected_ns.as_deref().map(Stats::of_sorted)
    }

    /// The `.hgrm` files of `path`: `path` gets the run's headline
    /// distribution (the open model's latency, else the closed model's
    /// YCSB-intended latency), and every distribution goes to
    /// `<path stem>.<series>.hgrm` (ttp-user's `report/format/hgrm.rs`
    /// writes them).
    pub fn hgrm_files(&self, path: &Path) -> Vec<(PathBuf, &Histogram<u64>)> {
        let all: Vec<(Series, &Histogram<u64>)> =
            self.phases.iter().flat_map(|ph| ph.series()).collect();
        let headline = all
            .iter()
            .find(|(s, _)| *s == Series::OpenLatency)
            .or_else(|| all.iter().find(|(s, _)| *s == Series::ClosedIntended));
        let mut files: Vec<(PathBuf, &Histogram<u64>)> = headline
            .map(|(_, h)| (path.to_path_buf(), *h))
            .into_iter()
            .collect();
        let s = path.to_string_lossy();
        let stem = s.strip_suffix(".hgrm").unwrap_or(&s);
        for (series, h) in all {
            files.push((PathBuf::from(format!("{stem}.{}.hgrm", series.key())), h));
        }
        files
    }
}

/// A duration in ns for people: 0, 812ns, 50.0µs, 3.20ms, 999.8ms, 1.25s.
pub fn fmt_ns(ns: u64) -> String {
    let v = ns as f64;
    if ns == 0 {
        "0".into()
    } else if ns < 1_000 {
        format!("{ns}ns")
    } else if ns < 1_000_000 {
        format!("{:.1}µs", v / 1e3)
    } else if ns < 10_000_000 {
        format!("{:.2}ms", v / 1e6)
    } else if ns < 1_000_000_000 {
        format!("{:.1}ms", v / 1e6)
    } else {
        format!("{:.2}s", v / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches unit slips in the human-readable durations.
    #[test]
    fn fmt_ns_units() {
        assert_eq!(fmt_ns(0), "0");
        assert_eq!(fmt_ns(812), "812ns");
        assert_eq!(fmt_ns(50_000), "50.0µs");
        assert_eq!(fmt_ns(3_200_000), "3.20ms");
        assert_eq!(fmt_ns(999_800_000), "999.8ms");
        assert_eq!(fmt_ns(1_250_000_000), "1.25s");
    }
}
