//! The in-kernel ledger against the kernel's own counters, read by the test
//! itself around the same window (root; see common::root_or_skip).
mod common;

use common::*;
use ttp_user::{
    accounts::{Image, Window},
    probe::{Ledger, seed},
};

fn image(ledger: &Ledger) -> Image {
    Image::from_snapshot(&ledger.snapshot().expect("snapshot"))
}

/// A process burns 300 ms of CPU, then reads 32 MiB with O_DIRECT while the
/// ledger watches. Catches: on-CPU time off against schedstat's
/// sum_exec_runtime, run-queue wait off against run_delay, bytes off against
/// /proc/PID/io, iowait missed or misattributed, lost records.
#[test]
fn cpu_and_direct_reads_match_the_kernel() {
    if !root_or_skip("cpu_and_direct_reads_match_the_kernel") {
        return;
    }
    let _serial = serial();
    let mut ledger = Ledger::attach().expect("attach the ledger");
    let mut fx = Held::start("fixture-mixed", &["--cpu-ms", "300", "--read-mib", "32"]);
    ledger.seed(&seed::threads_from_proc());
    let pid = fx.pid();
    let (cpu0, wait0) = schedstat(pid);
    let io0 = proc_read_bytes(pid);
    let steal0 = proc_stat_steal();
    let disk_bytes0 = disks_bytes();
    let before = image(&ledger);
    fx.go();
    let done = fx.line();
    let after = image(&ledger);
    let disk_bytes1 = disks_bytes();
    let (cpu1, wait1) = schedstat(pid);
    let io1 = proc_read_bytes(pid);
    let steal = steal_between(steal0, proc_stat_steal());
    fx.finish();
    let w = Window::between(&before, &after, &[]);
    let p = &w.processes[&pid];
    let k = &p.kernel;
    let wall = (after.at_ns - before.at_ns) as f64;
    eprintln!(
        "fixture said {done}ledger: {k:?}\nschedstat Δcpu {} Δwait {}",
        cpu1 - cpu0,
        wait1 - wait0
    );
    assert!(
        // 2 %: some context switches never reach the tracepoint on these
        // VMs (docs/ledger.md); typically within 0.2 %.
        within(
            k.on_cpu_ns as f64,
            (cpu1 - cpu0) as f64,
            0.02 + 2.0 * steal,
            2e6
        ),
        "on_cpu_ns {} vs schedstat {} (steal share {steal:.4})",
        k.on_cpu_ns,
        cpu1 - cpu0
    );
    assert!(
        within(k.runq_wait_ns as f64, (wait1 - wait0) as f64, 0.05, 2e6),
        "runq_wait_ns {} vs run_delay {}",
        k.runq_wait_ns,
        wait1 - wait0
    );
    assert_eq!(k.io.read_bytes, io1 - io0, "read bytes vs /proc/PID/io");
    assert!(
        read_bytes_cover(k.io.read_bytes, 32 << 20),
        "read bytes {} vs the fixture's 32 MiB",
        k.io.read_bytes
    );
    assert!(k.io.read_requests >= 32, "requests {}", k.io.read_requests);
    assert!(
        k.iowait_ns > 0 && (k.iowait_ns as f64) < wall,
        "iowait {} wall {wall}",
        k.iowait_ns
    );
    // Own I/O is what the tool controls: it accrues only while the disk
    // serves this process's requests, so it is bounded by the process's
    // own device time and by its I/O wait. How much of the wait it is
    // depends on what else used the disk: only when nothing else did
    // (the device's sector counts grew by no more than ours plus 5 %) must
    // it be most of the wait.
    assert!(k.io.device_ns > 0);
    assert!(k.iowait_own_ns > 0, "no own I/O for 32 MiB of reads");
    assert!(
        k.iowait_own_ns <= k.iowait_ns + 1_000_000,
        "own {} beyond iowait {}",
        k.iowait_own_ns,
        k.iowait_ns
    );
    assert!(
        k.iowait_own_ns <= k.io.device_ns + 1_000_000,
        "own {} beyond the process's device time {}",
        k.iowait_own_ns,
        k.io.device_ns
    );
    let device_bytes = disk_bytes1.saturating_sub(disk_bytes0);
    if device_bytes as f64 <= 1.05 * (k.io.read_bytes + k.io.write_bytes) as f64 {
        assert!(
            k.iowait_own_ns as f64 > 0.5 * k.iowait_ns as f64,
            "own {} of iowait {} while only this process used the disk ({device_bytes} bytes)",
            k.iowait_own_ns,
            k.iowait_ns
        );
    }
    assert_eq!(w.lost.losses(), 0, "lost: {:?}", w.lost);
}

