//! The SickStore queue model (paper Sec. 4, eq. 1–2) as an in-process
//! target: a server with maximum throughput λ_max whose backlog is a counter,
//! plus one hiccup of length H at time t_h. Nothing is really slowed down;
//! each request is answered after `l + T_i`, T_i being the wait the model
//! computes at the request's arrival. Its latencies are known in closed form
//! (see `analytic`), which is what makes it a check on the driver.
use std::sync::{Arc, Mutex};

use super::{
    clock::Clock,
    targets::{ConnectFuture, RequestFuture, Target, TargetFactory},
};

/// The simulator's parameters; times in nanoseconds from the start of the phase.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct SimParams {
    /// λ_max, requests per second the server can serve.
    pub capacity_per_s: f64,
    /// t_h and H of eq. 2, if a hiccup is simulated.
    pub hiccup: Option<Hiccup>,
    /// l, the fixed latency every response has on top of its queueing wait.
    pub service_latency_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Hiccup {
    pub at_ns: u64,
    pub for_ns: u64,
}

/// The state of eq. 1–2: the counter C of outstanding requests after the
/// last arrival, and that arrival's time.
#[derive(Debug, Clone)]
pub(crate) struct SickStore {
    params: SimParams,
    /// C(t_{i−1}) + 1: the counter after the previous request was added.
    backlog: f64,
    last_arrival_ns: Option<u64>,
    hiccup_applied: bool,
}

impl SickStore {
    pub fn new(params: SimParams) -> Self {
        Self {
            params,
            backlog: 0.0,
            last_arrival_ns: None,
            hiccup_applied: false,
        }
    }

    /// A request arrives at `t_ns` (non-decreasing); returns its waiting time
    /// T_i in nanoseconds.
    pub(crate) fn arrive(&mut self, t_ns: u64) -> u64 {
        let lambda = self.params.capacity_per_s;
        // Eq. 1: C(t_i) = max(0, C(t_{i−1}) − λ_max·Δ_{i−1,i}); for the first
        // request C is 0.
        let mut c = match self.last_arrival_ns {
            None => 0.0,
            Some(prev) => {
                let delta_s = t_ns.saturating_sub(prev) as f64 / 1e9;
                self.backlog - lambda * delta_s
            }
        };
        // Eq. 2: the first request at or after t_h (t_{i−1} < t_h ≤ t_i) adds
        // λ_max·H requests' worth of work, inside the max(0, ·).
        if let Some(h) = self.params.hiccup
            && !self.hiccup_applied
            && t_ns >= h.at_ns
        {
            c += lambda * h.for_ns as f64 / 1e9;
            self.hiccup_applied = true;
        }
        let c = c.max(0.0);
        self.last_arrival_ns = Some(t_ns);
        // Sec. 4: "add one to the counter C before returning T_i".
        self.backlog = c + 1.0;
        // T_i = C(t_i)/λ_max.
        (c / lambda * 1e9).round() as u64
    }
}

/// `--simulate`: connects a fresh SickStore per phase.
#[derive(Debug, Clone)]
pub struct SimulateFactory {
    pub params: SimParams,
}

impl TargetFactory for SimulateFactory {
    fn describe(&self) -> serde_json::Value {
        let p = &self.params;
        serde_json::json!({
            "kind": "simulate",
            "model": "SickStore queue (Friedrich et al., Sec. 4, eq. 1-2)",
            "capacity_per_s": p.capacity_per_s,
            "hiccup_at_ns": p.hiccup.map(|h| h.at_ns),
            "hiccup_for_ns": p.hiccup.map(|h| h.for_ns),
            "service_latency_ns": p.service_latency_ns,
        })
    }

    fn summary(&self) -> String {
        let p = &self.params;
        let hiccup = match p.hiccup {
            Some(h) => format!(
                ", hiccup of {} at {}",
                super::output::fmt_ns(h.for_ns),
                super::output::fmt_ns(h.at_ns)
            ),
            None => String::new(),
        };
        format!(
            "simulated SickStore queue (capacity {} req/s{hiccup}, service latency {})",
            p.capacity_per_s,
            super::output::fmt_ns(p.service_latency_ns)
        )
    }

    fn supports_virtual_clock(&self) -> bool {
        true
    }

    fn connect<'a>(&'a self, clock: &'a Clock, _concurrency: usize) -> ConnectFuture<'a> {
        Box::pin(async move {
            Ok(Arc::new(SimTarget {
                clock: clock.clone(),
                origin_ns: clock.now_ns(),
                store: Mutex::new(SickStore::new(self.params)),
                service_latency_ns: self.params.service_latency_ns,
            }) as Arc<dyn Target>)
        })
    }
}

struct SimTarget {
    clock: Clock,
    /// Hiccup times are relative to the phase start.
    origin_ns: u64,
    store: Mutex<SickStore>,
    service_latency_ns: u64,
}

impl Target for SimTarget {
    fn call(&self) -> RequestFuture {
        let now = self.clock.now_ns();
        let wait_ns = self
            .store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .arrive(now.saturating_sub(self.origin_ns));
        // Sec. 4: "each calling client thread has to pause for the duration l + T_i".
        let sleep = self
            .clock
            .sleep_until(now + self.service_latency_ns + wait_ns);
        Box::pin(async move {
            sleep.await;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(hiccup: Option<Hiccup>) -> SimParams {
        SimParams {
            capacity_per_s: 1250.0,
            hiccup,
            service_latency_ns: 0,
        }
    }

    /// Catches a wrong drain term in eq. 1: hand-computed waits for arrivals
    /// at 0, 0, 0, 1 ms, 10 ms against λ = 1250/s (one request per 0.8 ms):
    /// C = 0, 1, 2, max(0, 3 − 1.25) = 1.75, max(0, 2.75 − 11.25) = 0.
    #[test]
    fn eq1_waits_match_hand_computation() {
        let mut s = SickStore::new(params(None));
        let waits: Vec<u64> = [0, 0, 0, 1_000_000, 10_000_000]
            .iter()
            .map(|&t| s.arrive(t))
            .collect();
        assert_eq!(waits, vec![0, 800_000, 1_600_000, 1_400_000, 0]);
    }

    /// Catches a hiccup applied at the wrong request, twice, or outside the
    /// max(0, ·) of eq. 2: arrivals every 1 ms, hiccup of 1 s at 2.5 ms. The
    /// request at 3 ms gets C = max(0, 1 − 1.25 + 1250) = 1249.75, T =
    /// 999.8 ms; the next one 1249.5 → 999.6 ms; earlier ones wait 0.
    #[test]
    fn eq2_hiccup_hits_first_request_after_t_h_once() {
        let mut s = SickStore::new(params(Some(Hiccup {
            at_ns: 2_500_000,
            for_ns: 1_000_000_000,
        })));
        let waits: Vec<u64> = (0..5).map(|i| s.arrive(i * 1_000_000)).collect();
        assert_eq!(waits, vec![0, 0, 0, 999_800_000, 999_600_000]);
    }
}
