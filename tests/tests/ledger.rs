//! The in-kernel ledger against the kernel's own counters, read by the test
//! itself around the same window (root; see common::root_or_skip).
use crate::common;

use common::*;
use ttp_ledger::{
    accounts::Window,
    probe::{AttachOptions, Ledger, seed},
};

/// The test thread back on every CPU (after `pin(0, …)`).
fn unpin_self() {
    // SAFETY: a cpu_set_t with every bit set, valid pointer and size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in 0..libc::CPU_SETSIZE as usize {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
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
    fx.wait_asleep();
    let (cpu0, wait0) = schedstat(pid);
    let io0 = proc_read_bytes(pid);
    let steal0 = proc_stat_steal();
    let disk_bytes0 = disks_bytes();
    let before = image(&ledger);
    fx.go();
    let done = fx.line_then_asleep();
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
    // On a busy machine it may be waiting for a CPU at this instant: take it
    // at a moment it runs, polling from the other CPU (on its CPU every
    // poll would preempt it).
    pin(pid, 1);
    pin(0, 0);
    let mut a = ledger.account(pid).expect("the fixture's account");
    for _ in 0..1000 {
        if a.state == ttp_common::state::RUNNING {
            break;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
        a = ledger.account(pid).expect("the fixture's account");
    }
    assert_eq!(a.state, ttp_common::state::RUNNING, "computing: {a:?}");
    unpin_self();
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
    let before = image(&ledger);
    let idle0 = idle_reads(&ledger);
    r1.go();
    r2.go();
    r1.line();
    r2.line();
    let idle1 = idle_reads(&ledger);
    let after = image(&ledger);
    let (p1, p2) = (r1.pid(), r2.pid());
    r1.finish();
    r2.finish();
    // Exit records too: a process that ended inside the window (a disk
    // writer beside the test) has its iowait share only there, and the
    // machine's iowait counts it.
    let mut exits = Vec::new();
    ledger.drain_exits(&mut exits);
    let w = Window::between(&before, &after, &exits);
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
    // A few dozen halts: the split is not compared (see the function).
    per_cpu_idle_matches_the_kernel(&idle0, &idle1, false);
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
    let pids: Vec<u32> = fx.numbers_to_end();
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

/// A process that wakes from I/O thousands of times, beside other work: it
/// burns 350 ms, then reads 8 MiB with O_DIRECT in 4 KiB reads (2 048
/// wake-ups from iowait). Catches on-CPU time taken from the wall clock
/// (about 9 µs a wake-up from an idle CPU is runtime for the kernel and
/// waiting for a wall clock started at the wakeup: −5 % on this fixture),
/// and run-queue wait that mixes in wake-up latency (18 ms against 0.1 ms).
/// Bounds: on-CPU and run-queue wait are differences of the kernel's own
/// counters, read at switches, and the fixture is off the CPU at both ends
/// of the window, so they are exact; 1 % and 5 % + 1 ms leave room only for
/// a misread, not for load beside.
#[test]
fn io_wakeups_keep_on_cpu_and_run_delay_exact() {
    if !root_or_skip("io_wakeups_keep_on_cpu_and_run_delay_exact") {
        return;
    }
    let _serial = serial();
    let _beside = load_beside();
    // With the wake-up hook, so that wake latency is measured (the default
    // ledger has no wake-up program: tests/tests/ledger_wake.rs).
    let ledger = Ledger::attach_with(&AttachOptions {
        wake_latency: true,
        ..Default::default()
    })
    .expect("attach the ledger");
    assert!(ledger.wake_latency_measured());
    let run = common::io_wake::io_wake_run(&[&ledger], None);
    let (w, k) = (&run.windows[0], &run.process(0).kernel);
    let (cpu, wait, done) = (run.cpu_ns, run.run_delay_ns, &run.said);
    eprintln!("fixture said {done}ledger {k:?}\nschedstat Δcpu {cpu} Δrun_delay {wait}");
    common::io_wake::assert_wakeups_match_the_kernel(k.wakeups, w.lost.wakeups_unseen, &run);
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
        k.wake_latency_ns > 0,
        "wake latency of 2048 wake-ups not reported"
    );
    assert_eq!(w.lost.losses(), 0, "lost: {:?}", w.lost);
}

/// (start ticks, tgid, runtime ns) of every thread in /proc, by tid.
fn runtimes() -> std::collections::HashMap<u32, (u64, u32, u64)> {
    let mut out = std::collections::HashMap::new();
    for t in seed::threads_from_proc() {
        if let Some((exec, _)) = t.sched {
            out.insert(t.tid, (t.start_key, t.tgid, exec));
        }
    }
    out
}

/// The whole machine for 4 s, beside other work. Catches a thread the
/// ledger believes is running after a switch-out the tracepoint missed and
/// charged with a CPU's idle time (pid 1 was charged 7 s of on-CPU in a
/// 4 s window against 12 ms in its schedstat). No process may be charged
/// more than its threads' runtime grew (1 % + 2 ms): the ledger's reads lie
/// inside the two /proc reads, so that holds by construction unless a time
/// is charged that the kernel did not count. And the machine's total may
/// not fall short of it (3 % + 10 ms: the running threads' /proc runtime
/// is up to one tick behind at each end).
#[test]
fn no_process_is_charged_more_than_its_kernel_runtime() {
    if !root_or_skip("no_process_is_charged_more_than_its_kernel_runtime") {
        return;
    }
    let _serial = serial();
    let _beside = load_beside();
    let mut ledger = Ledger::attach().expect("attach the ledger");
    ledger.seed(&seed::threads_from_proc());
    let s0 = runtimes();
    let before = image(&ledger);
    std::thread::sleep(std::time::Duration::from_secs(4));
    let after = image(&ledger);
    let s1 = runtimes();
    let mut per_proc: std::collections::BTreeMap<u32, (f64, f64)> = Default::default();
    for (key, a1) in &after.threads {
        let (Some(a0), Some(&(start0, _, r0)), Some(&(start1, tgid, r1))) =
            (before.threads.get(key), s0.get(&key.tid), s1.get(&key.tid))
        else {
            continue;
        };
        if start0 != start1 {
            continue; // the tid was reused between the reads
        }
        let e = per_proc.entry(tgid).or_default();
        e.0 += a1.on_cpu_ns.saturating_sub(a0.on_cpu_ns) as f64;
        e.1 += r1.saturating_sub(r0) as f64;
    }
    assert!(per_proc.contains_key(&1), "pid 1 not compared");
    eprintln!(
        "{} processes; pid 1: ledger {:?}; unreported switches {}, repaired {}",
        per_proc.len(),
        per_proc[&1],
        after.stats.unreported_switches - before.stats.unreported_switches,
        after.stats.switches_unseen - before.stats.switches_unseen
    );
    for (tgid, (ledger_ns, kernel_ns)) in &per_proc {
        assert!(
            *ledger_ns <= kernel_ns * 1.01 + 2e6,
            "process {tgid}: ledger on-CPU {ledger_ns} ns > its threads' runtime growth {kernel_ns} ns"
        );
    }
    let (l, k) = per_proc
        .values()
        .fold((0.0, 0.0), |(l, k), (a, b)| (l + a, k + b));
    assert!(
        l >= k * 0.97 - 10e6,
        "the ledger's total on-CPU {l} falls short of the kernel's {k}"
    );
}

/// The children of `ppid` in /proc.
fn children_of(ppid: u32) -> Vec<u32> {
    seed::threads_from_proc()
        .into_iter()
        .filter(|t| t.ppid == ppid && t.tid == t.tgid)
        .map(|t| t.tid)
        .collect()
}

/// PostgreSQL under `pgbench -c 2` (TPC-B-like: every commit waits for a
/// WAL fsync), beside other work. Catches a per-CPU iowait count that
/// leaks (a wake-up that could not take the CPU's lock never lowered it, and
/// the CPU's idle time stayed iowait: 7.7× /proc/stat's iowait) and
/// backends' on-CPU time off against their schedstat. Bounds: per CPU idle
/// and iowait against the kernel's ns sums as in
/// [`per_cpu_idle_matches_the_kernel`]. On-CPU is the kernel's runtime at
/// the ledger's reads, inside the test's two /proc reads: 1 % plus the wall
/// time between each /proc read and the ledger's (a backend can run no
/// longer than that outside the ledger's window).
#[test]
fn pgbench_iowait_idle_and_backends_match_the_kernel() {
    if !root_or_skip("pgbench_iowait_idle_and_backends_match_the_kernel") {
        return;
    }
    let _serial = serial();
    let cluster = pg::Cluster::start("ledger-pgbench");
    let pgbench = |args: &[&str]| {
        let mut c = std::process::Command::new(cluster.bin.join("pgbench"));
        c.args(["-h", cluster.dir.to_str().unwrap()])
            .args(["-p", &cluster.port.to_string(), "-U", "ttp"])
            .args(args)
            .arg("postgres")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        c
    };
    let init = pgbench(&["-i", "-s", "2", "-q"])
        .status()
        .expect("pgbench -i");
    assert!(init.success(), "pgbench -i failed");
    let mut ledger = Ledger::attach().expect("attach the ledger");
    ledger.seed(&seed::threads_from_proc());
    let mut bench = pgbench(&["-c", "2", "-T", "7"])
        .spawn()
        .expect("start pgbench");
    std::thread::sleep(std::time::Duration::from_secs(1));
    let postmaster = cluster.postmaster_pid();
    let backends = children_of(postmaster);
    // The schedstat reads bracket the ledger's: what a backend ran between
    // a /proc read and the ledger's is in the kernel's figure only, and is
    // at most the wall time between them (`gaps`).
    let t0 = std::time::Instant::now();
    let sched0: Vec<(u64, u64)> = backends.iter().map(|&p| schedstat(p)).collect();
    let before = image(&ledger);
    let mut gaps = t0.elapsed();
    let idle0 = idle_reads(&ledger);
    std::thread::sleep(std::time::Duration::from_secs(4));
    let idle1 = idle_reads(&ledger);
    let t1 = std::time::Instant::now();
    let after = image(&ledger);
    let sched1: Vec<(u64, u64)> = backends.iter().map(|&p| schedstat(p)).collect();
    gaps += t1.elapsed();
    let status = bench.wait().expect("wait pgbench");
    assert!(status.success(), "pgbench failed");
    let w = Window::between(&before, &after, &[]);
    eprintln!(
        "lock contended {}, unreported switches {}",
        w.lost.lock_contended, w.lost.unreported_switches
    );
    per_cpu_idle_matches_the_kernel(&idle0, &idle1, true);
    let mut compared = 0;
    for (i, pid) in backends.iter().enumerate() {
        let Some(p) = w.processes.get(pid) else {
            continue;
        };
        let kernel = sched1[i].0.saturating_sub(sched0[i].0) as f64;
        if kernel < 1e6 {
            continue; // idle helpers: nothing to compare
        }
        compared += 1;
        assert!(
            (p.kernel.on_cpu_ns as f64 - kernel).abs() <= 0.01 * kernel + gaps.as_nanos() as f64,
            "{} [{pid}]: ledger on-CPU {} vs schedstat {kernel}, reads {gaps:?} apart",
            p.comm,
            p.kernel.on_cpu_ns
        );
    }
    assert!(compared >= 2, "the two pgbench backends were not compared");
    // No count left behind: once the benchmark is over, the ledger's tasks
    // in iowait (summed over CPUs) may not exceed the kernel's
    // (/proc/stat procs_blocked = Σ rq->nr_iowait) at any of 20 samples
    // taken 10 ms apart; a leaked count stays for good. (Tasks already in
    // iowait at attach are not counted by the ledger, so it may be lower.)
    let excess = (0..20)
        .map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            let snap = ledger.snapshot().expect("snapshot");
            let kernel = procs_blocked();
            let ours: u64 = snap.cpus.iter().map(|(_, c)| c.nr_iowait).sum();
            ours as i64 - kernel as i64
        })
        .min()
        .unwrap();
    assert!(
        excess <= 0,
        "the ledger still counts {excess} more tasks in iowait than the kernel"
    );
}

