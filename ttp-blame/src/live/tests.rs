//! The live source's arithmetic on constructed ledger and detail reads,
//! against values worked out by hand (no root, no kernel).
use std::collections::{BTreeMap, HashMap};

use ttp_common::{
    CpuAccount, DiskAccount, ExitRecord, ThreadAccount,
    detail::{DeviceIo, MemStall, ThreadCpu, ThreadCpuKey, ThreadDevIo, ThreadDevKey},
    state,
};

use super::edge::{Edge, Naming, Open, PerCpu, UNKNOWN_DEVICE, per_cpu_delta, to_window};
use ttp_ledger::{
    accounts::ThreadKey,
    probe::{DetailSnapshot, KernelStats, Snapshot},
};

const MS: u64 = 1_000_000;
/// vda's kernel dev_t (254:0).
const VDA: u32 = 254 << 20;
const VDB: u32 = (254 << 20) | 16;

fn open(cpu: u32, since_ns: u64, at: u64) -> Option<Open> {
    Some(Open {
        cpu,
        since_ns,
        ns: at - since_ns,
    })
}

fn closed(pairs: &[(u32, u64)]) -> BTreeMap<u32, u64> {
    pairs.iter().copied().collect()
}

/// An interval open at both edges adds only its growth; closed counters add
/// what they grew by. Catches an open run charged twice (its whole length
/// again at each edge).
#[test]
fn open_interval_adds_its_growth() {
    let prev = PerCpu {
        closed: closed(&[(0, 10 * MS)]),
        open: open(1, 100 * MS, 130 * MS),
        debt_ns: 0,
    };
    let mut cur = PerCpu {
        closed: closed(&[(0, 14 * MS)]),
        open: open(1, 100 * MS, 180 * MS),
        debt_ns: 0,
    };
    let d = per_cpu_delta(Some(&prev), &mut cur);
    assert_eq!(d, closed(&[(0, 4 * MS), (1, 50 * MS)]));
    assert_eq!(cur.debt_ns, 0);
}

/// A wait open at the last edge (30 ms charged to cpu1) that ended 15 ms
/// into this window shows up in the closed counter in full (45 ms): only
/// 15 ms are new. Catches the 30 ms being charged a second time.
#[test]
fn closed_interval_pays_what_was_charged_while_open() {
    let prev = PerCpu {
        closed: closed(&[(1, 0)]),
        open: open(1, 100 * MS, 130 * MS),
        debt_ns: 0,
    };
    let mut cur = PerCpu {
        closed: closed(&[(1, 45 * MS)]),
        open: None,
        debt_ns: 0,
    };
    assert_eq!(
        per_cpu_delta(Some(&prev), &mut cur),
        closed(&[(1, 15 * MS)])
    );
    assert_eq!(cur.debt_ns, 0);
}

/// A wait charged to cpu0 while open (20 ms) that was switched in on cpu1
/// (35 ms closed there): the owed 20 ms come out of cpu1, the CPU that grew.
/// Catches time lost or doubled when a wait migrates.
#[test]
fn migrated_wait_keeps_the_total() {
    let prev = PerCpu {
        closed: closed(&[(0, 5 * MS)]),
        open: open(0, 80 * MS, 100 * MS),
        debt_ns: 0,
    };
    let mut cur = PerCpu {
        closed: closed(&[(0, 5 * MS), (1, 35 * MS)]),
        open: None,
        debt_ns: 0,
    };
    let d = per_cpu_delta(Some(&prev), &mut cur);
    assert_eq!(d, closed(&[(1, 15 * MS)]));
    // Across the two edges, 20 + 15 = 35 ms: the wait's real length.
}

/// The ledger was read just after a wait closed but the detail had not yet
/// counted it: the 30 ms charged while open are owed until the closed
/// total appears one edge later. Catches an owed amount dropped (time
/// doubled) or taken from an unrelated CPU's closed time.
#[test]
fn debt_waits_for_the_closed_total() {
    let prev = PerCpu {
        closed: closed(&[(1, 0)]),
        open: open(1, 100 * MS, 130 * MS),
        debt_ns: 0,
    };
    let mut mid = PerCpu {
        closed: closed(&[(1, 0)]),
        open: None,
        debt_ns: 0,
    };
    assert!(per_cpu_delta(Some(&prev), &mut mid).is_empty());
    assert_eq!(mid.debt_ns, 30 * MS);
    let mut last = PerCpu {
        closed: closed(&[(1, 40 * MS)]),
        open: None,
        debt_ns: 0,
    };
    assert_eq!(
        per_cpu_delta(Some(&mid), &mut last),
        closed(&[(1, 10 * MS)])
    );
    assert_eq!(last.debt_ns, 0);
}

