//! The server's ledger per second of a `load --attach-pid` phase, beside
//! the phase's latency timeline, as `load` prints it after the phases.
use ttp_load::{Model, histograms::SecondRow};

/// The ledger rows of a phase beside its latency timeline, for the
/// terminal. Ledger row `s` covers [s − 1, s) seconds, timeline row `s − 1`.
pub(crate) fn ledger_per_second(
    model: Model,
    pid: u32,
    rows: &[serde_json::Value],
    timeline: &[SecondRow],
) -> String {
    let ms = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or(0) as f64 / 1e6;
    let mut out = format!(
        "\n{model:?} model: ledger of pid {pid} and its descendants, per second\n{:>6} {:>7} {:>12} {:>12} {:>10} {:>10} {:>10} {:>10}\n",
        "second", "sent", "latency mean", "on CPU", "run queue", "iowait", "read", "written"
    );
    for r in rows {
        let second = r["second"].as_u64().unwrap_or(0);
        let t = second
            .checked_sub(1)
            .and_then(|s| timeline.iter().find(|t| t.second == s));
        let lat = t
            .and_then(|t| t.latency_mean_ns)
            .map(|n| format!("{:.2}ms", n as f64 / 1e6))
            .unwrap_or_else(|| "-".into());
        out += &format!(
            "{:>6} {:>7} {:>12} {:>10.1}ms {:>8.1}ms {:>8.1}ms {:>8.1}MB {:>8.1}MB\n",
            second,
            t.map_or(0, |t| t.sent),
            lat,
            ms(r, "on_cpu_ns"),
            ms(r, "runq_wait_ns"),
            ms(r, "iowait_ns"),
            r["read_bytes"].as_u64().unwrap_or(0) as f64 / 1e6,
            r["write_bytes"].as_u64().unwrap_or(0) as f64 / 1e6,
        );
    }
    out
}
