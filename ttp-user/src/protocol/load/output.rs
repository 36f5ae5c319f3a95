//! The results of a load run for people and programs: the terminal table
//! with the models side by side, the `ttp.load/1` JSON, and `.hgrm` files.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use hdrhistogram::Histogram;
use serde::Serialize;

use super::{
    Model, PhasePlan,
    clock::ClockKind,
    driver::PhaseResult,
    histograms::{self, REPORTED_PERCENTILES, SecondRow, Stats},
};

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

    pub fn error_total(&self) -> u64 {
        self.recorder
            .errors
            .values()
            .fold(0u64, |a, &e| a.saturating_add(e))
    }

    /// Successful measured requests per second of the measured span (the
    /// duration, stretched to the last measured completion if that came
    /// later), so a generator that only caught up in the grace period does
    /// not claim the requested rate.
    pub fn achieved_rate_per_s(&self) -> f64 {
        per_second(self.recorder.ok, self.recorder.measured_span_ns())
    }

    /// Measured requests sent per second of the measured duration.
    pub fn sent_rate_per_s(&self) -> f64 {
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
#[derive(Debug, Clone, Default, Serialize)]
pub struct OutputFiles {
    pub hgrm: Vec<PathBuf>,
    pub svg: Option<PathBuf>,
}

#[derive(Serialize)]
struct ReportJson<'a> {
    schema: &'static str,
    target: &'a serde_json::Value,
    /// The terminal's line for the target, so `report` shows it as `load`
    /// did.
    target_summary: &'a str,
    clock: ClockKind,
    requested_rate_per_s: f64,
    arrivals: super::schedule::Arrivals,
    seed: u64,
    warmup_s: f64,
    duration_s: f64,
    grace_s: f64,
    timeout_s: Option<f64>,
    max_in_flight: usize,
    connections: usize,
    latency_limit_s: Option<f64>,
    phases: Vec<PhaseJson<'a>>,
    expected_open_latency_ns: Option<Stats>,
    files: &'a OutputFiles,
}

#[derive(Serialize)]
struct PhaseJson<'a> {
    model: Model,
    scheduled: u64,
    sent: u64,
    completed_ok: u64,
    failed: u64,
    omitted: u64,
    /// `--latency-limit`: measured successes later than the limit, and
    /// (open model) requests skipped because they were already that late.
    late: u64,
    skipped: u64,
    errors: &'a BTreeMap<String, u64>,
    error_total: u64,
    requested_rate_per_s: f64,
    sent_rate_per_s: f64,
    achieved_rate_per_s: f64,
    elapsed_s: f64,
    send_lag_ns: Stats,
    /// Open model, real clock: each send's lag minus the sender thread's
    /// CPU wait and CPU time since it was last on schedule.
    #[serde(skip_serializing_if = "Option::is_none")]
    send_lag_unexplained_ns: Option<Stats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sender: Option<super::sender::SenderStats>,
    series: BTreeMap<&'static str, Stats>,
    timeline: &'a [SecondRow],
    samplers: &'a BTreeMap<String, Vec<serde_json::Value>>,
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

impl LoadReport {
    pub fn expected_stats(&self) -> Option<Stats> {
        self.expected_ns.as_deref().map(Stats::of_sorted)
    }

