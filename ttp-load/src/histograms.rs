//! Where measurements go: HdrHistograms (paper Sec. 2.1) of the latency from
//! the intended start and of the service time, the send lag, errors by kind,
//! and a per-second timeline; and the `.hgrm` percentile-distribution text
//! that HdrHistogram's plotters read.
use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use super::targets::RequestError;

/// Values are nanoseconds, 1 ns to 1 hour, 3 significant digits (0.1 %).
const HIST_MAX_NS: u64 = 3_600_000_000_000;
const HIST_SIGFIG: u8 = 3;

/// The percentiles every report shows.
pub(crate) const REPORTED_PERCENTILES: [f64; 5] = [50.0, 90.0, 99.0, 99.9, 99.99];

pub fn new_histogram() -> Histogram<u64> {
    // The bounds are constants that hdrhistogram accepts (low ≥ 1,
    // high ≥ 2·low, sigfig ≤ 5); a failure here is a programming error.
    Histogram::new_with_bounds(1, HIST_MAX_NS, HIST_SIGFIG).expect("valid histogram bounds")
}

/// One second of a phase (by the requests' intended start times, except
/// `completed`, which counts completions in that second).
/// Read back by `report` (report/render/load_report.rs).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct SecondRow {
    pub second: u64,
    pub warmup: bool,
    /// Requests whose intended start fell in this second and that were sent.
    pub sent: u64,
    /// Successful completions during this second (any intended time).
    pub completed: u64,
    pub errors: u64,
    /// Mean and max of completion − intended start over successes intended
    /// in this second.
    pub latency_mean_ns: Option<u64>,
    pub latency_max_ns: Option<u64>,
    #[serde(skip)]
    latency_sum_ns: u128,
    #[serde(skip)]
    latency_n: u64,
}

/// Everything one phase measured. Times are ns from the phase start.
#[derive(Debug, Clone)]
pub struct Recorder {
    warmup_ns: u64,
    end_ns: u64,
    /// completion − intended start (open model's latency; YCSB's
    /// "Intended-READ" in the closed model).
    pub from_intended: Histogram<u64>,
    /// completion − actual send (open model's service time; YCSB's
    /// uncorrected latency in the closed model).
    pub service: Histogram<u64>,
    /// actual send − intended start: how late the generator (or the
    /// in-flight bound, or a closed-loop connection) sent each request.
    pub send_lag: Histogram<u64>,
    /// Open model on the real clock: each send's lag minus the sender
    /// thread's time waiting for and running on a CPU since it was last on
    /// schedule — the time it slept past its deadline or blocked.
    pub send_lag_unexplained: Histogram<u64>,
    pub errors: BTreeMap<String, u64>,
    /// Measured requests (intended in [warmup, end)) that were sent.
    pub sent: u64,
    /// Measured requests that completed successfully.
    pub ok: u64,
    /// Measured requests that completed with an error.
    pub failed: u64,
    pub timeline: Vec<SecondRow>,
    /// Completion time of the last measured request (ns from phase start).
    pub last_done_ns: u64,
    /// `--latency-limit`, and the measured successes whose latency from
    /// their intended start exceeded it (pgbench's "late").
    pub latency_limit_ns: Option<u64>,
    pub late: u64,
    closed: bool,
}

impl Recorder {
    pub fn new(warmup_ns: u64, end_ns: u64, grace_ns: u64) -> Self {
        let seconds = (end_ns + grace_ns).div_ceil(1_000_000_000).max(1);
        let timeline = (0..seconds)
            .map(|s| SecondRow {
                second: s,
                warmup: (s + 1) * 1_000_000_000 <= warmup_ns,
                ..Default::default()
            })
            .collect();
        Self {
            warmup_ns,
            end_ns,
            from_intended: new_histogram(),
            service: new_histogram(),
            send_lag: new_histogram(),
            send_lag_unexplained: new_histogram(),
            errors: BTreeMap::new(),
            sent: 0,
            ok: 0,
            failed: 0,
            timeline,
            last_done_ns: 0,
            latency_limit_ns: None,
            late: 0,
            closed: false,
        }
    }

    /// Whether a request intended at `intended_ns` is measured (not warm-up,
    /// within the duration).
    pub(crate) fn measured(&self, intended_ns: u64) -> bool {
        intended_ns >= self.warmup_ns && intended_ns < self.end_ns
    }

    fn row(&mut self, t_ns: u64) -> Option<&mut SecondRow> {
        self.timeline.get_mut((t_ns / 1_000_000_000) as usize)
    }

    /// A request was sent at `sent_ns` for its intended time `intended_ns`.
    pub(crate) fn on_send(&mut self, intended_ns: u64, sent_ns: u64) {
        if self.closed {
            return;
        }
        if let Some(r) = self.row(intended_ns) {
            r.sent += 1;
        }
        if self.measured(intended_ns) {
            self.sent += 1;
            self.send_lag
                .saturating_record(sent_ns.saturating_sub(intended_ns));
        }
    }

