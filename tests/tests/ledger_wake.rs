//! The ledger without its wake-up program (the default): a sleep ends at
//! the thread's switch-in, back-dated to the wake-up by the kernel's own
//! counters (docs/ledger.md). Root; see common::root_or_skip.
use crate::common;

use common::io_wake::*;
use common::*;
use ttp_ledger::{
    collect::taskstats::TaskstatsClient,
    probe::{AttachOptions, Ledger},
};
use ttp_sys::sys::delayacct::DelayAcct;

/// The I/O-wake fixture without the wake-up hook, beside two CPU burners
/// and a disk writer. Catches an iowait that ends anywhere but at the
/// wake-up (ended at the switch-in it would carry each wake-up's latency:
/// ≈ 9 µs a wake-up from an idle CPU, 18 ms over this fixture), wake-ups
/// not counted at the switch-in, and on-CPU or run-queue wait disturbed by
/// the change.
///
/// References. Taskstats gives delay accounting's blkio delay, what
/// `iowait_ns` is defined against (docs/ledger.md): its growth at
/// `delayacct_blkio_end` is also what places a recorded wait's end here,
/// so over waits it recorded the two agree up to the stretch from
/// `delayacct_blkio_start` to the switch-out tracepoint (inside
/// `__schedule`, interrupts off, < 2 µs a wait: 2 048 × 2 µs ≈ 4 ms),
/// taken as 2 % + 4 ms. It is the reference whenever delay accounting
/// recorded all but at most 16 waits of the window (blkio_count against
/// the wake-ups), and no more delay than the window: on this kernel a wait whose dequeue the
/// scheduler deferred (EEVDF's DELAY_DEQUEUE, up to a third of them beside
/// the CPU burners) is not recorded, or recorded from a stale start (once
/// 57 707 s). Otherwise the reference is a second ledger loaded at the
/// same time with the wake-up hook, which ends each wait at the
/// `sched_wakeup` tracepoint: that fires after the wake-up's IPI reached
/// an idle target CPU (≈ 6–10 µs here) while delay accounting ends the
/// wait at the waker, and the rq clock (used for waits delay accounting
/// does not record) misses the wake-up path when the wake-up preempted an
/// idle CPU (≈ 9 µs): either way at most ≈ 10 µs a wait, 2 048 × 10 µs ≈
/// 20 ms, so 5 % + 20 ms. (Measured without the load beside: this ledger
/// 55.08 ms, taskstats 56.10 ms over all 2 048 waits, the hooked ledger
/// 68.78 ms.)
/// Wake-ups: the kernel's voluntary switches of the window ± 2 (how many
/// reads sleep is the kernel's choice: common::io_wake), and the hooked
/// ledger's count ± 2 (a wake-up near either end of the window), less the
/// wake-ups its program did not run for, which it counts. On-CPU
/// and run-queue wait are the kernel's counters (1 %, 5 % + 1 ms as in
/// ledger.rs).
#[test]
fn io_wakeups_without_the_hook_match_delay_accounting() {
    if !root_or_skip("io_wakeups_without_the_hook_match_delay_accounting") {
        return;
    }
    let _serial = serial();
    let _beside = load_beside();
    // Delay accounting on before the ledgers load, as every command does.
    let _delayacct = DelayAcct::enable().expect("switch delay accounting on");
    let ledger = Ledger::attach().expect("attach the ledger");
    assert!(
        !ledger.wake_latency_measured(),
        "the default ledger loads sched_wakeup"
    );
    let hooked = Ledger::attach_with(&AttachOptions {
        wake_latency: true,
        ..Default::default()
    })
    .expect("attach the hooked ledger");
    let taskstats = TaskstatsClient::connect().expect("taskstats");
    let run = io_wake_run(&[&ledger, &hooked], Some(&taskstats));
    let (w, k, h) = (
        &run.windows[0],
        &run.process(0).kernel,
        &run.process(1).kernel,
    );
    let (cpu, wait) = (run.cpu_ns, run.run_delay_ns);
    let (blkio, recorded) = run.blkio.expect("taskstats asked for");
    eprintln!(
        "pid {} fixture said {}ledger {k:?}\nhooked {h:?}\nschedstat Δcpu {cpu} Δrun_delay {wait}; taskstats Δblkio {blkio} ns over {recorded} waits\nlost: {:?}\nhooked lost: {:?}",
        run.pid, run.said, w.lost, run.windows[1].lost
    );
    let window = run.window_ns;
    // A few unrecorded waits (sleeps on stdin are wake-ups too, and a
    // deferred dequeue now and then) weigh ≈ 25 µs each: within the bound.
    // A wait recorded from a stale start counts, besides itself, the
    // previous wait and the running and run-queue time between: the
    // thread's time in the window is on-CPU + run-queue wait + sleep, so
    // blkio beyond window − on-CPU − run-queue wait (less this bound's own
    // slack) shows one. Seen once beside two CPU burners and a disk
    // writer: 986 ms of blkio over 2 041 waits, while on-CPU 390 ms and
    // run-queue wait 1 116 ms left at most ~60 ms of sleep in the window
    // (both ledgers: 50 ms).
    let sleep_room = window - cpu - wait;
    let stale = blkio > sleep_room + 0.02 * blkio + 4e6;
    if h.wakeups.saturating_sub(recorded) <= 16 && blkio <= window && !stale {
        // Delay accounting is what iowait_ns is defined against: where it
        // recorded the waits it is the reference, and the hooked ledger,
        // whose waits end later by the wake-up's IPI (beside the load, 10.6
        // µs a wait was seen: 143.4 ms against this ledger's 121.6 ms and
        // taskstats' 122.5 ms), is only shown.
        assert!(
            within(k.iowait_ns as f64, blkio, 0.02, 4e6),
            "iowait_ns {} vs taskstats blkio_delay_total {blkio}",
            k.iowait_ns
        );
    } else {
        eprintln!(
            "taskstats not compared: delay accounting recorded {recorded} of {} waits, {blkio} ns{}; the hooked ledger is the reference",
            h.wakeups,
            if stale {
                format!(
                    ", more than the {sleep_room} ns the window leaves beside on-CPU and run-queue wait (a stale start)"
                )
            } else {
                String::new()
            }
        );
        // Both ledgers split the same stretches, switch-out to switch-in,
        // into the wait and the wake latency after it: the sums agree up
        // to the two windows' edges (0.1–0.3 ms in four runs beside the
        // load), allowed 1 % + 2 ms.
        let (ks, hs) = (
            (k.iowait_ns + k.wake_latency_ns) as f64,
            (h.iowait_ns + h.wake_latency_ns) as f64,
        );
        assert!(
            within(ks, hs, 0.01, 2e6),
            "iowait + wake latency {ks} vs the hooked ledger's {hs}"
        );
        // Where the split falls. A recorded wait ends where delay
        // accounting ends it, before the hooked ledger's tracepoint on the
        // target CPU by the wake-up's IPI (10.6 µs a wait seen beside the
        // load, module comment): below, the bound this comparison always
        // had (5 % or 20 ms, the larger), or 15 µs a recorded wait where
        // that is more (−7.6 to −14.6 ms in three runs beside the load).
        // An unrecorded wait ends at the wake-up's enqueue by the rq clock,
        // also when the wake-up preempted the CPU's current task and the
        // kernel skipped the clock's update (by the CPU's offset between
        // the two clocks: docs/ledger.md): above, only what the offset
        // leaves (sub-microsecond a wait) and the windows' edges, 2 % or
        // 5 ms, the larger (at most +0.7 ms in four runs). Before that
        // case was placed, its resched stayed in the wait: +21.6 ms over
        // 1 488 unrecorded waits in one run beside the load.
        let (kw, hw) = (k.iowait_ns as f64, h.iowait_ns as f64);
        let below = (0.05 * hw).max(20e6).max(15e3 * recorded as f64);
        assert!(
            kw >= hw - below && kw <= hw + (0.02 * hw).max(5e6),
            "iowait_ns {kw} vs the hooked ledger's {hw} ({recorded} waits recorded by delay accounting)"
        );
    }
    // This ledger counts a wake-up at the switch-in after it: one the
    // kernel never emitted is repaired and counted in `switches_unseen`.
    let missed = w.lost.switches_unseen;
    common::io_wake::assert_wakeups_match_the_kernel(k.wakeups, missed, &run);
    // The hooked ledger counts a wake-up when it happens, this one at the
    // switch-in after it, and the two images are read one after the other:
    // a wake-up near either end may fall in one window only. The hooked
    // ledger also misses the wake-ups its program did not run for (a
    // wake-up from an interrupt while another BPF program ran on that CPU:
    // the kernel skips a nested program) and says how many in its window's
    // `wakeups_unseen`, machine-wide, so at most that many of this
    // process's. Seen beside two CPU burners and a disk writer: 1 963
    // against 1 958 with 11 unseen. This ledger misses, in the same way,
    // the switch-ins the kernel never emitted (`missed`, above): 2 041
    // against 2 048 with 18 in a CI run.
    let unseen = run.windows[1].lost.wakeups_unseen;
    assert!(
        k.wakeups <= h.wakeups + 2 + unseen && h.wakeups <= k.wakeups + 2 + missed,
        "{} wake-ups against the hooked ledger's {} ({unseen} it did not see, {missed} switches this ledger repaired)",
        k.wakeups,
        h.wakeups
    );
    assert!(
        within(k.on_cpu_ns as f64, cpu, 0.01, 0.0),
        "on_cpu_ns {} vs schedstat {cpu}",
        k.on_cpu_ns
    );
    assert!(
        within(k.runq_wait_ns as f64, wait, 0.05, 1e6),
        "runq_wait_ns {} vs run_delay {wait}",
        k.runq_wait_ns
    );
    assert!(
        k.iowait_own_ns <= k.iowait_ns,
        "own-I/O time {} beyond the iowait {}",
        k.iowait_own_ns,
        k.iowait_ns
    );
    assert_eq!(w.lost.losses(), 0, "lost: {:?}", w.lost);
    assert_eq!(
        w.lost.wakeups_unseen, 0,
        "without the hook no wake-up is 'unseen'"
    );
}