/// /proc/stat procs_blocked: tasks in iowait machine-wide (nr_iowait()).
fn procs_blocked() -> u64 {
    std::fs::read_to_string("/proc/stat")
        .expect("/proc/stat")
        .lines()
        .find_map(|l| l.strip_prefix("procs_blocked ")?.trim().parse().ok())
        .expect("procs_blocked in /proc/stat")
}

/// Each CPU's idle + iowait, and each of the two, between two
/// [`idle_reads`], against the kernel's (/proc/stat and its ns sums in
/// /proc/timer_list). The reads of each CPU are one instant (see
/// [`idle_reads`]), so what differs is what each side counts as idle.
///
/// The bound against /proc/stat: 10 % + 2 ticks (the tick
/// rounding of the two reads is below 2 ticks); where the per-halt
/// residual below adds up to more (many short halts: pgbench on an
/// otherwise quiet machine), /proc/stat gets that allowance plus the two
/// ticks instead, and the test prints which bound held. The ledger may
/// be above /proc/stat by the CPU's interrupt time too, as /proc/stat
/// samples it (irq + softirq ticks): the interrupts that end halts (see
/// below) are that CPU's, and a host that makes them long took CPU 1,
/// which takes the disk's completions, to +8.5 to +13.7 % of /proc/stat
/// (+683 to +911 µs an idle entry) with 180–250 ms of softirq in the
/// window (docs/ledger.md).
///
/// Against the ns sums: the ledger's idle state runs from the cpu_idle
/// entry to its exit (the halt); the kernel's clock from the idle loop's
/// entry, stopped at each interrupt's entry and restarted at its exit
/// unless the interrupt woke a task. So the interrupts inside a halt are
/// idle to the ledger and not to the kernel, and the loop's way into the
/// halt (governor, tick stop) is idle to the kernel and not to the ledger.
/// The second is the idle loop's own code, short on any machine:
/// [`RESIDUAL_NS`] per idle entry (`idle_calls`) plus 1 ms bounds how far
/// the ledger may be *short* of the kernel. The first is as long as the
/// host makes an interrupt: −11 to +6 µs an idle entry on one host, +80
/// to +537 µs on another (kernel 6.18.44-fc-v782: the halts that an I/O
/// completion ends, mostly iowait halts), so it is shown, not bounded,
/// and the excess is held only to the bound against /proc/stat.
/// The split: the kernel classifies a whole stretch by the iowait count
/// at its end, the ledger follows the count as it changes (cpu.rs
/// `settle`), so a task woken mid-halt moves part of that halt from one
/// side to the other; with the interrupt time above falling mostly on
/// iowait, the split is shown against both and only a leaking count (more
/// than twice the kernel's iowait) fails, compared only where halts are
/// many (pgbench).
fn per_cpu_idle_matches_the_kernel(
    r0: &std::collections::BTreeMap<u32, IdleRead>,
    r1: &std::collections::BTreeMap<u32, IdleRead>,
    split: bool,
) {
    let tick = 1e9 / user_hz() as f64;
    assert_eq!(r0.len(), r1.len(), "CPUs came or went");
    for (cpu, b) in r1 {
        let a = &r0[cpu];
        let ledger_idle = (b.ledger_idle_ns - a.ledger_idle_ns) as f64;
        let ledger_iowait = (b.ledger_iowait_ns - a.ledger_iowait_ns) as f64;
        let kernel_idle = (b.kernel.idle_ns - a.kernel.idle_ns) as f64;
        let kernel_iowait = (b.kernel.iowait_ns - a.kernel.iowait_ns) as f64;
        let ticks = |f: fn(&IdleRead) -> u64| (f(b) - f(a)) as f64 * tick;
        let stat_idle = ticks(|r| r.stat_idle_ticks);
        let stat_iowait = ticks(|r| r.stat_iowait_ticks);
        let entries = (b.kernel.idle_calls - a.kernel.idle_calls) as f64;
        // The CPU's interrupt time by /proc/stat's sampling: where an
        // interrupt ends a halt, the ledger's idle state runs on to the
        // exit event, /proc/stat's idle stops at the interrupt's entry.
        let interrupts = ticks(|r| r.stat_irq_ticks) + ticks(|r| r.stat_softirq_ticks);
        eprintln!(
            "cpu{cpu}: /proc/stat irq + softirq {interrupts} ns, steal {} ns",
            ticks(|r| r.stat_steal_ticks)
        );
        let residual = (ledger_idle + ledger_iowait) - (kernel_idle + kernel_iowait);
        eprintln!(
            "cpu{cpu}: ledger idle {ledger_idle} iowait {ledger_iowait} | kernel idle {kernel_idle} iowait {kernel_iowait} | /proc/stat idle {stat_idle} iowait {stat_iowait} | {entries} idle entries, residual {:.0} ns an entry",
            residual / entries.max(1.0)
        );
        let allowed = entries * RESIDUAL_NS + 1e6;
        // The 10 % bound, or, where halts are so many and short that the
        // per-halt residual adds up beyond 10 %, the residual's.
        let issue = |stat: f64| (0.10 * stat + 2.0 * tick).max(allowed + 2.0 * tick);
        let show = |what: &str, ledger: f64, kernel: f64, stat: f64| {
            eprintln!(
                "cpu{cpu}: {what} {:+.3} ms vs /proc/stat ({} the 10 % + 2 ticks), {:+.1} µs an idle entry vs the kernel's clock",
                (ledger - stat) / 1e6,
                if (ledger - stat).abs() <= 0.10 * stat + 2.0 * tick {
                    "within"
                } else {
                    "beyond"
                },
                (ledger - kernel) / entries.max(1.0) / 1e3
            );
        };
        // Short of the kernel's clock by no more than the idle loop's way
        // into each halt.
        let not_short = |what: &str, ledger: f64, kernel: f64| {
            assert!(
                ledger - kernel >= -allowed,
                "cpu{cpu}: ledger {what} {ledger} ns is short of the kernel's {kernel} ns by more than {allowed} ns over {entries} idle entries"
            );
        };
        let (ledger_sum, kernel_sum, stat_sum) = (
            ledger_idle + ledger_iowait,
            kernel_idle + kernel_iowait,
            stat_idle + stat_iowait,
        );
        show("idle + iowait", ledger_sum, kernel_sum, stat_sum);
        not_short("idle + iowait", ledger_sum, kernel_sum);
        assert!(
            stat_sum - ledger_sum <= issue(stat_sum),
            "cpu{cpu}: ledger idle + iowait {ledger_sum} ns short of /proc/stat's {stat_sum} ns by more than 10 % + 2 ticks and more than {allowed} ns + 2 ticks"
        );
        assert!(
            ledger_sum - stat_sum <= issue(stat_sum) + interrupts,
            "cpu{cpu}: ledger idle + iowait {ledger_sum} ns above /proc/stat's {stat_sum} ns by more than 10 % + 2 ticks and the CPU's {interrupts} ns of interrupts"
        );
        if split {
            show("iowait", ledger_iowait, kernel_iowait, stat_iowait);
            show("idle", ledger_idle, kernel_idle, stat_idle);
            not_short("iowait", ledger_iowait, kernel_iowait);
            // A count that leaks makes every later idle moment iowait
            // (7.7× /proc/stat's before v2). The excess of an honest count
            // is the interrupt time of the halts that I/O completions end
            // (see above): +24 % to +38 % on one host, within 10 % on
            // another. Twice the kernel's is far from both.
            assert!(
                ledger_iowait <= 2.0 * kernel_iowait + allowed + 2.0 * tick,
                "cpu{cpu}: ledger iowait {ledger_iowait} ns vs the kernel's {kernel_iowait} ns: more than twice (a leaking iowait count?)"
            );
        }
    }
}

/// Per idle entry, how far the ledger's idle state may be short of the
/// kernel's idle clock (see [`per_cpu_idle_matches_the_kernel`]). Measured on this
/// machine under load (other builds on both CPUs): −11.2 to +5.9 µs an
/// entry over windows of 3 to 241 halts, single halts −21 to +52 µs (an
/// interrupt inside a halt delayed by the host counts whole; the 1 ms
/// covers a few of those); under pgbench at a quieter moment −4.8 and −3.2
/// µs over 37 651 and 27 685 halts. With the switches as the idle interval
/// it was +9 to +27 µs, always an excess.
const RESIDUAL_NS: f64 = 25e3;
