//! Eq. 1–10 on small constructed windows.
use super::*;
use crate::{BlameError, Options};
use ttp_window::window::blame_record::{CauseKind, Resource};

const SEC: u64 = 1_000_000_000;

/// The paper's Examples 3.3–3.4 and Sec. 3.4: three tasks read 30, 60 and
/// 120 bytes in 1 s from a 210 B/s disk; Task1 (the victim) is blocked
/// 1/4 s. Catches any slip in eq. 4, 6, 8 or 10.
#[test]
fn paper_examples_3_3_and_3_4() {
    let tasks = vec![
        proc_task(1, "task1"),
        proc_task(2, "task2"),
        proc_task(3, "task3"),
    ];
    let mut w = window(0, SEC);
    w.devices = vec![device("sda", Some(210), None)];
    w.tasks = vec![
        Tw::new(1).iowait("sda", SEC / 4).io("sda", 30, 1).done(),
        Tw::new(2).io("sda", 60, 1).done(),
        Tw::new(3).io("sda", 120, 1).done(),
    ];
    let report = crate::analyze(&recording(1, SEC, tasks, vec![w]), &Options::default()).unwrap();
    let row = &report.rows[0];
    // Example 3.3: S = 210/30 − 1 = 6 (eq. 4).
    assert!(close(row.slowdown.unwrap(), 6.0));
    // Eq. 2 and 7: RATP = 1 s / 30 B, RATP-blocked = 0.25 s / 30 B.
    assert!(close(row.ratp.unwrap(), SEC as f64 / 30.0));
    assert!(close(row.ratp_blocked.unwrap(), SEC as f64 / 4.0 / 30.0));
    let share = |t| row.shares.iter().find(|s| s.task == Some(t)).unwrap();
    // Example 3.4: β = 60/30 = 2 and 120/30 = 4 (eq. 6).
    assert!(close(share(2).beta.unwrap(), 2.0));
    assert!(close(share(3).beta.unwrap(), 4.0));
    // Eq. 8: (0.25/30) / (1/60) = 0.5 and (0.25/30) / (1/120) = 1.
    assert!(close(share(2).beta_hat.unwrap(), 0.5));
    assert!(close(share(3).beta_hat.unwrap(), 1.0));
    // Eq. 10: the 0.25 s split 1:2.
    assert!(close(share(2).blame_ns, SEC as f64 / 12.0));
    assert!(close(share(3).blame_ns, SEC as f64 / 6.0));
}

/// Only processes on the CPUs where the victim waited take its CPU blame:
/// in window 0 it waits on cpu1 (A runs there), in window 1 on cpu0 (C
/// runs there); each window both run. Catches blame spread over all CPUs.
#[test]
fn cpu_blame_is_scoped_to_the_cpus_waited_on() {
    let tasks = vec![proc_task(1, "victim"), proc_task(2, "a"), proc_task(3, "c")];
    let mk = |i: u64, wait_cpu: u32| {
        let mut w = window(i, 50 * MS);
        w.cpus = vec![cpu(0, Some(0), None), cpu(1, Some(0), None)];
        w.tasks = vec![
            Tw::new(1)
                .on_cpu(wait_cpu, 10 * MS)
                .wait(wait_cpu, 8 * MS)
                .done(),
            Tw::new(2)
                .on_cpu(1, 50 * MS - if wait_cpu == 1 { 10 * MS } else { 0 })
                .done(),
            Tw::new(3)
                .on_cpu(0, 50 * MS - if wait_cpu == 0 { 10 * MS } else { 0 })
                .done(),
        ];
        w
    };
    let rec = recording(1, 50 * MS, tasks, vec![mk(0, 1), mk(1, 0)]);
    let b = blame_by_pid(&crate::analyze(&rec, &Options::default()).unwrap());
    assert!(close(b[&(Some(2), Resource::Cpu)], 8.0 * MS as f64));
    assert!(close(b[&(Some(3), Resource::Cpu)], 8.0 * MS as f64));
    assert!(
        !b.contains_key(&(None, Resource::Cpu)),
        "no unknown: both CPUs fully accounted"
    );
}

