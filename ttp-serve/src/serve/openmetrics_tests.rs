use super::*;
use ttp_ledger::accounts::CpuTimes;

pub(crate) fn exposition() -> Exposition {
    let mut m = LedgerMeasures {
        on_cpu_ns: 1_500_000_000,
        iowait_ns: 250_000_000,
        voluntary_switches: 3,
        ..Default::default()
    };
    m.io.read_bytes = 4096;
    let mut fleet = FleetView {
        groups: vec![
            ("a \"b\".service".into(), m),
            ("other".into(), LedgerMeasures::default()),
        ],
        ..Default::default()
    };
    fleet.cpus.insert(
        1,
        CpuTimes {
            busy_ns: 2_000_000_000,
            idle_ns: 0,
            iowait_ns: 1,
        },
    );
    fleet.stats.exit_records_lost = 7;
    Exposition {
        group_label: "unit",
        fleet,
        programs: vec![(
            "sched_switch".into(),
            ProgramCounters {
                run_count: 10,
                run_time_ns: 5_000,
                recursion_misses: 0,
            },
        )],
        thread_capacity: 4096,
        wake_latency: false,
        irq_time: false,
        read_unix_ns: 2_000,
        otlp: Some(PushCounts {
            pushed: 2,
            failed: 1,
        }),
        postgres: vec![pg_server()],
    }
}

/// One server with one named series (3 statements: 40 µs, 80 µs, 2 ms)
/// and `other` (one of 20 s).
fn pg_server() -> crate::serve::postgres::ServerView {
    use crate::serve::{postgres::*, statement_series::*};
    let mut named = StatementTotals {
        calls: 3,
        elapsed_ns: 2_120_000,
        on_cpu_ns: 1_500_000,
        runq_wait_ns: 250_000,
        lock_wait_ns: 0,
        iowait_ns: 7,
        ..Default::default()
    };
    named.buckets[0] = 1;
    named.buckets[1] = 1;
    named.buckets[5] = 1;
    let mut other = StatementTotals {
        calls: 1,
        elapsed_ns: 20_000_000_000,
        lock_wait_ns: 19_000_000_000,
        ..Default::default()
    };
    other.buckets[BUCKETS - 1] = 1;
    ServerView {
        data_directory: "/srv/pg \"a\"".into(),
        up: true,
        restarts: 2,
        crash_restarts: 1,
        unobserved_ns: 500_000_000,
        interrupted: 1,
        lost_records: 0,
        status_entry: Some((19, 18)),
        statements: vec![
            SeriesView {
                database: "shop".into(),
                user: "alice".into(),
                fingerprint: fingerprint_id("select $1"),
                queryid: None,
                query: "select $1".into(),
                totals: named,
            },
            SeriesView {
                fingerprint: "other".into(),
                query: "other".into(),
                totals: other,
                ..Default::default()
            },
        ],
    }
}

/// Catches a histogram whose buckets are not cumulative, whose +Inf is not
/// its count, or whose statements' counters are not in seconds; and a
/// server's restarts without their kind.
#[test]
fn postgres_statements_as_counters_and_a_histogram() {
    let x = exposition();
    let text = encode(&registry(Arc::new(RwLock::new(x))), Format::OpenMetrics);
    let sel = r#"data_directory="/srv/pg \"a\"",database="shop",user="alice",fingerprint="#;
    let line = |name: &str, extra: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(sel) && l.contains(extra))
            .unwrap_or_else(|| panic!("no {name} {extra} in\n{text}"))
            .rsplit_once(' ')
            .unwrap()
            .1
            .parse::<f64>()
            .unwrap()
    };
    assert_eq!(line("ttp_pg_statement_calls_total", ""), 3.0);
    assert_eq!(line("ttp_pg_statement_elapsed_seconds_total", ""), 0.00212);
    assert_eq!(line("ttp_pg_statement_on_cpu_seconds_total", ""), 0.0015);
    assert_eq!(line("ttp_pg_statement_latency_seconds_count", ""), 3.0);
    assert_eq!(line("ttp_pg_statement_latency_seconds_sum", ""), 0.00212);
    assert_eq!(
        line("ttp_pg_statement_latency_seconds_bucket", "le=\"0.00005\""),
        1.0
    );
    assert_eq!(
        line("ttp_pg_statement_latency_seconds_bucket", "le=\"0.0001\""),
        2.0
    );
    assert_eq!(
        line("ttp_pg_statement_latency_seconds_bucket", "le=\"0.001\""),
        2.0
    );
    assert_eq!(
        line("ttp_pg_statement_latency_seconds_bucket", "le=\"0.0025\""),
        3.0
    );
    assert_eq!(
        line("ttp_pg_statement_latency_seconds_bucket", "le=\"+Inf\""),
        3.0
    );
    assert!(
        text.contains(r#"ttp_pg_statement_latency_seconds_bucket{le="+Inf",data_directory="/srv/pg \"a\"",database="",user="",fingerprint="other",query="other"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(
            r#"ttp_pg_server_restarts_total{data_directory="/srv/pg \"a\"",kind="crash"} 1"#
        ),
        "{text}"
    );
    assert!(
        text.contains(
            r#"ttp_pg_server_unobserved_seconds_total{data_directory="/srv/pg \"a\""} 0.5"#
        ),
        "{text}"
    );
    assert!(
        text.contains("# TYPE ttp_pg_statement_latency_seconds histogram"),
        "{text}"
    );
    // A server newer than ttp knows, read with 18's layout.
    assert!(
        text.contains(
            r#"ttp_pg_server_status_entry{data_directory="/srv/pg \"a\"",version="19",layout="18"} 1"#
        ),
        "{text}"
    );
}

