//! `ttp-ebpf serve --otlp` end to end (root): a collector started by the
//! test (an HTTP server decoding the OTLP protobuf with the
//! opentelemetry-proto messages) receives the fixture group's counters as
//! the kernel counts them, and pushes it refuses are counted and retried.
use crate::common;

use std::{
    collections::{BTreeMap, BTreeSet},
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use common::{serve::*, *};
use opentelemetry_proto::tonic::{
    collector::metrics::v1::ExportMetricsServiceRequest,
    common::v1::any_value,
    metrics::v1::{AggregationTemporality, metric::Data, number_data_point},
};
use prost::Message;

/// One pushed point: (metric name, labels) → (start, time, value).
type Points = BTreeMap<(String, BTreeMap<String, String>), (u64, u64, f64)>;

/// An OTLP/HTTP collector on loopback: answers the first `refuse`
/// requests 503, the rest 200, and keeps every request it accepted,
/// decoded. It stops with the test process.
struct Collector {
    port: u16,
    accepted: Arc<Mutex<Vec<Points>>>,
    refused: Arc<Mutex<u32>>,
}

impl Collector {
    fn start(refuse: u32) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind collector");
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let refused = Arc::new(Mutex::new(0));
        let (acc, refs) = (Arc::clone(&accepted), Arc::clone(&refused));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let (path, ctype, body) = read_request(&conn);
                assert_eq!(path, "/v1/metrics", "serve appends the signal's path");
                assert_eq!(ctype, "application/x-protobuf");
                let req = ExportMetricsServiceRequest::decode(body.as_slice())
                    .expect("an OTLP metrics request");
                let mut r = refs.lock().unwrap();
                let status = if *r < refuse {
                    *r += 1;
                    "503 Service Unavailable"
                } else {
                    acc.lock().unwrap().push(points(&req));
                    "200 OK"
                };
                drop(r);
                let mut conn = conn;
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status}\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
            }
        });
        Self {
            port,
            accepted,
            refused,
        }
    }

    fn accepted(&self) -> Vec<Points> {
        self.accepted.lock().unwrap().clone()
    }
}