/// `attach --wake-latency` loads the wake-up program: the JSON has a
/// number for every process's `wake_latency_ns`, `sched_wakeup` appears in
/// the probes' cost with as many runs as it handled, and the text summary
/// gives the total. (Without the flag: null, see attach_cli.rs.)
#[test]
fn attach_wake_latency_reports_the_measure() {
    if !root_or_skip("attach_wake_latency_reports_the_measure") {
        return;
    }
    let _serial = serial();
    let json = temp_path("attach-wake-latency.json");
    let (code, out, err) = ttp(&[
        "attach",
        "--all",
        "--duration",
        "2s",
        "-q",
        "--wake-latency",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "attach --wake-latency failed: {err}");
    let v = json_file(&json);
    let _ = std::fs::remove_file(&json);
    let procs = v["processes"].as_array().unwrap();
    assert!(
        procs
            .iter()
            .all(|p| p["kernel"]["wake_latency_ns"].is_u64()),
        "a process without wake_latency_ns"
    );
    let total: u64 = procs
        .iter()
        .map(|p| p["kernel"]["wake_latency_ns"].as_u64().unwrap())
        .sum();
    assert!(total > 0, "no wake latency over 2 s of the whole machine");
    let wakeup_runs = v["probe_cost"]["programs"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["program"] == "sched_wakeup"))
        .map(|p| p["runs"].as_u64().unwrap_or(0));
    assert!(
        wakeup_runs.is_some_and(|r| r > 0),
        "sched_wakeup not in probe_cost: {}",
        v["probe_cost"]
    );
    assert!(
        out.contains("wake latency (wall clock"),
        "text summary without wake latency:\n{out}"
    );
}

