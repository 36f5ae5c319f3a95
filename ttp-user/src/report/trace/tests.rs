//! The trace writer on constructed event streams: every expected number is
//! worked out by hand from the events below.
use serde_json::Value;

use super::*;
use crate::report::format::chrome::{IO_TID_BASE, PROTOCOL_PID};
use ttp_ledger::probe::{BlockPhase, KernelStats, ThreadState, TraceBody, TraceEvent};
use ttp_window::window::trace_record::Seed;

const T0: u64 = 1_000_000_000; // trace start, ns
const END: u64 = T0 + 100_000; // trace end, ns

fn ev(ts_ns: u64, tid: u32, tgid: u32, cpu: u32, body: TraceBody) -> TraceEvent {
    TraceEvent {
        ts_ns,
        tid,
        tgid,
        cpu,
        body,
    }
}

fn seed(tid: u32, tgid: u32, state: ThreadState, since_ns: u64, comm: &str) -> Seed {
    Seed {
        tid,
        tgid,
        state,
        since_ns,
        comm: comm.into(),
    }
}

fn recording(events: Vec<TraceEvent>, seeds: Vec<Seed>) -> Recording {
    Recording {
        start_ns: T0,
        end_ns: END,
        events,
        seeds,
        roots: vec![10],
        ..Default::default()
    }
}

fn parse(trace: &Trace) -> Value {
    serde_json::from_slice(&trace.to_bytes()).expect("valid JSON")
}

fn events(doc: &Value) -> &Vec<Value> {
    doc["traceEvents"].as_array().expect("traceEvents array")
}

fn find(doc: &Value, f: impl Fn(&Value) -> bool) -> Vec<&Value> {
    events(doc).iter().filter(|e| f(e)).collect()
}

fn is(e: &Value, ph: &str, name: &str, tid: u32) -> bool {
    e["ph"] == ph && e["name"] == name && e["tid"] == tid
}