    /// The `ttp.load/1` document (fields serialise in declaration order,
    /// "schema" first).
    pub fn json_doc<'a>(&'a self, files: &'a OutputFiles) -> impl Serialize + 'a {
        let p = &self.plan;
        ReportJson {
            schema: "ttp.load/1",
            target: &self.target,
            target_summary: &self.target_summary,
            clock: self.clock,
            requested_rate_per_s: p.rate_per_s,
            arrivals: p.arrivals,
            seed: p.seed,
            warmup_s: secs(p.warmup_ns),
            duration_s: secs(p.duration_ns),
            grace_s: secs(p.grace_ns),
            timeout_s: p.timeout_ns.map(secs),
            max_in_flight: p.max_in_flight,
            connections: p.connections,
            latency_limit_s: p.latency_limit_ns.map(secs),
            phases: self
                .phases
                .iter()
                .map(|ph| PhaseJson {
                    model: ph.model,
                    scheduled: ph.counts.scheduled,
                    sent: ph.recorder.sent,
                    completed_ok: ph.recorder.ok,
                    failed: ph.recorder.failed,
                    omitted: ph.counts.omitted,
                    late: ph.recorder.late,
                    skipped: ph.counts.skipped,
                    errors: &ph.recorder.errors,
                    error_total: ph.error_total(),
                    requested_rate_per_s: p.rate_per_s,
                    sent_rate_per_s: ph.sent_rate_per_s(),
                    achieved_rate_per_s: ph.achieved_rate_per_s(),
                    elapsed_s: secs(ph.counts.elapsed_ns),
                    send_lag_ns: Stats::of(&ph.recorder.send_lag),
                    send_lag_unexplained_ns: ph
                        .counts
                        .sender
                        .map(|_| Stats::of(&ph.recorder.send_lag_unexplained)),
                    sender: ph.counts.sender,
                    series: ph
                        .series()
                        .iter()
                        .map(|(s, h)| (s.key(), Stats::of(h)))
                        .collect(),
                    timeline: &ph.recorder.timeline,
                    samplers: &ph.samples,
                })
                .collect(),
            expected_open_latency_ns: self.expected_stats(),
            files,
        }
    }

    /// All distributions of the run, in display order.
    pub fn columns(&self) -> Vec<(Series, Stats)> {
        let mut cols = Vec::new();
        for ph in &self.phases {
            for (s, h) in ph.series() {
                cols.push((s, Stats::of(h)));
            }
        }
        // Open latency first, then the closed model's two, then service time.
        cols.sort_by_key(|(s, _)| match s {
            Series::OpenLatency => 0,
            Series::ClosedUncorrected => 1,
            Series::ClosedIntended => 2,
            Series::OpenServiceTime => 3,
            Series::Expected => 4,
        });
        if let Some(e) = self.expected_stats() {
            cols.push((Series::Expected, e));
        }
        cols
    }

    /// The terminal report.
    pub fn render(&self) -> String {
        let p = &self.plan;
        let mut out = format!("load: {}\n", self.target_summary);
        out.push_str(&format!(
            "      {} req/s {} for {} after {} warm-up, {} clock\n\n",
            p.rate_per_s,
            match p.arrivals {
                super::schedule::Arrivals::Uniform => "uniform".to_string(),
                super::schedule::Arrivals::Poisson => format!("poisson (seed {})", p.seed),
            },
            fmt_ns(p.duration_ns),
            fmt_ns(p.warmup_ns),
            match self.clock {
                ClockKind::Virtual => "virtual",
                ClockKind::Real => "real",
            }
        ));
        let cols = self.columns();
        let width = 18;
        let mut head1 = format!("{:<10}", "");
        let mut head2 = format!("{:<10}", "");
        let closed = format!("closed ({} conn.)", p.connections);
        for (s, _) in &cols {
            let (a, b) = match s {
                Series::OpenLatency => ("open model", "latency"),
                Series::OpenServiceTime => ("open model", "service time"),
                Series::ClosedUncorrected => (closed.as_str(), "uncorrected"),
                Series::ClosedIntended => (closed.as_str(), "YCSB-intended"),
                Series::Expected => ("queue model", "expected"),
            };
            head1.push_str(&format!("{a:>width$}"));
            head2.push_str(&format!("{b:>width$}"));
        }
        out.push_str(&format!("{head1}\n{head2}\n"));
        // A distribution with no successful request has no latencies: "-",
        // not a misleading 0.
        let value = |st: &Stats, v: u64| {
            if st.count == 0 {
                "-".to_string()
            } else {
                fmt_ns(v)
            }
        };
        let mut rows: Vec<(String, Vec<String>)> = REPORTED_PERCENTILES
            .iter()
            .map(|&pct| {
                let cells = cols.iter().map(|(_, st)| value(st, st.percentile(pct)));
                (format!("p{pct}"), cells.collect())
            })
            .collect();
        rows.push((
            "max".into(),
            cols.iter().map(|(_, st)| value(st, st.max_ns)).collect(),
        ));
        rows.push((
            "mean".into(),
            cols.iter()
                .map(|(_, st)| value(st, st.mean_ns.round() as u64))
                .collect(),
        ));
        rows.push((
            "requests".into(),
            cols.iter().map(|(_, st)| st.count.to_string()).collect(),
        ));
        for (name, cells) in rows {
            out.push_str(&format!("{name:<10}"));
            for c in cells {
                out.push_str(&format!("{c:>width$}"));
            }
            out.push('\n');
        }
        out.push('\n');
        for ph in &self.phases {
            out.push_str(&self.render_phase_summary(ph));
        }
        out
    }

