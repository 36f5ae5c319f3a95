//! `ttp-ebpf run -- CMD` self-recovery (TTPv2 Sec. 3.2.3), end to end
//! (root): a plan that changes restarts the Q@C; a transient failure is
//! retried with exponential back-off and, after ten retries, pauses the run.
use crate::common;

use std::time::Instant;

use common::*;

/// A shell script that counts its calls in `counter` and prints
/// `before` for the first `k` calls, `after` from then on.
fn flipping(counter: &std::path::Path, k: u32, before: &str, after: &str) -> String {
    let c = counter.display();
    format!(
        "c=$(cat {c} 2>/dev/null || echo 0); c=$((c+1)); echo $c > {c}; \
         if [ $c -le {k} ]; then echo '{before}'; else echo '{after}'; fi"
    )
}

/// `ttp-ebpf run OPTS --json TEMP -- CMD`: (exit code, stdout, stderr, the
/// JSON document, which is removed once read).
fn run(name: &str, opts: &[&str], cmd: &[&str]) -> (i32, String, String, serde_json::Value) {
    let json = temp_path(name);
    let json_arg = json.to_str().unwrap();
    // No warm-up: these tests count every call of the plan command and
    // of the command, and a warm-up would be one more of each.
    let mut args = vec!["run", "--warmup", "0"];
    args.extend_from_slice(opts);
    args.extend_from_slice(&["--json", json_arg, "--"]);
    args.extend_from_slice(cmd);
    let (code, out, err) = ttp(&args);
    assert!(json.exists(), "no JSON written (exit {code}): {err}");
    let v = json_file(&json);
    let _ = std::fs::remove_file(&json);
    (code, out, err, v)
}

/// The check `id` of a run's JSON.
fn check<'a>(v: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id}"))
}

/// The plan command's output flips after its 3rd call (QE 3): QE 4's plan
/// differs from QE 1's, so the Q@C restarts and measures 5 QEs with the new
/// plan. Catches a Q@C that mixes the two plans (X2 would flag it instead
/// of a restart), a restart not recorded in the JSON and the paragraph, and
/// the QEs of the old plan kept.
#[test]
fn a_plan_that_flips_restarts_the_qc() {
    if !root_or_skip("a_plan_that_flips_restarts_the_qc") {
        return;
    }
    let _serial = serial();
    let counter = temp_path("plan-counter");
    let _ = std::fs::remove_file(&counter);
    let plan = flipping(&counter, 3, "Seq Scan on t", "Index Scan using t_id on t");
    let (code, out, err, v) = run(
        "recovery-plan.json",
        &["-n", "5", "--as-root", "--plan-cmd", &plan],
        &["true"],
    );
    assert_eq!(code, 0, "{err}");
    let rec = &v["setup"]["recovery"];
    assert_eq!(rec["plan_restarts"], 1, "{rec}");
    assert_eq!(rec["restarts"][0]["qe"], 4, "{rec}");
    assert_eq!(rec["restarts"][0]["discarded"], 3, "{rec}");
    let qes = v["qes"].as_array().unwrap();
    assert_eq!(qes.len(), 5);
    for (k, q) in qes.iter().enumerate() {
        assert_eq!(q["qe"], k as u64 + 1);
        assert_eq!(q["plan"], "Index Scan using t_id on t\n", "{q}");
    }
    // 3 QEs of the old plan + 1 capture that found the change + 5 QEs.
    let calls: u32 = std::fs::read_to_string(&counter)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(calls, 9);
    let x2 = check(&v, "X2");
    assert_eq!(x2["violations"], 0, "{x2}");
    let para = v["paragraph"].as_str().unwrap();
    assert!(
        para.contains("restarted 1 time(s) because its plan changed, discarding 3 QE(s)"),
        "{para}"
    );
    assert!(err.contains("restarting the Q@C"), "{err}");
    assert!(out.contains("Sec. 3.2.3"), "{out}");
    let _ = std::fs::remove_file(&counter);
}

