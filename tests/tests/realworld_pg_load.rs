//! `ttp-ebpf load` against a real PostgreSQL server (Debian's package; a
//! throw-away cluster per test, see common::pg), compared with the server's
//! own log of every statement it executed (log_min_duration_statement = 0,
//! µs resolution) and with the table's contents. Root (the cluster runs as
//! the postgres user).
//!
//! Every bound holds request by request (a request's service time contains
//! the server's execution of it; its latency contains its service time),
//! so it holds for every order statistic whatever the machine's load: a
//! busy machine makes every figure larger, never reorders them.
use crate::common;

use std::collections::BTreeMap;

use common::{pg::Cluster, realpg::*, *};

/// `load` at 200 requests/s against the throw-away server,
/// pgbench's select-only statement with `--param aid=uniform:1:100000`.
/// The truth is the server's own log of every statement it executed
/// (log_min_duration_statement = 0, µs resolution):
/// - the server executed ttp's statement exactly as many times as ttp
///   counts requests completed (none lost, none invented), on as many
///   backends as the pool had connections;
/// - each request's service time (send to last row) contains the server's
///   execution of it, so at every reported percentile ttp's service time
///   is at least the server's execute duration (an order statistic of
///   values each at least as large is at least as large; 0.1 % for the
///   histogram's 3 significant digits);
/// - latency from the intended start contains the service time, so the
///   same holds between them;
/// - the send lag is recorded for every request sent, with the part the
///   sender's own CPU wait does not explain beside it;
/// - the `$1` values the server received (its log's parameters of each
///   execute) lie in [1, 100000] and their mean is within 5 standard
///   errors of a uniform draw's 50000.5 (sd of one draw 100000/√12, so
///   the bound is 5 × 28868/√n: a false alarm about once in 1.7 million
///   runs).
///
/// No bound here depends on how fast the machine is: a busy machine makes
/// every figure larger, never reorders them.
#[test]
fn load_service_times_contain_the_servers_own() {
    if !root_or_skip("load_service_times_contain_the_servers_own") {
        return;
    }
    let _serial = serial();
    let c = Cluster::start("rwload");
    pgbench_init(&c);
    c.psql("ALTER SYSTEM SET log_min_duration_statement = 0");
    c.psql("SELECT pg_reload_conf()");
    let out = c.dir.join("load.json");
    let sql = "SELECT abalance FROM pgbench_accounts WHERE aid = $1";
    let (code, text, err) = ttp(&[
        "load",
        "--rate",
        "200",
        "--duration",
        "3s",
        "--postgres",
        &c.conninfo(),
        "--sql",
        sql,
        "--param",
        "aid=uniform:1:100000",
        "--pool-size",
        "2",
        "--json",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}\n{text}");
    let doc = json_file(&out);
    let ph = &doc["phases"][0];
    let (sent, ok) = (u64_at(ph, "sent"), u64_at(ph, "completed_ok"));
    assert_eq!(u64_at(ph, "error_total"), 0, "{text}");
    assert_eq!(ok, sent, "{text}");
    assert!(ok >= 300, "3 s at 200/s sent only {ok}: {text}");
    let by_backend = executes(&c, "FROM pgbench_accounts WHERE aid = $1");
    let server_total: usize = by_backend.values().map(Vec::len).sum();
    assert_eq!(
        server_total as u64, ok,
        "the server executed the statement {server_total} times, ttp completed {ok}"
    );
    assert!(
        (1..=2).contains(&by_backend.len()),
        "backends {:?} for a pool of 2",
        by_backend.keys()
    );
    // The parameters of each execute, as the server logged them on the
    // line after it.
    let log = log_lines_of(&c, None);
    let values: Vec<f64> = log
        .windows(2)
        .filter(|w| {
            w[0].contains("  execute ") && w[0].contains("FROM pgbench_accounts WHERE aid = $1")
        })
        .map(|w| {
            let v = w[1]
                .split("parameters: $1 = '")
                .nth(1)
                .and_then(|x| x.split('\'').next())
                .unwrap_or_else(|| panic!("no parameter after {}: {}", w[0], w[1]));
            v.parse::<f64>().expect("integer parameter")
        })
        .collect();
    assert_eq!(values.len() as u64, ok, "one logged parameter per execute");
    assert!(
        values.iter().all(|&v| (1.0..=100_000.0).contains(&v)),
        "a value outside [1, 100000]"
    );
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let bound = 5.0 * 100_000.0 / 12f64.sqrt() / (values.len() as f64).sqrt();
    assert!(
        (mean - 50_000.5).abs() <= bound,
        "mean of the values the server received {mean}, expected 50000.5 ± {bound}"
    );
    let mut server: Vec<f64> = by_backend.into_values().flatten().collect();
    server.sort_by(f64::total_cmp);
    let service = &ph["series"]["open_service_time"];
    let latency = &ph["series"]["open_latency"];
    assert_eq!(u64_at(service, "count"), ok);
    for p in ["50", "90", "99"] {
        let srv_us = sorted_percentile(&server, p.parse().unwrap());
        let svc_us = percentile_ns(service, p) / 1e3;
        let lat_us = percentile_ns(latency, p) / 1e3;
        assert!(
            svc_us * 1.001 >= srv_us,
            "p{p}: ttp's service time {svc_us} µs below the server's execute {srv_us} µs"
        );
        assert!(
            lat_us * 1.001 >= svc_us,
            "p{p}: latency {lat_us} µs below service time {svc_us} µs"
        );
    }
    assert!(
        service["min_ns"].as_f64().unwrap() * 1.001 >= server[0] * 1e3,
        "fastest service {} ns below the server's fastest execute {} µs",
        service["min_ns"],
        server[0]
    );
    assert_eq!(u64_at(&ph["send_lag_ns"], "count"), sent);
    assert_eq!(u64_at(&ph["send_lag_unexplained_ns"], "count"), sent);
    assert!(ph["sender"]["run_delay_ns"].is_u64(), "{}", ph["sender"]);
    eprintln!(
        "load: server execute p50 {:.1} µs, ttp service p50 {:.1} µs, latency p50 {:.1} µs, send lag p99 {} ns",
        sorted_percentile(&server, 50.0),
        percentile_ns(service, "50") / 1e3,
        percentile_ns(latency, "50") / 1e3,
        ph["send_lag_ns"]["percentiles_ns"]["99"]
    );
}

/// A transaction script in pgbench's format: one account's balance
/// raised by 1 and read back.
const SCRIPT: &str = "-- one account's balance raised by 1 and read back
\\set aid random(1, 100000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
END;
";

/// `load --postgres … -f SCRIPT`. pgbench itself runs the same
/// file first (the format is pgbench's); then ttp at 100 transactions/s:
/// - every completed transaction committed exactly once: the table's sum
///   of balances grew by exactly the number ttp counts completed (each
///   adds 1), none failed;
/// - the server executed the four statements in the script's order on
///   each connection, once per completed transaction (its log), the
///   UPDATE and the SELECT of a transaction with the same `:aid`, drawn
///   anew for each transaction;
/// - each transaction's service time contains the server's execution of
///   its four statements, so at every reported percentile ttp's service
///   time is at least the server's per-transaction sum (the same order
///   statistics argument as the single-statement test).
#[test]
fn load_script_runs_whole_transactions() {
    if !root_or_skip("load_script_runs_whole_transactions") {
        return;
    }
    let _serial = serial();
    let c = Cluster::start("rwscript");
    pgbench_init(&c);
    let script = c.dir.join("tx.sql");
    std::fs::write(&script, SCRIPT).unwrap();
    let pgbench = std::process::Command::new(c.bin.join("pgbench"))
        .args(["-n", "-M", "prepared", "-t", "5", "-f"])
        .arg(&script)
        .arg("-d")
        .arg(c.conninfo())
        .output()
        .expect("pgbench -f");
    assert!(
        pgbench.status.success(),
        "pgbench refuses the script: {}",
        String::from_utf8_lossy(&pgbench.stderr)
    );
    let sum = || -> i64 {
        c.psql("SELECT sum(abalance) FROM pgbench_accounts")
            .parse()
            .unwrap()
    };
    let before = sum();
    assert_eq!(before, 5, "pgbench's 5 transactions");
    c.psql("ALTER SYSTEM SET log_min_duration_statement = 0");
    c.psql("SELECT pg_reload_conf()");
    let out = c.dir.join("script.json");
    let (code, text, err) = ttp(&[
        "load",
        "--rate",
        "100",
        "--duration",
        "2s",
        "--postgres",
        &c.conninfo(),
        "-f",
        script.to_str().unwrap(),
        "--pool-size",
        "2",
        // Every transaction is to finish: the server once stalled 1.6 s
        // beside a disk writer, and the default 1 s of grace left 62 in
        // flight (`unfinished`).
        "--grace",
        "60s",
        "--json",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}\n{text}");
    assert!(text.contains("4 statement(s) a transaction"), "{text}");
    let doc = json_file(&out);
    assert_eq!(
        doc["target"]["script"]["statements"]
            .as_array()
            .map(Vec::len),
        Some(4),
        "{}",
        doc["target"]
    );
    let ph = &doc["phases"][0];
    let ok = u64_at(ph, "completed_ok");
    assert_eq!(u64_at(ph, "error_total"), 0, "{text}");
    assert_eq!(ok, u64_at(ph, "sent"), "{text}");
    assert!(ok >= 150, "2 s at 100/s completed only {ok}: {text}");
    assert_eq!(
        sum() - before,
        ok as i64,
        "committed transactions vs ttp's completed"
    );
    // The server's executions, per backend in log order.
    // (statement kind, duration µs, its `$1` as logged on the next line).
    type Exec = (String, f64, Option<String>);
    let mut per_backend: BTreeMap<u64, Vec<Exec>> = BTreeMap::new();
    let log = log_lines_of(&c, None);
    for (i, l) in log.iter().enumerate() {
        let Some(rest) = l.split("LOG:  duration: ").nth(1) else {
            continue;
        };
        let Some((ms, what)) = rest.split_once(" ms  execute ") else {
            continue;
        };
        let sql = what.split_once(": ").map_or("", |(_, s)| s);
        let pid: u64 = l
            .split(" [")
            .nth(1)
            .and_then(|x| x.split(']').next())
            .and_then(|x| x.parse().ok())
            .unwrap();
        let kind = sql.split_whitespace().next().unwrap_or("").to_string();
        let param = log
            .get(i + 1)
            .and_then(|d| d.split("parameters: $1 = '").nth(1))
            .and_then(|x| x.split('\'').next())
            .map(str::to_string);
        per_backend.entry(pid).or_default().push((
            kind,
            ms.parse::<f64>().unwrap() * 1000.0,
            param,
        ));
    }
    let mut tx_us: Vec<f64> = Vec::new();
    let mut distinct = std::collections::BTreeSet::new();
    for (pid, execs) in &per_backend {
        assert_eq!(execs.len() % 4, 0, "backend {pid}: {execs:?}");
        for tx in execs.chunks(4) {
            let kinds: Vec<&str> = tx.iter().map(|(k, _, _)| k.as_str()).collect();
            assert_eq!(kinds, ["BEGIN", "UPDATE", "SELECT", "END"], "backend {pid}");
            // :aid is drawn once a transaction: the UPDATE and the SELECT
            // of one transaction got the same value.
            assert!(
                tx[1].2.is_some() && tx[1].2 == tx[2].2,
                "backend {pid}: {tx:?}"
            );
            distinct.insert(tx[1].2.clone());
            tx_us.push(tx.iter().map(|(_, d, _)| d).sum());
        }
    }
    // A new draw each transaction: of n uniform draws on 100 000 values,
    // the expected number of repeated pairs is n²/200 000 (0.2 for 200).
    assert!(
        distinct.len() + 5 >= tx_us.len(),
        "{} distinct :aid values in {} transactions",
        distinct.len(),
        tx_us.len()
    );
    assert_eq!(tx_us.len() as u64, ok, "transactions the server executed");
    tx_us.sort_by(f64::total_cmp);
    let service = &ph["series"]["open_service_time"];
    for p in ["50", "90", "99"] {
        let srv = sorted_percentile(&tx_us, p.parse().unwrap());
        let svc = percentile_ns(service, p) / 1e3;
        assert!(
            svc * 1.001 >= srv,
            "p{p}: transaction service time {svc} µs below the server's {srv} µs"
        );
    }
    // A variable whose range its column's type cannot hold: refused at
    // connect, naming the variable as the script wrote it.
    let wide = c.dir.join("wide.sql");
    std::fs::write(
        &wide,
        "\\set aid random(1, 9999999999)\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n",
    )
    .unwrap();
    let (code, _, err) = ttp(&[
        "load",
        "--rate",
        "10",
        "--duration",
        "1s",
        "--postgres",
        &c.conninfo(),
        "-f",
        wide.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("does not fit :aid of type int4"), "{err}");
    eprintln!(
        "script: {ok} transactions; server p50 {:.1} µs, ttp service p50 {:.1} µs",
        sorted_percentile(&tx_us, 50.0),
        percentile_ns(service, "50") / 1e3
    );
}
