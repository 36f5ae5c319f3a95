//! `ttp-ebpf run` on a busy machine: every QE's query process has its
//! ledger account (root).
use crate::common;

use common::*;

/// CPU each QE's command burns (its own thread CPU clock, so whatever the
/// load does to its wall time).
const CPU_MS: u64 = 60;

/// QEs measured: enough that a loss affecting a few QEs in a hundred is
/// seen (a run of 16 to 32 such QEs lost one to three of them).
const QES: usize = 40;

/// Under load the test makes itself (two CPU burners, so the two CPUs are
/// contended, and a fork storm whose thread exits keep the exit-record ring
/// and its draining thread busy at every QE), each QE's query process must
/// have the ledger's measures: a process whose account was in the
/// before-image must not vanish from the window because its exit record
/// reached the reader only after the window's first drain.
///
/// What the tool controls, and so what is asserted: the command is one
/// process (fixture-spin) that burns `CPU_MS` of its own thread CPU time,
/// so the ledger's on-CPU time (the kernel's runtime, TTPv2 Sec. 3.5 (b)
/// and (c) summed) is at least that, whatever the load; and it is at most
/// what /proc reports for the same process as U + S (the zombie's final
/// counters in the after-image, Fig. 5), plus the two ticks the two
/// truncations to 10 ms ticks can lose, plus one tick for the held child's
/// time before exec that the before-image already counted. Lost exit
/// records would be a reason, shown in the record, for a missing account,
/// so the message names them.
#[test]
fn every_qe_under_load_has_the_query_process_account() {
    if !root_or_skip("every_qe_under_load_has_the_query_process_account") {
        return;
    }
    let _serial = serial();
    let _burn0 = Background::start("fixture-spin", &["--cpu-ms", "600000"]);
    let _burn1 = Background::start("fixture-spin", &["--cpu-ms", "600000"]);
    let _storm = Background::start(
        "fixture-forkstorm",
        &[
            "--procs",
            "10000000",
            "--parallel",
            "2",
            "--threads",
            "4",
            "--thread-cpu-us",
            "200",
        ],
    );
    let out = temp_path("query-account.json");
    let spin = fixture("fixture-spin");
    let n = QES.to_string();
    let cpu = CPU_MS.to_string();
    let (code, _, err) = ttp(&[
        "run",
        "-n",
        &n,
        "--as-root",
        "--json",
        out.to_str().unwrap(),
        "--",
        spin.to_str().unwrap(),
        "--cpu-ms",
        &cpu,
    ]);
    assert_eq!(code, 0, "run failed: {err}");
    let v = json_file(&out);
    let _ = std::fs::remove_file(&out);
    let qes = v["qes"].as_array().expect("qes");
    assert_eq!(qes.len(), QES);
    let tick_ns = 10_000_000.0;
    let mut missing = Vec::new();
    for q in qes {
        let qe = q["qe"].as_u64().unwrap();
        let lost = q["exit_records_lost"].as_u64();
        let query: Vec<&serde_json::Value> = q["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["class"] == "query")
            .collect();
        assert_eq!(query.len(), 1, "QE {qe}: one query process expected");
        let p = query[0];
        assert_eq!(p["comm"], "fixture-spin", "QE {qe}");
        let Some(on_cpu) = p["on_cpu_ns"].as_f64() else {
            missing.push((qe, lost));
            continue;
        };
        let us = (p["u_ticks"].as_u64().unwrap() + p["s_ticks"].as_u64().unwrap()) as f64;
        assert!(
            on_cpu >= CPU_MS as f64 * 1e6,
            "QE {qe}: on-CPU {on_cpu} ns below the {CPU_MS} ms the command burned"
        );
        assert!(
            on_cpu <= (us + 3.0) * tick_ns,
            "QE {qe}: on-CPU {on_cpu} ns above /proc's U+S of {us} ticks (+3)"
        );
    }
    assert!(
        missing.is_empty(),
        "{} of {QES} QEs have no ledger account for the query process \
         (qe, exit records lost): {missing:?}",
        missing.len()
    );
}