fn account(tid: u32, tgid: u32, st: u32, since: u64) -> ThreadAccount {
    let mut a = ThreadAccount::zeroed();
    a.tid = tid;
    a.tgid = tgid;
    a.start_time_ns = 7;
    a.state = st;
    a.state_since_ns = since;
    a
}

fn snapshot(at: u64, threads: Vec<ThreadAccount>, cpu0_idle_ns: u64) -> Snapshot {
    Snapshot {
        at_ns: at,
        threads,
        cpus: vec![(
            0,
            CpuAccount {
                valid: 1,
                idle: 0,
                since_ns: at,
                idle_ns: cpu0_idle_ns,
                ..Default::default()
            },
        )],
        disk: DiskAccount::default(),
        proc_disk: HashMap::new(),
        stats: KernelStats::default(),
        irq: Vec::new(),
    }
}

fn cpu_entry(
    tid: u32,
    cpu: u32,
    on: u64,
    runq: u64,
    running: u64,
    last_in: u64,
) -> (ThreadCpuKey, ThreadCpu) {
    (
        ThreadCpuKey { tid, cpu },
        ThreadCpu {
            start_time_ns: 7,
            on_cpu_ns: on,
            runq_wait_ns: runq,
            running_since_ns: running,
            switched_in_ns: last_in,
        },
    )
}

fn dev_entry(tid: u32, dev: u32, bytes: u64, requests: u64) -> (ThreadDevKey, ThreadDevIo) {
    (
        ThreadDevKey { tid, dev },
        ThreadDevIo {
            start_time_ns: 7,
            io: DeviceIo { bytes, requests },
        },
    )
}

fn key(tid: u32) -> ThreadKey {
    ThreadKey { tid, start: 7 }
}

