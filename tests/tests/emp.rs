//! EMP end to end (root; see common::root_or_skip): `run --protocol emp`
//! under CPU noise with an injected long-running daemon, `calibrate` with a
//! daemon that strikes chosen runs, the default INC workload, and Ctrl-C.
//!
//! Truth comes from the fixtures themselves: fixture-spin logs its own CPU
//! time (CLOCK_PROCESS_CPUTIME_ID) per execution and which executions woke
//! the daemon; fixture-noisyd logs the CPU time of each of its bursts.
use crate::common;

use std::{
    collections::BTreeSet,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use common::*;
use serde_json::Value;

/// A fresh scratch directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("ttp-emp-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(p.join("trig")).expect("scratch dir");
        Self(p)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
    fn s(&self, name: &str) -> String {
        self.path(name).to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The CPU the program, the burners and the daemon share.
fn shared_cpu() -> String {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1);
    (n - 1).to_string()
}

/// The daemon's process name: unique to this test process, so that another
/// run of these tests on the same machine (its own fixture-noisyd) is not
/// taken for this test's daemon by EMP's name-based cut-offs.
fn daemon_name() -> String {
    format!("noisyd-{}", std::process::id())
}

/// Starts fixture-noisyd under [`daemon_name`] and waits until its FIFOs
/// are open.
fn start_daemon(dir: &Scratch, cpu: &str, burn_ms: &str) -> Background {
    let mut child = Command::new(fixture("fixture-noisyd"))
        .args(["--pin", cpu, "--burn-ms", burn_ms, "--comm", &daemon_name()])
        .args(["--trigger", &dir.s("trig"), "--log", &dir.s("noisyd.log")])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start fixture-noisyd");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("fixture-noisyd output");
    assert_eq!(line.trim(), "ready", "fixture-noisyd did not start");
    Background(child)
}

fn json(path: &Path) -> Value {
    let bytes =
        std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_slice(&bytes).expect("valid JSON")
}

/// fixture-spin's log: index → (process CPU ns, woke the daemon).
fn spin_log(path: &Path) -> Vec<(u64, u64, bool)> {
    std::fs::read_to_string(path)
        .expect("spin log")
        .lines()
        .map(|l| {
            let v: Vec<u64> = l.split_whitespace().map(|x| x.parse().unwrap()).collect();
            (v[0], v[1], v[2] == 1)
        })
        .collect()
}

/// fixture-noisyd's log: CPU ns of each burst.
fn daemon_bursts(path: &Path) -> Vec<u64> {
    std::fs::read_to_string(path)
        .expect("daemon log")
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect()
}

/// Runs by verdict in a ttp.emp/1 document.
fn runs_with(o: &Value, verdict: &str) -> BTreeSet<u64> {
    o["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["verdict"] == verdict)
        .map(|r| r["index"].as_u64().unwrap())
        .collect()
}

/// Runs the run loop set aside (verdicts other than the protocol's own).
fn flagged(o: &Value) -> BTreeSet<u64> {
    ["warm_up", "failed", "lost_records", "missing_pt"]
        .iter()
        .flat_map(|v| runs_with(o, v))
        .collect()
}

/// Runs in which `name` is among the daemon cut-off hits.
fn hit_runs(o: &Value, name: &str) -> BTreeSet<u64> {
    o["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["hits"]
                .as_array()
                .is_some_and(|h| h.iter().any(|h| h["name"] == name))
        })
        .map(|r| r["index"].as_u64().unwrap())
        .collect()
}

fn assert_valid_svg(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("svg file");
    let doc = roxmltree::Document::parse(&text).expect("well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    text
}

/// ttp-ebpf with arguments given as one line of words (none has spaces).
fn ttp_words(line: &str) -> (i32, String, String) {
    let words: Vec<&str> = line.split_whitespace().collect();
    let (code, stdout, stderr) = ttp(&words);
    eprintln!("$ ttp-ebpf {line}\n{stdout}\n{stderr}");
    (code, stdout, stderr)
}

/// A compute-bound program (150 ms of CPU) shares its CPU with two burners
/// that switch on and off at random and with a stream of short-lived
/// processes; in runs 3 and 7 it wakes a daemon that burns 60 ms. Catches:
/// a PT that follows the elapsed time (relative error not a tenth of ET's),
/// PT off against the program's own CPU clock, the daemon's runs not
/// dropped or dropped by the wrong rule, other runs blamed on it, and
/// missing result files.
#[test]
fn emp_run_under_noise_keeps_pt_steady_and_drops_the_daemon_runs() {
    if !root_or_skip("emp_run_under_noise_keeps_pt_steady_and_drops_the_daemon_runs") {
        return;
    }
    let _serial = serial();
    let dir = Scratch::new("run");
    let cpu = shared_cpu();
    let _daemon = start_daemon(&dir, &cpu, "60");
    let noise = format!(
        "--pin {cpu} --burners 2 --phase-min-ms 100 --phase-max-ms 800 --spawn-every-ms 30 --seed 3"
    );
    let _noise = Background::start(
        "fixture-cpu-noise",
        &noise.split_whitespace().collect::<Vec<_>>(),
    );
    // A profile with the daemon's cut-off only (20 ms; it burns 60 ms).
    let profile = dir.path("profile.json");
    std::fs::write(
        &profile,
        format!(
            r#"{{"schema":"ttp.emp-profile/1","created_by":"test","calibrations":[],
            "daemons":[{{"name":"{}","cases":[{{"when":"always","cutoff_ns":20000000}}]}}]}}"#,
            daemon_name()
        ),
    )
    .unwrap();
    let (code, stdout, _) = ttp_words(&format!(
        "run --protocol emp -n 10 --as-root --cutoffs {} --json {} --record {} --plot {} -- \
         {} --cpu-ms 150 --pin {cpu} --state {} --trigger {} --on-runs 3,7",
        dir.s("profile.json"),
        dir.s("out.json"),
        dir.s("runs.json"),
        dir.s("plots"),
        fixture("fixture-spin").display(),
        dir.s(""),
        dir.s("trig"),
    ));
    assert_eq!(code, 0, "run failed");
    let o = json(&dir.path("out.json"));
    assert_eq!(o["schema"], "ttp.emp/1");
    assert_eq!(o["runs"].as_array().unwrap().len(), 11);
    assert_eq!(
        o["pt_source"], "runtime",
        "every run has the scheduler's runtime"
    );
    assert_eq!(o["profile_path"], profile.to_string_lossy().as_ref());
    // Fig. 8 Step 1: the EMPv1–v4 set-up from a check snapshot, and the
    // header claims EMPv5 exactly when all four held.
    let versions = o["setup"]["versions"].as_array().expect("set-up recorded");
    let names: Vec<&str> = versions
        .iter()
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["EMPv1", "EMPv2", "EMPv3", "EMPv4"]);
    assert_eq!(o["setup"]["check"]["schema"], "ttp.check/1");
    let held = versions
        .iter()
        .all(|v| v["unmet"].as_array().unwrap().is_empty());
    assert_eq!(
        stdout.contains("EMP (compute-bound timing, EMPv5):"),
        held,
        "{stdout}"
    );
    // PT and ET outliers are counted apart (Table XVIII: 16 ET, 20 PT),
    // each against its own band, recomputed here from the runs the first
    // sanity check kept: mean ± 2 sample sd of that time (Sec. 4.5).
    assert!(o["dropped"]["et_two_sigma"].is_u64() && o["et_two_sigma"]["n"].is_u64());
    let passed: Vec<&Value> = o["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["verdict"] == "retained" || r["verdict"] == "two_sigma")
        .collect();
    let outside = |key: &str| -> BTreeSet<u64> {
        let x: Vec<f64> = passed.iter().map(|r| r[key].as_f64().unwrap()).collect();
        let n = x.len() as f64;
        let m = x.iter().sum::<f64>() / n;
        let sd = (x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        passed
            .iter()
            .zip(&x)
            .filter(|(_, v)| (**v - m).abs() > 2.0 * sd)
            .map(|(r, _)| r["index"].as_u64().unwrap())
            .collect()
    };
    let (et_out, pt_out) = (outside("et_ns"), outside("pt_ns"));
    assert_eq!(o["et_two_sigma"]["n"].as_u64(), Some(passed.len() as u64));
    assert_eq!(
        o["dropped"]["et_two_sigma"].as_u64(),
        Some(et_out.len() as u64),
        "ET outliers {et_out:?}"
    );
    assert_eq!(
        o["dropped"]["two_sigma"].as_u64(),
        Some(pt_out.len() as u64),
        "PT outliers {pt_out:?}"
    );
    assert_eq!(runs_with(&o, "two_sigma"), pt_out);
    let et_marked: BTreeSet<u64> = passed
        .iter()
        .filter(|r| !r["et_two_sigma"].is_null())
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    assert_eq!(et_marked, et_out);

    // The runs that woke the daemon, by the program's own log (index 0 is
    // the warm-up). A run the loop set aside (lost ledger records) is never
    // judged, so only the others must be dropped by the daemon rule.
    let log = spin_log(&dir.path("spin.log"));
    assert_eq!(log.len(), 11);
    let woke: BTreeSet<u64> = log.iter().filter(|l| l.2).map(|l| l.0).collect();
    assert_eq!(woke, BTreeSet::from([3, 7]));
    let woke_usable: BTreeSet<u64> = woke.difference(&flagged(&o)).copied().collect();
    assert!(!woke_usable.is_empty(), "both daemon runs set aside: {o}");
    assert_eq!(runs_with(&o, "daemon_cutoff"), woke_usable, "daemon rule");
    assert_eq!(hit_runs(&o, &daemon_name()), woke_usable);
    for r in o["runs"].as_array().unwrap() {
        let i = r["index"].as_u64().unwrap();
        let v = r["verdict"].as_str().unwrap();
        match i {
            0 => assert_eq!(v, "warm_up"),
            3 | 7 => {}
            _ => assert!(
                ["retained", "two_sigma", "lost_records"].contains(&v),
                "run {i}: {v}"
            ),
        }
    }
    // The daemon's PT in those runs (from the ledger) against its own CPU
    // clock. Under heavy contention on this VM the ledger's on-CPU time of
    // a 300 ms burst was seen from 14 % below to 27 % above the scheduler's
    // own runtime (stolen time adds; the deficit is unexplained, see
    // docs/emp.md): the band allows that and still catches a window that saw
    // only part of the burst, or another process's time.
    let bursts = daemon_bursts(&dir.path("noisyd.log"));
    assert_eq!(bursts.len(), 2);
    let (lo, hi) = (*bursts.iter().min().unwrap(), *bursts.iter().max().unwrap());
    for h in o["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["hits"].as_array())
    {
        let pt = h[0]["pt_ns"].as_u64().unwrap() as f64;
        assert!(
            pt > 0.6 * lo as f64 && pt < 1.6 * hi as f64,
            "daemon PT {pt} ns vs its own bursts {bursts:?} ns"
        );
    }

    // PT of every run against the program's own CPU clock, read just before
    // it exits: the runtime PT is at least that, and the exit adds little.
    for r in o["runs"].as_array().unwrap() {
        let i = r["index"].as_u64().unwrap() as usize;
        let pt = r["pt_ns"].as_u64().expect("PT in every run");
        let own = log[i].1;
        assert!(
            pt >= own && pt - own < 2_000_000,
            "run {i}: PT {pt} ns vs the program's own {own} ns"
        );
    }

    // EMP's claim: PT is far steadier than ET under noise.
    let pt_rel = o["pt"]["rel_err"].as_f64().unwrap();
    let et_rel = o["et"]["rel_err"].as_f64().unwrap();
    eprintln!("relative error: PT {pt_rel:.2e}, ET {et_rel:.2e}");
    assert!(et_rel > 0.0);
    assert!(pt_rel <= et_rel / 10.0, "PT {pt_rel} vs ET {et_rel}");

    // The raw runs: the same 11 runs, every daemon execution listed.
    let rec = json(&dir.path("runs.json"));
    assert_eq!(rec["schema"], "ttp.emp-runs/1");
    let runs = rec["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 11);
    assert!(runs.iter().all(|r| r["pt"]["taskstats_us"].is_u64()));
    let text = assert_valid_svg(&dir.path("plots/emp_series.svg"));
    assert!(text.contains("dropped: daemon cut-off ("));
    assert!(stdout.contains(&format!("dropped (daemon cut-off): {}[", daemon_name())));
}

/// A calibration of 60 runs of a 10 ms program, in four of which (every
/// 15th) it wakes a daemon that burns 300 ms, then a later run with the
/// profile. Catches: the daemon not identified as infrequent and
/// long-running, a cut-off not at the midpoint rule, a scatter plot that
/// is not one point per pair, and a profile the run does not apply.
#[test]
fn calibration_finds_the_daemon_and_a_later_run_uses_its_cutoff() {
    if !root_or_skip("calibration_finds_the_daemon_and_a_later_run_uses_its_cutoff") {
        return;
    }
    let _serial = serial();
    let dir = Scratch::new("cal");
    let cpu = shared_cpu();
    let _daemon = start_daemon(&dir, &cpu, "300");
    let spin = fixture("fixture-spin");
    std::fs::create_dir_all(dir.path("cal")).unwrap();
    let (code, _, _) = ttp_words(&format!(
        "calibrate --runs 60 --as-root --out {} --plot {} --record {} -- \
         {} --cpu-ms 10 --pin {cpu} --state {} --trigger {} --on-runs 7,22,37,52",
        dir.s("profile.json"),
        dir.s("plots"),
        dir.s("cal-runs.json"),
        spin.display(),
        dir.s("cal"),
        dir.s("trig"),
    ));
    assert_eq!(code, 0, "calibrate failed");
    let p = json(&dir.path("profile.json"));
    assert_eq!(p["schema"], "ttp.emp-profile/1");
    let cal = &p["calibrations"][0];
    // Runs the loop set aside (lost ledger records) are not analysed.
    let rec = json(&dir.path("cal-runs.json"));
    let set_aside: BTreeSet<u64> = rec["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["flags"]["lost_records"] != 0 || r["flags"]["failed"].is_string())
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    assert!(set_aside.len() <= 2, "runs set aside: {set_aside:?}");
    assert_eq!(cal["usable_runs"], 60 - set_aside.len());
    // Step 6: the daemon is infrequent, in exactly the runs that woke it.
    let woke: Vec<u64> = [7, 22, 37, 52]
        .into_iter()
        .filter(|i| !set_aside.contains(i))
        .collect();
    let runs: Vec<u64> = cal["infrequent"][daemon_name()]["run_indices"]
        .as_array()
        .expect("the daemon identified as infrequent")
        .iter()
        .map(|r| r.as_u64().unwrap())
        .collect();
    assert_eq!(runs, woke);
    // Step 8: never in the central cluster, so its cut-off is half its
    // smallest long execution (midpoint with 0), rounded half up to whole
    // ms and at least 1 ms (the paper's PT resolution, Table XVI).
    let bursts = daemon_bursts(&dir.path("noisyd.log"));
    assert_eq!(bursts.len(), 4);
    let d = p["daemons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == daemon_name().as_str())
        .expect("a cut-off for the daemon");
    let basis = &d["short_basis"];
    assert_eq!(basis["rule"], "midpoint");
    assert!(basis["central_max_ns"].is_null(), "{basis}");
    let l_min = basis["l_min_ns"].as_u64().unwrap();
    let cutoff = d["cases"][0]["cutoff_ns"].as_u64().unwrap();
    let ms = 1_000_000;
    assert_eq!(cutoff, ((l_min + ms) / (2 * ms) * ms).max(ms));
    // The smallest of the four ledger measurements of a 300 ms burst (see
    // the band of the test above): not the 10 ms program, not a fraction.
    let min_burst = *bursts.iter().min().unwrap() as f64;
    assert!(
        l_min as f64 >= 0.6 * min_burst && (l_min as f64) < 1.6 * min_burst,
        "L minimum {l_min} ns vs smallest burst {min_burst} ns"
    );
    // The dual-execution plot: one circle per pair (a set-aside run breaks
    // its pair).
    let pairs = cal["pairs"].as_array().unwrap().len();
    assert!(
        pairs >= 30 - set_aside.len() && pairs <= 30,
        "{pairs} pairs"
    );
    let svg = assert_valid_svg(&dir.path("plots/dual_execution.svg"));
    assert_eq!(svg.matches("<circle").count(), pairs);

    // A later run with the profile drops the runs the daemon strikes.
    std::fs::create_dir_all(dir.path("run")).unwrap();
    let (code, _, _) = ttp_words(&format!(
        "run --protocol emp -n 10 --as-root --cutoffs {} --json {} -- \
         {} --cpu-ms 10 --pin {cpu} --state {} --trigger {} --on-runs 4,8",
        dir.s("profile.json"),
        dir.s("out.json"),
        spin.display(),
        dir.s("run"),
        dir.s("trig"),
    ));
    assert_eq!(code, 0, "run failed");
    let o = json(&dir.path("out.json"));
    assert_eq!(o["cutoffs"]["cutoffs_ns"][daemon_name()], cutoff);
    let woke: BTreeSet<u64> = BTreeSet::from([4, 8])
        .difference(&flagged(&o))
        .copied()
        .collect();
    assert!(!woke.is_empty(), "both daemon runs set aside: {o}");
    assert_eq!(hit_runs(&o, &daemon_name()), woke);
    assert!(runs_with(&o, "daemon_cutoff").is_superset(&woke));
}

/// Without a command, calibrate runs the paper's two calibrations of INC
/// (Step 1 and Step 7), here with small counts and task lengths, sized on
/// this machine, and states the procedure against the paper's. Catches a
/// default workload that is not INC or not sized to the task length, a
/// Step 7 not run or not merged, and a procedure not recorded.
#[test]
fn calibrate_defaults_to_inc_sized_for_this_machine() {
    if !root_or_skip("calibrate_defaults_to_inc_sized_for_this_machine") {
        return;
    }
    let _serial = serial();
    let dir = Scratch::new("inc");
    let (code, stdout, stderr) = ttp_words(&format!(
        "calibrate --runs 8 --inc-seconds 0.05 --long-runs 8 --long-inc-seconds 0.1 --as-root --out {} --record {}",
        dir.s("profile.json"),
        dir.s("runs.json")
    ));
    assert_eq!(code, 0, "calibrate failed");
    let p = json(&dir.path("profile.json"));
    let cals = p["calibrations"].as_array().unwrap();
    assert_eq!(cals.len(), 2, "Step 1 and Step 7");
    for (cal, file, secs) in [
        (&cals[0], "runs.json", 0.05),
        (&cals[1], "runs.step7.json", 0.1),
    ] {
        assert_eq!(cal["usable_runs"], 8);
        assert_eq!(cal["command"][1], "inc");
        assert_eq!(cal["command"][2], "--loops");
        let rec = json(&dir.path(file));
        let runs = rec["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 9, "warm-up + 8");
        for r in runs {
            let pt = r["pt"]["runtime_ns"].as_u64().expect("runtime PT") as f64 / 1e9;
            // INC's loop is `secs` of CPU; process start and exit add a
            // little, and the loop count is rounded to whole iterations.
            assert!(
                (secs * 0.6..secs * 3.0).contains(&pt),
                "INC run of {pt} s for {secs} s"
            );
        }
    }
    let proc_ = &p["procedure"];
    let phases = proc_["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 2);
    assert_eq!(phases[0]["step"], 1);
    assert_eq!(phases[0]["program"], "INC0.05");
    assert_eq!(phases[0]["paper_runs"], 800);
    assert_eq!(phases[1]["step"], 7);
    assert_eq!(phases[1]["paper_task_seconds"], 16384.0);
    assert_eq!(phases[1]["completed_runs"], 8);
    assert!(proc_["iteration_cpu_ns"].as_u64().unwrap() > 0);
    assert!(
        stderr.contains("in place of the paper's 800 × INC128"),
        "{stderr}"
    );
    assert!(stdout.contains("Step 7 took"), "{stdout}");
    assert!(stdout.contains("Step 8"));
}

/// SIGINT during a run: the runs completed are kept in the JSON, with a
/// note, and ttp exits cleanly. Catches results lost on Ctrl-C.
#[test]
fn interrupting_a_run_keeps_the_completed_runs() {
    if !root_or_skip("interrupting_a_run_keeps_the_completed_runs") {
        return;
    }
    let _serial = serial();
    let dir = Scratch::new("int");
    let spin = fixture("fixture-spin");
    let child = Command::new(ttp_bin())
        .args(["run", "--protocol", "emp", "-n", "200", "--as-root"])
        .args([
            "--json",
            &dir.s("out.json"),
            "--record",
            &dir.s("runs.json"),
        ])
        .arg("--")
        .arg(&spin)
        .args(["--cpu-ms", "20"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ttp-ebpf");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n = std::fs::read(dir.path("runs.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .map_or(0, |v| v["runs"].as_array().map_or(0, Vec::len));
        if n >= 4 {
            break;
        }
        assert!(Instant::now() < deadline, "no runs recorded");
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().expect("ttp-ebpf output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let o = json(&dir.path("out.json"));
    let rec = json(&dir.path("runs.json"));
    let kept = rec["runs"].as_array().unwrap().len();
    assert!((4..200).contains(&kept), "{kept} runs kept");
    assert_eq!(o["runs"].as_array().unwrap().len(), kept);
    assert!(
        o["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().starts_with("interrupted")),
        "{o}"
    );
}

/// Ctrl-C during Step 7 of the default calibration: Step 1's profile was
/// saved before Step 7 began and is what remains, with notes saying Step 7
/// was interrupted and left out. Catches a long Step 7 interrupted taking
/// Step 1's runs with it.
#[test]
fn interrupting_step_7_keeps_step_1() {
    if !root_or_skip("interrupting_step_7_keeps_step_1") {
        return;
    }
    let _serial = serial();
    let dir = Scratch::new("step7");
    let child = Command::new(ttp_bin())
        .args([
            "calibrate",
            "--runs",
            "8",
            "--inc-seconds",
            "0.02",
            "--long-runs",
            "40",
            "--long-inc-seconds",
            "1",
            "--as-root",
            "--out",
            &dir.s("profile.json"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ttp-ebpf");
    // The profile appears when Step 1 is done, before Step 7's first run.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.path("profile.json").exists() {
        assert!(Instant::now() < deadline, "no Step 1 profile");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().expect("ttp-ebpf output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = json(&dir.path("profile.json"));
    let cals = p["calibrations"].as_array().unwrap();
    assert_eq!(cals.len(), 1, "Step 1 alone");
    assert_eq!(cals[0]["usable_runs"], 8);
    let phases = p["procedure"]["phases"].as_array().unwrap();
    assert_eq!(phases[0]["completed_runs"], 8);
    assert!(phases[1]["completed_runs"].as_u64().unwrap() < 40);
    // "interrupted after k of 40 runs of Step 7", or "Step 7 not run
    // (interrupted)" when the signal came before its first run.
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("note: ") && l.contains("Step 7") && l.contains("interrupted")),
        "{stdout}"
    );
}