/// (path, content type, body) of one HTTP/1.1 POST.
fn read_request(conn: &TcpStream) -> (String, String, Vec<u8>) {
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut r = BufReader::new(conn);
    let mut line = String::new();
    r.read_line(&mut line).expect("request line");
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let (mut len, mut ctype) = (0usize, String::new());
    loop {
        line.clear();
        r.read_line(&mut line).expect("header");
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').expect("header line");
        match k.to_ascii_lowercase().as_str() {
            "content-length" => len = v.trim().parse().expect("length"),
            "content-type" => ctype = v.trim().to_string(),
            _ => {}
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).expect("body");
    (path, ctype, body)
}

/// Every number point of a request, with its labels; counters must be
/// cumulative monotonic sums.
fn points(req: &ExportMetricsServiceRequest) -> Points {
    let mut out = Points::new();
    for rm in &req.resource_metrics {
        for sm in &rm.scope_metrics {
            for m in &sm.metrics {
                let dps = match m.data.as_ref().expect("data") {
                    Data::Sum(s) => {
                        assert!(s.is_monotonic, "{}", m.name);
                        assert_eq!(
                            s.aggregation_temporality,
                            AggregationTemporality::Cumulative as i32
                        );
                        &s.data_points
                    }
                    Data::Gauge(g) => &g.data_points,
                    other => panic!("{}: {other:?}", m.name),
                };
                for p in dps {
                    let labels = p
                        .attributes
                        .iter()
                        .map(|a| {
                            let v = match a.value.as_ref().and_then(|v| v.value.as_ref()) {
                                Some(any_value::Value::StringValue(s)) => s.clone(),
                                other => panic!("{}: label {other:?}", m.name),
                            };
                            (a.key.clone(), v)
                        })
                        .collect();
                    let Some(number_data_point::Value::AsDouble(v)) = p.value else {
                        panic!("{}: not a double", m.name)
                    };
                    out.insert(
                        (m.name.clone(), labels),
                        (p.start_time_unix_nano, p.time_unix_nano, v),
                    );
                }
            }
        }
    }
    out
}

fn value(p: &Points, name: &str, label: (&str, &str)) -> Option<f64> {
    let key = (
        name.to_string(),
        BTreeMap::from([(label.0.to_string(), label.1.to_string())]),
    );
    p.get(&key).map(|x| x.2)
}

/// Catches an OTLP push that differs from what the kernel says the
/// fixture's process did, or from `/metrics`: the fixture's control
/// group's `ttp_on_cpu_seconds_total` within 2 % (plus twice the steal
/// share, 2 ms) of its schedstat and `ttp_block_read_bytes_total` equal to
/// /proc/PID/io (the bound and its reasons are those of serve.rs's
/// Prometheus test); every pushed counter non-decreasing from push to
/// push, with one start time and growing timestamps; the pushed names
/// those of `/metrics`; and a refused push that stops the pushing or is
/// not counted in `ttp_otlp_pushes_total{result="failed"}`.
#[test]
fn otlp_collector_gets_the_fixture_group_as_the_kernel_counts_it() {
    if !root_or_skip("otlp_collector_gets_the_fixture_group_as_the_kernel_counts_it") {
        return;
    }
    let _serial = serial();
    // The first two pushes are refused: serve retries after 1 s, then 2 s.
    let collector = Collector::start(2);
    let url = format!("http://127.0.0.1:{}", collector.port);
    let serve = Serve::start(&["--group-by", "cgroup", "--interval", "1s", "--otlp", &url]);
    let fx = GroupFixture::run("otlp");
    let read = fx.read;
    let group = ("cgroup", fx.cg.path.as_str());
    // Wait for two accepted pushes after the fixture went idle that agree
    // (the read bytes complete, the on-CPU value the same), and for four
    // at least, for the checks across pushes below.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (on_cpu, bytes) = loop {
        let got = collector.accepted();
        let last2: Vec<_> = got
            .iter()
            .rev()
            .take(2)
            .map(|p| {
                (
                    value(p, "ttp_on_cpu_seconds_total", group),
                    value(p, "ttp_block_read_bytes_total", group),
                )
            })
            .collect();
        if let [(Some(a2), Some(b)), (Some(a), _)] = last2[..]
            && a == a2
            && b as u64 >= read
            && got.len() >= 4
        {
            break (a2, b as u64);
        }
        assert!(
            Instant::now() < deadline,
            "no settled push for {group:?} in 60 s: {last2:?} (read {read}; {} pushes accepted, {} refused)",
            got.len(),
            collector.refused.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    let pushes = collector.accepted();
    eprintln!("{} pushes accepted", pushes.len());
    fx.check("pushed", on_cpu, bytes);
    drop(fx);
    // Counters never go back; one start time; each push newer.
    let mut last: BTreeMap<_, (u64, u64, f64)> = BTreeMap::new();
    for p in &pushes {
        for (k, &(start, time, v)) in p {
            if let Some(&(s0, t0, v0)) = last.get(k) {
                assert_eq!(start, s0, "{k:?}: start time changed");
                assert!(time > t0, "{k:?}: time {t0} then {time}");
                if k.0.ends_with("_total") {
                    assert!(v >= v0, "{k:?}: {v0} then {v}");
                }
            }
            last.insert(k.clone(), (start, time, v));
        }
    }
    // The refused pushes were counted, and pushing went on.
    let failed = value(
        pushes.last().unwrap(),
        "ttp_otlp_pushes_total",
        ("result", "failed"),
    );
    assert_eq!(failed, Some(2.0), "two refused pushes counted");
    // The names pushed are the sample names of /metrics.
    let (status, text) = get(serve.port, "/metrics", None);
    assert_eq!(status, 200);
    let scraped: BTreeSet<String> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next().map(str::to_string))
        .collect();
    let pushed: BTreeSet<String> = pushes.last().unwrap().keys().map(|k| k.0.clone()).collect();
    assert_eq!(pushed, scraped);
    assert_eq!(serve.stop(), 0);
}