/// The per-CPU iowait count without the hook: lowered at the switch-in of
/// the task that waited, so it comes back to 0 once the I/O fixture is
/// done, and the ledger's per-CPU iowait stays within the kernel's. A
/// count left up would book every later idle moment of its CPU as iowait.
#[test]
fn iowait_count_drops_at_the_switch_in() {
    if !root_or_skip("iowait_count_drops_at_the_switch_in") {
        return;
    }
    let _serial = serial();
    let ledger = Ledger::attach_with(&AttachOptions::default()).expect("attach the ledger");
    let mut fx = Held::start(
        "fixture-mixed",
        &["--cpu-ms", "0", "--read-mib", "4", "--block-kib", "4"],
    );
    fx.wait_asleep();
    fx.go();
    let _ = fx.line_then_asleep();
    fx.finish();
    // The fixture is done: the ledger's count of tasks in iowait on every
    // CPU may not exceed the tasks the kernel has blocked now.
    let snap = ledger.snapshot().expect("snapshot");
    let counted: u64 = snap.cpus.iter().map(|(_, c)| c.nr_iowait).sum();
    let blocked = procs_blocked();
    assert!(
        counted <= blocked + 1,
        "ledger counts {counted} tasks in iowait, the kernel has {blocked} blocked"
    );
}

/// `procs_blocked` of /proc/stat: tasks in uninterruptible sleep now.
fn procs_blocked() -> u64 {
    std::fs::read_to_string("/proc/stat")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("procs_blocked ")?.trim().parse().ok())
        .unwrap_or(0)
}

