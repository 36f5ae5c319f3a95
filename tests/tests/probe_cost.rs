//! The probes' own cost (probe/cost.rs) against the ledger's own event
//! counters over the same window, and the machine left as it was (root;
//! see common::root_or_skip).
use crate::common;

use common::*;
use ttp_ledger::probe::{
    Ledger,
    cost::{CostSnapshot, ProbeCost},
};

fn bpf_stats_sysctl() -> String {
    std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled")
        .expect("read kernel.bpf_stats_enabled")
        .trim()
        .to_string()
}

fn runs(s: &CostSnapshot, program: &str) -> u64 {
    s.programs
        .iter()
        .find(|(n, _)| n == program)
        .unwrap_or_else(|| panic!("{program} missing from {s:?}"))
        .1
        .runs
}

/// The kernel's run count of the ledger's sched_switch (counted while the
/// test holds its own statistics fd).
fn kernel_runs(ledger: &Ledger) -> u64 {
    ledger
        .kernel_counters("sched_switch")
        .expect("sched_switch loaded")
        .run_count
}

/// Whether this process holds a BPF statistics fd now.
fn holds_stats_fd() -> bool {
    std::fs::read_dir("/proc/self/fd")
        .expect("read /proc/self/fd")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .any(|l| l.to_string_lossy().contains("bpf-stats"))
}

/// Two threads of this process hand a token back and forth, each blocking
/// until it comes back: at least one context switch per hand-over.
fn ping_pong(round_trips: u32) {
    let (to_b, from_a) = std::sync::mpsc::channel::<u32>();
    let (to_a, from_b) = std::sync::mpsc::channel::<u32>();
    let b = std::thread::spawn(move || {
        for v in from_a {
            if to_a.send(v).is_err() {
                break;
            }
        }
    });
    for i in 0..round_trips {
        to_b.send(i).expect("send");
        from_b.recv().expect("recv");
    }
    drop(to_b);
    b.join().expect("join");
}

/// The runs probe_cost reports for sched_switch (the ledger's own count,
/// one per-CPU add in every run) must equal the kernel's run count of the
/// program over the same window, read while the test holds a statistics
/// fd of its own. Catches a count taken from the wrong counter or
/// program, a window difference taken the wrong way, and runs left
/// uncounted on some path of the program.
///
/// The two counters cannot be read at one instant while other CPUs keep
/// switching, so each end of the window reads the kernel's count before
/// and after the ledger's. Counters only grow, so the kernel's inner
/// difference (read 2 → read 3) is at most, and the outer one (read 1 →
/// read 4) at least, the ledger's difference — up to one run per CPU that
/// has counted its switch but not yet had its run counted (the kernel
/// counts a run after the program returns). That bound comes from the
/// order of the reads, not from the machine being idle.
#[test]
fn sched_switch_runs_counted_by_the_ledger_equal_the_kernels() {
    if !root_or_skip("sched_switch_runs_counted_by_the_ledger_equal_the_kernels") {
        return;
    }
    let _serial = serial();
    let sysctl_before = bpf_stats_sysctl();
    let cpus = std::thread::available_parallelism().map_or(64, |n| n.get()) as u64;
    {
        let ledger = Ledger::attach().expect("attach the ledger");
        ledger
            .cost_available()
            .expect("BPF statistics can be enabled on this kernel");
        let _on = ttp_ledger::probe::cost::enable_stats().expect("BPF_ENABLE_STATS");
        let k1 = kernel_runs(&ledger);
        let c1 = ledger.cost_snapshot().expect("cost 1");
        let k2 = kernel_runs(&ledger);
        const ROUND_TRIPS: u32 = 5_000;
        ping_pong(ROUND_TRIPS);
        let k3 = kernel_runs(&ledger);
        let c2 = ledger.cost_snapshot().expect("cost 2");
        let k4 = kernel_runs(&ledger);

        let counted = runs(&c2, "sched_switch") - runs(&c1, "sched_switch");
        let (inner, outer) = (k3 - k2, k4 - k1);
        eprintln!(
            "ledger-counted runs {counted}; kernel's runs between the inner reads {inner}, outer reads {outer}"
        );
        assert!(
            inner <= counted + cpus && counted <= outer + cpus,
            "kernel runs {inner}..{outer} (± {cpus} in flight) vs ledger-counted {counted}"
        );
        // Every hand-over blocks one thread: the window cannot hold fewer
        // switches than hand-overs, so the comparison above is not vacuous.
        assert!(
            inner >= u64::from(ROUND_TRIPS),
            "only {inner} sched_switch runs for {ROUND_TRIPS} round trips: statistics not counting?"
        );
        let cost = ProbeCost::between(&c1, &c2);
        let sw = cost.program("sched_switch").expect("sched_switch row");
        assert_eq!(sw.runs, counted);
        assert!(sw.runs_counted, "{sw:?}");
        assert_eq!(
            cost.total.run_time_ns,
            cost.programs.iter().map(|p| p.run_time_ns).sum::<u64>()
        );
        assert!(cost.window_ns == c2.at_ns - c1.at_ns);
        eprintln!("cost over the ping-pong: {cost:?}");
    }
    assert_eq!(
        bpf_stats_sysctl(),
        sysctl_before,
        "kernel.bpf_stats_enabled must be as before once the ledger is gone"
    );
}