/// Blocked time with no consumer at all is unknown, and with the victim
/// consuming nothing the slowdown is undefined rather than infinite or 0.
#[test]
fn no_consumer_means_unknown_and_undefined_slowdown() {
    let mut w = window(0, 50 * MS);
    w.tasks = vec![Tw::new(1).iowait("vda", 30 * MS).done()];
    let rec = recording(1, 50 * MS, vec![proc_task(1, "v")], vec![w]);
    let report = crate::analyze(&rec, &Options::default()).unwrap();
    let disk = &report.resources[1];
    assert_eq!(disk.by_kind[&CauseKind::Unknown], 30.0 * MS as f64);
    assert_eq!(
        (disk.slowdown.rows_defined, disk.slowdown.rows_undefined),
        (0, 1)
    );
    assert!(report.rows[0].ratp_blocked.is_none());
}

/// Steal time on a CPU without idle accounting is the unknown consumer: the
/// victim waited 6 ms on cpu0 where B ran 20 ms and 10 ms were stolen.
#[test]
fn steal_time_is_unknown_consumption() {
    let mut w = window(0, 50 * MS);
    w.cpus = vec![cpu(0, None, Some(10 * MS))];
    w.tasks = vec![
        Tw::new(1).on_cpu(0, 20 * MS).wait(0, 6 * MS).done(),
        Tw::new(2).on_cpu(0, 20 * MS).done(),
    ];
    let rec = recording(
        1,
        50 * MS,
        vec![proc_task(1, "v"), proc_task(2, "b")],
        vec![w],
    );
    let b = blame_by_pid(&crate::analyze(&rec, &Options::default()).unwrap());
    assert!(close(b[&(Some(2), Resource::Cpu)], 4.0 * MS as f64));
    assert!(close(b[&(None, Resource::Cpu)], 2.0 * MS as f64));
}

/// A small deterministic generator (no dependency, same sequence on every
/// run).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// Whatever the windows hold — missing machine counters, a victim that
/// consumed nothing, windows nobody else used, two victim threads — the
/// contributions of every resource add up to its blocked time.
#[test]
fn sums_hold_on_irregular_windows() {
    let mut g = Lcg(7);
    let mut tasks: Vec<TaskInfo> = (2..8).map(|p| proc_task(p, "other")).collect();
    tasks.push(kthread(9, "kswapd0"));
    tasks.push(proc_task(1, "v"));
    let mut second = proc_task(1, "v-worker");
    second.id = 11;
    second.tid = 11;
    tasks.push(second);
    let windows = (0..40)
        .map(|i| {
            let mut w = window(i, 50 * MS);
            for c in 0..2 {
                let idle = (g.next(3) > 0).then(|| g.next(20) * MS);
                let steal = (g.next(2) == 0).then(|| g.next(5) * MS);
                w.cpus.push(cpu(c, idle, steal));
            }
            if g.next(2) == 0 {
                w.devices
                    .push(device("vda", Some(g.next(64) * MIB), Some(g.next(100))));
            }
            for v in [1, 11] {
                w.tasks.push(
                    Tw::new(v)
                        .on_cpu(g.next(2) as u32, g.next(3) * 5 * MS)
                        .wait(g.next(2) as u32, g.next(25) * MS)
                        .iowait(["vda", "vdb"][g.next(2) as usize], g.next(40) * MS)
                        .io("vda", g.next(2) * MIB, g.next(3))
                        .mem(g.next(2) * g.next(5) * MS, g.next(100))
                        .done(),
                );
            }
            for p in (2..8).chain([9]) {
                if g.next(3) == 0 {
                    continue;
                }
                w.tasks.push(
                    Tw::new(p)
                        .on_cpu(g.next(2) as u32, g.next(20) * MS)
                        .io("vda", g.next(8) * MIB, g.next(5))
                        .mem(0, g.next(3) * g.next(50))
                        .done(),
                );
            }
            w
        })
        .collect();
    let rec = recording(1, 50 * MS, tasks, windows);
    let report = crate::analyze(&rec, &Options::default()).unwrap();
    assert!(
        report.rows.len() > 100,
        "the generator must exercise many rows"
    );
    for r in &report.resources {
        let sum: f64 = r.by_kind.values().sum();
        assert!(
            (sum - r.blocked_ns as f64).abs() <= 1e-6 * r.blocked_ns as f64,
            "{:?}: {sum} vs {}",
            r.resource,
            r.blocked_ns
        );
        assert!(r.by_kind.values().all(|v| *v >= 0.0));
    }
    // The two victim threads contend with each other: that blame is `own`.
    assert!(report.resources[0].by_kind[&CauseKind::Own] > 0.0);
    // Every thread's blocked time is bounded by its window here.
    let wait = report
        .checks
        .iter()
        .find(|c| c.name == "victim_blocked_within_window")
        .unwrap();
    assert!(wait.passed());
}

