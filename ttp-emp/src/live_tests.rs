use std::{sync::mpsc::channel, time::Duration};

use super::*;
use ttp_ledger::{
    accounts::{LedgerColumns, ProcessDelta, Window},
    collect::taskstats::{Origin, Taskstats},
};
use ttp_window::window::record::{Measures, ProcessMeasures, QeRecord};

/// A taskstats record as the kernel lays it out (include/uapi/linux/
/// taskstats.h, version 14): cpu_run_virtual_total at byte 72, ac_pid 128,
/// ac_etime 144, ac_utime 152, ac_stime 160, ac_tgid 368. The runtime is
/// made 500 ns more than utime + stime so the two sums differ.
fn ts(scope: Scope, id: u32, tgid: u32, utime_us: u64, stime_us: u64) -> TaskstatsRecord {
    let mut b = vec![0u8; 400];
    b[0..2].copy_from_slice(&14u16.to_ne_bytes());
    let runtime_ns = (utime_us + stime_us) * 1_000 + 500;
    b[72..80].copy_from_slice(&runtime_ns.to_ne_bytes());
    b[128..132].copy_from_slice(&id.to_ne_bytes());
    b[144..152].copy_from_slice(&1_000u64.to_ne_bytes());
    b[152..160].copy_from_slice(&utime_us.to_ne_bytes());
    b[160..168].copy_from_slice(&stime_us.to_ne_bytes());
    b[368..372].copy_from_slice(&tgid.to_ne_bytes());
    let origin = Origin {
        exit: true,
        delayacct_on: false,
    };
    TaskstatsRecord {
        scope,
        id,
        stats: Taskstats::decode(&b, scope, origin).expect("valid record"),
    }
}

fn proc(
    pid: u32,
    comm: &str,
    class: ProcessClass,
    on_cpu_ns: u64,
    stopped: bool,
) -> ProcessMeasures {
    ProcessMeasures {
        pid: Some(pid),
        start_time_ns: Some(0),
        comm: comm.into(),
        class,
        stopped,
        m: Measures {
            ledger: LedgerColumns {
                on_cpu_ns: Some(on_cpu_ns),
                ..Default::default()
            },
            ..Default::default()
        },
    }
}

/// A run of a program (pid 100, three threads; its child 101, one thread)
/// beside a daemon (200), the tool (50) and an idle process (300).
fn outcome(records: Vec<TaskstatsRecord>) -> QeOutcome {
    let mut rec = QeRecord::new(1, 150.0);
    rec.time_meas_ns = Some(150_000_123);
    rec.exit_code = Some(0);
    rec.processes = vec![
        proc(100, "prog", ProcessClass::Query, 120_000_000, true),
        proc(101, "prog-child", ProcessClass::Query, 20_000_000, true),
        proc(200, "rhn_check", ProcessClass::Daemon, 7_000_000, false),
        proc(50, "ttp-ebpf", ProcessClass::Executor, 3_000_000, false),
        proc(300, "idle-daemon", ProcessClass::Daemon, 0, false),
    ];
    let mut w = Window {
        start_ns: 5_000_000_000,
        end_ns: 5_160_000_000,
        ..Default::default()
    };
    for (pid, threads) in [(100, 3), (101, 1), (200, 1), (50, 2)] {
        w.processes.insert(
            pid,
            ProcessDelta {
                tgid: pid,
                threads,
                ..Default::default()
            },
        );
    }
    QeOutcome {
        t0_ns: 0,
        t1_ns: 0,
        record: rec,
        window: w,
        taskstats_exits: records,
    }
}

/// Every exit record of the program: threads 100, 102, 103 of process 100
/// and its group record, process 101, plus a daemon's exit.
fn all_records() -> Vec<TaskstatsRecord> {
    vec![
        ts(Scope::Task, 102, 100, 40_000, 1_000),
        ts(Scope::Task, 103, 100, 36_000, 0),
        ts(Scope::Task, 200, 200, 9_000, 0),
        ts(Scope::Task, 101, 101, 16_000, 4_000),
        ts(Scope::Task, 100, 100, 40_000, 3_000),
        ts(Scope::ThreadGroup, 100, 100, 0, 0),
    ]
}

/// PT = Σ (ac_utime + ac_stime) over the program's threads:
/// (40 + 1) + 36 + (40 + 3) + (16 + 4) ms = 140,000 µs. Catches a missing
/// thread or child process, a daemon's record counted, or the group
/// record counted on top of its threads.
#[test]
fn taskstats_pt_sums_every_thread_of_the_program() {
    let o = outcome(all_records());
    assert_eq!(program_taskstats_us(&o), Some(140_000));
    // Four program threads, each 500 ns above its utime + stime.
    assert_eq!(program_runtime_ns(&o), Some(140_002_000));
}

