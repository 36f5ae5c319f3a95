//! `ttp-ebpf serve --postgres PGDATA` end to end (root): a throw-away
//! cluster's statements counted exactly (pgbench's own count is the
//! reference) through `pg_ctl restart` and a crash-restart, as a real
//! Prometheus stores them; on-CPU per statement against `statements` over
//! the same statements; 10 000 distinct statements within N + 1 series.
use crate::common;

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use common::{pg::*, serve::*, *};

/// The label selecting pgbench -S's statement.
const SELECT: &str = r#"query="select abalance from pgbench_accounts where aid = $1""#;

/// The value of the first sample of `name` whose labels contain every
/// part of `sel` (parts separated by `|`).
fn sample(text: &str, name: &str, sel: &str) -> Option<f64> {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with('{') || r.starts_with(' '))
                && sel.split('|').all(|part| l.contains(part))
        })
        .find_map(|l| l.rsplit_once(' ')?.1.parse().ok())
}

fn metrics(port: u16) -> String {
    let (status, body) = get(port, "/metrics", None);
    assert_eq!(status, 200, "{body}");
    body
}

/// `name{sel}` once serve has counted everything finished: the same value
/// in two scrapes 2.5 s apart (serve drains every second and refreshes
/// every `--interval 1s`). `None` while the series does not exist.
fn settled(port: u16, name: &str, sel: &str) -> Option<f64> {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let a = sample(&metrics(port), name, sel);
        std::thread::sleep(Duration::from_millis(2500));
        let b = sample(&metrics(port), name, sel);
        if a == b {
            return b;
        }
        assert!(
            Instant::now() < deadline,
            "{name}{{{sel}}} still moving: {a:?} then {b:?}"
        );
    }
}

