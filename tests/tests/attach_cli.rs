//! `ttp-ebpf attach` end to end (root): its JSON against the kernel's own
//! counters, children, and clean errors for bad input.
use crate::common;

use common::*;

/// Catches an attach summary whose numbers or cross-check drift from the
/// kernel: on-CPU vs schedstat within 1 % (or 2 ms), read bytes equal to
/// /proc/PID/io, iowait > 0 and below the wall time, mostly own I/O, nothing
/// lost, every comparison that should hold within tolerance.
#[test]
fn attach_by_pid_agrees_with_the_kernel() {
    if !root_or_skip("attach_by_pid_agrees_with_the_kernel") {
        return;
    }
    let _serial = serial();
    let mut fx = Held::start("fixture-mixed", &["--cpu-ms", "300", "--read-mib", "32"]);
    let pid = fx.pid().to_string();
    let json = temp_path("attach.json");
    let mut ttp = ttp_attached(&[
        "attach",
        "--pid",
        &pid,
        "--duration",
        "3s",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    let disk_bytes0 = disks_bytes();
    fx.go();
    fx.line();
    let disk_bytes1 = disks_bytes();
    let status = ttp.wait().expect("wait ttp");
    fx.finish();
    assert!(status.success(), "attach failed: {status}");
    let v = json_file(&json);
    assert_eq!(v["schema"], "ttp.attach/1");
    let p = &v["processes"][0];
    let k = &p["kernel"];
    let pr = &p["proc"];
    let on_cpu = k["on_cpu_ns"].as_f64().unwrap();
    let sched = pr["schedstat_run_ns"].as_f64().unwrap();
    // The ledger counts wall time on a CPU, schedstat excludes steal; and
    // on these VMs some context switches never reach the tracepoint
    // (docs/ledger.md): over six quiet runs five were within 0.16 % and one
    // off by 1.81 %. So 2 % plus twice the steal share, where the tool's own
    // cross-check flags beyond 1 %.
    let st = &v["overall"]["proc_stat"];
    let all: f64 = [
        "user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal",
    ]
    .iter()
    .map(|f| st[f].as_f64().unwrap_or(0.0))
    .sum();
    let steal = st["steal"].as_f64().unwrap_or(0.0) / all.max(1.0);
    eprintln!(
        "on_cpu − schedstat: {:.0} ns of an allowed {:.0} ns",
        on_cpu - sched,
        (sched * (0.02 + 2.0 * steal)).max(2e6)
    );
    assert!(
        within(on_cpu, sched, 0.02 + 2.0 * steal, 2e6),
        "on_cpu {on_cpu} vs schedstat {sched} (steal {steal:.4}); kernel {k}; lost {}",
        v["lost"]
    );
    assert!(
        on_cpu >= 300e6,
        "the fixture burned 300 ms of CPU, ledger says {on_cpu}"
    );
    assert_eq!(k["io"]["read_bytes"], pr["read_bytes"]);
    let read = k["io"]["read_bytes"].as_u64().unwrap();
    assert!(read_bytes_cover(read, 32 << 20), "read bytes {read}");
    let iowait = k["iowait_ns"].as_f64().unwrap();
    assert!(iowait > 0.0 && iowait < v["window"]["duration_ns"].as_f64().unwrap());
    // Own I/O accrues only while the disk serves this process's requests:
    // bounded by its I/O wait and its device time.
    let own = k["iowait_own_ns"].as_f64().unwrap();
    let device = k["io"]["device_ns"].as_f64().unwrap();
    assert!(own > 0.0, "no own I/O for 32 MiB of reads");
    assert!(own <= iowait + 1e6, "own {own} beyond iowait {iowait}");
    assert!(own <= device + 1e6, "own {own} beyond device time {device}");
    let device_bytes = disk_bytes1.saturating_sub(disk_bytes0);
    eprintln!(
        "iowait {iowait} own {own} device {device}; disk bytes {device_bytes} for our {read}"
    );
    // No lower bound beyond > 0: another process's request in service at
    // the same moment halves the share (1/n), and byte counts cannot show
    // such requests (a cache flush moves no bytes and can take
    // milliseconds on this disk); CPU contention between a request's issue
    // and the sleep moves device time outside the wait. Quiet runs give
    // own = iowait (the figures printed above).
    assert_eq!(v["lost"]["kernel"]["exit_records_lost"], 0);
    assert_eq!(v["lost"]["kernel"]["thread_map_full"], 0);
    // Delay accounting's blkio delay is erratic under CPU contention on the
    // reference kernel (docs/ttpv2.md, "BlockIO comes from the ledger"): the
    // tool still compares and flags it, the test does not rely on it.
    for a in p["agreement"].as_array().unwrap() {
        if a["reference"].as_str().unwrap().contains("blkio") {
            continue;
        }
        assert!(
            a["within"].as_bool().unwrap() || a.get("informational").is_some(),
            "cross-check outside tolerance: {a}"
        );
    }
    assert!(
        !v["overall"]["kernel"]["cpus"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(v["overall"]["proc_stat"]["iowait"].is_u64());
    let _ = std::fs::remove_file(json);
}

/// Catches children missed by `--children` (forked and gone between two
/// reads) and a target exit that does not end attach.
#[test]
fn attach_children_sees_all_200_and_ends_when_the_target_exits() {
    if !root_or_skip("attach_children_sees_all_200_and_ends_when_the_target_exits") {
        return;
    }
    let _serial = serial();
    let mut fx = Held::start(
        "fixture-forker",
        &["--children", "200", "--child-cpu-us", "300"],
    );
    let parent = fx.pid();
    let json = temp_path("children.json");
    let mut ttp = ttp_attached(&[
        "attach",
        "--pid",
        &parent.to_string(),
        "--children",
        "--interval",
        "200ms",
        "--duration",
        "60s",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    fx.go();
    let pids: Vec<u64> = fx.numbers_to_end();
    assert_eq!(pids.len(), 200);
    let status = ttp.wait().expect("wait ttp");
    assert!(status.success());
    let v = json_file(&json);
    assert!(
        v["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("exited"))
    );
    let procs = v["processes"].as_array().unwrap();
    // A child whose switch-in never reached the tracepoint (docs/ledger.md)
    // has its 300 µs run booked as run-queue wait; at most 2 % may.
    let mut without_cpu = 0;
    for pid in &pids {
        let p = procs
            .iter()
            .find(|p| p["pid"].as_u64() == Some(*pid))
            .unwrap_or_else(|| panic!("child {pid} missing from attach --children"));
        let k = &p["kernel"];
        let on_cpu = k["on_cpu_ns"].as_u64().unwrap();
        assert!(
            on_cpu + k["runq_wait_ns"].as_u64().unwrap() > 0,
            "child {pid} not accounted"
        );
        if on_cpu == 0 {
            without_cpu += 1;
        }
        assert_eq!(p["exited"], true);
    }
    assert!(
        without_cpu <= 4,
        "{without_cpu} of 200 children without on-CPU time"
    );
    let _ = std::fs::remove_file(json);
}

/// `attach --pid` of a target killed 0.5 s in, with a 5 s refresh: the
/// window ends at the exit (the test's own clock at the kill), not at the
/// next refresh. The end must come after the kill and within 2.5 s of it:
/// half the refresh, so a window that waits for the refresh fails by
/// seconds, while the wake-up itself takes milliseconds even on a loaded
/// machine. Catches a target that exits after 1.09 s reported "over 2 s".
#[test]
fn attach_ends_the_window_when_the_target_exits() {
    if !root_or_skip("attach_ends_the_window_when_the_target_exits") {
        return;
    }
    let _serial = serial();
    let mut target = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("sleep");
    let json = temp_path("exit-window.json");
    let mut ttp = ttp_attached(&[
        "attach",
        "--pid",
        &target.id().to_string(),
        "--interval",
        "5s",
        "--duration",
        "60s",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let killed_ns = monotonic_ns();
    target.kill().expect("kill sleep");
    target.wait().expect("reap sleep");
    assert!(ttp.wait().expect("wait ttp").success());
    let v = json_file(&json);
    let end_ns = v["window"]["end_ns"].as_u64().unwrap();
    assert!(end_ns >= killed_ns, "window ended before the target exited");
    let late_ms = (end_ns - killed_ns) as f64 / 1e6;
    assert!(
        late_ms < 2500.0,
        "window ended {late_ms:.1} ms after the exit"
    );
    assert_eq!(v["processes"][0]["exited"], true);
    let _ = std::fs::remove_file(json);
}

/// A target that exits inside the window (`dd` copying 1 GB of zeros in
/// 1 KiB blocks, on CPU for a few hundred ms) is cross-checked against its
/// taskstats exit record: the record is there and the ledger's on-CPU time
/// is not short of its runtime (within tolerance, or above it by the exit
/// path that follows the record, which the row then says). Catches `taskstats: null` and no cross-check
/// for a process whose exit record arrived.
#[test]
fn an_exited_target_is_cross_checked_from_its_exit_record() {
    if !root_or_skip("an_exited_target_is_cross_checked_from_its_exit_record") {
        return;
    }
    let _serial = serial();
    let mut target = std::process::Command::new("sh")
        .args([
            "-c",
            "read go; exec dd if=/dev/zero of=/dev/null bs=1k count=1000000 2>/dev/null",
        ])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("sh");
    let json = temp_path("exit-record.json");
    let mut ttp = ttp_attached(&[
        "attach",
        "--pid",
        &target.id().to_string(),
        "--duration",
        "60s",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    use std::io::Write;
    writeln!(target.stdin.take().unwrap(), "go").unwrap();
    assert!(target.wait().expect("dd").success());
    assert!(ttp.wait().expect("wait ttp").success());
    let v = json_file(&json);
    let p = &v["processes"][0];
    assert_eq!(p["exited"], true);
    // The taskstats record travels by netlink; a socket that overflowed
    // (other processes' exits on a busy machine) may have dropped it, which
    // the tool counts and says. Without an overflow it must be there.
    let overflows = v["lost"]["taskstats_listener_overflows"]
        .as_u64()
        .unwrap_or(0);
    if p["taskstats"].is_null() && overflows > 0 {
        eprintln!(
            "the exit record was lost with {overflows} listener overflow(s), counted in the report"
        );
        return;
    }
    assert!(
        p["taskstats"].is_object(),
        "taskstats: {} (listener overflows {overflows}, notes {})",
        p["taskstats"],
        v["notes"]
    );
    assert!(p["kernel"]["on_cpu_ns"].as_u64().unwrap() > 50_000_000);
    let row = p["agreement"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["reference"] == "taskstats exit record cpu_run_virtual_total")
        .unwrap_or_else(|| panic!("no exit-record comparison: {}", p["agreement"]));
    // The ledger may exceed the record by the exit path after it (marked
    // informational, its length unknown to the kernel), never fall short.
    let (ledger, kernel, tol) = (
        row["ledger"].as_u64().unwrap(),
        row["kernel"].as_u64().unwrap(),
        row["tolerance"].as_u64().unwrap(),
    );
    assert!(
        ledger + tol >= kernel,
        "ledger short of the exit record: {row}"
    );
    assert!(
        row["within"] == true || row["informational"].is_string(),
        "{row}"
    );
    let _ = std::fs::remove_file(json);
}

/// Catches bad input that panics, hangs or exits 0: each gets one clear
/// line and exit code 2.
#[test]
fn bad_input_gets_a_clear_error_and_exit_2() {
    if !root_or_skip("bad_input_gets_a_clear_error_and_exit_2") {
        return;
    }
    let _serial = serial();
    let (code, _, err) = ttp(&["attach", "--pid", "999999999"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no process with pid 999999999"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    let (code, _, err) = ttp(&["attach", "--pid", "1", "--duration", "0s"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("greater than zero"), "{err}");
    let (code, _, err) = ttp(&["attach", "--pid", "1", "--duration", "ten"]);
    assert_eq!(code, 2, "{err}");
    let out = std::process::Command::new(ttp_bin())
        .args(["attach", "--pid", "1", "--duration", "1s"])
        .env("TTP_VMLINUX_BTF", "/nonexistent/vmlinux")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no kernel BTF"), "{err}");
    // Not root: drop to nobody with setpriv (util-linux).
    let out = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(ttp_bin())
        .args(["attach", "--pid", "1", "--duration", "1s"])
        .output()
        .expect("setpriv");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("sudo"), "the error says to use sudo: {err}");
}

/// Runtime (ns) of every thread of process `pid`, from
/// /proc/PID/task/*/schedstat.
fn process_runtime(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
                .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0)
}

/// `attach --all` for 4 s: pid 1 may not be charged more on-CPU than its
/// threads' runtime grew around the command (1 % + 2 ms). Catches a thread
/// kept "running" after a switch-out the tracepoint missed and charged a
/// CPU's idle time (pid 1 was charged 6.7–7.8 s in 4 s against 2–13 ms).
/// The command's window lies inside the two /proc reads, so only time the
/// kernel did not count can break the bound.
#[test]
fn attach_all_charges_pid_1_no_more_than_its_runtime() {
    if !root_or_skip("attach_all_charges_pid_1_no_more_than_its_runtime") {
        return;
    }
    let _serial = serial();
    let json = temp_path("attach-all.json");
    let before = process_runtime(1);
    let (code, _, err) = ttp(&[
        "attach",
        "--all",
        "--duration",
        "4s",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    let after = process_runtime(1);
    assert_eq!(code, 0, "attach --all failed: {err}");
    let v = json_file(&json);
    let p1 = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == 1)
        .expect("pid 1 in attach --all");
    let on_cpu = p1["kernel"]["on_cpu_ns"].as_f64().unwrap();
    let kernel = after.saturating_sub(before) as f64;
    eprintln!("pid 1: ledger {on_cpu} ns, schedstat Δ {kernel} ns");
    assert!(
        on_cpu <= kernel * 1.01 + 2e6,
        "pid 1 charged {on_cpu} ns of on-CPU against {kernel} ns of runtime"
    );
    // No wake-up program without --wake-latency: the measure is not taken.
    assert!(
        p1["kernel"]["wake_latency_ns"].is_null(),
        "wake_latency_ns without --wake-latency: {}",
        p1["kernel"]["wake_latency_ns"]
    );
    assert!(
        v["probe_cost"]["programs"]
            .as_array()
            .is_none_or(|ps| ps.iter().all(|p| p["program"] != "sched_wakeup")),
        "sched_wakeup loaded by default"
    );
    let _ = std::fs::remove_file(json);
}