    /// [`Recorder::on_send`] with the sender's CPU wait and CPU time since it
    /// was last on schedule (`run_delay_ns`), when known.
    pub(crate) fn on_send_waited(
        &mut self,
        intended_ns: u64,
        sent_ns: u64,
        run_delay_ns: Option<u64>,
    ) {
        if self.closed {
            return;
        }
        self.on_send(intended_ns, sent_ns);
        if let Some(d) = run_delay_ns
            && self.measured(intended_ns)
        {
            let lag = sent_ns.saturating_sub(intended_ns);
            self.send_lag_unexplained
                .saturating_record(lag.saturating_sub(d));
        }
    }

    /// Adds the sends `other` recorded (a sender thread's own recorder, kept
    /// apart so that sending never waits on a lock the completions hold).
    pub(crate) fn merge_sends(&mut self, other: &Recorder) {
        self.sent += other.sent;
        // Both histograms have the same bounds: adding cannot fail.
        let _ = self.send_lag.add(&other.send_lag);
        let _ = self.send_lag_unexplained.add(&other.send_lag_unexplained);
        for (mine, theirs) in self.timeline.iter_mut().zip(&other.timeline) {
            mine.sent += theirs.sent;
        }
    }

    /// A request completed at `done_ns`.
    pub(crate) fn on_complete(
        &mut self,
        intended_ns: u64,
        sent_ns: u64,
        done_ns: u64,
        result: &Result<(), RequestError>,
    ) {
        if self.closed {
            return;
        }
        let latency_ns = done_ns.saturating_sub(intended_ns);
        match result {
            Ok(()) => {
                if let Some(r) = self.row(done_ns) {
                    r.completed += 1;
                }
                if let Some(r) = self.row(intended_ns) {
                    r.latency_sum_ns += u128::from(latency_ns);
                    r.latency_n += 1;
                    r.latency_max_ns = Some(r.latency_max_ns.unwrap_or(0).max(latency_ns));
                }
            }
            Err(_) => {
                if let Some(r) = self.row(intended_ns) {
                    r.errors += 1;
                }
            }
        }
        if !self.measured(intended_ns) {
            return;
        }
        self.last_done_ns = self.last_done_ns.max(done_ns);
        match result {
            Ok(()) => {
                self.ok += 1;
                if self.latency_limit_ns.is_some_and(|l| latency_ns > l) {
                    self.late += 1;
                }
                self.from_intended.saturating_record(latency_ns);
                self.service
                    .saturating_record(done_ns.saturating_sub(sent_ns));
            }
            Err(e) => {
                self.failed += 1;
                self.count_error(e.kind(), 1);
            }
        }
    }

    /// The measured span: from the end of the warm-up to the end of the
    /// duration, or to the last measured completion if that came later (a
    /// generator or closed loop catching up during the grace period).
    pub(crate) fn measured_span_ns(&self) -> u64 {
        self.end_ns.max(self.last_done_ns) - self.warmup_ns
    }

    pub(crate) fn count_error(&mut self, kind: String, n: u64) {
        if n > 0 {
            *self.errors.entry(kind).or_insert(0) += n;
        }
    }

    /// Stops recording: completions that arrive after the run ended (a real
    /// runtime shutting down) must not change the results.
    pub fn close(&mut self) {
        self.closed = true;
        for r in &mut self.timeline {
            if r.latency_n > 0 {
                r.latency_mean_ns = Some((r.latency_sum_ns / u128::from(r.latency_n)) as u64);
            }
        }
    }
}

/// Summary of one histogram, nanoseconds.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    pub count: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    #[serde(default)]
    pub stddev_ns: f64,
    pub max_ns: u64,
    /// Keys "50", "90", "99", "99.9", "99.99".
    pub percentiles_ns: BTreeMap<String, u64>,
}

impl Stats {
    pub fn of(h: &Histogram<u64>) -> Self {
        let empty = h.is_empty();
        Self {
            count: h.len(),
            min_ns: if empty { 0 } else { h.min() },
            mean_ns: if empty { 0.0 } else { h.mean() },
            stddev_ns: if empty { 0.0 } else { h.stdev() },
            max_ns: if empty { 0 } else { h.max() },
            percentiles_ns: REPORTED_PERCENTILES
                .iter()
                .map(|&p| {
                    (
                        percentile_key(p),
                        if empty { 0 } else { h.value_at_percentile(p) },
                    )
                })
                .collect(),
        }
    }

