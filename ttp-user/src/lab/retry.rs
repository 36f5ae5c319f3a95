//! Waiting for a lab server that cannot be reached: exponential back-off
//! with a cap and jitter (docs/lab.md, "Waiting"). Each wait is drawn
//! uniformly from the upper half of the current step ("equal jitter"), so
//! workers cut off together by a restart of the lab server do not all
//! come back in the same instant, and no wait is shorter than half its
//! step; the step doubles after every failure up to the cap.
use std::time::Duration;

use rand::{RngExt, SeedableRng, rngs::Xoshiro256PlusPlus};

pub(crate) struct Backoff {
    first: Duration,
    cap: Duration,
    step: Duration,
    rng: Xoshiro256PlusPlus,
}

impl Backoff {
    /// Steps of `first`, 2 × `first`, … up to `cap`.
    pub(crate) fn new(first: Duration, cap: Duration) -> Backoff {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Backoff::seeded(first, cap, nanos ^ (u64::from(std::process::id()) << 32))
    }

    fn seeded(first: Duration, cap: Duration, seed: u64) -> Backoff {
        let first = first.min(cap);
        Backoff {
            first,
            cap,
            step: first,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    /// The next wait: uniform in [step/2, step]; then the step doubles,
    /// up to the cap.
    pub(crate) fn next_wait(&mut self) -> Duration {
        let step = self.step;
        self.step = (self.step * 2).min(self.cap);
        let half = step / 2;
        let extra = self.rng.random_range(0..=(step - half).as_millis() as u64);
        half + Duration::from_millis(extra)
    }

    /// Back to the first step (the lab answered).
    pub(crate) fn reset(&mut self) {
        self.step = self.first;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_cap_within_their_jitter() {
        let mut b = Backoff::seeded(Duration::from_secs(1), Duration::from_secs(10), 7);
        let steps = [1, 2, 4, 8, 10, 10, 10];
        for s in steps {
            let w = b.next_wait();
            let step = Duration::from_secs(s);
            assert!(w >= step / 2 && w <= step, "{w:?} for step {step:?}");
        }
        b.reset();
        assert!(b.next_wait() <= Duration::from_secs(1));
    }

    #[test]
    fn waits_are_spread_not_equal() {
        let mut waits: Vec<Duration> = (0..20)
            .map(|seed| {
                Backoff::seeded(Duration::from_secs(8), Duration::from_secs(8), seed).next_wait()
            })
            .collect();
        waits.sort();
        waits.dedup();
        // 20 draws from 4001 equally likely millisecond values: all equal
        // has probability 4001^-19.
        assert!(waits.len() > 1, "{waits:?}");
    }
}
