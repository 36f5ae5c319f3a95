//! The acceptance scenario: a victim reading from disk and computing
//! on cpu0, two readers at a 4:1 byte ratio on vda, a CPU burner on cpu0, a
//! sleeper that uses nothing, and a kworker (a known cause).
use super::*;
use crate::{
    Options,
    attribute::Check,
    cause::{GROUP_KERNEL, UNKNOWN},
};
use ttp_window::window::blame_record::{CauseKind, Resource};

pub(crate) const VICTIM: u32 = 100;
pub(crate) const READER_A: u32 = 200;
pub(crate) const READER_B: u32 = 300;
pub(crate) const BURNER: u32 = 400;
pub(crate) const SLEEPER: u32 = 500;
pub(crate) const KWORKER: u32 = 50;
pub(crate) const WINDOWS: u64 = 20;

/// Per 50 ms window: the victim runs 20 ms on cpu0, waits 10 ms in cpu0's
/// run queue and 20 ms in iowait on vda for its 1 MiB; reader A reads
/// `a_mib(i)` MiB and reader B 1 MiB from vda, both running on cpu1; the
/// burner runs 26 ms on cpu0; a kworker runs 2 ms on cpu0 and writes 1 MiB;
/// cpu0 is never idle (2 ms of it go to no thread: steal), cpu1 idles 43 ms;
/// vda completes 0.5 MiB more than the threads account for.
pub(crate) fn scenario(a_mib: impl Fn(u64) -> f64) -> Recording {
    let tasks = vec![
        proc_task(VICTIM, "victim"),
        proc_task(READER_A, "reader_a"),
        proc_task(READER_B, "reader_b"),
        proc_task(BURNER, "burner"),
        proc_task(SLEEPER, "sleeper"),
        kthread(KWORKER, "kworker/0:1"),
    ];
    let windows = (0..WINDOWS)
        .map(|i| {
            let a = (a_mib(i) * MIB as f64) as u64;
            let mut w = window(i, 50 * MS);
            w.cpus = vec![cpu(0, Some(0), None), cpu(1, Some(43 * MS), None)];
            w.devices = vec![device("vda", Some(a + 3 * MIB + MIB / 2), Some(40))];
            w.tasks = vec![
                Tw::new(VICTIM)
                    .on_cpu(0, 20 * MS)
                    .wait(0, 10 * MS)
                    .iowait("vda", 20 * MS)
                    .io("vda", MIB, 8)
                    .done(),
                Tw::new(READER_A).on_cpu(1, 5 * MS).io("vda", a, 8).done(),
                Tw::new(READER_B).on_cpu(1, 2 * MS).io("vda", MIB, 8).done(),
                Tw::new(BURNER).on_cpu(0, 26 * MS).done(),
                Tw::new(KWORKER).on_cpu(0, 2 * MS).io("vda", MIB, 8).done(),
            ];
            w
        })
        .collect();
    recording(VICTIM, 50 * MS, tasks, windows)
}

fn check<'a>(checks: &'a [Check], name: &str) -> &'a Check {
    checks.iter().find(|c| c.name == name).expect(name)
}

/// Catches a wrong eq. 10 split (e.g. weighting I/O blame by time instead of
/// consumption, or letting CPU-only processes take I/O blame): the steady
/// case is computed by hand.
#[test]
fn steady_scenario_matches_hand_computation() {
    let report = crate::analyze(&scenario(|_| 4.0), &Options::default()).unwrap();
    let b = blame_by_pid(&report);
    let get = |pid, r| b.get(&(pid, r)).copied().unwrap_or(0.0);
    let n = WINDOWS as f64;
    // I/O: 20 ms per window over others' 6.5 MiB (A 4, B 1, kworker 1,
    // unknown 0.5).
    let io = |mib: f64| n * 20.0 * MS as f64 * mib / 6.5;
    assert!(close(get(Some(READER_A), Resource::Disk), io(4.0)));
    assert!(close(get(Some(READER_B), Resource::Disk), io(1.0)));
    assert!(close(get(Some(KWORKER), Resource::Disk), io(1.0)));
    assert!(close(get(None, Resource::Disk), io(0.5)));
    // CPU: 10 ms per window on cpu0 over burner 26, kworker 2, steal 2.
    let c = |ms: f64| n * 10.0 * MS as f64 * ms / 30.0;
    assert!(close(get(Some(BURNER), Resource::Cpu), c(26.0)));
    assert!(close(get(Some(KWORKER), Resource::Cpu), c(2.0)));
    assert!(close(get(None, Resource::Cpu), c(2.0)));
    // The readers ran only on cpu1, where the victim never waited.
    assert_eq!(get(Some(READER_A), Resource::Cpu), 0.0);
    assert_eq!(get(Some(READER_B), Resource::Cpu), 0.0);
    // Slowdown (eq. 4/17): cpu0 others 30 ms / victim 20 ms; vda 6.5 MiB / 1.
    let cpu = &report.resources[0];
    assert_eq!(cpu.resource, Resource::Cpu);
    assert!(close(cpu.slowdown.mean().unwrap(), 1.5));
    assert!(close(cpu.slowdown.p1_sum / n, 1.3));
    let disk = &report.resources[1];
    assert!(close(disk.slowdown.mean().unwrap(), 6.5));
    assert!(close(disk.slowdown.p2_sum / n, 1.5));
}

