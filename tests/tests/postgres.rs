//! TTPv2 against a real PostgreSQL server started by the test (root; see
//! common::root_or_skip and common::pg). Truths come from the server
//! itself (pg_backend_pid's process, postmaster.pid, pg_relation_size) and
//! from what the test did to it (stopping it, killing ttp).
use crate::common;

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use common::{
    pg::{Cluster, backend_pids, stderr, ttp},
    *,
};

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("json written")).expect("json")
}

const JOIN: &str = "SELECT count(*) FROM t a JOIN t b ON a.k = b.id";

fn query_process(qe: &serde_json::Value) -> Vec<&serde_json::Value> {
    qe["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["class"] == "query")
        .collect()
}

/// `run --postgres … -n 10 --cold-cache` of a join over a 22 MB table.
/// Catches: a query process other than the backend that served the QE
/// (pg_backend_pid, whose parent is the postmaster of postmaster.pid), a
/// cold QE that read nothing from the disk (the server or page cache not
/// emptied), a QE without its plan, the restart not happening.
#[test]
fn run_cold_cache_join_on_the_backend() {
    if !root_or_skip("run_cold_cache_join_on_the_backend") {
        return;
    }
    let _serial = serial();
    let c = Cluster::start("run");
    let table_bytes = c.make_table(300_000);
    let first_postmaster = c.postmaster_pid();
    let out = c.dir.join("run.json");
    let o = ttp(&[
        "run",
        "--postgres",
        &c.conninfo(),
        "--sql",
        JOIN,
        "-n",
        "10",
        "--cold-cache",
        "--json",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("somewhat artificially cold"), "{text}");
    let doc = json(&out);
    assert_eq!(doc["schema"], "ttp.run/1");
    let qes = doc["qes"].as_array().unwrap();
    assert_eq!(qes.len(), 10);
    let backends = backend_pids(&doc);
    assert_eq!(backends.len(), 10);
    // Each cold QE is served by a new server, hence a new backend.
    let mut distinct = backends.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 10, "backends {backends:?}");
    let last_postmaster = c.postmaster_pid();
    assert_ne!(
        last_postmaster, first_postmaster,
        "the server was not restarted"
    );
    let mut waited_ns = 0;
    for (qe, &backend) in qes.iter().zip(&backends) {
        let q = query_process(qe);
        assert_eq!(q.len(), 1, "QE {}: one query process", qe["qe"]);
        assert_eq!(q[0]["pid"].as_u64(), Some(backend), "QE {}", qe["qe"]);
        assert_eq!(q[0]["comm"], "postgres");
        let plan = qe["plan"].as_str().expect("plan captured");
        assert!(plan.contains("\"Node Type\": \"Aggregate\""), "{plan}");
        assert!(plan.contains("\"Relation Name\": \"t\""), "{plan}");
        // The cold QE reads the table from the disk: the block layer's
        // bytes are about pg_relation_size, and the backend waited for them.
        let read = q[0]["read_bytes"].as_u64().unwrap();
        assert!(
            read as f64 >= 0.9 * table_bytes as f64 && read <= 3 * table_bytes,
            "QE {}: read {read} bytes, table {table_bytes}",
            qe["qe"]
        );
        waited_ns += q[0]["iowait_ns"].as_u64().unwrap();
        assert_eq!(qe["exit_code"], 0);
        // Sec. 3.1's procedure, shared with `run -- CMD`: after the restart
        // and the plan, the 64 MB O_DIRECT fill, the drop (shown to work by
        // a re-read that reached the device), then the QE.
        let cold = &qe["cold_cache"];
        assert_eq!(cold["fill_bytes"].as_u64(), Some(64 << 20), "{cold}");
        let drop = cold["drop_unix_ns"].as_u64().unwrap();
        assert!(
            cold["fill_start_unix_ns"].as_u64().unwrap() < drop,
            "{cold}"
        );
        assert!(drop < qe["start_unix_ns"].as_u64().unwrap(), "{cold}");
        assert!(
            cold["check_device_bytes"].as_u64().unwrap()
                >= cold["check_file_bytes"].as_u64().unwrap(),
            "{cold}"
        );
    }
    // The backend waited for the disk, but readahead decides how often: it
    // reads ahead of the scan, so a cold QE's backend blocked 1–6 times,
    // 0.19–1.7 ms in all (40 QEs measured), and once in a fresh-clone run
    // not at all while reading the whole table. Ten QEs without one wait
    // would be the ledger missing them.
    assert!(waited_ns > 0, "no BlockIO in 10 cold QEs");
    assert!(text.contains("with a cold cache"), "{text}");
    // The last QE's server: its postmaster is a utility, not a daemon.
    let last = qes.last().unwrap();
    let pm = last["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"].as_u64() == Some(u64::from(last_postmaster)))
        .expect("postmaster among the processes");
    assert_eq!(pm["class"], "utility");
    let x2 = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|ch| ch["id"] == "X2")
        .unwrap();
    assert_eq!(x2["violations"], 0, "one plan: {x2}");
}

