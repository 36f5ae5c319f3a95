//! When each request is meant to start: the open model's arrival process
//! (paper Sec. 2, "users arrive with an average arrival rate λ and a new
//! request is only triggered by a new user arrival"), uniform (request i at
//! t0 + i/R, the schedule of YCSB's Listing 1 and wrk2) or Poisson.
//!
//! Times are nanoseconds from the start of a phase. The Poisson generator is
//! a hand-written SplitMix64 rather than a library RNG so that a recorded seed
//! reproduces the same schedule whatever crate versions a later build uses.

/// The arrival process of the schedule.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum Arrivals {
    /// Request i at i/R: a fixed inter-arrival time 1/R.
    Uniform,
    /// Exponential inter-arrival times with mean 1/R (a Poisson process), from a seeded RNG.
    Poisson,
}

/// SplitMix64 (Steele, Lea, Flood 2014): a small, fast generator whose output
/// for a given seed is fixed by its definition.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// The intended start times of one phase, as an iterator of nanoseconds.
///
/// `stride`/`offset` select every `stride`-th request starting at `offset`:
/// the closed model gives connection j the requests j, j+N, j+2N, … of the
/// same schedule, so that with N connections and a uniform schedule each
/// connection's deadlines are YCSB's `overallStartTime + opsdone × tick`
/// (Listing 1, lines 11–12, tick = N/R) staggered by 1/R between connections.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    rate_per_s: f64,
    arrivals: Arrivals,
    rng: SplitMix64,
    /// Index of the next request of the full schedule.
    index: u64,
    /// Poisson: the arrival time of request `index`, in ns (kept as f64 so
    /// that rounding does not accumulate).
    poisson_at_ns: f64,
    stride: u64,
}

impl Schedule {
    /// The full schedule. `rate_per_s` must be positive and finite (checked
    /// where options are validated).
    pub fn new(rate_per_s: f64, arrivals: Arrivals, seed: u64) -> Self {
        Self::strided(rate_per_s, arrivals, seed, 0, 1)
    }

    /// Requests `offset`, `offset + stride`, … of the schedule `new` gives.
    pub(crate) fn strided(
        rate_per_s: f64,
        arrivals: Arrivals,
        seed: u64,
        offset: u64,
        stride: u64,
    ) -> Self {
        let mut s = Self {
            rate_per_s,
            arrivals,
            rng: SplitMix64::new(seed),
            index: 0,
            poisson_at_ns: 0.0,
            stride: stride.max(1),
        };
        for _ in 0..offset {
            s.advance();
        }
        s
    }

    fn current_ns(&self) -> u64 {
        match self.arrivals {
            Arrivals::Uniform => (self.index as f64 * 1e9 / self.rate_per_s).round() as u64,
            Arrivals::Poisson => self.poisson_at_ns.round() as u64,
        }
    }

    fn advance(&mut self) {
        if self.arrivals == Arrivals::Poisson {
            // Inverse-CDF sampling of Exp(R): gap = −ln(1 − U)/R, U ∈ [0, 1).
            let u = self.rng.next_f64();
            self.poisson_at_ns += -(1.0 - u).ln() / self.rate_per_s * 1e9;
        }
        self.index += 1;
    }

    /// How many of the remaining requests start before `end_ns`, consuming
    /// them (the first one at or after `end_ns` stays next). Uniform
    /// schedules count without iterating.
    pub(crate) fn count_before(&mut self, end_ns: u64) -> u64 {
        if self.arrivals == Arrivals::Uniform && self.stride == 1 {
            // Request i starts before end iff round(i·1e9/R) < end; start
            // from the estimate and settle the rounding exactly.
            let mut last = ((end_ns as f64 * self.rate_per_s / 1e9).ceil() as u64).max(self.index);
            while last > self.index && self.at(last - 1) >= end_ns {
                last -= 1;
            }
            while self.at(last) < end_ns {
                last += 1;
            }
            let n = last - self.index;
            self.index = last;
            return n;
        }
        let mut n = 0;
        while self.current_ns() < end_ns {
            n += 1;
            for _ in 0..self.stride {
                self.advance();
            }
        }
        n
    }

