//! What `compare` takes from a `ttp.load/1` result.
//!
//! The file keeps, per phase, a per-second timeline (mean and max latency
//! of the requests intended in each second, measured from the intended
//! start: coordinated-omission free, paper 003 Sec. 3) and whole-run
//! HdrHistogram percentiles. Only the timeline has samples, so the
//! statistics run over seconds: the measures are the per-second mean and
//! max latency, compared by their median over the measured seconds. The
//! whole-run p50/p99/p99.9/max have one value per file and are shown side
//! by side without an interval: a per-request bootstrap would treat
//! queued requests as independent, which under load they are not.
use std::collections::BTreeMap;

use serde::Deserialize;

use super::input::{InputError, Measure, Side};
use super::stats::Centre;

#[derive(Debug, Deserialize)]
pub(crate) struct LoadFile {
    schema: String,
    #[serde(default)]
    target: serde_json::Value,
    #[serde(default)]
    clock: Option<String>,
    #[serde(default)]
    requested_rate_per_s: Option<f64>,
    #[serde(default)]
    arrivals: Option<String>,
    #[serde(default)]
    connections: Option<u64>,
    #[serde(default)]
    duration_s: Option<f64>,
    phases: Vec<Phase>,
}

#[derive(Debug, Deserialize)]
struct Phase {
    model: String,
    #[serde(default)]
    series: BTreeMap<String, Stats>,
    #[serde(default)]
    timeline: Vec<Second>,
}

#[derive(Debug, Deserialize)]
struct Stats {
    max_ns: u64,
    #[serde(default)]
    percentiles_ns: BTreeMap<String, u64>,
}

#[derive(Debug, Deserialize)]
struct Second {
    #[serde(default)]
    warmup: bool,
    latency_mean_ns: Option<u64>,
    latency_max_ns: Option<u64>,
}

const PERCENTILES: [(&str, &str); 3] = [("50", "p50"), ("99", "p99"), ("99.9", "p99.9")];

pub(crate) fn load_side(f: LoadFile) -> Result<Side, InputError> {
    let mut measures = Vec::new();
    let mut whole_run = Vec::new();
    let mut seconds = 0;
    for p in &f.phases {
        // Seconds after the warm-up in which some intended request
        // completed: the samples.
        let rows: Vec<&Second> = p
            .timeline
            .iter()
            .filter(|s| !s.warmup && s.latency_mean_ns.is_some())
            .collect();
        seconds = seconds.max(rows.len());
        let ms = |ns: u64| ns as f64 / 1e6;
        measures.push(Measure {
            name: format!("{}_second_mean_latency_ms", p.model),
            what: format!(
                "{} model: mean latency (from the intended start) of each second's requests, one sample per second",
                p.model
            ),
            centre: Centre::Median,
            samples: rows.iter().filter_map(|s| s.latency_mean_ns.map(ms)).collect(),
            sample_unit: "seconds",
        });
        measures.push(Measure {
            name: format!("{}_second_max_latency_ms", p.model),
            what: format!(
                "{} model: worst latency of each second's requests, one sample per second",
                p.model
            ),
            centre: Centre::Median,
            samples: rows
                .iter()
                .filter_map(|s| s.latency_max_ns.map(ms))
                .collect(),
            sample_unit: "seconds",
        });
        for (series, st) in p.series.iter().filter(|(n, _)| n.ends_with("latency")) {
            for (key, name) in PERCENTILES {
                if let Some(v) = st.percentiles_ns.get(key) {
                    whole_run.push((format!("{series} {name} (ms)"), ms(*v)));
                }
            }
            whole_run.push((format!("{series} max (ms)"), ms(st.max_ns)));
        }
    }
    if seconds < 2 {
        return Err(InputError::TooFew {
            retained: seconds,
            unit: "measured second(s)",
            why: " in every phase".into(),
        });
    }
    let mut setup = BTreeMap::new();
    setup.insert("schema", f.schema.clone());
    let mut put = |k: &'static str, v: Option<String>| {
        if let Some(v) = v {
            setup.insert(k, v);
        }
    };
    put("clock", f.clock.clone());
    put(
        "requested rate (/s)",
        f.requested_rate_per_s.map(|r| r.to_string()),
    );
    put("arrivals", f.arrivals.clone());
    put("connections", f.connections.map(|c| c.to_string()));
    put("duration (s)", f.duration_s.map(|d| d.to_string()));
    put(
        "phases",
        Some(
            f.phases
                .iter()
                .map(|p| p.model.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        ),
    );
    let kind = f.target.get("kind").and_then(|k| k.as_str()).unwrap_or("?");
    Ok(Side {
        title: format!("load against a {kind} target"),
        schema: f.schema,
        retained: seconds,
        measures,
        whole_run,
        setup,
        vprofile: None,
    })
}