/// One thread: sleeping since before the trace, woken at T0+500, on CPU 1
/// from T0+1250 to T0+3251, then sleeping to the end. Catches ns shown as
/// µs (or rounded to whole µs), a seed ignored, a slice not closed at the
/// end, and a running slice without its CPU.
#[test]
fn states_become_complete_events_in_microseconds_with_ns_precision() {
    let rec = recording(
        vec![
            ev(T0 + 500, 10, 10, 0, TraceBody::Wakeup { new: false }),
            ev(T0 + 1250, 10, 10, 1, TraceBody::SwitchIn { prev_tid: 0 }),
            ev(
                T0 + 3251,
                10,
                10,
                1,
                TraceBody::SwitchOut {
                    state: ThreadState::Sleeping,
                    next_tid: 0,
                    preempt: false,
                    prev_state: 1,
                },
            ),
        ],
        vec![seed(10, 10, ThreadState::Sleeping, T0 - 5_000_000, "mixed")],
    );
    let trace = Trace::new(rec, "ttp attach");
    let text = String::from_utf8(trace.to_bytes()).unwrap();
    // 1_000_001_250 ns = 1_000_001.25 µs; 2001 ns = 2.001 µs, exactly.
    assert!(
        text.contains(r#""ts":1000001.25,"dur":2.001"#),
        "running slice not in exact µs: {text}"
    );
    let doc = parse(&trace);
    let x: Vec<(String, f64, f64)> = find(&doc, |e| e["ph"] == "X" && e["tid"] == 10)
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["ts"].as_f64().unwrap(),
                e["dur"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        x,
        vec![
            ("Sleeping".into(), 1_000_000.0, 0.5),
            ("Runnable".into(), 1_000_000.5, 0.75),
            ("Running".into(), 1_000_001.25, 2.001),
            ("Sleeping".into(), 1_000_003.251, 96.749),
        ]
    );
    let running = find(&doc, |e| is(e, "X", "Running", 10));
    assert_eq!(running[0]["args"]["cpu"], 1);
    // The four slices tile the trace: 0.5 + 0.75 + 2.001 + 96.749 = 100 µs.
    assert_eq!(
        trace.timeline().time_in(10, ThreadState::Running, T0, END),
        2001
    );
    assert_eq!(doc["displayTimeUnit"], "ns");
}

/// Thread 11 is woken twice: by thread 10 of the same traced process while
/// 10 runs, then by tid 999 of an untraced process. Catches a flow whose
/// ends are not paired by id, a flow end not bound to the wakee's runnable
/// slice, a waker mixed up with the wakee, and arrows drawn from a thread
/// that has no track.
#[test]
fn wakeups_by_traced_threads_become_paired_flow_events() {
    let sw_out = |state| TraceBody::SwitchOut {
        state,
        next_tid: 0,
        preempt: false,
        prev_state: 1,
    };
    let rec = recording(
        vec![
            ev(T0 + 1_000, 10, 10, 0, TraceBody::SwitchIn { prev_tid: 0 }),
            ev(
                T0 + 2_000,
                11,
                10,
                0,
                TraceBody::Waking {
                    waker_tid: 10,
                    waker_tgid: 10,
                },
            ),
            ev(T0 + 2_100, 11, 10, 1, TraceBody::Wakeup { new: false }),
            ev(T0 + 3_000, 11, 10, 1, TraceBody::SwitchIn { prev_tid: 0 }),
            ev(T0 + 4_000, 11, 10, 1, sw_out(ThreadState::Sleeping)),
            ev(T0 + 5_000, 10, 10, 0, sw_out(ThreadState::Sleeping)),
            ev(
                T0 + 6_000,
                11,
                10,
                1,
                TraceBody::Waking {
                    waker_tid: 999,
                    waker_tgid: 998,
                },
            ),
            ev(T0 + 6_050, 11, 10, 1, TraceBody::Wakeup { new: false }),
        ],
        vec![
            seed(10, 10, ThreadState::Runnable, T0, "server"),
            seed(11, 10, ThreadState::Sleeping, T0, "worker"),
        ],
    );
    let trace = Trace::new(rec, "ttp attach");
    let doc = parse(&trace);
    let starts = find(&doc, |e| e["ph"] == "s");
    let ends = find(&doc, |e| e["ph"] == "f");
    assert_eq!(
        (starts.len(), ends.len()),
        (1, 1),
        "one flow: the traced waker's"
    );
    let (s, f) = (starts[0], ends[0]);
    assert_eq!(s["id"], f["id"]);
    assert_eq!((s["pid"].as_u64(), s["tid"].as_u64()), (Some(10), Some(10)));
    assert_eq!(
        s["ts"].as_f64(),
        Some(1_000_002.0),
        "at the waking, inside 10's running slice"
    );
    assert_eq!((f["tid"].as_u64(), f["bp"].as_str()), (Some(11), Some("e")));
    let fts = f["ts"].as_f64().unwrap();
    assert!(
        (1_000_002.1..1_000_003.0).contains(&fts),
        "flow end {fts} outside 11's runnable slice [1000002.1, 1000003)"
    );
    let runnable = find(&doc, |e| is(e, "X", "Runnable", 11));
    assert_eq!(runnable.len(), 2);
    assert_eq!(runnable[0]["args"]["woken_by"]["tid"], 10);
    assert_eq!(runnable[1]["args"]["woken_by"]["tid"], 999);
    assert_eq!(runnable[1]["args"]["woken_by"]["pid"], 998);
}

/// Names, counters, losses. Catches a process named after a non-leader
/// thread, threads without names, counters on the wrong track, with the
/// count in the wrong arg or stamped before the trace, and losses that do
/// not reach the metadata or the timeline.
#[test]
fn metadata_names_counters_and_losses() {
    let sample = |ts, nr_running| {
        ev(
            ts,
            0,
            0,
            1,
            TraceBody::CpuSample {
                nr_running,
                nr_iowait: 1,
                idle: false,
            },
        )
    };
    let mut rec = recording(
        vec![
            // Sampled before the trace started: only the last one counts,
            // as the value at the start.
            sample(T0 - 20_000_000, 5),
            sample(T0 - 10_000_000, 3),
            sample(T0 + 10, 4),
            ev(
                T0 + 20,
                12,
                10,
                0,
                TraceBody::Fork {
                    parent_tid: 10,
                    parent_tgid: 10,
                    comm: "pool-1".into(),
                },
            ),
            ev(T0 + 30, 12, 10, 0, TraceBody::Wakeup { new: true }),
        ],
        vec![
            seed(11, 10, ThreadState::Sleeping, T0, "helper"),
            seed(10, 10, ThreadState::Sleeping, T0, "postgres"),
        ],
    );
    rec.stats = KernelStats {
        trace_events_lost: 7,
        ..Default::default()
    };
    let trace = Trace::new(rec, "ttp attach");
    let doc = parse(&trace);
    assert_eq!(doc["schema"], "ttp.trace/1");
    assert_eq!(doc["metadata"]["events_lost"], 7);
    assert_eq!(doc["metadata"]["clock"], "CLOCK_MONOTONIC");
    let pname = find(&doc, |e| {
        e["ph"] == "M" && e["name"] == "process_name" && e["pid"] == 10
    });
    assert_eq!(pname[0]["args"]["name"], "postgres");
    let tnames: Vec<(u64, String)> = find(&doc, |e| e["name"] == "thread_name" && e["pid"] == 10)
        .iter()
        .map(|e| {
            (
                e["tid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        tnames,
        vec![
            (10, "postgres".into()),
            (11, "helper".into()),
            (12, "pool-1".into())
        ]
    );
    let rq = find(&doc, |e| e["ph"] == "C" && e["name"] == "cpu1 run queue");
    let points: Vec<(f64, u64)> = rq
        .iter()
        .map(|e| {
            (
                e["ts"].as_f64().unwrap(),
                e["args"]["tasks"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(points, [(1_000_000.0, 3), (1_000_000.01, 4)]);
    assert_eq!(rq[0]["pid"], crate::report::format::chrome::CPUS_PID);
    let io = find(&doc, |e| e["ph"] == "C" && e["name"] == "cpu1 iowait");
    assert_eq!(io[0]["args"]["tasks"], 1);
    let warn = find(&doc, |e| e["ph"] == "i" && e["s"] == "g");
    assert!(
        warn[0]["name"]
            .as_str()
            .unwrap()
            .starts_with("7 trace events lost")
    );
    // The new thread is runnable from its first wakeup, not before.
    let fork_thread = find(&doc, |e| e["ph"] == "X" && e["tid"] == 12);
    assert_eq!(fork_thread.len(), 1);
    assert_eq!(fork_thread[0]["ts"].as_f64(), Some(1_000_000.03));
}

fn block(ts: u64, phase: BlockPhase, rq: u64, bytes: u32) -> TraceEvent {
    ev(
        ts,
        10,
        10,
        0,
        TraceBody::Block {
            phase,
            rq,
            sector: 8,
            bytes,
            op: 0,
            dev_major: 0,
            dev_minor: 0,
        },
    )
}

/// Two reads in flight at once, a third never completed, and a completion
/// of a request submitted before the trace. Catches overlapping requests
/// put on one row (Perfetto would drop the misnested one), bytes taken
/// before merges, device time not nested in its request, requests left
/// open dropped, and unmatched completions invented as requests.
#[test]
fn io_requests_get_rows_nested_device_time_and_counted_anomalies() {
    use BlockPhase::*;
    let rec = recording(
        vec![
            block(T0 + 100, Submit, 0xa, 4096),
            block(T0 + 150, Submit, 0xb, 4096),
            block(T0 + 200, Issue, 0xa, 8192),
            block(T0 + 250, Issue, 0xb, 4096),
            block(T0 + 900, Complete, 0xa, 0),
            block(T0 + 950, Complete, 0xb, 0),
            block(T0 + 960, Complete, 0xc, 0),
            block(T0 + 1_000, Submit, 0xa, 4096),
        ],
        vec![seed(10, 10, ThreadState::Sleeping, T0, "reader")],
    );
    let trace = Trace::new(rec, "ttp attach");
    let tl = trace.timeline();
    assert_eq!(tl.io.len(), 3);
    assert_eq!((tl.stats.io_unmatched, tl.stats.io_incomplete), (1, 1));
    let doc = parse(&trace);
    let reads = find(&doc, |e| e["ph"] == "X" && e["name"] == "read");
    assert_eq!(reads.len(), 3);
    let rows: std::collections::BTreeSet<u64> =
        reads.iter().map(|e| e["tid"].as_u64().unwrap()).collect();
    assert_eq!(
        rows.len(),
        2,
        "two requests in flight at once need two rows"
    );
    assert!(rows.iter().all(|&t| t >= IO_TID_BASE as u64));
    assert_eq!(
        reads[0]["args"]["bytes"], 8192,
        "bytes at issue, after a merge"
    );
    assert_eq!(reads[0]["dur"].as_f64(), Some(0.8));
    assert_eq!(reads[0]["args"]["device_us"].as_f64(), Some(0.7));
    let dev = find(&doc, |e| {
        e["name"] == "on device" && e["tid"] == reads[0]["tid"]
    });
    assert_eq!(dev[0]["ts"].as_f64(), Some(1_000_000.2));
    assert_eq!(dev[0]["dur"].as_f64(), Some(0.7));
    let open = reads
        .iter()
        .find(|e| e["args"]["incomplete"] == true)
        .unwrap();
    assert_eq!(
        open["dur"].as_f64(),
        Some(99.0),
        "open request ends with the trace"
    );
}

/// A thread with no seed first seen switching out, exiting later, and its
/// tid reused by a new thread. Catches inferred states not marked, slices
/// after an exit, and a reused tid continuing the old thread's slices.
#[test]
fn first_events_infer_and_exits_end_tracks() {
    let rec = recording(
        vec![
            ev(
                T0 + 400,
                20,
                20,
                0,
                TraceBody::SwitchOut {
                    state: ThreadState::Runnable,
                    next_tid: 5,
                    preempt: true,
                    prev_state: 0,
                },
            ),
            ev(T0 + 500, 20, 20, 0, TraceBody::SwitchIn { prev_tid: 5 }),
            ev(
                T0 + 700,
                20,
                20,
                0,
                TraceBody::Exit {
                    group_dead: true,
                    comm: "short".into(),
                },
            ),
            ev(
                T0 + 800,
                20,
                21,
                1,
                TraceBody::Fork {
                    parent_tid: 21,
                    parent_tgid: 21,
                    comm: "reuse".into(),
                },
            ),
        ],
        vec![],
    );
    let trace = Trace::new(rec, "ttp attach");
    let s = &trace.timeline().slices;
    let old: Vec<_> = s.iter().filter(|s| s.tgid == 20).collect();
    assert_eq!(old.len(), 3);
    assert!(old[0].inferred && old[0].state == ThreadState::Running);
    assert_eq!((old[0].start_ns, old[0].end_ns), (T0, T0 + 400));
    assert!(old[1].preempted && old[1].state == ThreadState::Runnable);
    assert_eq!(old[2].end_ns, T0 + 700, "nothing after the exit");
    assert!(
        s.iter().all(|s| s.tgid != 21),
        "the new thread has no state yet"
    );
    assert_eq!(trace.timeline().threads[&(21, 20)], "reuse");
}

/// Catches QE slices on the wrong track, Time_meas/Time_calc/dropped not
/// carried, and a backwards slice accepted.
#[test]
fn qe_slices_on_the_protocol_track() {
    let mut trace = Trace::new(recording(vec![], vec![]), "ttp run (TTPv2)");
    for i in 0..3u64 {
        trace
            .add_qe(QeSlice {
                name: format!("QE {}", i + 1),
                start_ns: T0 + i * 30_000,
                end_ns: T0 + i * 30_000 + 25_000,
                time_meas_ms: 0.025,
                time_calc_ms: (i != 1).then_some(0.02),
                dropped: (i == 1).then(|| "measured time ≤ 2 ticks".to_string()),
            })
            .unwrap();
    }
    assert!(
        trace
            .add_qe(QeSlice {
                name: "bad".into(),
                start_ns: 5,
                end_ns: 4,
                time_meas_ms: 0.0,
                time_calc_ms: None,
                dropped: None,
            })
            .is_err()
    );
    let doc = parse(&trace);
    let qes = find(&doc, |e| e["ph"] == "X" && e["pid"] == PROTOCOL_PID);
    assert_eq!(qes.len(), 3);
    assert!(qes.iter().all(|q| q["dur"].as_f64() == Some(25.0)));
    assert_eq!(qes[1]["args"]["dropped"], true);
    assert_eq!(qes[1]["args"]["drop_reason"], "measured time ≤ 2 ticks");
    assert_eq!(qes[0]["args"]["time_calc_ms"].as_f64(), Some(0.02));
    assert_eq!(qes[0]["args"]["time_meas_ms"].as_f64(), Some(0.025));
    let pname = find(&doc, |e| {
        e["name"] == "process_name" && e["pid"] == PROTOCOL_PID
    });
    assert_eq!(pname[0]["args"]["name"], "ttp run (TTPv2)");
}
