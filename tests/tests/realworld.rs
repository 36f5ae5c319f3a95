//! `ttp-ebpf run` on real programs from Debian packages (coreutils `sort
//! --parallel`, `xz -T2`, gzip; installed by `cargo xtask setup`), each
//! compared with an independent tool on the same executions: GNU time
//! (`/usr/bin/time`, the children's rusage from wait4) wraps every
//! execution and appends its user + system time to a file, one line per
//! QE. Root.
use crate::common;

use common::*;
use serde_json::Value;

/// /usr/bin/time's `%U %S` lines: user + system seconds per execution, in
/// ms.
fn time_lines(path: &std::path::Path) -> Vec<f64> {
    std::fs::read_to_string(path)
        .expect("/usr/bin/time output")
        .lines()
        .filter_map(|l| {
            let v: Vec<f64> = l
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            (v.len() == 2).then(|| (v[0] + v[1]) * 1000.0)
        })
        .collect()
}

fn require(tool: &str) {
    assert!(
        std::path::Path::new(tool).exists(),
        "{tool} missing: run `cargo xtask setup` (installs coreutils, xz-utils, gzip, time)"
    );
}

/// A file of `lines` pseudo-random decimal lines (a fixed LCG, so every
/// run sorts and compresses the same data).
fn random_lines(name: &str, lines: usize) -> std::path::PathBuf {
    use std::io::Write;
    let path = temp_path(name);
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).expect("data file"));
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..lines {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        writeln!(f, "{:020} {:x}", x >> 11, x.rotate_left(17)).unwrap();
    }
    f.flush().unwrap();
    path
}

/// Runs `run -n N --as-root --json FILE -- /usr/bin/time -a -o TIMES -f
/// "%U %S" CMD…` and returns (report, JSON, GNU time's ms per QE, the
/// warm-up's lines left out).
fn run_timed(name: &str, n: u32, cmd: &[&str]) -> (String, Value, Vec<f64>) {
    require("/usr/bin/time");
    let json = temp_path(&format!("{name}.json"));
    let times = temp_path(&format!("{name}.times"));
    let _ = std::fs::remove_file(&times);
    let n_s = n.to_string();
    let mut args = vec![
        "run",
        "-n",
        &n_s,
        "--as-root",
        "--json",
        json.to_str().unwrap(),
        "--",
        "/usr/bin/time",
        "-a",
        "-o",
        times.to_str().unwrap(),
        "-f",
        "%U %S",
    ];
    args.extend_from_slice(cmd);
    let (code, out, err) = ttp(&args);
    assert_eq!(code, 0, "ttp run failed: {err}\n{out}");
    let doc = json_file(&json);
    let mut t = time_lines(&times);
    let _ = std::fs::remove_file(&json);
    let _ = std::fs::remove_file(&times);
    // run's warm-up executions ran first (docs/ttpv2.md, "Warm-up
    // executions"): their lines come before the QEs'.
    let warmups = doc["setup"]["warmup"].as_array().map_or(0, Vec::len);
    assert_eq!(
        t.len(),
        warmups + n as usize,
        "one /usr/bin/time line per warm-up and QE"
    );
    let t = t.split_off(warmups);
    (out, doc, t)
}

fn query(qe: &Value) -> &Value {
    &qe["query"]
}

