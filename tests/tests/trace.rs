//! `--trace` against the ledger it is built from and the kernel's own
//! counters, on a process that sleeps, computes and reads with O_DIRECT
//! (root; see common::root_or_skip).
use crate::common;

use std::collections::BTreeSet;

use common::*;
use serde_json::Value;
use ttp_ledger::{
    accounts::{Image, ThreadKey},
    probe::{AttachOptions, Ledger, seed},
};
use ttp_user::report::{format::chrome::Chrome, trace::Trace};
use ttp_window::window::trace_record::Recorder;

/// The account of thread `tid` in `img`.
fn thread(img: &Image, tid: u32) -> ttp_common::ThreadAccount {
    *img.threads
        .iter()
        .find(|(k, _)| k.tid == tid)
        .map(|(_, a)| a)
        .unwrap_or_else(|| panic!("thread {tid} not in the ledger"))
}

/// ns covered by the "X" events of (pid, tid) named `name`, clipped to
/// [from_ns, to_ns] (timestamps are µs in the file).
fn covered(events: &[Value], pid: u32, tid: u32, name: &str, from_ns: u64, to_ns: u64) -> f64 {
    let (from, to) = (from_ns as f64 / 1e3, to_ns as f64 / 1e3);
    events
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == pid && e["tid"] == tid && e["name"] == name)
        .map(|e| {
            let ts = e["ts"].as_f64().unwrap();
            let end = ts + e["dur"].as_f64().unwrap();
            (end.min(to) - ts.max(from)).max(0.0) * 1e3
        })
        .sum()
}

/// No two `Running` slices on one CPU overlap: a CPU runs one thread at a
/// time, so a slice that did not end at its thread's switch-out shows here.
fn no_running_slices_overlap_on_a_cpu(events: &[Value]) {
    let mut by_cpu: std::collections::BTreeMap<u64, Vec<(f64, f64, u64)>> = Default::default();
    for e in events
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"] == "Running")
    {
        let cpu = e["args"]["cpu"]
            .as_u64()
            .expect("a Running slice names its CPU");
        let ts = e["ts"].as_f64().unwrap();
        let end = ts + e["dur"].as_f64().unwrap();
        by_cpu
            .entry(cpu)
            .or_default()
            .push((ts, end, e["tid"].as_u64().unwrap()));
    }
    for (cpu, mut slices) in by_cpu {
        slices.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in slices.windows(2) {
            // Timestamps are µs with three decimals: 1 ns of rounding.
            assert!(
                w[1].0 >= w[0].1 - 0.002,
                "cpu {cpu}: tid {} runs from {} µs, before tid {} stops at {} µs",
                w[1].2,
                w[1].0,
                w[0].2,
                w[0].1
            );
        }
    }
}