/// Two edges 50 ms apart, every value chosen by hand:
/// - thread 10 (the victim) ran 20 ms on cpu0 (closed), waited 10 ms there
///   (closed), was in iowait 15 ms, completed 1 MiB in 8 requests on vda,
///   and has been in direct reclaim since 5 ms before the edge;
/// - thread 20 runs on cpu0 since 20 ms before the edge (open, from the
///   detail's running mark) and completed 3 MiB on vda and 1 MiB on vdb;
/// - thread 30 runs since 5 ms before the first edge, from before the
///   detail was loaded (only the ledger knows it; /proc has it on cpu0), so
///   all 50 ms of the window are its;
/// - 0.5 MiB completed on vda without an owner; cpu0 was idle 0 ms.
///
/// Catches: open intervals not closed at the edge, the ledger's open run
/// used where the detail knows better, device totals that are not threads
/// plus unowned, iowait charged to the wrong device, idle not taken from
/// the CPU account.
#[test]
fn window_from_two_edges() {
    let t0 = 1_000 * MS;
    let t1 = t0 + 50 * MS;
    let victim = account(10, 10, state::SLEEPING, t0);
    let mut burner = account(20, 20, state::RUNNING, t1 - 20 * MS);
    burner.state_since_ns = t1 - 20 * MS;
    let old = account(30, 30, state::RUNNING, t0 - 5 * MS);
    let mut task_cpu = |_: u32, tid: u32| (tid == 20 || tid == 30).then_some(0);
    let s0 = snapshot(
        t0,
        vec![victim, account(20, 20, state::RUNNABLE, t0), old],
        0,
    );
    let d0 = DetailSnapshot {
        at_ns: t0,
        thread_cpu: vec![cpu_entry(10, 0, 0, 0, 0, 0), cpu_entry(20, 0, 0, 0, 0, 0)],
        ..Default::default()
    };
    let e0 = Edge::build(&s0, &d0, &[], &mut task_cpu);
    // At the first edge thread 30's run is open since t0 − 5 ms (the ledger
    // fallback) and thread 20's wait is open since t0.
    assert_eq!(e0.threads[&key(30)].on_cpu.open, open(0, t0 - 5 * MS, t0));

    let mut v1 = victim;
    v1.iowait_ns = 15 * MS;
    let s1 = snapshot(t1, vec![v1, burner, old], 0);
    let d1 = DetailSnapshot {
        at_ns: t1,
        thread_cpu: vec![
            cpu_entry(10, 0, 20 * MS, 10 * MS, 0, t0 + 30 * MS),
            cpu_entry(20, 0, 0, 30 * MS, t1 - 20 * MS, t1 - 20 * MS),
        ],
        thread_dev: vec![
            dev_entry(10, VDA, 1 << 20, 8),
            dev_entry(20, VDA, 3 << 20, 24),
            dev_entry(20, VDB, 1 << 20, 8),
        ],
        unowned: vec![(
            VDA,
            DeviceIo {
                bytes: 512 << 10,
                requests: 4,
            },
        )],
        mem: vec![(
            10,
            MemStall {
                start_time_ns: 7,
                since_ns: t1 - 5 * MS,
                stall_ns: 2 * MS,
                depth: 1,
                _pad: 0,
            },
        )],
        ..Default::default()
    };
    let mut e1 = Edge::build(&s1, &d1, &[], &mut task_cpu);
    e1.hold_max(&e0);
    let ids: HashMap<ThreadKey, u32> = [(key(10), 1), (key(20), 2), (key(30), 3)].into();
    let mut last_device = HashMap::new();
    let w = to_window(
        &e0,
        &mut e1,
        Naming {
            task_id: &mut |k| ids[k],
            device: &mut |d| if d == VDA { "vda".into() } else { "vdb".into() },
            last_device: &mut last_device,
        },
    );
    assert_eq!((w.start_ns, w.end_ns), (t0, t1));
    let tw = |id: u32| w.tasks.iter().find(|t| t.task == id).unwrap();
    let v = tw(1);
    assert_eq!(v.on_cpu_ns, BTreeMap::from([(0, 20 * MS)]));
    assert_eq!(v.runq_wait_ns, BTreeMap::from([(0, 10 * MS)]));
    assert_eq!(v.iowait_ns, BTreeMap::from([("vda".to_string(), 15 * MS)]));
    assert_eq!(v.disk_bytes["vda"], 1 << 20);
    assert_eq!(v.mem_stall_ns, 7 * MS);
    // Thread 20: 30 ms of wait closed at its switch-in (its open wait was
    // charged from t0, so 0 of it was owed), 20 ms on CPU still open.
    let b = tw(2);
    assert_eq!(b.on_cpu_ns, BTreeMap::from([(0, 20 * MS)]));
    assert_eq!(b.runq_wait_ns, BTreeMap::from([(0, 30 * MS)]));
    // Thread 30 ran on through the whole window (ledger fallback).
    assert_eq!(tw(3).on_cpu_ns, BTreeMap::from([(0, 50 * MS)]));
    let dev = |n: &str| w.devices.iter().find(|d| d.device == n).unwrap();
    assert_eq!(dev("vda").bytes, Some((1 << 20) + (3 << 20) + (512 << 10)));
    assert_eq!(dev("vda").requests, Some(8 + 24 + 4));
    assert_eq!(dev("vdb").bytes, Some(1 << 20));
    assert_eq!(w.cpus.len(), 1);
    assert_eq!(w.cpus[0].idle_ns, Some(0));
    assert_eq!(last_device[&10], VDA);
}

