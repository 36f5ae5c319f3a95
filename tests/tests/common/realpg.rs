//! Helpers of the tests that compare ttp with a real PostgreSQL server's
//! own account of the same executions (realworld_pg*.rs): tables, the
//! server's log, pgbench's tables, percentiles as the load histograms
//! report them.
#![allow(dead_code)]
use std::collections::BTreeMap;

use serde_json::Value;

use super::pg::Cluster;

pub fn u64_at(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

/// A table `t` of `rows` rows (id, k, pad), its cache warmed by one full
/// read; work_mem large enough that the join's hash stays in memory (no
/// temporary files: the warm join does no I/O of its own).
pub fn make_table(c: &Cluster, rows: u64) {
    c.make_table(rows);
    c.psql("ALTER ROLE ttp SET work_mem = '64MB'");
}

/// The server's log lines of the backend with pid `pid` (log_line_prefix
/// `%m [%p] `, initdb's default).
pub fn log_lines_of(c: &Cluster, pid: Option<u64>) -> Vec<String> {
    let text = std::fs::read_to_string(c.dir.join("log")).expect("server log");
    text.lines()
        .filter(|l| pid.is_none_or(|p| l.contains(&format!(" [{p}] "))))
        .map(str::to_string)
        .collect()
}

/// pgbench's tables at scale 1 (100 000 accounts), made by pgbench itself,
/// checkpointed and read once.
pub fn pgbench_init(c: &Cluster) {
    super::pg::pgbench_tables(c);
    c.psql("CHECKPOINT");
    c.psql("SELECT count(*) FROM pgbench_accounts");
}

/// Durations the server logged for `execute` of statements containing
/// `needle`, by backend pid, in µs.
pub fn executes(c: &Cluster, needle: &str) -> BTreeMap<u64, Vec<f64>> {
    let mut by: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for l in log_lines_of(c, None) {
        let Some(rest) = l.split("LOG:  duration: ").nth(1) else {
            continue;
        };
        let Some((ms, what)) = rest.split_once(" ms  ") else {
            continue;
        };
        if !what.starts_with("execute ") || !what.contains(needle) {
            continue;
        }
        let pid: u64 = l
            .split(" [")
            .nth(1)
            .and_then(|x| x.split(']').next())
            .and_then(|x| x.parse().ok())
            .expect("pid in the log prefix");
        by.entry(pid)
            .or_default()
            .push(ms.parse::<f64>().expect("duration") * 1000.0);
    }
    by
}

pub fn percentile_ns(stats: &Value, p: &str) -> f64 {
    stats["percentiles_ns"][p]
        .as_u64()
        .unwrap_or_else(|| panic!("p{p} missing in {stats}")) as f64
}

/// The value at percentile `p` of `sorted` as HdrHistogram reports it (the
/// smallest value with at least p % of the values at or below it).
pub fn sorted_percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}