/// A switch-in the ledger never saw (these VMs drop some sched_switch
/// events, docs/ledger.md), simulated: while the fixture computes, its
/// account is put back in the run queue as if its switch-in had been
/// missed. At its next switch-out the ledger must take the run from the
/// kernel's sum_exec_runtime. Catches a CPU-bound run booked as run-queue
/// wait (seen once in CI: 16 ms of on-CPU for a 200 ms burn).
#[test]
fn a_missed_switch_in_is_recovered_from_the_kernels_runtime() {
    if !root_or_skip("a_missed_switch_in_is_recovered_from_the_kernels_runtime") {
        return;
    }
    let _serial = serial();
    let mut ledger = Ledger::attach().expect("attach the ledger");
    let mut fx = Held::start("fixture-mixed", &["--cpu-ms", "600"]);
    let pid = fx.pid();
    let (cpu0, _) = schedstat(pid);
    let before = image(&ledger);
    let unseen0 = ledger.snapshot().expect("snapshot").stats.switches_unseen;
    fx.go();
    // Let it compute, then lose its switch-in: state back to runnable since
    // the switch-in, as if only its wakeup had been seen.
    std::thread::sleep(std::time::Duration::from_millis(150));
    let mut a = ledger.account(pid).expect("the fixture's account");
    assert_eq!(a.state, ttp_common::state::RUNNING, "computing: {a:?}");
    assert!(
        a.exec_snap_ns > 0,
        "runtime snapshot at its last switch-out"
    );
    a.state = ttp_common::state::RUNNABLE;
    ledger
        .replace_account_for_test(&a)
        .expect("replace the account");
    let done = fx.line();
    let after = image(&ledger);
    let (cpu1, _) = schedstat(pid);
    let unseen = ledger.snapshot().expect("snapshot").stats.switches_unseen - unseen0;
    fx.finish();
    let w = Window::between(&before, &after, &[]);
    let k = &w.processes[&pid].kernel;
    eprintln!(
        "fixture said {done}ledger {k:?}, schedstat Δcpu {}",
        cpu1 - cpu0
    );
    assert!(unseen >= 1, "the recovery was not counted");
    assert!(
        within(k.on_cpu_ns as f64, (cpu1 - cpu0) as f64, 0.03, 3e6),
        "on_cpu_ns {} vs schedstat {}: the run after the lost switch-in is missing",
        k.on_cpu_ns,
        cpu1 - cpu0
    );
}