/// A record seen twice (the same thread id) counts once. Catches PT
/// doubled by a repeated hand-over.
#[test]
fn a_duplicated_record_counts_once() {
    let mut r = all_records();
    r.push(ts(Scope::Task, 103, 100, 36_000, 0));
    assert_eq!(program_taskstats_us(&outcome(r)), Some(140_000));
}

/// Without the thread-group record of the multi-threaded process, or
/// without the child's record, the sum is unknown, not smaller. Catches a
/// partial sum reported as the PT.
#[test]
fn missing_records_make_taskstats_pt_absent() {
    let no_group: Vec<_> = all_records()
        .into_iter()
        .filter(|r| r.scope != Scope::ThreadGroup)
        .collect();
    assert!(!taskstats_complete(&outcome(vec![]), &no_group));
    assert_eq!(program_taskstats_us(&outcome(no_group.clone())), None);
    assert_eq!(program_runtime_ns(&outcome(no_group)), None);
    let no_child: Vec<_> = all_records().into_iter().filter(|r| r.id != 101).collect();
    assert_eq!(program_taskstats_us(&outcome(no_child)), None);
}

/// A program process still running when the run ended owes its record for
/// later: no waiting, no taskstats PT. Catches a 1 s stall per run on
/// programs that leave a process behind.
#[test]
fn a_running_program_process_is_not_waited_for() {
    let mut o = outcome(vec![]);
    o.record.processes[1].stopped = false;
    let (tx, rx) = channel();
    let t0 = std::time::Instant::now();
    assert!(!await_program_exits(&mut o, &rx, Duration::from_secs(5)));
    assert!(t0.elapsed() < Duration::from_secs(1));
    drop(tx);
}

/// Records the listener hands over after the QE ended are picked up, the
/// daemon's too (kept, not used). Catches late records being missed, which
/// would leave taskstats PT absent on a loaded machine.
#[test]
fn late_records_are_awaited() {
    let mut o = outcome(vec![]);
    let (tx, rx) = channel();
    let mut recs = all_records();
    let late = recs.split_off(3);
    for r in recs {
        tx.send(r).unwrap();
    }
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        for r in late {
            tx.send(r).unwrap();
        }
    });
    assert!(await_program_exits(&mut o, &rx, Duration::from_secs(5)));
    sender.join().unwrap();
    assert_eq!(program_taskstats_us(&o), Some(140_000));
    assert_eq!(o.taskstats_exits.len(), 6);
}

/// Ledger PT is the program's processes' on-CPU time (120 + 20 ms); the
/// daemons are every other process that ran, the tool included, with their
/// own on-CPU time. Catches the program counted as a daemon, the tool left
/// out, or idle processes listed.
#[test]
fn ledger_pt_and_daemons_are_split_by_class() {
    let o = outcome(all_records());
    assert_eq!(program_on_cpu_ns(&o), Some(140_000_000));
    let d = daemon_executions(&o);
    let names: Vec<(&str, u32, u64)> = d
        .iter()
        .map(|d| (d.name.as_str(), d.pid, d.pt_ns))
        .collect();
    assert_eq!(
        names,
        [("rhn_check", 200, 7_000_000), ("ttp-ebpf", 50, 3_000_000)]
    );
}

/// Failed and incomplete runs are flagged with the reason. Catches a
/// crashed or killed program being averaged in, or lost ledger records
/// ignored.
#[test]
fn failures_and_losses_are_flagged() {
    let mut o = outcome(vec![]);
    assert_eq!(run_flags(&o, false), RunFlags::default());
    o.record.exit_code = Some(3);
    assert_eq!(
        run_flags(&o, false).failed.as_deref(),
        Some("exit status 3")
    );
    o.record.exit_code = None;
    o.record.signal = Some(9);
    assert_eq!(
        run_flags(&o, false).failed.as_deref(),
        Some("killed by signal 9")
    );
    o.record.timed_out = Some(true);
    assert_eq!(
        run_flags(&o, false).failed.as_deref(),
        Some("timed out (killed)")
    );
    o.window.lost.exit_records_lost = 2;
    o.window.vanished_threads = 1;
    let f = run_flags(&o, true);
    assert_eq!(f.lost_records, 3);
    assert!(f.warm_up);
}

/// The run carries ET from Time_meas in ns and its start relative to the
/// first run. Catches ms/ns slips and offsets from the wrong origin.
#[test]
fn run_has_et_and_start_offset() {
    let o = outcome(all_records());
    let r = emp_run(4, &o, 4_000_000_000, false);
    assert_eq!(r.index, 4);
    assert_eq!(r.et_ns, 150_000_123);
    assert_eq!(r.start_offset_ns, Some(1_000_000_000));
    assert_eq!(r.pt.taskstats_us, Some(140_000));
    assert_eq!(r.pt.ledger_on_cpu_ns, Some(140_000_000));
    assert_eq!(r.pt.runtime_ns, Some(140_002_000));
    assert_eq!(r.daemons.len(), 2);
}