fn u64_of(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

/// Per QE: the query's U + S (ticks, 10 ms) against GNU time's user +
/// system of the same execution and against the ledger's exact on-CPU
/// time, within 5 %. The bound's absolute part: /usr/bin/time
/// prints 10 ms resolution for U and S each, /proc truncates U and S to
/// ticks each, and GNU time's own process (counted by ttp as part of the
/// command, not by its own rusage) uses well under a tick: 3 ticks.
fn assert_cpu_matches(what: &str, doc: &Value, gnu_ms: &[f64]) {
    let qes = doc["qes"].as_array().expect("qes");
    for (qe, gnu) in qes.iter().zip(gnu_ms) {
        let q = query(qe);
        let us_ms = (u64_of(q, "u_ticks") + u64_of(q, "s_ticks")) as f64 * 10.0;
        let exact_ms = u64_of(q, "on_cpu_ns") as f64 / 1e6;
        assert!(
            within(us_ms, *gnu, 0.05, 30.0),
            "{what} QE {}: U+S {us_ms} ms vs /usr/bin/time {gnu} ms",
            qe["qe"]
        );
        assert!(
            within(us_ms, exact_ms, 0.05, 30.0),
            "{what} QE {}: U+S {us_ms} ms vs the ledger's on-CPU {exact_ms} ms",
            qe["qe"]
        );
    }
}

/// A program whose 4 threads burn 300 ms each, under `sh -c 'prog; true'`
/// (the shell reaps it, so only its exit records remain). Catches the
/// process's time taken from its main thread's exit record alone: U = S =
/// 0 and every QE dropped by QE3.
#[test]
fn threads_under_a_shell_keep_their_cpu_time() {
    if !root_or_skip("threads_under_a_shell_keep_their_cpu_time") {
        return;
    }
    let _serial = serial();
    let spin = fixture("fixture-spin");
    let script = format!("{} --threads 4 --cpu-ms 300; true", spin.display());
    let (_, doc, gnu) = run_timed("threads-sh", 3, &["sh", "-c", &script]);
    assert_cpu_matches("4 threads under sh", &doc, &gnu);
    for qe in doc["qes"].as_array().unwrap() {
        let us = u64_of(query(qe), "u_ticks") + u64_of(query(qe), "s_ticks");
        assert!(us >= 114, "4 × 300 ms is 120 ticks, got {us}: {qe}");
        let by: Vec<&str> = qe["dropped_by"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(!by.contains(&"QE3"), "dropped as zero query time: {by:?}");
    }
}

/// The same program run directly on this machine's CPUs: its
/// CPU time exceeds its wall time whenever its threads ran in parallel,
/// so the paper's one-CPU QE4 fires where the time does; ttp's QE4 bounds
/// it by the CPUs the query ran on and drops none of them. Catches QE4
/// left at one CPU, a thread count not measured, and a literal rule that
/// is not reported.
#[test]
fn parallel_query_is_not_dropped_by_qe4() {
    if !root_or_skip("parallel_query_is_not_dropped_by_qe4") {
        return;
    }
    let _serial = serial();
    let spin = fixture("fixture-spin");
    let (out, doc, gnu) = run_timed(
        "threads-direct",
        3,
        &[spin.to_str().unwrap(), "--threads", "4", "--cpu-ms", "300"],
    );
    assert_cpu_matches("4 threads", &doc, &gnu);
    let cpus = doc["setup"]["cpus"].as_u64().unwrap();
    let mut literal_expected = Vec::new();
    for qe in doc["qes"].as_array().unwrap() {
        let most = qe["query_threads_max"].as_u64().expect("query_threads_max");
        // The fixture's 4 workers ran; /usr/bin/time and the main thread
        // wait, but ran too at their start.
        assert!(
            (4..=6).contains(&most),
            "threads at once {most}, expected the 4 workers (+ time, main)"
        );
        let by: Vec<&str> = qe["dropped_by"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(!by.contains(&"QE4"), "QE {} dropped by QE4", qe["qe"]);
        let q = query(qe);
        let ticks = u64_of(q, "u_ticks") + u64_of(q, "s_ticks") + u64_of(q, "blkio_ticks");
        if ticks as f64 * 10.0 > qe["time_meas_ms"].as_f64().unwrap() {
            literal_expected.push(format!("qe {}", qe["qe"]));
        }
    }
    let qe4 = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "QE4")
        .unwrap();
    let lit = &qe4["paper_literal"];
    let offenders: Vec<String> = lit["offenders"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        offenders, literal_expected,
        "the paper's literal QE4 is reported for exactly the QEs whose ticks exceed Time_meas"
    );
    if cpus > 1 {
        assert!(
            out.contains("threads at once on this"),
            "the report says how many CPUs the query used:\n{out}"
        );
    }
}

/// GNU sort with two threads on 1.5 M lines, under a shell. Catches a
/// multi-threaded real program's worker threads lost (U+S far below
/// /usr/bin/time).
#[test]
fn sort_parallel_matches_gnu_time() {
    if !root_or_skip("sort_parallel_matches_gnu_time") {
        return;
    }
    require("/usr/bin/sort");
    let _serial = serial();
    let data = random_lines("sort.txt", 1_500_000);
    let script = format!(
        "sort --parallel=2 -S 256M {} -o /dev/null; true",
        data.display()
    );
    let (_, doc, gnu) = run_timed("sort", 3, &["sh", "-c", &script]);
    let _ = std::fs::remove_file(&data);
    assert_cpu_matches("sort --parallel=2", &doc, &gnu);
}

/// xz with two threads (2 MiB blocks so both work) and single-threaded
/// gzip on the same data. Catches the same loss in a second threaded
/// program, and a regression of the single-threaded path.
#[test]
fn xz_and_gzip_match_gnu_time() {
    if !root_or_skip("xz_and_gzip_match_gnu_time") {
        return;
    }
    require("/usr/bin/xz");
    require("/usr/bin/gzip");
    let _serial = serial();
    let data = random_lines("xz.txt", 400_000);
    let xz = format!(
        "xz -T2 --block-size=2MiB -3 -c {} > /dev/null; true",
        data.display()
    );
    let (_, doc, gnu) = run_timed("xz", 3, &["sh", "-c", &xz]);
    assert_cpu_matches("xz -T2", &doc, &gnu);
    let (_, doc, gnu) = run_timed("gzip", 3, &["gzip", "-c", "-6", data.to_str().unwrap()]);
    let _ = std::fs::remove_file(&data);
    assert_cpu_matches("gzip", &doc, &gnu);
}

/// `run -- echo hi` and `run -- sleep 0.05`: no TTPv2 result
/// (zero ticks, QE3), but Time_meas and the exact time over the QEs run,
/// and one line saying why. `sleep 0.05` lasts at least 50 ms of wall
/// time by definition. Catches a report with no number, and the
/// command's output printed into the report.
#[test]
fn short_commands_get_a_number_and_a_reason() {
    if !root_or_skip("short_commands_get_a_number_and_a_reason") {
        return;
    }
    let _serial = serial();
    for (cmd, min_ms) in [
        (vec!["echo", "hi-from-echo"], 0.0),
        (vec!["sleep", "0.05"], 50.0),
    ] {
        let json = temp_path("short.json");
        let mut args = vec![
            "run",
            "-n",
            "3",
            "--as-root",
            "--json",
            json.to_str().unwrap(),
            "--",
        ];
        args.extend_from_slice(&cmd);
        let (code, out, err) = ttp(&args);
        assert_eq!(code, 0, "{cmd:?}: {err}\n{out}");
        assert!(
            !out.lines().any(|l| l.trim() == "hi-from-echo"),
            "the command's stdout is not part of the report:\n{out}"
        );
        let doc = json_file(&json);
        let _ = std::fs::remove_file(&json);
        let stats = &doc["result"]["stats"];
        let meas = stats["time_meas_all_ms"]["median"]
            .as_f64()
            .unwrap_or_else(|| panic!("{cmd:?}: no Time_meas over the QEs run: {stats}"));
        assert!(meas >= min_ms, "{cmd:?}: Time_meas {meas} ms < {min_ms} ms");
        let exact = stats["time_exact_all_ms"]["median"]
            .as_f64()
            .expect("exact");
        assert!(
            exact > 0.0 && exact <= meas,
            "{cmd:?}: exact {exact} ms, Time_meas {meas} ms"
        );
        if doc["result"]["time_calc_ms"].is_null() {
            let why = doc["result"]["no_result_why"].as_str().unwrap_or_default();
            assert!(why.contains("QE3"), "{cmd:?}: why no result: {why:?}");
            assert!(out.contains("No TTPv2 result: QE3"), "{out}");
            assert!(
                out.contains("Measured over all 3 QE(s) run: Time_meas"),
                "{out}"
            );
        }
        assert!(
            out.starts_with(&format!("TTPv2 — `{}`", cmd.join(" "))),
            "the report names the command:\n{out}"
        );
    }
}

/// A mistyped command: one line on stderr, exit 2, no report.
#[test]
fn mistyped_command_fails_in_one_line() {
    if !root_or_skip("mistyped_command_fails_in_one_line") {
        return;
    }
    let _serial = serial();
    let (code, out, err) = ttp(&["run", "-n", "2", "--as-root", "--", "no-such-command-xyz"]);
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty(), "no report: {out}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains("no-such-command-xyz"), "{err}");
}

/// `run --protocol emp --cpu N`: every run of a program with
/// two threads, started by a shell, is allowed CPU N only (the kernel's
/// Cpus_allowed_list, which each of the program's three threads reads from
/// /proc/thread-self while it runs), and the result says so. Catches --cpu
/// refused or ignored under EMP. Each thread writes its own line, so the
/// count does not depend on when anything is scheduled.
#[test]
fn emp_run_pins_the_program() {
    if !root_or_skip("emp_run_pins_the_program") {
        return;
    }
    let _serial = serial();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let cpu: u32 = online
        .trim()
        .rsplit([',', '-'])
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let spin = fixture("fixture-spin");
    let seen = temp_path("emp-cpu.txt");
    let _ = std::fs::remove_file(&seen);
    let script = format!(
        "{} --threads 2 --cpu-ms 200 --affinity-to {}",
        spin.display(),
        seen.display()
    );
    let json = temp_path("emp-cpu.json");
    let (code, out, err) = ttp(&[
        "run",
        "--protocol",
        "emp",
        "-n",
        "2",
        "--as-root",
        "--cpu",
        &cpu.to_string(),
        "--json",
        json.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(code, 0, "{err}\n{out}");
    let lines = std::fs::read_to_string(&seen).expect("the program's own view");
    let _ = std::fs::remove_file(&seen);
    let lines: Vec<&str> = lines.lines().collect();
    // Warm-up + 2 runs, each with the main thread and its 2 workers.
    assert_eq!(lines.len(), 3 * 3, "{lines:?}");
    for l in &lines {
        assert_eq!(*l, format!("Cpus_allowed_list:\t{cpu}"), "{lines:?}");
    }
    let doc = json_file(&json);
    let _ = std::fs::remove_file(&json);
    let pinned = format!("pinned to CPU {cpu} with sched_setaffinity");
    assert!(
        doc["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d.as_str().unwrap().contains(&pinned)),
        "{}",
        doc["notes"]
    );
    assert!(out.contains(&pinned), "the report states it: {out}");
}