    /// Exact statistics of sorted values (the queue model's known answer),
    /// with the same percentile rank rule as the histograms.
    pub(crate) fn of_sorted(sorted: &[u64]) -> Self {
        let n = sorted.len() as f64;
        let mean = if sorted.is_empty() {
            0.0
        } else {
            sorted.iter().map(|&v| v as f64).sum::<f64>() / n
        };
        let var = if sorted.is_empty() {
            0.0
        } else {
            sorted
                .iter()
                .map(|&v| (v as f64 - mean).powi(2))
                .sum::<f64>()
                / n
        };
        Self {
            count: sorted.len() as u64,
            min_ns: sorted.first().copied().unwrap_or(0),
            mean_ns: mean,
            stddev_ns: var.sqrt(),
            max_ns: sorted.last().copied().unwrap_or(0),
            percentiles_ns: REPORTED_PERCENTILES
                .iter()
                .map(|&p| (percentile_key(p), quantile_of_sorted(sorted, p / 100.0)))
                .collect(),
        }
    }

    #[cfg(test)]
    pub(crate) fn percentile(&self, p: f64) -> u64 {
        self.percentiles_ns
            .get(&percentile_key(p))
            .copied()
            .unwrap_or(0)
    }
}

pub(crate) fn percentile_key(p: f64) -> String {
    format!("{p}")
}

/// The (1/(1−q), value in ms) points of the percentile spectrum, as the
/// `.hgrm` lists them, without the final q = 1 row.
pub fn spectrum_points(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    h.iter_quantiles(5)
        .filter(|v| v.quantile_iterated_to() < 1.0)
        .map(|v| {
            (
                1.0 / (1.0 - v.quantile_iterated_to()),
                v.value_iterated_to() as f64 / 1e6,
            )
        })
        .collect()
}

/// The value at quantile `q` of sorted values, with HdrHistogram's rank rule
/// (`value_at_quantile`: the smallest value with at least ⌈q·n⌉ values at or
/// below it), so that exact and histogram percentiles are comparable.
pub(crate) fn quantile_of_sorted(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches an off-by-one in the rank rule (HdrHistogram's is ⌈q·n⌉).
    #[test]
    fn quantile_rank_rule() {
        let v: Vec<u64> = (1..=1000).collect();
        assert_eq!(quantile_of_sorted(&v, 0.5), 500);
        assert_eq!(quantile_of_sorted(&v, 0.999), 999);
        assert_eq!(quantile_of_sorted(&v, 0.9999), 1000);
        assert_eq!(quantile_of_sorted(&v, 0.0), 1);
    }

    /// Catches latencies measured from the send instead of the intended time,
    /// and warm-up or post-duration requests leaking into the histograms.
    #[test]
    fn recorder_measures_from_intended_time_and_skips_warmup() {
        let mut r = Recorder::new(1_000_000_000, 3_000_000_000, 0);
        // Warm-up request: counted in the timeline only.
        r.on_send(500_000_000, 500_000_000);
        r.on_complete(500_000_000, 500_000_000, 600_000_000, &Ok(()));
        // Measured: intended 1.5 s, sent 1.7 s (queued), done 1.8 s.
        r.on_send(1_500_000_000, 1_700_000_000);
        r.on_complete(1_500_000_000, 1_700_000_000, 1_800_000_000, &Ok(()));
        // Measured failure.
        r.on_send(2_000_000_000, 2_000_000_000);
        r.on_complete(
            2_000_000_000,
            2_000_000_000,
            2_100_000_000,
            &Err(RequestError::ExitStatus { code: 1 }),
        );
        assert_eq!(r.measured_span_ns(), 2_000_000_000);
        // A late completion (intended 2.9 s, done 3.5 s) stretches the span
        // the achieved rate is computed over.
        r.on_send(2_900_000_000, 2_900_000_000);
        r.on_complete(
            2_900_000_000,
            2_900_000_000,
            3_500_000_000,
            &Err(RequestError::Timeout),
        );
        assert_eq!(r.measured_span_ns(), 2_500_000_000);
        r.close();
        assert_eq!((r.sent, r.ok, r.failed), (3, 1, 2));
        assert_eq!(r.from_intended.len(), 1);
        assert!(
            r.from_intended
                .equivalent(r.from_intended.max(), 300_000_000)
        );
        assert!(r.service.equivalent(r.service.max(), 100_000_000));
        assert!(r.send_lag.equivalent(r.send_lag.max(), 200_000_000));
        assert_eq!(r.errors.get("exit_status_1"), Some(&1));
        assert!(r.timeline[0].warmup && !r.timeline[1].warmup);
        assert_eq!(r.timeline[0].latency_mean_ns, Some(100_000_000));
        assert_eq!(r.timeline[1].latency_max_ns, Some(300_000_000));
        assert_eq!(r.timeline[2].errors, 2);
    }
}
