//! `ttp.load/1` (the load driver), read back: the latency distributions of
//! every phase as a terminal table and one row per distribution.
//!
//! The file keeps summaries, not histograms, so the latency plot of `load
//! --svg` cannot be redrawn from it; the `.hgrm` files it lists can.
use std::collections::BTreeMap;

use serde::Deserialize;

use super::{Rendered, Table};
use crate::protocol::load::output::fmt_ns;

#[derive(Debug, Clone, Deserialize)]
pub struct LoadDoc {
    pub target: serde_json::Value,
    pub clock: String,
    pub requested_rate_per_s: f64,
    pub arrivals: String,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub phases: Vec<Phase>,
    #[serde(default)]
    pub latency_limit_s: Option<f64>,
    #[serde(default)]
    pub expected_open_latency_ns: Option<Stats>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Phase {
    pub model: String,
    pub scheduled: u64,
    pub sent: u64,
    pub completed_ok: u64,
    pub failed: u64,
    #[serde(default)]
    pub omitted: u64,
    pub achieved_rate_per_s: f64,
    pub series: BTreeMap<String, Stats>,
    /// Absent from files written before these fields existed.
    #[serde(default)]
    pub send_lag_ns: Option<Stats>,
    #[serde(default)]
    pub send_lag_unexplained_ns: Option<Stats>,
    #[serde(default)]
    pub late: u64,
    #[serde(default)]
    pub skipped: u64,
}

/// A distribution's summary, ns (protocol/load/histograms.rs `Stats`).
#[derive(Debug, Clone, Deserialize)]
pub struct Stats {
    pub count: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub max_ns: u64,
    /// Keys "50", "90", "99", "99.9", "99.99".
    pub percentiles_ns: BTreeMap<String, u64>,
}

const PERCENTILES: [&str; 5] = ["50", "90", "99", "99.9", "99.99"];

impl LoadDoc {
    /// Every distribution, (phase model, series, stats), open model first.
    fn columns(&self) -> Vec<(String, String, &Stats)> {
        let mut cols: Vec<(String, String, &Stats)> = self
            .phases
            .iter()
            .flat_map(|p| {
                p.series
                    .iter()
                    .map(|(k, s)| (p.model.clone(), k.clone(), s))
            })
            .collect();
        if let Some(e) = &self.expected_open_latency_ns {
            cols.push(("queue model".into(), "expected_open_latency".into(), e));
        }
        cols
    }
}

impl Rendered for LoadDoc {
    fn title(&self) -> String {
        format!(
            "ttp load: {} req/s {} for {} s",
            self.requested_rate_per_s, self.arrivals, self.duration_s
        )
    }

    fn text(&self) -> String {
        let mut out = format!(
            "load: {}\n      {} req/s {} for {} s after {} s warm-up, {} clock\n\n",
            self.target,
            self.requested_rate_per_s,
            self.arrivals,
            self.duration_s,
            self.warmup_s,
            self.clock
        );
        let cols = self.columns();
        let w = 24;
        out.push_str(&format!("{:<10}", ""));
        for (m, s, _) in &cols {
            out.push_str(&format!("{:>w$}", format!("{m} {s}")));
        }
        out.push('\n');
        // A distribution with no request has no latencies: "-", not 0.
        let cell = |st: &Stats, v: u64| {
            if st.count == 0 {
                "-".to_string()
            } else {
                fmt_ns(v)
            }
        };
        for p in PERCENTILES {
            out.push_str(&format!("{:<10}", format!("p{p}")));
            for (_, _, st) in &cols {
                let v = st.percentiles_ns.get(p).copied().unwrap_or(0);
                out.push_str(&format!("{:>w$}", cell(st, v)));
            }
            out.push('\n');
        }
        for (name, f) in [
            ("max", (|s: &Stats| s.max_ns) as fn(&Stats) -> u64),
            ("mean", |s: &Stats| s.mean_ns.round() as u64),
        ] {
            out.push_str(&format!("{name:<10}"));
            for (_, _, st) in &cols {
                out.push_str(&format!("{:>w$}", cell(st, f(st))));
            }
            out.push('\n');
        }
        out.push_str(&format!("{:<10}", "requests"));
        for (_, _, st) in &cols {
            out.push_str(&format!("{:>w$}", st.count));
        }
        out.push_str("\n\n");
        for p in &self.phases {
            out.push_str(&format!(
                "{}: achieved {:.1} of {} req/s requested; {} scheduled, {} sent, {} ok, {} failed{}\n",
                p.model,
                p.achieved_rate_per_s,
                self.requested_rate_per_s,
                p.scheduled,
                p.sent,
                p.completed_ok,
                p.failed,
                if p.model == "closed" {
                    format!(", {} omitted (never sent: coordinated omission)", p.omitted)
                } else {
                    String::new()
                }
            ));
            if let Some(l) = p.send_lag_ns.as_ref().filter(|l| l.count > 0) {
                let pct = |k: &str| fmt_ns(l.percentiles_ns.get(k).copied().unwrap_or(0));
                out.push_str(&format!(
                    "        send lag behind schedule p50 {} p99 {} max {}\n",
                    pct("50"),
                    pct("99"),
                    fmt_ns(l.max_ns)
                ));
            }
            if let Some(b) = p.send_lag_unexplained_ns.as_ref().filter(|b| b.count > 0) {
                out.push_str(&format!(
                    "        send lag beyond the sender's CPU wait and work p99 {} max {}\n",
                    fmt_ns(b.percentiles_ns.get("99").copied().unwrap_or(0)),
                    fmt_ns(b.max_ns)
                ));
            }
            if let Some(limit) = self.latency_limit_s {
                out.push_str(&format!(
                    "        latency limit {}: {} late, {} skipped\n",
                    fmt_ns((limit * 1e9).round() as u64),
                    p.late,
                    p.skipped
                ));
            }
        }
        out
    }

    fn table(&self) -> Table {
        let mut t = Table::new(&[
            "model",
            "series",
            "count",
            "min_us",
            "p50_us",
            "p90_us",
            "p99_us",
            "p99.9_us",
            "p99.99_us",
            "max_us",
            "mean_us",
        ]);
        let us = |ns: u64| format!("{:.3}", ns as f64 / 1e3);
        for (m, s, st) in self.columns() {
            let mut row = vec![m, s, st.count.to_string(), us(st.min_ns)];
            row.extend(
                PERCENTILES
                    .iter()
                    .map(|p| us(st.percentiles_ns.get(*p).copied().unwrap_or(0))),
            );
            row.push(us(st.max_ns));
            row.push(format!("{:.3}", st.mean_ns / 1e3));
            t.push(row);
        }
        t
    }
}
