//! `ttp-ebpf run` (TTPv2) end to end (root).
use crate::common;

use common::*;

fn rsd(v: &[f64]) -> f64 {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    var.sqrt() / mean
}

/// TTPv2's point (Sec. 10): under noise on the same CPU, the calculated
/// time varies far less than the measured time. Catches per-process
/// measures taken from the wrong process or window, lost children, a
/// Time_calc that follows wall time, and an exact time that disagrees with
/// the paper's formula beyond tick truncation.
#[test]
fn run_under_noise_time_calc_is_stable_and_exact_time_agrees() {
    if !root_or_skip("run_under_noise_time_calc_is_stable_and_exact_time_agrees") {
        return;
    }
    let _serial = serial();
    // On the workload's CPU, each 700 ms period is either a CPU burst or
    // idle, at random (so each QE's wall time differs), plus a 4 KiB synced
    // write and a short-lived process every period.
    let noise = Background::start(
        "fixture-noise",
        &["--coin", "--period-ms", "700", "--io", "--spawn"],
    );
    pin(noise.0.id(), 1);
    let json = temp_path("run.json");
    let mixed = fixture("fixture-mixed");
    let (code, out, err) = ttp(&[
        "run",
        "-n",
        "10",
        "--cold-cache",
        "--as-root",
        "--json",
        json.to_str().unwrap(),
        "--",
        "taskset",
        "-c",
        "1",
        mixed.to_str().unwrap(),
        "--cpu-ms",
        "500",
        "--read-mib",
        "8",
    ]);
    drop(noise);
    assert_eq!(code, 0, "run failed: {err}");
    let v = json_file(&json);
    assert_eq!(v["schema"], "ttp.run/1");
    let qes = v["qes"].as_array().unwrap();
    assert_eq!(qes.len(), 10);
    // The kernel's delay accounting sometimes charges the query process an
    // uptime-sized BlockIO delay (a wait with no recorded start; see
    // docs/ttpv2.md); TTPv2's QE8 flags it. Such QEs are left out here; the
    // ledger's iowait for the same process stays right.
    let query_of = |q: &serde_json::Value| {
        q["processes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["class"] == "query")
            .cloned()
            .expect("query process")
    };
    let kept: Vec<&serde_json::Value> = qes
        .iter()
        .filter(|q| {
            query_of(q)["blkio_ticks"].as_f64().unwrap() * 10.0
                <= q["time_meas_ms"].as_f64().unwrap()
        })
        .collect();
    assert!(
        kept.len() >= 6,
        "{} of 10 QEs with an impossible query BlockIO",
        10 - kept.len()
    );
    let meas: Vec<f64> = kept
        .iter()
        .map(|q| q["time_meas_ms"].as_f64().unwrap())
        .collect();
    let calc: Vec<f64> = kept
        .iter()
        .map(|q| q["time_calc_ms"].as_f64().unwrap())
        .collect();
    let exact: Vec<f64> = kept
        .iter()
        .map(|q| q["time_exact_ms"].as_f64().unwrap())
        .collect();
    eprintln!("Time_meas {meas:?}\nTime_calc {calc:?}\nexact {exact:?}\n{out}");
    // The noise is on the CPU: Time_calc's CPU part (U + S) must vary far
    // less than Time_meas. Its I/O part (BlockIO − 0.5 × IOWait) follows
    // whatever else uses the disk, which a busy machine decides, so the
    // stability is asserted on the part the noise acts on.
    let su: Vec<f64> = kept
        .iter()
        .map(|q| {
            (q["query"]["u_ticks"].as_u64().unwrap() + q["query"]["s_ticks"].as_u64().unwrap())
                as f64
        })
        .collect();
    let (r_meas, r_su) = (rsd(&meas), rsd(&su));
    assert!(
        r_su <= r_meas / 5.0,
        "RSD of U+S {r_su:.4} vs Time_meas {r_meas:.4}"
    );
    // Time_calc − exact = (U+S − on-CPU) + (BlockIO − own I/O) − 0.5 ×
    // IOWait (eq. 1–2). The last two terms depend on who else used the
    // disk (a busy machine's writer makes the query wait behind it and
    // adds IOWait), which the tool does not control; the first is the
    // tool's: /proc's U and S of the query against the ledger's on-CPU,
    // each truncated to a 10 ms tick (2 ticks), plus 2 % for context
    // switches the tracepoint misses on these VMs (docs/ledger.md).
    for q in &kept {
        let qm = &q["query"];
        let su_ms =
            (qm["u_ticks"].as_u64().unwrap() + qm["s_ticks"].as_u64().unwrap()) as f64 * 10.0;
        let on_cpu_ms = qm["on_cpu_ns"].as_u64().unwrap() as f64 / 1e6;
        assert!(
            (su_ms - on_cpu_ms).abs() <= 20.0 + 0.02 * on_cpu_ms,
            "QE {}: U+S {su_ms} ms vs on-CPU {on_cpu_ms} ms",
            q["qe"]
        );
    }
    for q in qes {
        assert_eq!(
            q["ephemeral_processes"].as_u64(),
            Some(0),
            "ephemeral processes in QE {}",
            q["qe"]
        );
        let query = query_of(q);
        assert_eq!(query["comm"], "fixture-mixed");
        // 8 MiB of O_DIRECT reads, plus its binary and libraries read back
        // after the page cache was dropped.
        let read = query["read_bytes"].as_u64().unwrap();
        assert!(
            (8 << 20..(8 << 20) + (16 << 20)).contains(&read),
            "query read {read} bytes"
        );
    }
    assert!(
        v["paragraph"]
            .as_str()
            .unwrap()
            .contains("Tucson Timing Protocol")
    );
    assert!(
        v["checks"].as_array().unwrap().len() >= 25,
        "every check reported"
    );
    assert!(out.contains("Time_calc"));
    let _ = std::fs::remove_file(json);
}

/// `taskset -c 0 ttp-ebpf run`: the CPU count is what the overall /proc/stat
/// counters sum over (its `cpuN` lines, read here independently), not the
/// one CPU of the affinity mask, and the Sec. 9 paragraph says the run was
/// pinned. Catches `available_parallelism()` (1 under taskset) as
/// `setup.cpus`, and a pinned run reported as if it could use every CPU.
#[test]
fn pinned_run_counts_every_online_cpu_and_says_it_was_pinned() {
    if !root_or_skip("pinned_run_counts_every_online_cpu_and_says_it_was_pinned") {
        return;
    }
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let summed = stat
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count() as u64;
    if summed < 2 {
        eprintln!("skipped: one online CPU, nothing to pin away from");
        return;
    }
    let _serial = serial();
    let json = temp_path("pinned.json");
    let out = std::process::Command::new("taskset")
        .args(["-c", "0"])
        .arg(ttp_bin())
        .args(["run", "-n", "2", "--as-root", "--json"])
        .arg(&json)
        .args(["--", "true"])
        .output()
        .expect("taskset runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_file(&json);
    assert_eq!(v["setup"]["cpus"].as_u64(), Some(summed), "{}", v["setup"]);
    assert_eq!(v["machine"]["affinity_cpus"], serde_json::json!([0]));
    assert!(
        stdout.contains(&format!(
            "pinned to CPU 0 (1 of the {summed} online CPUs, by their affinity mask)"
        )),
        "{stdout}"
    );
    let _ = std::fs::remove_file(json);
}

/// Catches an interrupted run that loses what it measured, and a missing
/// command that hangs or is not counted by X1.
#[test]
fn interrupted_run_keeps_its_qes_and_a_missing_command_is_a_clear_error() {
    if !root_or_skip("interrupted_run_keeps_its_qes_and_a_missing_command_is_a_clear_error") {
        return;
    }
    let _serial = serial();
    let json = temp_path("interrupted.json");
    let mut child = std::process::Command::new(ttp_bin())
        .args([
            "run",
            "-n",
            "100",
            "--json",
            json.to_str().unwrap(),
            "--",
            "sleep",
            "0.2",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Ok(t) = std::fs::read_to_string(&json)
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&t)
            && v["qes"].as_array().is_some_and(|q| q.len() >= 3)
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no QEs written within 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert!(status.success(), "interrupted run exits cleanly: {status}");
    let v = json_file(&json);
    let qes = v["qes"].as_array().unwrap();
    assert!(qes.len() >= 3 && qes.len() < 100);
    assert!(
        qes.iter()
            .all(|q| q["time_meas_ms"].as_f64().unwrap() >= 200.0)
    );
    let _ = std::fs::remove_file(&json);

    // A program that does not exist: one line, exit 2, nothing written.
    let (code, out, err) = ttp(&[
        "run",
        "-n",
        "3",
        "--json",
        json.to_str().unwrap(),
        "--",
        "/nonexistent/program",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/nonexistent/program"), "{err}");
    assert!(
        out.is_empty() && !json.exists(),
        "no report, no file: {out}"
    );
    // A program that runs and fails is a missing query (X1).
    let (code, _, err) = ttp(&[
        "run",
        "-n",
        "3",
        "--as-root",
        "--json",
        json.to_str().unwrap(),
        "--",
        "false",
    ]);
    assert_eq!(code, 0, "{err}");
    let v = json_file(&json);
    let x1 = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "X1")
        .unwrap();
    assert!(
        x1["violations"].as_u64() >= Some(1),
        "X1 counts the missing program: {x1}"
    );
    assert!(
        x1["offenders"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o == "qe 1"),
        "{x1}"
    );
    let _ = std::fs::remove_file(json);
}

/// `run --blame`: a command pinned to CPU 0 beside a CPU burner pinned
/// there too. Each QE's blame must put the command's run-queue wait on the
/// burner, and its CPU blocked time must be the run-queue wait the run's
/// own ledger measured for the query process (a separate ledger instance;
/// tests/ledger.rs holds that one to schedstat's run_delay). Catches a
/// blame that starts after the command (missed windows), a victim that is
/// not the command, or a culprit that is not the burner, or blamed for
/// more CPU than it ran. The burner ranks first only when CPU 0 was not
/// shared with others' work (a busy machine decides that, not the tool).
#[test]
fn run_blame_puts_each_qes_cpu_wait_on_the_burner() {
    if !root_or_skip("run_blame_puts_each_qes_cpu_wait_on_the_burner") {
        return;
    }
    let _serial = serial();
    let burner = Background::start("fixture-spin", &["--pin", "0", "--cpu-ms", "120000"]);
    let burner_pid = u64::from(burner.0.id());
    let (burner_cpu0, _) = schedstat(burner.0.id());
    let json = temp_path("run-blame.json");
    let spin = fixture("fixture-spin");
    let (code, out, err) = ttp(&[
        "run",
        "-n",
        "3",
        "--blame",
        "--json",
        json.to_str().unwrap(),
        "--",
        spin.to_str().unwrap(),
        "--pin",
        "0",
        "--cpu-ms",
        "300",
    ]);
    let (burner_cpu1, _) = schedstat(burner.0.id());
    drop(burner);
    assert_eq!(code, 0, "run --blame failed: {err}");
    assert!(out.contains("Contention blame per QE"), "{out}");
    let v = json_file(&json);
    let qes = v["qes"].as_array().unwrap();
    assert_eq!(qes.len(), 3);
    let mut burner_blamed_ns = 0.0;
    for q in qes {
        let b = &q["blame"];
        assert!(
            b.is_object(),
            "QE {} has no blame: {}",
            q["qe"],
            q["blame_error"]
        );
        let query = q["processes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["class"] == "query")
            .expect("query process");
        let runq = query["runq_wait_ns"].as_f64().unwrap();
        let cpu = b["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "cpu")
            .expect("cpu resource");
        let blocked = cpu["blocked_ns"].as_f64().unwrap();
        // Sharing CPU 0 with a burner, 300 ms of CPU waits about as long.
        assert!(runq > 100e6, "QE {}: run-queue wait {runq}", q["qe"]);
        assert!(
            within(blocked, runq, 0.05, 10e6),
            "QE {}: blame's CPU blocked time {blocked} vs the ledger's run-queue wait {runq}",
            q["qe"]
        );
        let kinds: f64 = cpu["by_kind"]
            .as_object()
            .unwrap()
            .values()
            .map(|x| x.as_f64().unwrap())
            .sum();
        assert!(
            within(kinds, blocked, 0.01, 1e6),
            "causes add up to {kinds}, not {blocked}"
        );
        // Alone with the victim on CPU 0 the burner explains ~95 % and ranks
        // first (ttp's own threads take the rest). On a busy machine other
        // programs land on CPU 0 too and take their share of the victim's
        // wait, which the tool does not control; what it controls is that
        // the burner is blamed, and that whatever the burner does not
        // explain is explained by the other processes it names.
        let cpu_blame = |e: &serde_json::Value| {
            (e["resource"] == "cpu")
                .then(|| e["blame_ns"].as_f64())
                .flatten()
        };
        let explanations = b["explanations"].as_array().unwrap();
        let burner_blame = explanations
            .iter()
            .filter(|e| e["pid"].as_u64() == Some(burner_pid))
            .filter_map(cpu_blame)
            .sum::<f64>();
        let others: f64 = explanations
            .iter()
            .filter(|e| e["pid"].as_u64().is_some_and(|p| p != burner_pid))
            .filter_map(cpu_blame)
            .sum();
        assert!(
            burner_blame > 0.0,
            "QE {}: the burner is not blamed",
            q["qe"]
        );
        eprintln!(
            "QE {}: burner {burner_blame} ns, named others {others} ns of {blocked} ns",
            q["qe"]
        );
        burner_blamed_ns += burner_blame;
        // With more than half of the wait, nobody else can rank above it
        // (below half, another program on CPU 0 may, on a busy machine).
        if burner_blame > 0.5 * blocked {
            let top = &explanations[0];
            assert_eq!(
                top["pid"].as_u64(),
                Some(burner_pid),
                "QE {}: {top}",
                q["qe"]
            );
        }
    }
    // Blame cannot exceed what the culprit actually ran: the burner's
    // on-CPU time over the whole run (schedstat), plus 5 % for the missed
    // context switches of these VMs.
    let burner_ran = (burner_cpu1 - burner_cpu0) as f64;
    assert!(
        burner_blamed_ns <= 1.05 * burner_ran + 10e6,
        "the burner is blamed {burner_blamed_ns} ns but ran {burner_ran} ns"
    );
}

/// `run --cpu N`: each execution sees only CPU N in its own
/// /proc/self/status (the kernel's view, printed through --show-output),
/// the JSON's machine deviations and the Sec. 9 paragraph say so, and a
/// CPU ttp may not use is refused in one line with exit 2. Catches a pin
/// that is not applied, not inherited across exec, or not reported.
#[test]
fn run_cpu_pins_the_command_and_says_so() {
    if !root_or_skip("run_cpu_pins_the_command_and_says_so") {
        return;
    }
    let _serial = serial();
    // The last CPU online: pinning there is not the default placement.
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let cpu: u32 = online
        .trim()
        .rsplit([',', '-'])
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let json = temp_path("pinned.json");
    let (code, out, err) = ttp(&[
        "run",
        "-n",
        "2",
        "--cpu",
        &cpu.to_string(),
        "--show-output",
        "--json",
        json.to_str().unwrap(),
        "--",
        "grep",
        "Cpus_allowed_list",
        "/proc/self/status",
    ]);
    assert_eq!(code, 0, "{err}");
    let seen: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("Cpus_allowed_list"))
        .collect();
    // The warm-up execution (--warmup, 1 by default) and the 2 QEs.
    assert_eq!(seen, vec![format!("Cpus_allowed_list:\t{cpu}"); 3], "{out}");
    let v = json_file(&json);
    let pinned = format!("pinned to CPU {cpu} with sched_setaffinity");
    assert!(
        v["machine"]["deviations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d.as_str().unwrap().contains(&pinned)),
        "{}",
        v["machine"]
    );
    assert!(out.contains(&pinned), "the paragraph states it: {out}");
    let _ = std::fs::remove_file(&json);
    let (code, _, err) = ttp(&["run", "-n", "1", "--cpu", "4096", "--", "true"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