/// Two processes read the same disk at once. Catches: own-I/O time not
/// split (each would claim the whole disk), iowait shares that do not add
/// up to the machine's iowait, per-CPU iowait far from /proc/stat.
#[test]
fn concurrent_readers_split_the_disk_and_the_iowait() {
    if !root_or_skip("concurrent_readers_split_the_disk_and_the_iowait") {
        return;
    }
    let _serial = serial();
    let dir = std::env::temp_dir();
    let f1 = dir.join("ttp-test-reader-1.dat");
    let f2 = dir.join("ttp-test-reader-2.dat");
    let mut ledger = Ledger::attach().expect("attach the ledger");
    let args = |f: &std::path::Path| {
        vec![
            "--cpu-ms".to_string(),
            "1".into(),
            "--read-mib".into(),
            "96".into(),
            "--file".into(),
            f.display().to_string(),
        ]
    };
    let a1 = args(&f1);
    let a2 = args(&f2);
    let mut r1 = Held::start(
        "fixture-mixed",
        &a1.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let mut r2 = Held::start(
        "fixture-mixed",
        &a2.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    ledger.seed(&seed::threads_from_proc());
    let stat0 = proc_stat_iowait_ticks();
    let before = image(&ledger);
    r1.go();
    r2.go();
    r1.line();
    r2.line();
    let after = image(&ledger);
    let stat1 = proc_stat_iowait_ticks();
    let (p1, p2) = (r1.pid(), r2.pid());
    r1.finish();
    r2.finish();
    let w = Window::between(&before, &after, &[]);
    let (k1, k2) = (&w.processes[&p1].kernel, &w.processes[&p2].kernel);
    eprintln!("reader 1 {k1:?}\nreader 2 {k2:?}\ncpus {:?}", w.cpus);
    for k in [k1, k2] {
        assert!(
            read_bytes_cover(k.io.read_bytes, 96 << 20),
            "read bytes {}",
            k.io.read_bytes
        );
        assert!(k.iowait_ns > 0);
        assert!(
            k.iowait_own_ns < k.iowait_ns,
            "own {} must drop below iowait {} when the disk is shared",
            k.iowait_own_ns,
            k.iowait_ns
        );
    }
    let machine = w.cpu_total().iowait_ns;
    let shares: u64 = w.processes.values().map(|p| p.kernel.iowait_share_ns).sum();
    assert!(
        within(shares as f64, machine as f64, 0.02, 1e6),
        "iowait shares of all tasks {shares} vs machine iowait {machine}"
    );
    assert!(k1.iowait_share_ns + k2.iowait_share_ns <= machine + 1_000_000);
    // /proc/stat counts iowait in USER_HZ ticks (10 ms), per CPU.
    let stat_ns = (stat1 - stat0) as f64 * 1e7;
    let cpus = w.cpus.len() as f64;
    assert!(
        within(machine as f64, stat_ns, 0.10, 2.0 * 1e7 * cpus),
        "ledger machine iowait {machine} vs /proc/stat {stat_ns}"
    );
    assert_eq!(w.lost.losses(), 0, "lost: {:?}", w.lost);
}

/// 200 short-lived children forked one after another. Catches: children
/// that exit between two reads of the map (exit records lost or ignored),
/// parent links missing so --children would not find them.
#[test]
fn short_lived_children_are_all_seen() {
    if !root_or_skip("short_lived_children_are_all_seen") {
        return;
    }
    let _serial = serial();
    let mut ledger = Ledger::attach().expect("attach the ledger");
    let mut fx = Held::start(
        "fixture-forker",
        &["--children", "200", "--child-cpu-us", "300"],
    );
    let parent = fx.pid();
    let before = image(&ledger);
    fx.go();
    let pids: Vec<u32> = fx
        .lines_to_end()
        .iter()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert_eq!(pids.len(), 200);
    let after = image(&ledger);
    let mut exits = Vec::new();
    ledger.drain_exits(&mut exits);
    let w = Window::between(&before, &after, &exits);
    let family = w.descendants(&[parent], &Default::default());
    let mut without_cpu = 0;
    for pid in &pids {
        let p = w
            .processes
            .get(pid)
            .unwrap_or_else(|| panic!("child {pid} missing"));
        assert!(p.exited, "child {pid} not marked exited");
        // A switch-in that never reached the tracepoint (docs/ledger.md)
        // books a child's run as run-queue wait: counted, at most 2 %.
        assert!(
            p.kernel.on_cpu_ns + p.kernel.runq_wait_ns > 0,
            "child {pid} not accounted"
        );
        if p.kernel.on_cpu_ns == 0 {
            without_cpu += 1;
        }
        assert!(
            family.contains(pid),
            "child {pid} not found as a descendant"
        );
    }
    assert!(
        without_cpu <= 4,
        "{without_cpu} of 200 children without on-CPU time"
    );
    assert_eq!(w.lost.exit_records_lost, 0);
}