/// `iowait_own_ns` beside a disk writer, against perf's record of the
/// same block and scheduler tracepoints (tests/common/perf_own.rs: the
/// ledger's definition applied offline to the raw events, no eBPF).
/// Catches an own-I/O clock that runs at the wrong rate while the disk is
/// shared, or is read at the wrong end of a wait: while requests whose
/// `block_io_done` never came (or whose lock was given up) stayed in
/// service for good, the ledgers read 10–41 ms against perf's 37–70 ms
/// (docs/ledger.md).
/// Bound: this ledger ends a wait at the wake-up (delay accounting's
/// instant, at the waker, a few µs before `sched_wakeup`) but reads the
/// own-I/O clock at the switch-in, each wait's own time capped at the
/// wait, so it lies between perf's own time up to the wake-up and perf's
/// own time up to the switch-in capped the same way. Each side gets
/// 5 % + 2 ms for the stretch between the waker and `sched_wakeup`
/// (≤ 10 µs a wait at rate 1/n, n ≥ 2 with the writer's request in
/// service: a few ms over 2 048 waits), and for the lock the own clock
/// gives up on (counted in lock_contended, printed). The load beside and
/// other work on the machine change n, which both readings see alike.
#[test]
fn iowait_own_beside_a_writer_matches_perf() {
    if !root_or_skip("iowait_own_beside_a_writer_matches_perf") {
        return;
    }
    let _serial = serial();
    let _beside = load_beside();
    let _delayacct = DelayAcct::enable().expect("switch delay accounting on");
    let ledger = Ledger::attach().expect("attach the ledger");
    let hooked = Ledger::attach_with(&AttachOptions {
        wake_latency: true,
        ..Default::default()
    })
    .expect("attach the hooked ledger");
    let Some(perf) = common::perf_own::PerfRecord::start() else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("perf is needed: apt-get install linux-perf");
        }
        eprintln!(
            "SKIPPED iowait_own_beside_a_writer_matches_perf: perf not installed (apt-get install linux-perf)"
        );
        return;
    };
    let run = io_wake_run(&[&ledger, &hooked], None);
    let truth = common::perf_own::own_truth(&perf.stop(), run.pid);
    let (k, h) = (&run.process(0).kernel, &run.process(1).kernel);
    eprintln!(
        "perf {truth:?}\nledger iowait {} own {} device {} (lost {:?})\nhooked iowait {} own {}",
        k.iowait_ns,
        k.iowait_own_ns,
        k.io.device_ns,
        run.windows[0].lost,
        h.iowait_ns,
        h.iowait_own_ns
    );
    let own = k.iowait_own_ns as f64;
    // perf is a reference that can lose events: its ring fills while the
    // load beside keeps the machine busy (a fresh-clone CI run recorded
    // 1 725 waits of 2 048 reads, 771 requests without their done). Then
    // the ledger is held to the hooked ledger, another program set over
    // the same waits, within the 5 % + 20 ms its derivation gives
    // (io_wakeups_without_the_hook_match_delay_accounting), and the loss
    // is said; it never fails the test on its own. The waits perf should
    // have are the kernel's voluntary switches of the window less the last
    // sleep on stdin (not in iowait); how many reads slept at all is the
    // kernel's choice (common::io_wake), so that is the count held to.
    let slept = run.voluntary.saturating_sub(1);
    if truth.waits + 2 < slept {
        let hooked = h.iowait_own_ns as f64;
        eprintln!(
            "REFERENCE LOST EVENTS: perf recorded {} iowait waits of the {slept} the kernel counted ({READS} reads, {} requests never done): iowait_own_ns held to the hooked ledger's {hooked} instead",
            truth.waits, truth.never_done
        );
        assert!(
            within(own, hooked, 0.05, 20e6),
            "iowait_own_ns {own} vs the hooked ledger's {hooked} (perf lost events: {truth:?})"
        );
        return;
    }
    let (lo, hi) = (
        truth.to_wakeup_ns * 0.95 - 2e6,
        truth.to_switch_in_capped_ns * 1.05 + 2e6,
    );
    // The kernel does not emit block_io_done for every request: perf's
    // reading leaves such a request out (`never_done`), the ledger keeps it
    // in service until its struct request is reused
    // (`requests_ended_at_reuse`), and says its own-I/O figure is then
    // approximate (docs/ledger.md). A loaded CI run read 120.3 ms against
    // perf's bound of 106.1 ms with 3 such requests (hooked ledger 124.4
    // ms). Outside perf's bound with such ends, the ledger is held to the
    // hooked ledger, as for a reference that lost events, and it is said.
    let reused = run.windows[0].lost.requests_ended_at_reuse;
    if (own < lo || own > hi) && reused > 0 && truth.never_done > 0 {
        let hooked = h.iowait_own_ns as f64;
        eprintln!(
            "COMPLETIONS THE KERNEL NEVER EMITTED: {} requests perf saw never done, {reused} ended at reuse by the ledger; iowait_own_ns {own} outside perf's [{lo}, {hi}], held to the hooked ledger's {hooked} instead",
            truth.never_done
        );
        assert!(
            within(own, hooked, 0.05, 20e6),
            "iowait_own_ns {own} vs the hooked ledger's {hooked} ({reused} ends at reuse; {truth:?})"
        );
        return;
    }
    assert!(
        own >= lo && own <= hi,
        "iowait_own_ns {own} outside perf's [{lo}, {hi}] ({truth:?})"
    );
}