/// The fixture sleeps 150 ms, burns 200 ms of CPU and reads 16 MiB with
/// O_DIRECT while traced. Catches: running slices that miss or double count
/// CPU time (against the ledger's on_cpu_ns and schedstat), gaps or overlaps
/// between a thread's slices, I/O requests missing or repeated (against the
/// ledger's read_requests), bytes off against /proc/PID/io, a file that is
/// not trace JSON, and losses not reported.
#[test]
fn trace_of_sleep_compute_and_direct_reads_matches_the_ledger() {
    if !root_or_skip("trace_of_sleep_compute_and_direct_reads_matches_the_ledger") {
        return;
    }
    let _serial = serial();
    let mut ledger = Ledger::attach_with(&AttachOptions {
        trace: true,
        ..Default::default()
    })
    .expect("attach the ledger with tracing");
    let mut fx = Held::start(
        "fixture-mixed",
        &["--sleep-ms", "150", "--cpu-ms", "200", "--read-mib", "16"],
    );
    ledger.seed(&seed::threads_from_proc());
    let pid = fx.pid();
    let rec = Recorder::start(&mut ledger, &[pid]).expect("start the recorder");
    let (cpu0, _) = schedstat(pid);
    let io0 = proc_read_bytes(pid);
    let steal0 = proc_stat_steal();
    let before = image(&ledger);
    fx.go();
    let done = fx.line();
    let after = image(&ledger);
    let steal_ns = steal_ns_between(steal0, proc_stat_steal());
    let (cpu1, _) = schedstat(pid);
    let io1 = proc_read_bytes(pid);
    let recording = rec.finish(&ledger).expect("finish the recording");
    fx.finish();

    let path = std::env::temp_dir().join(format!("ttp-trace-test-{pid}.json"));
    let trace = Trace::new(recording, "ttp test");
    ttp_user::report::format::write_unannounced_file(&path, &Chrome(&trace))
        .expect("write the trace");
    let doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).expect("JSON");
    std::fs::remove_file(&path).ok();
    let events = doc["traceEvents"].as_array().expect("traceEvents array");
    for e in events {
        let ph = e["ph"].as_str().expect("every event has a phase");
        assert!(e["pid"].is_u64() && e["tid"].is_u64(), "pid/tid: {e}");
        if ph != "M" {
            assert!(e["ts"].as_f64().is_some_and(|t| t > 0.0), "ts: {e}");
        }
        if ph == "X" {
            assert!(e["dur"].as_f64().is_some_and(|d| d >= 0.0), "dur: {e}");
        }
    }
    assert_eq!(doc["metadata"]["events_lost"], 0, "{}", doc["metadata"]);
    assert_eq!(doc["metadata"]["undecodable"], 0);
    // Nothing before the trace's start, nothing after its end.
    let (start_us, end_us) = (
        doc["metadata"]["start_ns"].as_f64().unwrap() / 1e3,
        doc["metadata"]["end_ns"].as_f64().unwrap() / 1e3,
    );
    for e in events.iter().filter(|e| e["ph"] != "M") {
        let ts = e["ts"].as_f64().unwrap();
        let end = ts + e["dur"].as_f64().unwrap_or(0.0);
        assert!(
            ts >= start_us && end <= end_us + 1e-3,
            "outside the trace: {e}"
        );
    }

    let (t0, t1) = (before.at_ns, after.at_ns);
    let key = |img: &Image| {
        img.threads
            .keys()
            .find(|k| k.tid == pid)
            .copied()
            .unwrap_or(ThreadKey { tid: pid, start: 0 })
    };
    assert_eq!(key(&before), key(&after), "same thread before and after");
    let (a0, a1) = (thread(&before, pid), thread(&after, pid));
    let ledger_cpu = (a1.on_cpu_ns - a0.on_cpu_ns) as f64;
    let running = covered(events, pid, pid, "Running", t0, t1);
    let wall = (t1 - t0) as f64;
    // The running slices are wall clock between the switch tracepoints;
    // on_cpu_ns is the kernel's runtime, which leaves out what the
    // hypervisor stole while the thread ran (PARAVIRT_TIME_ACCOUNTING) and
    // can start before the slice (below). The wall-clock truth is the
    // ledger's own: over the window, the thread was off the CPU for its
    // sleep, blocked, iowait and wake-to-switch-in (wake_latency_ns) wall
    // time, and on it for the rest. A slice that runs on past its
    // switch-out, or one counted twice, makes `running` exceed that.
    let off_cpu = (a1.sleep_ns - a0.sleep_ns)
        + (a1.blocked_ns - a0.blocked_ns)
        + (a1.iowait_ns - a0.iowait_ns)
        + (a1.wake_latency_ns - a0.wake_latency_ns);
    let on_wall = wall - off_cpu as f64;
    // A slice starts at the switch-in; the kernel's runtime can start
    // earlier, at the wake-up, when the wake-up skipped the rq clock's
    // update (docs/ledger.md: that part of the wait is runtime, not
    // run_delay). The wall-clock wait the kernel did not book as run_delay
    // bounds how much shorter the slices may be than the runtime (seen
    // beside a loaded machine: slices 2.770 ms short, 2.736 ms not booked).
    let wall_wait = (a1.wake_latency_ns - a0.wake_latency_ns) as f64;
    let run_delay = (a1.runq_wait_ns - a0.runq_wait_ns) as f64;
    let unbooked = (wall_wait - run_delay).max(0.0);
    // The other way the slices exceed the runtime by the steal while the
    // thread ran (seen beside a compile and two CPU burners: 14.0 ms and
    // 2.6 ms over a 202 ms runtime). /proc/stat gives steal only for the
    // whole machine, in USER_HZ ticks, truncated, and the kernel books it
    // at its ticks, up to a jiffy late on each CPU: the machine's steal
    // over the window plus that granularity bounds the thread's share.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let steal_slack = 1e9 / user_hz() as f64 + cpus as f64 * 1e9 / 100.0;
    eprintln!(
        "fixture said {done}running slices {running} ns, ledger on_cpu_ns {ledger_cpu}, schedstat {}, \
         ledger wall clock on the CPU {on_wall} ns, wait not booked as run_delay {unbooked} ns, \
         machine steal {steal_ns} ns (+ {steal_slack} ns granularity)",
        cpu1 - cpu0
    );
    assert!(
        within(running, on_wall, 0.001, 1e3),
        "running slices {running} ns vs the ledger's wall clock on the CPU {on_wall} ns"
    );
    assert!(
        running >= ledger_cpu * 0.99 - unbooked,
        "running slices {running} ns short of ledger on_cpu_ns {ledger_cpu} (wait not booked as run_delay {unbooked} ns)"
    );
    assert!(
        running <= ledger_cpu * 1.01 + steal_ns + steal_slack,
        "running slices {running} ns over ledger on_cpu_ns {ledger_cpu} by more than the machine's steal {steal_ns} ns + {steal_slack} ns"
    );
    // A loose second truth, read apart from the ledger: schedstat's runtime,
    // which leaves out the steal while the thread ran, as on_cpu_ns does
    // (ledger.rs holds the tight comparison). So the same allowances: the
    // wait not booked as run_delay below it, the machine's steal above it
    // (seen beside two CPU burners and a disk writer: slices 302 ms against
    // a 206 ms runtime, with 520 ms stolen from the machine's two CPUs).
    let sched = (cpu1 - cpu0) as f64;
    assert!(
        running >= sched * 0.95 - 5e6 - unbooked
            && running <= sched * 1.05 + 5e6 + steal_ns + steal_slack,
        "running slices {running} ns vs schedstat {sched} (not booked as run_delay {unbooked} ns, machine steal {steal_ns} ns)"
    );
    // The states tile the window: no gap, no overlap.
    let tiled: f64 = ["Running", "Runnable", "Sleeping", "Blocked", "I/O wait"]
        .iter()
        .map(|s| covered(events, pid, pid, s, t0, t1))
        .sum();
    assert!(
        within(tiled, wall, 0.001, 1e3),
        "states cover {tiled} of {wall} ns"
    );
    let sleeping = covered(events, pid, pid, "Sleeping", t0, t1);
    assert!(sleeping >= 140e6, "the 150 ms sleep shows as {sleeping} ns");
    let iowait = covered(events, pid, pid, "I/O wait", t0, t1);
    let ledger_iowait = (a1.iowait_ns - a0.iowait_ns) as f64;
    assert!(
        within(iowait, ledger_iowait, 0.01, 1e3),
        "I/O wait slices {iowait} vs ledger iowait_ns {ledger_iowait}"
    );

    // Every read request submitted in the window appears once.
    let reads: Vec<&Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "block" && e["name"] == "read" && e["pid"] == pid)
        .filter(|e| {
            let ts = e["ts"].as_f64().unwrap() * 1e3;
            ts >= t0 as f64 && ts <= t1 as f64
        })
        .collect();
    let ledger_reads = a1.io.read_requests - a0.io.read_requests;
    assert_eq!(
        reads.len() as u64,
        ledger_reads,
        "read requests in the trace vs the ledger"
    );
    let distinct: BTreeSet<(String, String)> = reads
        .iter()
        .map(|e| (e["ts"].to_string(), e["args"]["sector"].to_string()))
        .collect();
    assert_eq!(distinct.len(), reads.len(), "a request appears twice");
    let bytes: u64 = reads
        .iter()
        .map(|e| e["args"]["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(
        bytes,
        io1 - io0,
        "bytes of the requests vs /proc/PID/io read_bytes"
    );
    assert!(
        reads
            .iter()
            .all(|e| e["args"]["device_us"].as_f64().is_some()),
        "every request completed in the window"
    );
}

