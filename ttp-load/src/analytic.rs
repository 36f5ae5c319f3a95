//! The latencies the SickStore queue model (paper Sec. 4, eq. 1–2) gives an
//! open-model client with a uniform schedule, in closed form. This is written
//! independently of the simulator's step-by-step recursion, so tests can
//! check both the simulator and the driver against it.
//!
//! Derivation. Requests arrive at t_i = i/R. Write T_i = C(t_i)/λ for the
//! wait, δ = 1/λ − 1/R, and h for the index of the first request with
//! t_h ≤ t_i. Dividing eq. 2 by λ, with the "+1" of Sec. 4 after each request:
//!
//!   T_0 = H·[h = 0],   T_i = max(0, T_{i−1} + δ + H·[i = h])  (i ≥ 1).
//!
//! This is Lindley's recursion; unrolled, T_i is the largest suffix sum of
//! its increments (or 0). The increments are δ for every i ≥ 1 plus a single
//! H at i = h, so the largest suffix sum starts either at request 0 (all of
//! them) or at request h (the hiccup and what follows it):
//!
//!   T_i = max(0, i·δ + H·[h ≤ i], H + (i − max(h, 1) + 1)·δ  if h ≤ i).
//!
//! With R < λ (δ < 0) this is the paper's Figure 3 shape: 0 before the
//! hiccup, then H − (k+1)(1/R − 1/λ) for the k-th request after it, falling
//! linearly to 0. The client sees l + T_i.
use super::{
    PhasePlan,
    schedule::{Arrivals, Schedule},
    simulator::SimParams,
};

/// T_i + l for requests 0..n of a uniform schedule at `rate_per_s`, in ns.
pub(crate) fn uniform_latencies_ns(params: &SimParams, rate_per_s: f64, n: u64) -> Vec<u64> {
    let delta_s = 1.0 / params.capacity_per_s - 1.0 / rate_per_s;
    let (h, hiccup_s) = match params.hiccup {
        // h = the first i with i/R ≥ t_h, using the same rounding of i/R to
        // whole nanoseconds as the schedule.
        Some(hc) => {
            let mut h = (hc.at_ns as f64 * rate_per_s / 1e9).ceil() as u64;
            while h > 0 && ((h - 1) as f64 * 1e9 / rate_per_s).round() as u64 >= hc.at_ns {
                h -= 1;
            }
            while ((h as f64 * 1e9 / rate_per_s).round() as u64) < hc.at_ns {
                h += 1;
            }
            (h, hc.for_ns as f64 / 1e9)
        }
        None => (u64::MAX, 0.0),
    };
    (0..n)
        .map(|i| {
            let hit = h <= i;
            let from_start = i as f64 * delta_s + if hit { hiccup_s } else { 0.0 };
            let from_hiccup = if hit {
                hiccup_s + (i + 1 - h.max(1)) as f64 * delta_s
            } else {
                f64::NEG_INFINITY
            };
            let wait_s = 0f64.max(from_start).max(from_hiccup);
            (wait_s * 1e9).round() as u64 + params.service_latency_ns
        })
        .collect()
}

/// The open model's expected latencies (sorted, ns) for the measured
/// requests of `plan` against the simulator, when the schedule is uniform
/// and every request is sent at its intended time; `None` for Poisson
/// arrivals (no closed form).
pub fn expected_open_latencies_ns(params: &SimParams, plan: &PhasePlan) -> Option<Vec<u64>> {
    if plan.arrivals != Arrivals::Uniform {
        return None;
    }
    let end_ns = plan.warmup_ns + plan.duration_ns;
    let mut schedule = Schedule::new(plan.rate_per_s, Arrivals::Uniform, 0);
    let first = schedule.count_before(plan.warmup_ns);
    let n_end = first + schedule.count_before(end_ns);
    let mut v = uniform_latencies_ns(params, plan.rate_per_s, n_end).split_off(first as usize);
    v.sort_unstable();
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::super::simulator::{Hiccup, SickStore};
    use super::*;

    /// Catches any disagreement between the closed form and the eq. 1–2
    /// recursion the simulator runs: under load (R < λ, the paper's set-up),
    /// overload (R > λ) and a hiccup at the very first request.
    #[test]
    fn closed_form_matches_the_eq2_recursion() {
        let cases = [
            (1000.0, 1250.0, Some((30_000_000_000, 1_000_000_000))),
            (1000.0, 800.0, Some((2_000_000_000, 500_000_000))),
            (300.0, 1000.0, Some((0, 100_000_000))),
            (1000.0, 1250.0, None),
        ];
        for (rate, capacity, hiccup) in cases {
            let params = SimParams {
                capacity_per_s: capacity,
                hiccup: hiccup.map(|(at_ns, for_ns)| Hiccup { at_ns, for_ns }),
                service_latency_ns: 50_000,
            };
            let n = 40_000;
            let closed = uniform_latencies_ns(&params, rate, n);
            let mut store = SickStore::new(params);
            for (i, &want) in closed.iter().enumerate() {
                let t = (i as f64 * 1e9 / rate).round() as u64;
                let got = store.arrive(t) + params.service_latency_ns;
                assert!(
                    got.abs_diff(want) <= 2,
                    "rate {rate} cap {capacity} request {i}: recursion {got} ns, closed form {want} ns"
                );
            }
        }
    }

    /// Catches a misreading of the paper's set-up: at 1000/s against 1250/s,
    /// a 1 s hiccup at 30 s makes request 30 000 wait 1 s − 1 ms + 0.8 ms
    /// and the backlog drain 0.2 ms per request, reaching 0 after 5000 requests.
    #[test]
    fn paper_setup_hand_values() {
        let params = SimParams {
            capacity_per_s: 1250.0,
            hiccup: Some(Hiccup {
                at_ns: 30_000_000_000,
                for_ns: 1_000_000_000,
            }),
            service_latency_ns: 0,
        };
        let l = uniform_latencies_ns(&params, 1000.0, 36_000);
        assert_eq!(l[29_999], 0);
        assert_eq!(l[30_000], 999_800_000);
        assert_eq!(l[30_001], 999_600_000);
        assert_eq!(l[34_998], 200_000);
        assert_eq!(l[34_999], 0);
    }
}
