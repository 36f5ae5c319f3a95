//! The probes' own cost (probe/cost.rs) against the ledger's own event
//! counters over the same window, and the machine left as it was (root;
//! see common::root_or_skip).
mod common;

use common::*;
use ttp_user::probe::{
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
        .run_count
}

fn switches(ledger: &Ledger) -> u64 {
    ledger.snapshot().expect("snapshot").stats.switches
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

/// sched_switch's run count from the kernel's BPF statistics must equal the
/// ledger's own count of switches (STATS, incremented once in every run of
/// sched_switch) over the same window. Catches statistics read from the
/// wrong program or the wrong field, a window difference taken the wrong
/// way, statistics not enabled while the ledger is loaded, and
/// kernel.bpf_stats_enabled left changed.
///
/// The two counters cannot be read at one instant while other CPUs keep
/// switching, so each end of the window reads the BPF statistics before and
/// after the ledger's counter. Counters only grow, so the statistics'
/// inner difference (read 2 → read 3) is at most, and the outer one
/// (read 1 → read 4) at least, the ledger's difference — up to one run per
/// CPU that has counted its switch but not yet had its run counted (the
/// kernel counts a run after the program returns). That bound comes from
/// the order of the reads, not from the machine being idle.
#[test]
fn sched_switch_runs_equal_the_ledgers_switch_count() {
    if !root_or_skip("sched_switch_runs_equal_the_ledgers_switch_count") {
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
        assert_eq!(
            bpf_stats_sysctl(),
            sysctl_before,
            "the fd-based BPF_ENABLE_STATS must not write the sysctl"
        );
        let c1 = ledger.cost_snapshot().expect("cost 1");
        let s1 = switches(&ledger);
        let c2 = ledger.cost_snapshot().expect("cost 2");
        const ROUND_TRIPS: u32 = 5_000;
        ping_pong(ROUND_TRIPS);
        let c3 = ledger.cost_snapshot().expect("cost 3");
        let s2 = switches(&ledger);
        let c4 = ledger.cost_snapshot().expect("cost 4");

        let ledger_switches = s2 - s1;
        let inner = runs(&c3, "sched_switch") - runs(&c2, "sched_switch");
        let outer = runs(&c4, "sched_switch") - runs(&c1, "sched_switch");
        eprintln!(
            "ledger switches {ledger_switches}; sched_switch runs between the inner reads {inner}, outer reads {outer}"
        );
        assert!(
            inner <= ledger_switches + cpus && ledger_switches <= outer + cpus,
            "sched_switch runs {inner}..{outer} (± {cpus} in flight) vs ledger switches {ledger_switches}"
        );
        // Every hand-over blocks one thread: the window cannot hold fewer
        // switches than hand-overs, so the comparison above is not vacuous.
        assert!(
            inner >= u64::from(ROUND_TRIPS),
            "only {inner} sched_switch runs for {ROUND_TRIPS} round trips: statistics not counting?"
        );
        let cost = ProbeCost::between(&c2, &c3);
        let sw = cost.program("sched_switch").expect("sched_switch row");
        assert_eq!(sw.runs, inner);
        assert!(
            sw.run_time_ns > 0 && sw.ns_per_run.is_some_and(|n| n > 0.0),
            "run time not counted: {sw:?}"
        );
        assert_eq!(
            cost.total.run_time_ns,
            cost.programs.iter().map(|p| p.run_time_ns).sum::<u64>()
        );
        assert!(cost.share_of_window > 0.0 && cost.window_ns == c3.at_ns - c2.at_ns);
        eprintln!("cost over the ping-pong: {cost:?}");
    }
    assert_eq!(
        bpf_stats_sysctl(),
        sysctl_before,
        "kernel.bpf_stats_enabled must be as before once the ledger is gone"
    );
}

/// `attach` reports the probes' cost in its JSON and in words, and every
/// kernel counter in words rather than a debug dump. Catches the cost
/// missing from the command, a JSON total that is not the sum of its rows,
/// a mean that is not run time over runs, and a wrong window length.
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
    let mean = sw["ns_per_run"].as_f64().unwrap();
    let expect = sw["run_time_ns"].as_u64().unwrap() as f64 / runs as f64;
    assert!((mean - expect).abs() < 1e-6, "{sw}");
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
