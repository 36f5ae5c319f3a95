//! Closing and windowing on constructed accounts whose answers are known by
//! hand.
use std::collections::HashMap;

use ttp_common::{CpuAccount, DiskAccount, ExitRecord, ProcDisk, ThreadAccount, flag, state};

use super::*;
use crate::probe::{KernelStats, Snapshot};

fn thread(tid: u32, tgid: u32, st: u32, since: u64) -> ThreadAccount {
    let mut a = ThreadAccount::zeroed();
    a.tid = tid;
    a.tgid = tgid;
    a.start_time_ns = 1000 + tid as u64;
    a.state = st;
    a.state_since_ns = since;
    a
}

fn snap(at: u64, threads: Vec<ThreadAccount>) -> Snapshot {
    Snapshot {
        at_ns: at,
        threads,
        cpus: vec![],
        disk: DiskAccount::default(),
        proc_disk: HashMap::new(),
        stats: KernelStats::default(),
        irq: Vec::new(),
    }
}

/// Catches a reader that ignores the open interval: a thread running since
/// t=100 read at t=400 has 300 ns more on CPU than its closed intervals.
#[test]
fn open_interval_is_closed_as_of_the_snapshot() {
    let mut a = thread(7, 7, state::RUNNING, 100);
    a.on_cpu_ns = 50;
    let c = close(&a, &snap(400, vec![]));
    assert_eq!(c.on_cpu_ns, 350);
    let b = thread(8, 8, state::RUNNABLE, 100);
    let b = close(&b, &snap(250, vec![]));
    assert_eq!((b.wake_latency_ns, b.runq_wait_ns), (150, 0));
}

/// Catches wrong share/own arithmetic for an open iowait interval: CPU 1 has
/// been idle with 2 tasks in iowait for 100 ns since its last update (share
/// clock +50), the process's request has been in service alone for 80 ns
/// (own clock +80).
#[test]
fn open_iowait_interval_gets_share_and_own_time() {
    let mut a = thread(9, 9, state::IOWAIT, 1000);
    a.flags = flag::IOWAIT_COUNTED;
    a.iowait_cpu = 1;
    a.share_snap = 10;
    a.own_snap = 17;
    let mut s = snap(1100, vec![]);
    s.cpus = vec![(
        1,
        CpuAccount {
            idle: 1,
            nr_iowait: 2,
            valid: 1,
            since_ns: 1000,
            share_cum_ns: 30,
            ..Default::default()
        },
    )];
    s.disk = DiskAccount {
        busy_procs: 1,
        last_ns: 1020,
        g_cum_ns: 500,
        ..Default::default()
    };
    s.proc_disk.insert(
        9,
        ProcDisk {
            inflight: 1,
            g_snap_ns: 480,
            own_cum_ns: 7,
            ..Default::default()
        },
    );
    let c = close(&a, &s);
    assert_eq!(c.iowait_ns, 100);
    // share clock now = 30 + 100/2 = 80; minus snap 10.
    assert_eq!(c.iowait_share_ns, 70);
    // own clock now = 7 + (500 + 80 − 480) = 107; minus snap 17 (never
    // more than the wait: ttp_common::clocks).
    assert_eq!(c.iowait_own_ns, 90);
}

/// Catches double counting or loss across a window: a thread present in
/// both images contributes its difference; one that exited inside the
/// window contributes its exit record; a reused tid (new start time) is a
/// different thread; an exit after the window is ignored.
#[test]
fn window_combines_images_and_exit_records() {
    let mut t1 = thread(10, 10, state::SLEEPING, 0);
    t1.on_cpu_ns = 100;
    let before = Image::from_snapshot(&snap(1000, vec![t1]));
    let mut t1b = t1;
    t1b.on_cpu_ns = 400;
    t1b.state_since_ns = 2000;
    let mut child = thread(11, 11, state::DEAD, 1500);
    child.on_cpu_ns = 70;
    child.parent_tgid = 10;
    let after = Image::from_snapshot(&snap(2000, vec![t1b]));
    let mut late = child;
    late.start_time_ns = 99_999; // the tid reused later, exiting after the window
    late.on_cpu_ns = 5;
    let exits = [
        ExitRecord {
            exit_ns: 1500,
            account: child,
        },
        ExitRecord {
            exit_ns: 2500,
            account: late,
        },
    ];
    let w = Window::between(&before, &after, &exits);
    assert_eq!(w.processes[&10].kernel.on_cpu_ns, 300);
    assert_eq!(w.processes[&11].kernel.on_cpu_ns, 70);
    assert!(w.processes[&11].exited);
    assert_eq!(w.processes[&11].parent_tgid, Some(10));
    assert_eq!(w.processes.len(), 2);
    assert_eq!(w.descendants(&[10], &HashMap::new()).len(), 2);
}

/// A thread read into the first image that exits before that image's time
/// is taken (the snapshot reads its maps first): its exit record ends it in
/// the window. Catches it counted as vanished, which flags the window as
/// having lost records whenever short-lived processes come and go.
#[test]
fn exit_during_the_first_snapshot_is_not_vanished() {
    let mut t = thread(12, 12, state::SLEEPING, 900);
    t.on_cpu_ns = 40;
    let before = Image::from_snapshot(&snap(1000, vec![t]));
    let after = Image::from_snapshot(&snap(2000, vec![]));
    let mut dead = t;
    dead.state = state::DEAD;
    let exits = [ExitRecord {
        exit_ns: 995,
        account: dead,
    }];
    let w = Window::between(&before, &after, &exits);
    assert_eq!(w.vanished_threads, 0);
    assert!(w.processes[&12].exited);
    // Without the thread in the first image the same record is not the
    // window's.
    let w = Window::between(&Image::from_snapshot(&snap(1000, vec![])), &after, &exits);
    assert!(w.processes.is_empty());
}