/// `attach --trace` end to end on a process that forks 50 short-lived
/// children while traced. Catches children not inherited by the kernel's
/// traced set at fork, a child's CPU time missing from its own track, exits
/// not marked, and a trace or summary `report` cannot read back.
#[test]
fn attach_trace_follows_forked_children_and_report_reads_it() {
    if !root_or_skip("attach_trace_follows_forked_children_and_report_reads_it") {
        return;
    }
    let _serial = serial();
    let mut fx = Held::start(
        "fixture-forker",
        &["--children", "50", "--child-cpu-us", "1000"],
    );
    let parent = fx.pid();
    let trace = temp_path("forker.trace.json");
    let json = temp_path("forker.json");
    let mut ttp = ttp_attached(&[
        "attach",
        "--pid",
        &parent.to_string(),
        "--children",
        "--duration",
        "60s",
        "-q",
        "--json",
        json.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    let steal0 = proc_stat_steal();
    fx.go();
    let pids: Vec<u64> = fx.numbers_to_end();
    assert_eq!(pids.len(), 50);
    let status = ttp.wait().expect("wait ttp");
    assert!(status.success(), "attach --trace failed: {status}");
    let steal_ns = steal_ns_between(steal0, proc_stat_steal());
    let doc = json_file(&trace);
    assert_eq!(doc["schema"], "ttp.trace/1");
    assert_eq!(doc["metadata"]["events_lost"], 0, "{}", doc["metadata"]);
    let events = doc["traceEvents"].as_array().unwrap();
    let summary = json_file(&json);
    let mut excess = 0.0;
    for pid in &pids {
        let pid = *pid as u32;
        let running = covered(events, pid, pid, "Running", 0, u64::MAX / 2);
        let kernel = &summary["processes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["pid"] == pid)
            .unwrap_or_else(|| panic!("child {pid} missing from the summary"))["kernel"];
        let counter = |name: &str| kernel[name].as_f64().unwrap();
        let ledger = counter("on_cpu_ns");
        // Two clocks: the slices are wall clock between the switch
        // tracepoints; on_cpu_ns is the scheduler's runtime, which starts
        // at the pick and stops at update_curr inside __schedule, a few µs
        // from the tracepoint on each side of every slice, and leaves out
        // the time the hypervisor stole (PARAVIRT_TIME_ACCOUNTING). The
        // runtime can also start before the slice: after a wake-up
        // preemption the scheduler skips the next rq clock update
        // (rq_clock_skip_update), so a task picked then starts its runtime
        // at a clock as old as the CPU took to reschedule (seen: 34 µs).
        //
        // A slice missing from the track makes `running` short of the
        // ledger; that direction is held to 1 % + 60 µs a slice, which a
        // lost slice of a 1 ms child is well outside, plus what a stale rq
        // clock moved from the run-queue wait into the runtime: the pick
        // ends `run_delay` and starts the runtime at one reading of the rq
        // clock, so a clock d old at the pick adds d to the runtime and
        // takes d from `run_delay`, and the ledger's wall-clock wait to
        // the switch-in (`wake_latency_ns`, over the same waits) then
        // exceeds `runq_wait_ns` by d. Seen: 2 slices 190 µs short of the
        // runtime, with the wall-clock wait 213 µs over run_delay (a
        // reschedule that took that long on this VM). The other direction
        // has no such bound: a switch-out's runtime stops at update_curr,
        // and its tracepoint fires only after the next task is picked,
        // which when the CPU goes idle includes newidle balancing (it drops
        // the run-queue lock and waits for the other CPU's); and the
        // hypervisor's steal lengthens a slice without adding runtime. One
        // child's 2.3 ms of slices was seen 0.52 ms over its runtime. So
        // slices that run on too long are caught instead by the overlap
        // check below (a slice not ended at its switch-out overlaps the
        // next task's on that CPU) and, over all children together, by a
        // bound on the excess.
        let slices = events
            .iter()
            .filter(|e| e["ph"] == "X" && e["pid"] == pid && e["tid"] == pid)
            .filter(|e| e["name"] == "Running")
            .count() as f64;
        let tolerance = 0.01 * ledger + 60e3 * slices;
        let stale_clock = (counter("wake_latency_ns") - counter("runq_wait_ns")).max(0.0);
        assert!(
            running > 0.0 && running >= ledger - tolerance - stale_clock,
            "child {pid}: running slices {running} ns ({slices} slices) short of ledger on_cpu_ns {ledger} by more than {tolerance} + {stale_clock} (wall-clock wait over run_delay)"
        );
        excess += (running - ledger - tolerance).max(0.0);
        assert!(
            events
                .iter()
                .any(|e| e["ph"] == "i" && e["name"] == "exit (process)" && e["pid"] == pid),
            "child {pid} has no exit mark"
        );
    }
    // Over all children, the excess beyond each child's tolerance must
    // stay within the steal the kernel counted over the run, plus the
    // counter's granularity (/proc/stat shows it in USER_HZ ticks,
    // truncated, and the kernel books steal at its own ticks, up to one
    // jiffy late on each CPU), plus 1 ms for the scheduler's own work at
    // switch-outs (the largest single excess seen was 0.52 ms).
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let slack = 1e9 / user_hz() as f64 + cpus as f64 * 1e9 / 100.0 + 1e6;
    assert!(
        excess <= steal_ns + slack,
        "running slices exceed the ledger by {excess} ns over all children, more than the {steal_ns} ns the hypervisor stole + {slack} ns"
    );
    no_running_slices_overlap_on_a_cpu(events);
    for file in [&trace, &json] {
        let out = std::process::Command::new(ttp_bin())
            .args(["report", file.to_str().unwrap(), "--format", "csv"])
            .output()
            .expect("run report");
        assert!(out.status.success(), "report {}: {out:?}", file.display());
        let csv = String::from_utf8(out.stdout).unwrap();
        assert!(
            csv.lines().count() > pids.len(),
            "one row per child at least: {csv}"
        );
    }
    let _ = std::fs::remove_file(trace);
    let _ = std::fs::remove_file(json);
}