/// Waits until `name{sel}` is `want`.
fn wait_for(port: u16, name: &str, sel: &str, want: f64) {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let v = sample(&metrics(port), name, sel);
        if v == Some(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name}{{{sel}}} is {v:?}, waited for {want}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// pgbench on `c` with `args`; asserts it processed every transaction.
fn pgbench(c: &Cluster, args: &[&str]) {
    let out = Command::new(c.bin.join("pgbench"))
        .args(["-n", "-d"])
        .arg(c.conninfo())
        .args(args)
        .output()
        .expect("pgbench");
    assert!(
        out.status.success(),
        "pgbench {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A backend of `c` serving user ttp (its process title names it).
fn a_backend(c: &Cluster) -> Option<u32> {
    let pm = c.postmaster_pid();
    let children = std::fs::read_to_string(format!("/proc/{pm}/task/{pm}/children")).ok()?;
    children
        .split_whitespace()
        .filter_map(|p| p.parse::<u32>().ok())
        .find(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|t| String::from_utf8_lossy(&t).contains(" ttp postgres "))
        })
}

/// Catches calls lost or counted twice (pgbench's 1 000 transactions of
/// one statement each are the reference), a series that restarts from 0
/// or is lost when the server restarts (a new postmaster), a crash-restart
/// (a backend SIGKILLed mid-run) not counted or that stops the counting,
/// and a Prometheus that stores something else than serve says. The
/// server computes query ids, so the kernel keys the sums by them (the
/// other tests' servers compute none: keyed by the fingerprint computed in
/// the kernel); the series' `queryid` is checked against the server's own
/// (EXPLAIN VERBOSE's Query Identifier).
#[test]
fn calls_are_exact_through_a_restart_and_a_crash_restart() {
    let test = "calls_are_exact_through_a_restart_and_a_crash_restart";
    if !root_or_skip(test) || !prometheus_or_skip(test) {
        return;
    }
    let _serial = serial();
    let c = Cluster::start_with("servepg", "-c compute_query_id=on");
    pgbench_tables(&c);
    let data = c.data.to_str().unwrap().to_string();
    let serve = Serve::start(&["--interval", "1s", "--postgres", &data]);
    let prom = Prometheus::start(serve.port);
    let calls = "ttp_pg_statement_calls_total";
    let ours = format!(r#"data_directory="{data}""#);
    let before = settled(serve.port, calls, SELECT).unwrap_or(0.0);
    pgbench(&c, &["-S", "-c", "2", "-t", "500"]);
    let first = settled(serve.port, calls, SELECT).expect("the SELECT's series");
    assert_eq!(first - before, 1000.0, "pgbench -S -c 2 -t 500");
    // The labels the backends' status and the catalogs give.
    let text = metrics(serve.port);
    let line = text
        .lines()
        .find(|l| l.starts_with(calls) && l.contains(SELECT))
        .unwrap();
    assert!(
        line.contains(&ours)
            && line.contains(r#"database="postgres""#)
            && line.contains(r#"user="ttp""#),
        "{line}"
    );
    let plan =
        c.psql("EXPLAIN (VERBOSE, COSTS OFF) SELECT abalance FROM pgbench_accounts WHERE aid = 1");
    let queryid = plan
        .lines()
        .find_map(|l| l.trim().strip_prefix("Query Identifier: "))
        .unwrap_or_else(|| panic!("no Query Identifier in {plan}"));
    assert!(
        line.contains(&format!(r#"queryid="{queryid}""#)),
        "the server's query id {queryid}: {line}"
    );

    c.restart_server();
    wait_for(
        serve.port,
        "ttp_pg_server_restarts_total",
        &format!(r#"{ours},kind="restart""#),
        1.0,
    );
    wait_for(serve.port, "ttp_pg_server_up", &ours, 1.0);
    pgbench(&c, &["-S", "-c", "2", "-t", "500"]);
    let second = settled(serve.port, calls, SELECT).unwrap();
    assert_eq!(second - first, 1000.0, "after pg_ctl restart");

    // A crash-restart: one backend of a running pgbench killed.
    let mut bench = Command::new(c.bin.join("pgbench"))
        .args(["-n", "-S", "-c", "2", "-T", "4", "-d"])
        .arg(c.conninfo())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("pgbench");
    let deadline = Instant::now() + Duration::from_secs(20);
    while a_backend(&c).is_none() {
        assert!(Instant::now() < deadline, "no backend of pgbench");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    // The first backend that takes the signal: one found may be ending by
    // then (beside a disk writer, one was gone: kill said ESRCH).
    loop {
        let victim = a_backend(&c);
        // SAFETY: a signal to a process of the test's own server.
        if victim.is_some_and(|v| unsafe { libc::kill(v as i32, libc::SIGKILL) } == 0) {
            break;
        }
        assert!(Instant::now() < deadline, "no backend of pgbench to kill");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = bench.wait();
    wait_for(
        serve.port,
        "ttp_pg_server_restarts_total",
        &format!(r#"{ours},kind="crash""#),
        1.0,
    );
    assert_eq!(get(serve.port, "/healthz", None).0, 200);
    // The server accepts connections again once its recovery is done.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !Command::new(c.bin.join("pg_isready"))
        .args(["-q", "-d"])
        .arg(c.conninfo())
        .status()
        .is_ok_and(|s| s.success())
    {
        assert!(Instant::now() < deadline, "server not back after the crash");
        std::thread::sleep(Duration::from_millis(200));
    }
    let third = settled(serve.port, calls, SELECT).unwrap();
    assert!(
        third > second,
        "the statements before the kill were counted"
    );
    pgbench(&c, &["-S", "-c", "2", "-t", "500"]);
    let fourth = settled(serve.port, calls, SELECT).unwrap();
    assert_eq!(fourth - third, 1000.0, "after the crash-restart");

    // Prometheus stored the same value, and the series never went down.
    let q = format!("{calls}{{{SELECT}}}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = query(prom.port, &q);
        if v == Some(fourth) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "prometheus has {v:?} for {q}, serve {fourth}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(
        query(prom.port, &format!("resets({q}[10m])")),
        Some(0.0),
        "the series went down"
    );
    drop(prom);
    assert_eq!(serve.stop(), 0);
}

/// Catches a running server that `--postgres` alone does not find, an
/// on-CPU split that differs from `statements`' over the same statements
/// (both measure at the client socket from the backends' own counters;
/// the issue's bound is 5 %), and calls that differ.
#[test]
fn on_cpu_agrees_with_statements_over_the_same_statements() {
    if !root_or_skip("on_cpu_agrees_with_statements_over_the_same_statements") {
        return;
    }
    let _serial = serial();
    // Query ids on: `statements` sums the SELECT under one key (without
    // them each of its 4 000 texts is a key of its own, whose text a burst
    // under load can leave behind: docs/statements.md).
    let c = Cluster::start_with("servepg-cpu", "-c compute_query_id=on");
    pgbench_tables(&c);
    // `--postgres` alone: the server is found by its postmaster.
    let serve = Serve::start(&["--interval", "1s", "--postgres"]);
    let data = c.data.to_str().unwrap().to_string();
    wait_for(
        serve.port,
        "ttp_pg_server_up",
        &format!(r#"data_directory="{data}""#),
        1.0,
    );
    let cpu = "ttp_pg_statement_on_cpu_seconds_total";
    let calls = "ttp_pg_statement_calls_total";
    // Another server of the machine may run the same statement.
    let select = format!(r#"data_directory="{data}"|{SELECT}"#);
    let cpu0 = settled(serve.port, cpu, &select).unwrap_or(0.0);
    let calls0 = settled(serve.port, calls, &select).unwrap_or(0.0);
    let (mut stmts, json) = statements_attached(&c, c.postmaster_pid(), "120s", "st.json", &[]);
    pgbench(&c, &["-S", "-c", "2", "-t", "2000"]);
    let cpu1 = settled(serve.port, cpu, &select).unwrap();
    let calls1 = settled(serve.port, calls, &select).unwrap();
    // SAFETY: Ctrl-C to our own child: it ends the window and writes.
    unsafe { libc::kill(stmts.id() as i32, libc::SIGINT) };
    assert!(stmts.wait().unwrap().success());
    let doc = json_file(&json);
    let g = doc["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["key"] == "select abalance from pgbench_accounts where aid = $1")
        .expect("the SELECT in statements");
    assert_eq!(calls1 - calls0, 4000.0);
    assert_eq!(g["calls"].as_u64(), Some(4000));
    let theirs = g["on_cpu_ns"].as_u64().unwrap() as f64 / 1e9;
    let ours = cpu1 - cpu0;
    eprintln!("on-CPU of 4000 SELECTs: serve {ours:.6} s, statements {theirs:.6} s");
    assert!(
        (ours - theirs).abs() <= 0.05 * theirs,
        "serve {ours} s against statements {theirs} s"
    );
    assert_eq!(serve.stop(), 0);
}

/// Catches a server that is down when serve starts and never followed,
/// and a cardinality that grows with the statements: 10 000 distinct
/// statements (a different column alias each) under `--postgres-top 5`
/// give at most 6 series in every family, and `other` holds all but what
/// the named series took (at most 5 a refresh) and what serve says it
/// lost.
#[test]
fn ten_thousand_distinct_statements_stay_within_n_plus_one_series() {
    if !root_or_skip("ten_thousand_distinct_statements_stay_within_n_plus_one_series") {
        return;
    }
    let _serial = serial();
    let c = Cluster::start("servepg-card");
    let data = c.data.to_str().unwrap().to_string();
    let ours = format!(r#"data_directory="{data}""#);
    // The server is down when serve starts, and followed once it is up.
    c.stop_server();
    let serve = Serve::start(&[
        "--interval",
        "1s",
        "--postgres",
        &data,
        "--postgres-top",
        "5",
    ]);
    wait_for(serve.port, "ttp_pg_server_up", &ours, 0.0);
    c.start_server();
    wait_for(serve.port, "ttp_pg_server_up", &ours, 1.0);
    let refreshes = |t: &str| sample(t, "ttp_ledger_refreshes_total", "").unwrap();
    let r0 = refreshes(&metrics(serve.port));
    let script = c.dir.join("distinct.sql");
    let text: String = (0..10_000)
        .map(|n| format!("SELECT 1 AS c{n};\n"))
        .collect();
    std::fs::write(&script, text).unwrap();
    let out = Command::new(c.bin.join("psql"))
        .args(["-X", "-q", "-o", "/dev/null", "-v", "ON_ERROR_STOP=1", "-f"])
        .arg(&script)
        .arg("-d")
        .arg(c.conninfo())
        .output()
        .expect("psql");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let other = settled(
        serve.port,
        "ttp_pg_statement_calls_total",
        &format!(r#"{ours},database="",user="",fingerprint="other""#),
    )
    .unwrap();
    let text = metrics(serve.port);
    let r1 = refreshes(&text);
    for family in [
        "ttp_pg_statement_calls_total",
        "ttp_pg_statement_elapsed_seconds_total",
        "ttp_pg_statement_on_cpu_seconds_total",
        "ttp_pg_statement_runqueue_wait_seconds_total",
        "ttp_pg_statement_lock_wait_seconds_total",
        "ttp_pg_statement_iowait_seconds_total",
        "ttp_pg_statement_latency_seconds_count",
    ] {
        let n = text
            .lines()
            .filter(|l| l.starts_with(&format!("{family}{{")) && l.contains(&ours))
            .count();
        assert!((1..=6).contains(&n), "{family}: {n} series");
    }
    // A record the kernel's ring could not take is counted as lost, not
    // hidden: serve drains every 0.1 s, the ring holds ~8 900.
    let lost = sample(&text, "ttp_pg_statement_records_lost_total", &ours).unwrap();
    let named_at_most = 5.0 * (r1 - r0 + 1.0);
    eprintln!(
        "10 000 statements: other {other}, lost {lost}, {} refreshes",
        r1 - r0
    );
    assert!(
        other + lost >= 10_000.0 - named_at_most,
        "other has {other} calls of 10 000, {lost} lost ({} refreshes)",
        r1 - r0
    );
    assert_eq!(serve.stop(), 0);
}