    fn render_phase_summary(&self, ph: &PhaseResult) -> String {
        let r = &ph.recorder;
        let name = match ph.model {
            Model::Open => "open:  ",
            Model::Closed => "closed:",
        };
        let mut line = format!(
            "{name} achieved {:.1} of {} req/s requested; {} scheduled, {} sent, {} ok",
            ph.achieved_rate_per_s(),
            ph.plan.rate_per_s,
            ph.counts.scheduled,
            r.sent,
            r.ok
        );
        if ph.model == Model::Closed {
            line.push_str(&format!(
                ", {} omitted (never sent: coordinated omission)",
                ph.counts.omitted
            ));
        }
        let errors = if r.errors.is_empty() {
            "none".to_string()
        } else {
            r.errors
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        line.push_str(&format!("\n        errors: {errors}"));
        if let Some(limit) = ph.plan.latency_limit_ns {
            line.push_str(&format!(
                "\n        latency limit {}: {} late of {} ok ({:.3} %), {} skipped of {} scheduled ({:.3} %)",
                fmt_ns(limit),
                r.late,
                r.ok,
                percent(r.late, r.ok),
                ph.counts.skipped,
                ph.counts.scheduled,
                percent(ph.counts.skipped, ph.counts.scheduled)
            ));
        }
        if !r.send_lag.is_empty() {
            line.push_str(&format!(
                "\n        send lag behind schedule p50 {} p99 {} max {}",
                fmt_ns(r.send_lag.value_at_quantile(0.50)),
                fmt_ns(r.send_lag.value_at_quantile(0.99)),
                fmt_ns(r.send_lag.max())
            ));
        }
        if let Some(s) = ph.counts.sender {
            let h = &r.send_lag_unexplained;
            match s.run_delay_ns {
                Some(d) if !h.is_empty() => line.push_str(&format!(
                    "\n        sender thread: waited {} for a CPU, ran {} (spun {}); lag beyond its CPU wait and work p99 {} max {}",
                    fmt_ns(d),
                    fmt_ns(s.on_cpu_ns.unwrap_or(0)),
                    fmt_ns(s.spin_ns),
                    fmt_ns(h.value_at_quantile(0.99)),
                    fmt_ns(h.max()),
                )),
                _ => line.push_str(&format!(
                    "\n        sender thread: spun {}; its CPU wait is unknown (no /proc/thread-self/schedstat)",
                    fmt_ns(s.spin_ns)
                )),
            }
            line.extend(s.policy_note());
        }
        line.push('\n');
        line
    }

    /// Writes the `.hgrm` files: `path` gets the run's headline distribution
    /// (the open model's latency, else the closed model's YCSB-intended
    /// latency), and every distribution goes to `<path stem>.<series>.hgrm`.
    pub fn write_hgrm(&self, path: &Path) -> std::io::Result<Vec<PathBuf>> {
        let mut written = Vec::new();
        let all: Vec<(Series, &Histogram<u64>)> =
            self.phases.iter().flat_map(|ph| ph.series()).collect();
        let headline = all
            .iter()
            .find(|(s, _)| *s == Series::OpenLatency)
            .or_else(|| all.iter().find(|(s, _)| *s == Series::ClosedIntended));
        if let Some((_, h)) = headline {
            crate::sys::atomic::write(path, histograms::hgrm_text(h).as_bytes())?;
            written.push(path.to_path_buf());
        }
        let s = path.to_string_lossy();
        let stem = s.strip_suffix(".hgrm").unwrap_or(&s);
        for (series, h) in all {
            let p = PathBuf::from(format!("{stem}.{}.hgrm", series.key()));
            crate::sys::atomic::write(&p, histograms::hgrm_text(h).as_bytes())?;
            written.push(p);
        }
        Ok(written)
    }
}

fn percent(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        100.0 * n as f64 / of as f64
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
