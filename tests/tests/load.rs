//! `ttp-ebpf load` against a local target whose service time is known: a
//! line echo server in this process that holds every request for
//! `SERVICE` before answering. Needs no privileges.
mod common;

use std::{
    io::{BufRead, BufReader, Write},
    net::{TcpListener, TcpStream},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use common::*;

const SERVICE: Duration = Duration::from_micros(300);

/// Starts the echo server; returns its address and its count of answered
/// requests. Its threads end with the test process.
fn echo_server() -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let answered = Arc::new(AtomicU64::new(0));
    let count = answered.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let count = count.clone();
            std::thread::spawn(move || serve(conn, &count));
        }
    });
    (addr, answered)
}

fn serve(conn: TcpStream, answered: &AtomicU64) {
    let _ = conn.set_nodelay(true);
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    let mut lines = BufReader::new(conn);
    let mut line = String::new();
    while lines.read_line(&mut line).is_ok_and(|n| n > 0) {
        std::thread::sleep(SERVICE);
        if out.write_all(line.as_bytes()).is_err() {
            return;
        }
        answered.fetch_add(1, Ordering::Relaxed);
        line.clear();
    }
}

fn stat(v: &serde_json::Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

/// 1 000 req/s for 3 s against the echo server. Catches:
/// - a send time taken after the request left (the service time would be
///   shorter than the server's known hold of 300 µs for some request);
/// - requests lost or invented (ttp's sent/ok against the server's count);
/// - a sender whose lag does not come from the machine: ttp splits each
///   send's lag into the sender thread's own time waiting for and running on
///   a CPU since it was last on schedule (schedstat, read by ttp) and the
///   rest — time it slept past its deadline or blocked, which its
///   sleep-and-spin design controls. The rest must stay under 100 µs for
///   99 % of requests. On an idle machine the whole lag is under it
///   (docs/load.md); on a busy one the lag grows with the CPU wait and the
///   catching up after it, which this bound subtracts. The bound is
///   statistical only in that a send may block on a lock held by a runtime
///   thread that itself waits for a CPU; in runs beside seven parallel
///   builds (load average 8–14) the rest was 0 at p99 and at most 1.4 ms.
#[test]
fn open_model_sends_on_schedule_against_a_known_echo_server() {
    let (addr, answered) = echo_server();
    let json = temp_path("load-echo.json");
    let (code, out, err) = ttp(&[
        "load",
        "--rate",
        "1000",
        "--duration",
        "3s",
        "--tcp",
        &addr,
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("send lag behind schedule p50"), "{out}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_file(&json).ok();
    assert_eq!(doc["target"]["kind"], "tcp");
    let ph = &doc["phases"][0];
    assert_eq!(stat(ph, "scheduled"), 3000, "{out}");
    // The server answered every request ttp counted as sent (no warm-up);
    // every answered one completed in time (no errors with no timeout).
    assert_eq!(
        stat(ph, "sent"),
        stat(ph, "scheduled") - stat(ph, "skipped")
    );
    assert_eq!(answered.load(Ordering::Relaxed), stat(ph, "sent"), "{out}");
    assert_eq!(stat(ph, "completed_ok"), stat(ph, "sent"), "{out}");
    assert_eq!(stat(ph, "error_total"), 0, "{out}");
    // Known service time: no request can come back sooner than the server
    // held it. Latency from the intended start includes the service time.
    let service = &ph["series"]["open_service_time"];
    let latency = &ph["series"]["open_latency"];
    assert!(
        stat(service, "min_ns") >= SERVICE.as_nanos() as u64,
        "service min {} < the server's {SERVICE:?}",
        stat(service, "min_ns")
    );
    assert!(latency["mean_ns"].as_f64().unwrap() >= service["mean_ns"].as_f64().unwrap());
    // The send lag the sender itself controls.
    let sender = &ph["sender"];
    assert!(sender["run_delay_ns"].is_u64(), "no schedstat: {sender}");
    let beyond = &ph["send_lag_unexplained_ns"];
    assert_eq!(stat(beyond, "count"), stat(ph, "sent"));
    let p99 = beyond["percentiles_ns"]["99"].as_u64().unwrap();
    assert!(
        p99 < 100_000,
        "send lag beyond the sender's CPU wait p99 {p99} ns; whole lag {}; sender {sender}",
        ph["send_lag_ns"]
    );
}
