//! `ttp.load/1` (the load driver): the latency distributions of every phase
//! as a terminal table and one row per distribution. `load` prints its run
//! through this renderer and `report` shows the saved file with it, so the
//! two are one text.
//!
//! The file keeps summaries, not histograms, so the latency plot of `load
//! --svg` cannot be redrawn from it; the `.hgrm` files it lists can.
use super::{rendered::Rendered, table::Table};
use ttp_load::{
    Model,
    clock::ClockKind,
    document::{LoadDocument, PhaseDocument},
    histograms::Stats,
    output::fmt_ns,
    schedule::Arrivals,
};

/// A model's name as the document spells it.
fn model_name(m: Model) -> &'static str {
    match m {
        Model::Open => "open",
        Model::Closed => "closed",
    }
}

/// The target in words: the line `load` printed, or, for files written
/// before it was saved, the target's fields (nulls left out).
fn target_line(d: &LoadDocument) -> String {
    if let Some(s) = &d.target_summary {
        return s.clone();
    }
    let Some(obj) = d.target.as_object() else {
        return d.target.to_string();
    };
    let kind = obj.get("kind").and_then(|k| k.as_str()).unwrap_or("target");
    let fields: Vec<String> = obj
        .iter()
        .filter(|(k, v)| *k != "kind" && !v.is_null())
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k} {s}"),
            v => format!("{k} {v}"),
        })
        .collect();
    format!("{kind} ({})", fields.join(", "))
}

const PERCENTILES: [&str; 5] = ["50", "90", "99", "99.9", "99.99"];

/// Every distribution, (phase model, series, stats), open model first.
fn columns(doc: &LoadDocument) -> Vec<(String, String, &Stats)> {
    let mut cols: Vec<(String, String, &Stats)> = doc
        .phases
        .iter()
        .flat_map(|p| {
            p.series
                .iter()
                .map(|(k, s)| (model_name(p.model).to_string(), k.clone(), s))
        })
        .collect();
    // The order `load` prints them in (ttp-load/src/output.rs).
    let rank = |series: &str| match series {
        "open_latency" => 0,
        "closed_uncorrected" => 1,
        "closed_intended" => 2,
        "open_service_time" => 3,
        _ => 4,
    };
    cols.sort_by_key(|(_, series, _)| rank(series));
    if let Some(e) = &doc.expected_open_latency_ns {
        cols.push(("queue model".into(), "expected_open_latency".into(), e));
    }
    cols
}

/// A phase's counts, errors, send lag and sender thread, worded as
/// `load` words them (ttp-load/src/output.rs `render_phase_summary`).
fn phase_summary(doc: &LoadDocument, p: &PhaseDocument) -> String {
    let name = match p.model {
        Model::Open => "open:  ",
        Model::Closed => "closed:",
    };
    let mut line = format!(
        "{name} achieved {:.1} of {} req/s requested; {} scheduled, {} sent, {} ok",
        p.achieved_rate_per_s, doc.requested_rate_per_s, p.scheduled, p.sent, p.completed_ok
    );
    if p.model == Model::Closed {
        line.push_str(&format!(
            ", {} omitted (never sent: coordinated omission)",
            p.omitted
        ));
    }
    let errors = if p.errors.is_empty() {
        "none".to_string()
    } else {
        p.errors
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    line.push_str(&format!("\n        errors: {errors}"));
    let percent = |n: u64, of: u64| {
        if of == 0 {
            0.0
        } else {
            100.0 * n as f64 / of as f64
        }
    };
    if let Some(limit) = doc.latency_limit_s {
        line.push_str(&format!(
            "\n        latency limit {}: {} late of {} ok ({:.3} %), {} skipped of {} scheduled ({:.3} %)",
            fmt_ns((limit * 1e9).round() as u64),
            p.late,
            p.completed_ok,
            percent(p.late, p.completed_ok),
            p.skipped,
            p.scheduled,
            percent(p.skipped, p.scheduled)
        ));
    }
    let pct = |st: &Stats, k: &str| fmt_ns(st.percentiles_ns.get(k).copied().unwrap_or(0));
    if let Some(l) = p.send_lag_ns.as_ref().filter(|l| l.count > 0) {
        line.push_str(&format!(
            "\n        send lag behind schedule p50 {} p99 {} max {}",
            pct(l, "50"),
            pct(l, "99"),
            fmt_ns(l.max_ns)
        ));
    }
    if let Some(s) = &p.sender {
        let beyond = p.send_lag_unexplained_ns.as_ref().filter(|b| b.count > 0);
        match (s.run_delay_ns, beyond) {
            (Some(d), Some(b)) => line.push_str(&format!(
                "\n        sender thread: waited {} for a CPU, ran {} (spun {}); lag beyond its CPU wait and work p99 {} max {}",
                fmt_ns(d),
                fmt_ns(s.on_cpu_ns.unwrap_or(0)),
                fmt_ns(s.spin_ns),
                pct(b, "99"),
                fmt_ns(b.max_ns),
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

impl Rendered for LoadDocument {
    fn title(&self) -> String {
        format!(
            "ttp load: {} req/s {} for {} s",
            self.requested_rate_per_s,
            match self.arrivals {
                Arrivals::Uniform => "uniform",
                Arrivals::Poisson => "poisson",
            },
            self.duration_s
        )
    }

    fn text(&self) -> String {
        let arrivals = match (self.arrivals, self.seed) {
            (Arrivals::Poisson, Some(seed)) => format!("poisson (seed {seed})"),
            (Arrivals::Poisson, None) => "poisson".to_string(),
            (Arrivals::Uniform, _) => "uniform".to_string(),
        };
        let clock = match self.clock {
            ClockKind::Virtual => "virtual",
            ClockKind::Real => "real",
        };
        let mut out = format!(
            "load: {}\n      {} req/s {arrivals} for {} after {} warm-up, {} clock\n\n",
            target_line(self),
            self.requested_rate_per_s,
            fmt_ns((self.duration_s * 1e9).round() as u64),
            fmt_ns((self.warmup_s * 1e9).round() as u64),
            clock
        );
        let cols = columns(self);
        // The two header lines of `load` (ttp-load/src/output.rs).
        let w = 18;
        let closed = match self.connections {
            Some(n) => format!("closed ({n} conn.)"),
            None => "closed".to_string(),
        };
        let mut head = [format!("{:<10}", ""), format!("{:<10}", "")];
        for (_, series, _) in &cols {
            let (a, b) = match series.as_str() {
                "open_latency" => ("open model", "latency"),
                "open_service_time" => ("open model", "service time"),
                "closed_uncorrected" => (closed.as_str(), "uncorrected"),
                "closed_intended" => (closed.as_str(), "YCSB-intended"),
                "expected_open_latency" => ("queue model", "expected"),
                other => ("", other),
            };
            head[0].push_str(&format!("{a:>w$}"));
            head[1].push_str(&format!("{b:>w$}"));
        }
        out.push_str(&format!("{}\n{}\n", head[0], head[1]));
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
            out.push_str(&phase_summary(self, p));
        }
        // The server's ledger per second (`--attach-pid`), as `load`
        // printed it after the phases.
        for p in &self.phases {
            let Some(rows) = p.samplers.get("ledger").filter(|r| !r.is_empty()) else {
                continue;
            };
            let pid = rows[0]["pid"].as_u64().unwrap_or(0) as u32;
            out.push_str(&crate::report::load::ledger_per_second(
                p.model,
                pid,
                rows,
                &p.timeline,
            ));
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
        for (m, s, st) in columns(self) {
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