fn study_lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A three-cardinality experiment, killed after its first Q@C and started
/// again. Catches: finished Q@Cs run again (their lines would change),
/// Q@Cs missing or duplicated after the resume, Time_calc that does not
/// grow with the table (a variable table not repopulated per cardinality),
/// monotonicity checks not applied across the study.
#[test]
fn experiment_three_cardinalities_resumes_after_kill() {
    if !root_or_skip("experiment_three_cardinalities_resumes_after_kill") {
        return;
    }
    let _serial = serial();
    let c = Cluster::start("exp");
    let spec = c.dir.join("spec.toml");
    let study = c.dir.join("spec.study.jsonl");
    std::fs::write(
        &spec,
        format!(
            r#"connection = "{}"
n = 6
cardinalities = [50000, 100000, 200000]

[data]
seed = 42
generate = "SELECT g AS id, (random() * {{max_cardinality}})::int AS k, md5(random()::text) AS pad FROM generate_series(1, {{max_cardinality}}) g"

[[query]]
name = "selfjoin"
sql = "SELECT count(*) FROM ttp_var a JOIN ttp_var b ON a.k = b.id"
"#,
            c.conninfo()
        ),
    )
    .unwrap();
    let mut child = Command::new(ttp_bin())
        .args(["experiment", spec.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start experiment");
    let t0 = Instant::now();
    while study_lines(&study).len() < 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no Q@C finished within 60 s"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "experiment ended early"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // (Delay accounting: the next ttp restores what the killed one switched
    // on; see sys::delayacct.)
    let before = study_lines(&study);
    assert!(before.len() < 4, "killed after every Q@C finished");
    let json_out = c.dir.join("analysis.json");
    let o = ttp(&[
        "experiment",
        spec.to_str().unwrap(),
        "--json",
        json_out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let after = study_lines(&study);
    assert_eq!(after.len(), 4, "header + 3 Q@Cs");
    // The header and the Q@Cs finished before the kill are untouched.
    for (i, line) in before.iter().enumerate().filter(|(_, l)| l.ends_with('}')) {
        assert_eq!(
            &after[i],
            line,
            "line {} changed: a finished Q@C ran again",
            i + 1
        );
    }
    let header: serde_json::Value = serde_json::from_str(&after[0]).unwrap();
    assert_eq!(header["spec"]["data"]["seed"], 42);
    let mut cards: Vec<u64> = after[1..]
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["labels"]["cardinality"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    cards.sort();
    assert_eq!(cards, [50000, 100000, 200000]);
    // Time_calc (eq. 2, per QE) grows with the cardinality.
    let doc = json(&json_out);
    let mut medians: Vec<(u64, f64)> = doc["qcs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|qc| {
            let mut t: Vec<f64> = qc["qes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|q| q["time_calc_ms"].as_f64().unwrap())
                .collect();
            t.sort_by(f64::total_cmp);
            (
                qc["labels"]["cardinality"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap(),
                t[t.len() / 2],
            )
        })
        .collect();
    medians.sort_by_key(|m| m.0);
    eprintln!("median Time_calc by cardinality: {medians:?}");
    assert!(
        medians[0].1 < medians[1].1 && medians[1].1 < medians[2].1,
        "{medians:?}"
    );
    for id in ["QC3", "QC4"] {
        let ch = doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|ch| ch["id"] == id)
            .unwrap();
        // Table XII counts Q@Cs: the three compared, over two adjacent pairs.
        assert_eq!(ch["evaluated"], 3, "{id} compares 3 Q@Cs: {ch}");
        assert!(
            ch["note"]
                .as_str()
                .unwrap_or("")
                .contains("of 2 adjacent pair"),
            "{id}: {ch}"
        );
    }
    // analyze reads the same study.
    let o = ttp(&["analyze", study.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("cardinality=200000"));
}

/// Catches errors that are unclear (no hint of what to fix), exit codes
/// that do not tell a usage error from a failure, and results lost: an
/// earlier result file overwritten by a failed run, measured QEs dropped
/// when the server goes away mid-run.
#[test]
fn errors_are_clear_and_nothing_is_lost() {
    if !root_or_skip("errors_are_clear_and_nothing_is_lost") {
        return;
    }
    let _serial = serial();
    let c = Cluster::start("err");
    c.make_table(20_000);
    let keep = c.dir.join("keep.json");
    std::fs::write(&keep, "earlier result").unwrap();
    let cases: [(String, &str, &str); 3] = [
        (
            format!("host={} port=1 user=ttp dbname=postgres", c.dir.display()),
            "SELECT 1",
            "cannot connect to PostgreSQL",
        ),
        ("port=notaport".into(), "SELECT 1", "is not valid"),
        (c.conninfo(), "SELEC count(*) FROM t", "syntax error"),
    ];
    for (conn, sql, says) in &cases {
        let o = ttp(&[
            "run",
            "--postgres",
            conn,
            "--sql",
            sql,
            "-n",
            "2",
            "--json",
            keep.to_str().unwrap(),
        ]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{conn} {sql}: {e}");
        assert!(e.contains(says), "{conn} {sql}: {e}");
        assert_eq!(std::fs::read_to_string(&keep).unwrap(), "earlier result");
    }
    // Ctrl-C while a statement runs: the server cancels it, the run ends at
    // once and keeps the QEs finished before (the warm-up execution and
    // QE 1 are quick, QE 2 would sleep 60 s; the warm-up is not a QE).
    c.psql("CREATE SEQUENCE s");
    let out = c.dir.join("int.json");
    let child = c.spawn_run(&[
        "--sql",
        "SELECT pg_sleep(CASE WHEN nextval('s') > 2 THEN 60 ELSE 0 END)",
        "-n",
        "3",
        "--json",
        out.to_str().unwrap(),
    ]);
    let t0 = Instant::now();
    while !out.exists() {
        assert!(t0.elapsed() < Duration::from_secs(30), "QE 1 not written");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let signalled = Instant::now();
    let o = child.wait_with_output().unwrap();
    assert!(
        signalled.elapsed() < Duration::from_secs(5),
        "the run went on {:?} after Ctrl-C",
        signalled.elapsed()
    );
    let e = stderr(&o);
    assert!(o.status.success() && e.contains("interrupted"), "{e}");
    assert_eq!(json(&out)["qes"].as_array().unwrap().len(), 1);
    // The server goes away in the middle of a run: ten retries with
    // back-off, then the run pauses with its QEs kept.
    let out = c.dir.join("mid.json");
    let child = c.spawn_run(&[
        "--sql",
        "SELECT count(*) FROM t a JOIN t b ON a.k = b.id",
        "-n",
        "1000",
        "--backoff",
        "5ms",
        "--json",
        out.to_str().unwrap(),
    ]);
    let t0 = Instant::now();
    let measured = loop {
        let n = std::fs::read_to_string(&out)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .map_or(0, |d| d["qes"].as_array().map_or(0, Vec::len));
        if n >= 3 {
            break n;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "no QEs measured");
        std::thread::sleep(Duration::from_millis(10));
    };
    c.stop_server();
    let o = child.wait_with_output().unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("paused") && e.contains("10 retries"), "{e}");
    let kept = json(&out)["qes"].as_array().unwrap().len();
    assert!(kept >= measured, "kept {kept} of {measured} QEs");
    // A server that is down: a clear error before anything is touched.
    let spec = c.dir.join("down.toml");
    std::fs::write(
        &spec,
        format!(
            "connection = \"{}\"\ncardinalities = [10]\n[data]\ngenerate = \"SELECT g AS id FROM generate_series(1, {{max_cardinality}}) g\"\n[[query]]\nname = \"q\"\nsql = \"SELECT 1\"\n",
            c.conninfo()
        ),
    )
    .unwrap();
    let o = ttp(&["experiment", spec.to_str().unwrap()]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("is the server running"), "{e}");
    assert!(
        !c.dir.join("down.study.jsonl").exists(),
        "a study was started"
    );
}

/// `load --postgres … --attach-pid POSTMASTER`. Catches a ledger timeline
/// missing from the JSON, one that follows the postmaster alone (which does
/// no query work: the backends are its children), or CPU time beyond what
/// the machine has.
#[test]
fn load_postgres_with_the_servers_ledger() {
    if !root_or_skip("load_postgres_with_the_servers_ledger") {
        return;
    }
    let _serial = serial();
    let c = Cluster::start("load");
    c.make_table(100_000);
    let out: PathBuf = c.dir.join("load.json");
    let pm = c.postmaster_pid().to_string();
    let o = ttp(&[
        "load",
        "--rate",
        "20",
        "--duration",
        "3s",
        "--postgres",
        &c.conninfo(),
        "--sql",
        "SELECT count(*) FROM t",
        "--pool-size",
        "2",
        "--attach-pid",
        &pm,
        "--json",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = json(&out);
    assert_eq!(doc["target"]["kind"], "postgres");
    let phase = &doc["phases"][0];
    assert!(phase["completed_ok"].as_u64().unwrap() >= 50, "{phase}");
    let rows = phase["samplers"]["ledger"].as_array().expect("ledger rows");
    assert!(rows.len() >= 2, "{rows:?}");
    let cpus = std::thread::available_parallelism().unwrap().get() as u64;
    for r in rows {
        let on_cpu = r["on_cpu_ns"].as_u64().unwrap();
        // 20 scans of a 100k-row table per second keep the backends busy.
        assert!(on_cpu > 0, "{r}");
        assert!(on_cpu <= cpus * 1_100_000_000, "{r}");
        assert!(r["processes"].as_u64().unwrap() >= 2, "{r}");
        assert_eq!(r["pid"].as_u64().unwrap().to_string(), pm);
    }
}

/// An index created in the middle of a Q@C changes the plan of the
/// prepared statement (PostgreSQL re-plans it). Catches a Q@C that mixes
/// QEs of two plans instead of restarting (Sec. 3.2.3), or that loses count
/// of the restart.
#[test]
fn a_changed_plan_restarts_the_qc() {
    if !root_or_skip("a_changed_plan_restarts_the_qc") {
        return;
    }
    let _serial = serial();
    let c = Cluster::start("plan");
    c.make_table(100_000);
    let out = c.dir.join("plan.json");
    let child = c.spawn_run(&[
        "--sql",
        "SELECT count(*) FROM t WHERE id < 50",
        "-n",
        "10",
        "--json",
        out.to_str().unwrap(),
    ]);
    let t0 = Instant::now();
    loop {
        let n = std::fs::read_to_string(&out)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .map_or(0, |d| d["qes"].as_array().map_or(0, Vec::len));
        if n >= 2 {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "no QEs measured");
        std::thread::sleep(Duration::from_millis(10));
    }
    c.psql("CREATE INDEX t_id ON t (id)");
    c.psql("ANALYZE t");
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = json(&out);
    assert!(
        doc["setup"]["recovery"]["plan_restarts"].as_u64().unwrap() >= 1,
        "{}",
        doc["setup"]
    );
    let qes = doc["qes"].as_array().unwrap();
    assert_eq!(qes.len(), 10);
    for qe in qes {
        let plan = qe["plan"].as_str().unwrap();
        assert!(
            plan.contains("t_id"),
            "QE {} ran without the index: {plan}",
            qe["qe"]
        );
    }
}