/// The statistics are on only inside the sampling windows: over 3 s of a
/// loaded ledger the process holds a statistics fd for about SAMPLE of
/// every PERIOD (two windows: ~0.4 s of 3 s), never the whole time, and
/// none once the ledger is gone; the sysctl is never written; and the
/// windows give sched_switch a mean ns a run, its run time runs × mean.
/// The bound (at most half the polls) leaves room for windows stretched
/// by a busy machine; holding the fd for the ledger's life would fail it.
#[test]
fn statistics_only_in_sampling_windows() {
    if !root_or_skip("statistics_only_in_sampling_windows") {
        return;
    }
    let _serial = serial();
    let sysctl_before = bpf_stats_sysctl();
    {
        let ledger = Ledger::attach().expect("attach the ledger");
        let c1 = ledger.cost_snapshot().expect("cost 1");
        let (mut polls, mut held) = (0u32, 0u32);
        let t0 = std::time::Instant::now();
        while t0.elapsed() < std::time::Duration::from_secs(3) {
            polls += 1;
            held += u32::from(holds_stats_fd());
            assert_eq!(bpf_stats_sysctl(), sysctl_before, "the sysctl was written");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let c2 = ledger.cost_snapshot().expect("cost 2");
        eprintln!("statistics fd held in {held} of {polls} polls over 3 s");
        assert!(held > 0, "no sampling window in 3 s");
        assert!(
            held * 2 < polls,
            "statistics fd held in {held} of {polls} polls: not in short windows"
        );
        let cost = ProbeCost::between(&c1, &c2);
        assert!(cost.sample_windows >= 1, "{cost:?}");
        let sw = cost.program("sched_switch").expect("sched_switch row");
        let mean = sw.ns_per_run.expect("sched_switch ran inside a window");
        assert!(mean > 0.0 && sw.sampled_runs > 0, "{sw:?}");
        assert_eq!(sw.run_time_ns, (sw.runs as f64 * mean).round() as u64);
    }
    assert!(
        !holds_stats_fd(),
        "a statistics fd left open after the ledger"
    );
    assert_eq!(bpf_stats_sysctl(), sysctl_before);
}

/// `attach` reports the probes' cost in its JSON and in words, and every
/// kernel counter in words rather than a debug dump. Catches the cost
/// missing from the command, a JSON total that is not the sum of its rows,
/// run time that is not runs × mean, no sampling window inside a 1 s
/// window (the first begins at the first image), and a wrong window
/// length.
#[test]
fn attach_reports_its_cost_and_losses_in_words() {
    if !root_or_skip("attach_reports_its_cost_and_losses_in_words") {
        return;
    }
    let _serial = serial();
    let sysctl_before = bpf_stats_sysctl();
    let json = temp_path("probe-cost-attach.json");
    let (code, out, err) = ttp(&[
        "attach",
        "--all",
        "--duration",
        "1s",
        "--quiet",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "attach failed: {err}");
    let v = json_file(&json);
    let _ = std::fs::remove_file(&json);
    let c = &v["probe_cost"];
    let rows = c["programs"].as_array().expect("probe_cost.programs");
    let sum = |f: &str| rows.iter().map(|r| r[f].as_u64().unwrap()).sum::<u64>();
    assert_eq!(c["total"]["runs"].as_u64(), Some(sum("runs")));
    assert_eq!(c["total"]["run_time_ns"].as_u64(), Some(sum("run_time_ns")));
    let sw = rows
        .iter()
        .find(|r| r["program"] == "sched_switch")
        .expect("sched_switch row");
    let runs = sw["runs"].as_u64().unwrap();
    assert!(
        runs > 0,
        "a second of the whole machine without a switch: {sw}"
    );
    // Run time is runs × the windows' mean, rounded to the ns.
    let mean = sw["ns_per_run"].as_f64().unwrap();
    let run_time = sw["run_time_ns"].as_u64().unwrap() as f64;
    assert!((mean * runs as f64 - run_time).abs() <= 0.5 + 1e-6, "{sw}");
    assert!(sw["runs_counted"] == true, "{sw}");
    assert!(c["sample_windows"].as_u64().unwrap_or(0) >= 1, "{c}");
    // The cost window lies inside the command's run: from its first image
    // to its last, about the --duration.
    let window_ns = c["window_ns"].as_u64().unwrap();
    assert!(
        (900_000_000..30_000_000_000).contains(&window_ns),
        "window {window_ns} ns for --duration 1s"
    );
    assert!(out.contains("ledger cost: "), "{out}");
    assert!(out.contains(" switches × "), "{out}");
    assert!(
        out.contains("lost in the kernel: nothing")
            || out.contains("LOST: ")
            || out.contains("repaired: "),
        "{out}"
    );
    assert!(
        !out.contains("KernelStats"),
        "debug dump in the text: {out}"
    );
    assert_eq!(bpf_stats_sysctl(), sysctl_before);
}