/// Catches metric names that drift from the documented ones, values not
/// in seconds, unescaped label values and a missing `# EOF`.
#[test]
fn openmetrics_names_units_and_values() {
    let text = encode(
        &registry(Arc::new(RwLock::new(exposition()))),
        Format::OpenMetrics,
    );
    for line in [
        "# TYPE ttp_on_cpu_seconds counter",
        "# UNIT ttp_on_cpu_seconds seconds",
        "ttp_on_cpu_seconds_total{unit=\"a \\\"b\\\".service\"} 1.5",
        "ttp_iowait_seconds_total{unit=\"a \\\"b\\\".service\"} 0.25",
        "ttp_block_read_bytes_total{unit=\"a \\\"b\\\".service\"} 4096.0",
        "ttp_switches_total{unit=\"a \\\"b\\\".service\",kind=\"voluntary\"} 3.0",
        "ttp_on_cpu_seconds_total{unit=\"other\"} 0.0",
        "ttp_cpu_seconds_total{cpu=\"1\",mode=\"busy\"} 2.0",
        "ttp_ledger_lost_events_total{kind=\"exit_record\"} 7.0",
        "ttp_probe_seconds_total{program=\"sched_switch\"} 0.000005",
        "ttp_ledger_thread_capacity 4096.0",
        "ttp_otlp_pushes_total{result=\"failed\"} 1.0",
        "# EOF",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line {line:?} in\n{text}"
        );
    }
    assert!(text.contains("ttp_build_info{version=\""), "{text}");
}

/// Catches a wake latency exported by a ledger that does not measure it
/// (no wake-up hook: the field holds no defined measure), or left out by
/// one that does.
#[test]
fn wake_latency_only_with_the_hook() {
    let mut x = exposition();
    let text = |x: &Exposition| {
        encode(
            &registry(Arc::new(RwLock::new(x.clone()))),
            Format::OpenMetrics,
        )
    };
    assert!(!text(&x).contains("ttp_wake_latency"), "{}", text(&x));
    x.wake_latency = true;
    assert!(
        text(&x).contains("# TYPE ttp_wake_latency_seconds counter"),
        "{}",
        text(&x)
    );
}

/// Catches a Prometheus text (0.0.4) exposition with OpenMetrics-only
/// lines, which 0.0.4 parsers reject.
#[test]
fn prometheus_text_has_no_openmetrics_lines() {
    let text = encode(
        &registry(Arc::new(RwLock::new(exposition()))),
        Format::PrometheusText,
    );
    assert!(
        !text.contains("# EOF") && !text.contains("# UNIT"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE ttp_on_cpu_seconds_total counter"),
        "{text}"
    );
}

#[test]
fn accept_header_negotiation() {
    let prom = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    assert_eq!(Format::from_accept(Some(prom)), Format::OpenMetrics);
    assert_eq!(Format::from_accept(Some("*/*")), Format::PrometheusText);
    assert_eq!(Format::from_accept(None), Format::PrometheusText);
}

/// Catches a JSON exposition whose numbers are not the ledger's own units.
#[test]
fn json_keeps_the_ledger_units() {
    let v = json(&exposition());
    assert_eq!(v["schema"], "ttp.serve/1");
    assert_eq!(v["groups"][0]["group"], "a \"b\".service");
    assert_eq!(v["groups"][0]["kernel"]["on_cpu_ns"], 1_500_000_000u64);
    assert_eq!(v["groups"][0]["kernel"]["io"]["read_bytes"], 4096);
    assert_eq!(v["lost"]["exit_records_lost"], 7);
    assert_eq!(v["programs"][0]["run_time_ns"], 5_000);
}

/// Every counter of the ledger's one list (`ttp_common::
/// for_each_ledger_counter`) reaches a scrape: each, set alone in one
/// group, shows in exactly one family's samples of that group, in seconds
/// for a time. Catches a counter added to the list and not exported here
/// (add its family in `group_families` and docs/serve.md).
#[test]
fn every_ledger_counter_is_exported() {
    use ttp_ledger::accounts::LedgerColumns;
    for name in LedgerColumns::NAMES {
        let mut json = serde_json::to_value(LedgerMeasures::default()).unwrap();
        let slot = match json.get_mut(*name) {
            Some(v) => v,
            None => json["io"]
                .get_mut(*name)
                .unwrap_or_else(|| panic!("{name} is neither a thread nor an I/O counter")),
        };
        *slot = 123_000_000_000u64.into();
        let m: LedgerMeasures = serde_json::from_value(json).unwrap();
        let mut x = exposition();
        x.wake_latency = true;
        x.irq_time = true;
        x.fleet.groups = vec![("probe".into(), m)];
        let want = if name.ends_with("_ns") { 123.0 } else { 123e9 };
        let carrying: Vec<&str> = families(&x)
            .iter()
            .filter(|f| {
                f.samples.iter().any(|(labels, v)| {
                    labels.iter().any(|(k, g)| *k == "unit" && g == "probe") && *v == want
                })
            })
            .map(|f| f.name)
            .collect();
        assert_eq!(
            carrying.len(),
            1,
            "ledger counter {name}: families carrying it {carrying:?}"
        );
    }
}