    fn at(&self, index: u64) -> u64 {
        (index as f64 * 1e9 / self.rate_per_s).round() as u64
    }
}

impl Iterator for Schedule {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let t = self.current_ns();
        for _ in 0..self.stride {
            self.advance();
        }
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches an off-by-one or a rate/period mix-up in the uniform schedule
    /// (request i must start at exactly i/R, Sec. 3).
    #[test]
    fn uniform_schedule_is_i_over_r() {
        let got: Vec<u64> = Schedule::new(1000.0, Arrivals::Uniform, 0)
            .take(4)
            .collect();
        assert_eq!(got, vec![0, 1_000_000, 2_000_000, 3_000_000]);
        let got: Vec<u64> = Schedule::new(3.0, Arrivals::Uniform, 0).take(3).collect();
        assert_eq!(got, vec![0, 333_333_333, 666_666_667]);
    }

    /// Catches strides that do not partition the schedule: the union of the N
    /// connections' requests must be the full schedule, each request once.
    #[test]
    fn strided_schedules_partition_the_full_schedule() {
        for arrivals in [Arrivals::Uniform, Arrivals::Poisson] {
            let full: Vec<u64> = Schedule::new(500.0, arrivals, 7).take(30).collect();
            let mut union: Vec<u64> = (0..3)
                .flat_map(|j| Schedule::strided(500.0, arrivals, 7, j, 3).take(10))
                .collect();
            union.sort_unstable();
            let mut sorted = full.clone();
            sorted.sort_unstable();
            assert_eq!(union, sorted, "{arrivals:?}");
        }
    }

    /// Catches a Poisson generator with the wrong mean gap or a seed that is
    /// not honoured: 20 000 gaps at 1000/s must average 1 ms (±3 %, about 4
    /// standard errors), and the same seed must give the same times.
    #[test]
    fn poisson_gaps_have_mean_one_over_r_and_replay_from_seed() {
        let times: Vec<u64> = Schedule::new(1000.0, Arrivals::Poisson, 42)
            .take(20_001)
            .collect();
        let mean_gap_ns = times[20_000] as f64 / 20_000.0;
        assert!(
            (mean_gap_ns - 1e6).abs() < 0.03e6,
            "mean gap {mean_gap_ns} ns"
        );
        let again: Vec<u64> = Schedule::new(1000.0, Arrivals::Poisson, 42)
            .take(100)
            .collect();
        assert_eq!(&times[..100], &again[..]);
        let other: Vec<u64> = Schedule::new(1000.0, Arrivals::Poisson, 43)
            .take(100)
            .collect();
        assert_ne!(&times[..100], &other[..]);
    }

    /// Catches a count that disagrees with iterating the schedule, or that
    /// swallows the first request after `end` (both paths).
    #[test]
    fn count_before_matches_iteration() {
        let mut p = Schedule::strided(1000.0, Arrivals::Poisson, 5, 1, 2);
        let by_iteration = p.clone().take_while(|&t| t < 50_000_000).count() as u64;
        let first_after = p.clone().find(|&t| t >= 50_000_000).unwrap();
        assert_eq!(p.count_before(50_000_000), by_iteration);
        assert_eq!(p.next(), Some(first_after));
        for (rate, end) in [
            (1000.0, 5_000_000),
            (3.0, 1_000_000_000),
            (7.5, 2_000_000_001),
        ] {
            let mut fast = Schedule::new(rate, Arrivals::Uniform, 0);
            fast.next();
            let by_iteration = fast.clone().take_while(|&t| t < end).count() as u64;
            assert_eq!(
                fast.count_before(end),
                by_iteration,
                "rate {rate} end {end}"
            );
            assert!(fast.next().unwrap() >= end);
        }
    }
}