/// The criterion: I/O blame of the two readers within 4:1 ± 20 %
/// when their ratio varies between windows, and the CPU blame to the burner.
/// Catches blame that ignores per-window consumption.
#[test]
fn readers_at_four_to_one_and_burner_takes_cpu_blame() {
    // Reader A reads 3, 4 or 5 MiB per window (mean 4): B always 1.
    let rec = scenario(|i| [3.0, 4.0, 5.0][(i % 3) as usize]);
    let report = crate::analyze(&rec, &Options::default()).unwrap();
    let b = blame_by_pid(&report);
    let ratio = b[&(Some(READER_A), Resource::Disk)] / b[&(Some(READER_B), Resource::Disk)];
    assert!((3.2..=4.8).contains(&ratio), "I/O blame ratio {ratio}");
    let cpu = &report.resources[0];
    let burner = b[&(Some(BURNER), Resource::Cpu)];
    assert!(
        burner > 0.8 * cpu.blocked_ns as f64,
        "burner {burner} of {}",
        cpu.blocked_ns
    );
    let top = &report.explanations[0];
    assert_eq!((top.pid, top.resource), (Some(READER_A), Resource::Disk));
}

/// A process alive throughout that used neither resource gets no blame from
/// ttp, while the overlap baseline gives it an equal share with the other
/// concurrent processes (all four alive all along: 1/4 of 600 ms).
#[test]
fn idle_process_gets_no_blame_but_overlap_blames_it() {
    let report = crate::analyze(&scenario(|_| 4.0), &Options::default()).unwrap();
    let sleeper = report
        .culprits
        .iter()
        .find(|c| c.pid == Some(SLEEPER))
        .expect("the sleeper is listed beside the baseline");
    assert_eq!(sleeper.blame_ns, 0.0);
    assert_eq!(sleeper.dor, 0.0);
    let total_blocked = (WINDOWS * (10 + 20) * MS) as f64;
    assert!(close(sleeper.overlap_blame_ns, total_blocked / 4.0));
    assert!(close(sleeper.overlap_share, 0.25));
    // The kworker is a known cause, never in the overlap baseline.
    assert!(report.baseline.entries.iter().all(|e| e.pid != KWORKER));
}

/// Contributions add up to the blocked time per resource, the residual is
/// labelled unknown, and the categories are the ones of eq. 5.
#[test]
fn contributions_sum_to_blocked_time_per_resource() {
    let report = crate::analyze(&scenario(|i| 1.0 + i as f64), &Options::default()).unwrap();
    for r in &report.resources {
        let sum: f64 = r.by_kind.values().sum();
        assert!(
            close(sum, r.blocked_ns as f64),
            "{:?}: {sum} vs {}",
            r.resource,
            r.blocked_ns
        );
    }
    assert_eq!(report.resources[0].blocked_ns, WINDOWS * 10 * MS);
    assert_eq!(report.resources[1].blocked_ns, WINDOWS * 20 * MS);
    // Memory: measured, and the victim never stalled.
    assert_eq!(report.resources[2].blocked_ns, 0);
    assert!(check(&report.checks, "blame_sums_to_blocked_time").passed());
    assert!(
        report.checks.iter().all(|c| c.passed()),
        "{:?}",
        report.checks
    );
    let unknown = report.culprits.iter().find(|c| c.pid.is_none()).unwrap();
    assert_eq!(
        (unknown.kind, unknown.process.as_str()),
        (CauseKind::Unknown, UNKNOWN)
    );
    let kw = report
        .culprits
        .iter()
        .find(|c| c.pid == Some(KWORKER))
        .unwrap();
    assert_eq!(
        (kw.kind, kw.group.as_str()),
        (CauseKind::Known, GROUP_KERNEL)
    );
}

/// The explanation sentence carries the hand-computed numbers (246.2 ms is
/// 20 windows × 20 ms × 4/6.5; 61.5 % of 400 ms).
#[test]
fn explanation_sentence() {
    let report = crate::analyze(&scenario(|_| 4.0), &Options::default()).unwrap();
    let top = &report.explanations[0];
    assert_eq!(
        top.text,
        "process reader_a (pid 200) on device vda caused 246.2 ms (61.5 %) of the victim's \
         I/O (iowait) blocked time"
    );
    // P: share of all 600 ms of blocked time.
    assert!(close(top.path_weight, 246.153_846_153_846_15e6 / 600e6));
}

/// Catches requests being ignored by `--disk-by requests`: A reads 4 MiB in
/// 1 request, B 1 MiB in 4, so by requests B is blamed 4× more than A.
#[test]
fn disk_by_requests_counts_requests() {
    let mut rec = scenario(|_| 4.0);
    for w in &mut rec.windows {
        for t in &mut w.tasks {
            match t.task {
                READER_A => t.disk_requests.insert("vda".into(), 1),
                READER_B => t.disk_requests.insert("vda".into(), 4),
                _ => None,
            };
        }
    }
    let opts = Options {
        disk_by: crate::DiskMeasure::Requests,
        ..Options::default()
    };
    let b = blame_by_pid(&crate::analyze(&rec, &opts).unwrap());
    let ratio = b[&(Some(READER_B), Resource::Disk)] / b[&(Some(READER_A), Resource::Disk)];
    assert!(close(ratio, 4.0), "{ratio}");
}