/// `--children`: a grandchild's CPU use is the victim's own, not a
/// concurrent process's.
#[test]
fn children_are_part_of_the_victim() {
    let mut child = proc_task(101, "child");
    child.ppid = Some(100);
    let mut grandchild = proc_task(102, "grandchild");
    grandchild.ppid = Some(101);
    let mut w = window(0, 50 * MS);
    w.cpus = vec![cpu(0, Some(0), None)];
    w.tasks = vec![
        Tw::new(100).on_cpu(0, 10 * MS).wait(0, 10 * MS).done(),
        Tw::new(102).on_cpu(0, 40 * MS).done(),
    ];
    let tasks = vec![proc_task(100, "parent"), child, grandchild];
    let mut rec = recording(100, 50 * MS, tasks, vec![w]);
    let kind = |rec: &Recording| {
        let r = crate::analyze(rec, &Options::default()).unwrap();
        r.culprits.iter().find(|c| c.pid == Some(102)).unwrap().kind
    };
    assert_eq!(kind(&rec), CauseKind::Concurrent);
    rec.victim.children = true;
    assert_eq!(kind(&rec), CauseKind::Own);
}

/// `--known COMM` moves a process from p1 to p2 (Sec. 5.1).
#[test]
fn known_comms_are_known_causes() {
    let mut w = window(0, 50 * MS);
    w.tasks = vec![
        Tw::new(1).iowait("vda", 10 * MS).done(),
        Tw::new(2).io("vda", MIB, 1).done(),
    ];
    let rec = recording(
        1,
        50 * MS,
        vec![proc_task(1, "v"), proc_task(2, "backup-agent")],
        vec![w],
    );
    let opts = Options {
        known_comms: vec!["backup".into()],
        ..Options::default()
    };
    let r = crate::analyze(&rec, &opts).unwrap();
    assert_eq!(r.resources[1].by_kind[&CauseKind::Known], 10.0 * MS as f64);
}

/// Merging windows keeps every counter's total and marks a machine counter
/// missing in one part as missing in the merged window.
#[test]
fn merging_windows_keeps_totals() {
    let mut rec = super::scenario::scenario(|i| i as f64);
    rec.windows[1].devices[0].bytes = None;
    let before = crate::analyze(&rec, &Options::default()).unwrap();
    rec.merge_windows(2);
    assert_eq!((rec.windows.len(), rec.window_ns), (10, 100 * MS));
    assert_eq!(rec.windows[0].devices[0].bytes, None);
    assert_eq!(rec.windows[1].devices[0].bytes, Some(5 * MIB + 7 * MIB));
    assert_eq!(rec.windows[0].cpus[1].idle_ns, Some(86 * MS));
    let after = crate::analyze(&rec, &Options::default()).unwrap();
    for (a, b) in before.resources.iter().zip(&after.resources) {
        assert_eq!(a.blocked_ns, b.blocked_ns);
    }
}

