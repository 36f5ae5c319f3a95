//! INC, the paper's program under test (Sec. 4, Fig. 7): the simplest
//! compute-bound program, a nested loop that increments a counter and does
//! no I/O. The paper fixes the outer count `c` per task length for its
//! machine (c = 1.46 × 10⁹ per second on an i7-870); ttp measures the cost
//! of one outer iteration on this machine and derives `c` for a requested
//! CPU time.
use std::{hint::black_box, time::Instant};

use serde::{Deserialize, Serialize};

use ttp_sys::sys::clock::thread_cpu_ns;

pub const SCHEMA: &str = "ttp.inc/1";

/// Increments per outer iteration (the paper's inner loop runs to
/// UINT_MAX − 1; a smaller inner count gives ~1 ms of granularity).
pub(crate) const INNER: u64 = 1 << 20;

/// CPU time the calibration spends at least, in ns.
const CALIBRATION_CPU_NS: u64 = 100_000_000;

/// Fig. 7: `for i in 1..=c { for j in 1..inner { k += 1 } }`. Every
/// increment goes through `black_box`, so the compiler can neither fold the
/// loop into a multiplication nor drop it.
#[inline(never)]
pub(crate) fn nested_loop(outer: u64, inner: u64) -> u64 {
    let mut k: u64 = 0;
    for _ in 0..outer {
        for _ in 0..inner {
            k = black_box(k).wrapping_add(1);
        }
    }
    black_box(k)
}

/// The measured cost of one outer iteration on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub inner: u64,
    /// Outer iterations timed.
    pub samples: usize,
    /// Median CPU time of one outer iteration, in ns (the median resists
    /// the odd interrupted iteration).
    pub outer_cpu_ns: u64,
    /// CPU time the calibration itself used, in ns.
    pub spent_cpu_ns: u64,
}

impl Calibration {
    /// Outer iterations for `cpu_seconds` of CPU (at least 1).
    pub fn loops_for(&self, cpu_seconds: f64) -> u64 {
        ((cpu_seconds * 1e9) / self.outer_cpu_ns.max(1) as f64)
            .round()
            .max(1.0) as u64
    }
}

/// Times single outer iterations until ~0.1 s of CPU has been spent.
pub fn calibrate() -> Calibration {
    let start = thread_cpu_ns();
    let mut samples = Vec::new();
    while samples.len() < 5
        || (thread_cpu_ns() - start < CALIBRATION_CPU_NS && samples.len() < 1_000)
    {
        let t0 = thread_cpu_ns();
        nested_loop(1, INNER);
        samples.push(thread_cpu_ns().saturating_sub(t0));
    }
    samples.sort_unstable();
    Calibration {
        inner: INNER,
        samples: samples.len(),
        outer_cpu_ns: samples[samples.len() / 2].max(1),
        spent_cpu_ns: thread_cpu_ns() - start,
    }
}

/// What one INC execution did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IncReport {
    pub schema: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_cpu_ns: Option<u64>,
    pub outer: u64,
    pub inner: u64,
    /// Final counter value (outer × inner): proof the loop ran.
    pub k: u64,
    /// CPU time of the loop alone (this thread), in ns.
    pub cpu_ns: u64,
    /// Elapsed time of the loop alone, in ns.
    pub et_ns: u64,
}

/// Runs `outer` iterations and reports.
pub fn run(outer: u64, calibration: Option<Calibration>, target_cpu_ns: Option<u64>) -> IncReport {
    let t0 = Instant::now();
    let c0 = thread_cpu_ns();
    let k = nested_loop(outer, INNER);
    let cpu = thread_cpu_ns().saturating_sub(c0);
    IncReport {
        schema: SCHEMA.to_string(),
        calibration,
        target_cpu_ns,
        outer,
        inner: INNER,
        k,
        cpu_ns: cpu,
        et_ns: t0.elapsed().as_nanos() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches the loop being optimised away or miscounted: k must be the
    /// exact number of increments.
    #[test]
    fn counts_every_increment() {
        assert_eq!(nested_loop(3, 1_000), 3_000);
    }

    /// Calibrated for 0.2 s of CPU, the loop must use CPU time of that
    /// order, measured by the kernel's per-thread clock. The bounds are
    /// wide because the test machine is shared and frequency may change;
    /// a loop the compiler removed would use ~0 s and fail.
    #[test]
    fn calibrated_run_hits_the_cpu_target() {
        let cal = calibrate();
        let loops = cal.loops_for(0.2);
        let r = run(loops, Some(cal), Some(200_000_000));
        assert_eq!(r.k, loops * INNER);
        let cpu_s = r.cpu_ns as f64 / 1e9;
        assert!(
            (0.1..0.6).contains(&cpu_s),
            "cpu {cpu_s} s for a 0.2 s target"
        );
        assert!(r.et_ns >= r.cpu_ns / 2);
    }
}