/// The command exits 75 (listed by --transient-exit) on its first two
/// calls: both are retried after 200 ms and 400 ms, the QE is measured on
/// the third call, and the run completes. Catches a transient failure kept
/// as a QE, a retry without the back-off (the run takes at least the 600 ms
/// of the two waits), and retries missing from the JSON.
#[test]
fn a_transient_exit_is_retried_with_back_off() {
    if !root_or_skip("a_transient_exit_is_retried_with_back_off") {
        return;
    }
    let _serial = serial();
    let counter = temp_path("fail-counter");
    let _ = std::fs::remove_file(&counter);
    let c = counter.display();
    let script = format!(
        "c=$(cat {c} 2>/dev/null || echo 0); c=$((c+1)); echo $c > {c}; [ $c -gt 2 ] || exit 75"
    );
    let t0 = Instant::now();
    let (code, _out, err, v) = run(
        "recovery-retry.json",
        &[
            "-n",
            "3",
            "--as-root",
            "--transient-exit",
            "75",
            "--backoff",
            "200ms",
        ],
        &["sh", "-c", &script],
    );
    let took = t0.elapsed();
    assert_eq!(code, 0, "{err}");
    assert!(took.as_millis() >= 600, "{took:?}: no back-off");
    let retried = v["setup"]["recovery"]["retried_errors"].as_array().unwrap();
    assert_eq!(retried.len(), 2, "{retried:?}");
    assert!(retried[0].as_str().unwrap().contains("exit status 75"));
    let qes = v["qes"].as_array().unwrap();
    assert_eq!(qes.len(), 3);
    assert!(qes.iter().all(|q| q["exit_code"] == 0), "{qes:?}");
    assert!(err.contains("retry 1/10 in 200ms"), "{err}");
    assert!(err.contains("retry 2/10 in 400ms"), "{err}");
    let para = v["paragraph"].as_str().unwrap();
    assert!(
        para.contains("retried 2 transient failure(s) with exponential back-off"),
        "{para}"
    );
    let _ = std::fs::remove_file(&counter);
}

/// A command that always exits 75: ten retries (1 + 2 + … + 512 ms of
/// back-off), then the run pauses with exit 1, keeping the last attempt as
/// a QE that X1 counts. Catches a run that retries forever or silently
/// drops the failure.
#[test]
fn a_persistent_transient_failure_pauses_the_run() {
    if !root_or_skip("a_persistent_transient_failure_pauses_the_run") {
        return;
    }
    let _serial = serial();
    let (code, _out, err, v) = run(
        "recovery-pause.json",
        &[
            "-n",
            "3",
            "--as-root",
            "--transient-exit",
            "75",
            "--backoff",
            "1ms",
        ],
        &["sh", "-c", "exit 75"],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("paused"), "{err}");
    assert!(err.contains("after 10 retries"), "{err}");
    let retried = v["setup"]["recovery"]["retried_errors"].as_array().unwrap();
    assert_eq!(retried.len(), 10);
    let qes = v["qes"].as_array().unwrap();
    assert_eq!(qes.len(), 1);
    assert_eq!(qes[0]["exit_code"], 75);
    let x1 = check(&v, "X1");
    assert!(x1["violations"].as_u64().unwrap() >= 1, "{x1}");
}

/// A parameter scan whose plan changes at one value only: that Q@C
/// restarts while the other goes on, and the rounds continue until both
/// have their QEs. Catches a restart that clears the wrong Q@C, a loop that
/// ends after n rounds with the restarted Q@C short of QEs, and a restart
/// recorded on the wrong Q@C.
#[test]
fn a_restart_in_a_scan_restarts_only_its_qc() {
    if !root_or_skip("a_restart_in_a_scan_restarts_only_its_qc") {
        return;
    }
    let _serial = serial();
    let dir = temp_path("recovery-scan");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.display();
    let plan = format!(
        "c=$(cat {d}/c{{k}} 2>/dev/null || echo 0); c=$((c+1)); echo $c > {d}/c{{k}}; \
         if [ {{k}} = 2 ] && [ $c -gt 2 ]; then echo B; else echo A; fi"
    );
    let (code, _out, err, v) = run(
        "recovery-scan.json",
        &["-n", "3", "--as-root", "-L", "k=1,2", "--plan-cmd", &plan],
        &["true"],
    );
    assert_eq!(code, 0, "{err}");
    let qcs = v["qcs"].as_array().unwrap();
    assert_eq!(qcs.len(), 2);
    for qc in qcs {
        let k = qc["labels"]["k"].as_str().unwrap();
        let qes = qc["qes"].as_array().unwrap();
        assert_eq!(qes.len(), 3, "k={k}");
        let want = if k == "2" { "B\n" } else { "A\n" };
        assert!(qes.iter().all(|q| q["plan"] == want), "k={k}: {qes:?}");
        let rec = &qc["setup"]["recovery"];
        if k == "2" {
            assert_eq!(rec["plan_restarts"], 1, "{rec}");
            assert_eq!(rec["restarts"][0]["discarded"], 2, "{rec}");
        } else {
            assert!(rec.is_null(), "k=1 restarted: {rec}");
        }
    }
    let para = v["paragraph"].as_str().unwrap();
    assert!(para.contains("k=2 was restarted 1 time(s)"), "{para}");
    let _ = std::fs::remove_dir_all(&dir);
}