/// The victim in iowait with no request of its own completing: charged to
/// the device it last used; a process that never did I/O, in a window
/// where nothing completed, to the unknown device; one with requests on
/// two devices, evenly. Catches iowait dropped when no device is evident.
#[test]
fn iowait_device_when_nothing_of_its_own_completed() {
    let t0 = 1_000 * MS;
    let t1 = t0 + 50 * MS;
    let mut a = account(10, 10, state::SLEEPING, t0);
    let mut b = account(11, 11, state::SLEEPING, t0);
    let c = account(12, 12, state::SLEEPING, t0);
    let no_cpu = &mut |_: u32, _: u32| None;
    let e0 = Edge::build(
        &snapshot(t0, vec![a, b, c], 0),
        &DetailSnapshot {
            at_ns: t0,
            thread_dev: vec![dev_entry(12, VDA, 4096, 1), dev_entry(12, VDB, 4096, 1)],
            ..Default::default()
        },
        &[],
        no_cpu,
    );
    a.iowait_ns = 9 * MS;
    b.iowait_ns = 6 * MS;
    let mut c1 = c;
    c1.iowait_ns = 5 * MS + 1;
    let mut e1 = Edge::build(
        &snapshot(t1, vec![a, b, c1], 0),
        &DetailSnapshot {
            at_ns: t1,
            thread_dev: vec![dev_entry(12, VDA, 8192, 2), dev_entry(12, VDB, 8192, 2)],
            ..Default::default()
        },
        &[],
        no_cpu,
    );
    let mut last_device = HashMap::from([(10, VDB)]);
    let w = to_window(
        &e0,
        &mut e1,
        Naming {
            task_id: &mut |k| k.tid,
            device: &mut |d| if d == VDA { "vda".into() } else { "vdb".into() },
            last_device: &mut last_device,
        },
    );
    let tw = |id: u32| w.tasks.iter().find(|t| t.task == id).unwrap();
    assert_eq!(
        tw(10).iowait_ns,
        BTreeMap::from([("vdb".to_string(), 9 * MS)])
    );
    // Nothing of 11's completed and it has no last device: the device that
    // completed the most bytes (a tie here, broken by the lower dev_t).
    assert_eq!(
        tw(11).iowait_ns,
        BTreeMap::from([("vda".to_string(), 6 * MS)])
    );
    // 12 split evenly, the odd nanosecond to the first device.
    assert_eq!(
        tw(12).iowait_ns,
        BTreeMap::from([
            ("vda".to_string(), 2 * MS + MS / 2 + 1),
            ("vdb".to_string(), 2 * MS + MS / 2)
        ])
    );
    // Without any device at all, iowait is kept under the unknown device.
    let e_none = Edge::build(
        &snapshot(t0, vec![account(13, 13, state::SLEEPING, t0)], 0),
        &DetailSnapshot::default(),
        &[],
        no_cpu,
    );
    let mut d = account(13, 13, state::SLEEPING, t0);
    d.iowait_ns = MS;
    let mut e_none1 = Edge::build(
        &snapshot(t1, vec![d], 0),
        &DetailSnapshot::default(),
        &[],
        no_cpu,
    );
    let w = to_window(
        &e_none,
        &mut e_none1,
        Naming {
            task_id: &mut |k| k.tid,
            device: &mut |_| unreachable!(),
            last_device: &mut HashMap::new(),
        },
    );
    assert_eq!(
        w.tasks[0].iowait_ns,
        BTreeMap::from([(UNKNOWN_DEVICE.to_string(), MS)])
    );
}

/// A thread that exited in the window: its exit record replaces its
/// account, its detail counters still count, and it has no open interval.
/// Catches an exiting thread's last run lost, or charged on after its exit.
#[test]
fn exited_thread_counts_to_its_exit() {
    let t0 = 1_000 * MS;
    let t1 = t0 + 50 * MS;
    let running = account(40, 40, state::RUNNING, t0 - MS);
    let no_cpu = &mut |_: u32, _: u32| Some(0);
    let e0 = Edge::build(
        &snapshot(t0, vec![running], 0),
        &DetailSnapshot {
            at_ns: t0,
            thread_cpu: vec![cpu_entry(40, 0, 0, 0, t0 - MS, t0 - MS)],
            ..Default::default()
        },
        &[],
        no_cpu,
    );
    let mut dead = running;
    dead.state = state::DEAD;
    dead.state_since_ns = t0 + 12 * MS;
    let exit = ExitRecord {
        exit_ns: t0 + 12 * MS,
        account: dead,
    };
    let mut e1 = Edge::build(
        &snapshot(t1, vec![], 38 * MS),
        &DetailSnapshot {
            at_ns: t1,
            thread_cpu: vec![cpu_entry(40, 0, 13 * MS, 0, 0, t0 - MS)],
            ..Default::default()
        },
        &[exit],
        no_cpu,
    );
    let w = to_window(
        &e0,
        &mut e1,
        Naming {
            task_id: &mut |k| k.tid,
            device: &mut |_| String::new(),
            last_device: &mut HashMap::new(),
        },
    );
    // 13 ms closed at its exit, 1 ms of which was charged at the first edge.
    assert_eq!(w.tasks[0].on_cpu_ns, BTreeMap::from([(0, 12 * MS)]));
    assert_eq!(w.cpus[0].idle_ns, Some(38 * MS));
}