/// Bad recordings are refused with the reason; a missing victim is named.
#[test]
fn invalid_recordings_are_refused() {
    let mut w = window(0, 50 * MS);
    w.tasks = vec![Tw::new(9).done()];
    let rec = recording(1, 50 * MS, vec![proc_task(1, "v")], vec![w.clone()]);
    assert!(matches!(
        crate::analyze(&rec, &Options::default()),
        Err(BlameError::UnknownTask { window: 0, task: 9 })
    ));
    let rec = recording(
        1,
        50 * MS,
        vec![proc_task(1, "v")],
        vec![window(1, 50 * MS), window(0, 50 * MS)],
    );
    assert!(matches!(
        crate::analyze(&rec, &Options::default()),
        Err(BlameError::InvalidRecording { .. })
    ));
    let rec = recording(
        7,
        50 * MS,
        vec![proc_task(1, "v")],
        vec![window(0, 50 * MS)],
    );
    assert!(matches!(
        crate::analyze(&rec, &Options::default()),
        Err(BlameError::NoVictim { pid: 7 })
    ));
    let rec = recording(1, 50 * MS, vec![proc_task(1, "v")], vec![]);
    assert!(matches!(
        crate::analyze(&rec, &Options::default()),
        Err(BlameError::NoWindows)
    ));
}

/// ttp's disk extension (docs/blame.md, "The victim's own disk time"):
/// the victim waits 40 ms on vda, the device served its own requests for
/// 30 ms of them. Alone (window 0) nobody is blamed in that view, though
/// eq. 10 puts all 40 ms on the unknown cause; beside a writer that
/// completed 3× its bytes (window 1), the writer gets the 10 ms behind
/// others and eq. 10's figures are unchanged. Catches culprits blamed for
/// the victim's own service time in the split view, a split that does not
/// add up to BT, and the paper's figures changed by the extension.
#[test]
fn disk_split_blames_only_the_wait_behind_others() {
    const MS: u64 = 1_000_000;
    let tasks = vec![proc_task(1, "victim"), proc_task(2, "writer")];
    let mut w0 = window(0, 100 * MS);
    w0.devices = vec![device("vda", Some(4096), Some(1))];
    w0.tasks = vec![
        Tw::new(1)
            .iowait("vda", 40 * MS)
            .iowait_own("vda", 30 * MS)
            .io("vda", 4096, 1)
            .done(),
    ];
    let mut w1 = window(1, 100 * MS);
    w1.devices = vec![device("vda", Some(16384), Some(4))];
    w1.tasks = vec![
        Tw::new(1)
            .iowait("vda", 40 * MS)
            .iowait_own("vda", 30 * MS)
            .io("vda", 4096, 1)
            .done(),
        Tw::new(2).io("vda", 12288, 3).done(),
    ];
    let rec = recording(1, 100 * MS, tasks.clone(), vec![w0.clone()]);
    let alone = crate::analyze(&rec, &Options::default()).unwrap();
    let d = alone.disk_split.as_ref().expect("split measured");
    assert_eq!((d.own_service_ns, d.behind_others_ns), (30 * MS, 10 * MS));
    assert!(d.culprits.is_empty(), "{:?}", d.culprits);
    assert!(close(d.unattributed_ns, (10 * MS) as f64));

    let rec = recording(1, 100 * MS, tasks, vec![w0, w1]);
    let both = crate::analyze(&rec, &Options::default()).unwrap();
    let d = both.disk_split.as_ref().unwrap();
    assert_eq!((d.own_service_ns, d.behind_others_ns), (60 * MS, 20 * MS));
    assert_eq!(d.culprits.len(), 1);
    assert_eq!(d.culprits[0].pid, Some(2));
    assert!(close(d.culprits[0].behind_blame_ns, (10 * MS) as f64));
    // Eq. 10 as before: the writer gets all of window 1's 40 ms.
    let by = blame_by_pid(&both);
    assert!(
        close(by[&(Some(2), Resource::Disk)], (40 * MS) as f64),
        "{by:?}"
    );
}
