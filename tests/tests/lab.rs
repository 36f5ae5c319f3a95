//! The lab against a real PostgreSQL lab server started by the test (root;
//! see common::root_or_skip and common::pg): two workers with two host
//! labels claim concurrently from one queue, and a `--no-run` worker
//! cannot end a real experiment's task (workers stopped, killed or cut
//! off in the middle of a Q@C: lab_faults.rs). Truths: the fixture's
//! own log of its executions (fixture-spin --state appends one line per
//! execution with the kernel's CPU time of its process), the spec the
//! test wrote, and the lab's tables read with psql.
use crate::common;

use std::{
    path::Path,
    process::{Command, Stdio},
};

use common::{
    lab::{LabServer, assert_refused, spin_command, wait_or_kill},
    pg::{Cluster, stderr, stdout, ttp},
    *,
};

/// (name, cpu_ms, n) of the spec's commands.
const COMMANDS: [(&str, u64, u32); 3] =
    [("spin30", 30, 3), ("spin60", 60, 2), ("spin1000", 1000, 2)];
const HOSTS: [&str; 2] = ["alpha", "beta"];

fn spec(dir: &Path, n_first: u32) -> String {
    let mut s = format!(
        "name = \"spin\"\nhosts = [\"{}\", \"{}\"]\n",
        HOSTS[0], HOSTS[1]
    );
    for (i, (name, cpu_ms, n)) in COMMANDS.iter().enumerate() {
        let n = if i == 0 { n_first } else { *n };
        let labels = format!("{{ cpu_ms = \"{cpu_ms}\" }}");
        s += &spin_command(name, *cpu_ms, n, Some(&dir.join(name)), &labels);
    }
    s
}

#[test]
fn two_workers_two_labels_every_task_once() {
    if !root_or_skip("two_workers_two_labels_every_task_once") {
        return;
    }
    let _serial = serial();
    let c = Cluster::start("lab");
    let url = c.conninfo();
    let dir = temp_path("lab");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    // A lab that was never initialised is refused with what to do.
    let o = ttp(&["lab", "status", "--lab", &url]);
    assert_refused(&o, "lab init");

    let o = ttp(&["lab", "init", "--lab", &url, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["applied"], serde_json::json!([1, 2, 3]));
    let o = ttp(&["lab", "init", "--lab", &url]);
    assert!(stdout(&o).contains("nothing to do"), "{}", stdout(&o));
    assert_eq!(c.psql("SELECT count(*) FROM ttp_lab_migrations"), "3");

    let spec_path = dir.join("spec.toml");
    std::fs::write(&spec_path, spec(&dir, COMMANDS[0].2)).unwrap();
    let sp = spec_path.to_str().unwrap();
    let o = ttp(&["lab", "submit", sp, "--lab", &url, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["tasks"], 6, "3 commands × 2 host labels");
    // The same spec again: a no-op that says so.
    let o = ttp(&["lab", "submit", sp, "--lab", &url]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("nothing changed"), "{}", stdout(&o));
    assert_eq!(c.psql("SELECT count(*) FROM ttp_lab_tasks"), "6");

    // Bad input: one line, exit 2, nothing in the lab changed.
    let changed = dir.join("changed.toml");
    std::fs::write(&changed, spec(&dir, COMMANDS[0].2 + 1)).unwrap();
    let hash_before = c.psql("SELECT spec_hash FROM ttp_lab_experiments");
    assert_refused(
        &ttp(&["lab", "submit", changed.to_str().unwrap(), "--lab", &url]),
        "different spec",
    );
    assert_eq!(
        c.psql("SELECT spec_hash FROM ttp_lab_experiments"),
        hash_before
    );
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "name = \"x\"\nhosts = [\"a\"]\n[[command]]\nname = 3\n",
    )
    .unwrap();
    assert_refused(
        &ttp(&["lab", "submit", bad.to_str().unwrap(), "--lab", &url]),
        "bad.toml",
    );
    let nowhere = format!("host={} port=1 user=ttp dbname=postgres", dir.display());
    assert_refused(
        &ttp(&["lab", "status", "--lab", &nowhere]),
        "cannot connect",
    );
    assert_refused(
        &ttp(&["lab", "submit", sp, "--lab", &nowhere]),
        "cannot connect",
    );
    assert_eq!(c.psql("SELECT count(*) FROM ttp_lab_tasks"), "6");
    assert_eq!(c.psql("SELECT count(*) FROM ttp_lab_experiments"), "1");
    // A schema newer than the binary is refused and left alone.
    c.psql("INSERT INTO ttp_lab_migrations (version, description) VALUES (99, 'future')");
    assert_refused(&ttp(&["lab", "status", "--lab", &url]), "newer");
    assert_refused(&ttp(&["lab", "init", "--lab", &url]), "newer");
    c.psql("DELETE FROM ttp_lab_migrations WHERE version = 99");

    // A Unix socket carries no TLS: asking for it is refused, not ignored
    // (TLS itself: lab_tls.rs).
    assert_refused(
        &ttp(&["lab", "status", "--lab", &format!("{url} sslmode=require")]),
        "cannot connect",
    );

    // The worker of label beta connects as the least-privilege role of
    // docs/lab.md, with exactly its GRANTs.
    c.psql("CREATE ROLE ttp_worker LOGIN");
    c.psql("GRANT SELECT ON ttp_lab_migrations, ttp_lab_experiments TO ttp_worker");
    c.psql("GRANT SELECT, UPDATE ON ttp_lab_tasks TO ttp_worker");
    c.psql("GRANT SELECT, INSERT, UPDATE ON ttp_lab_hosts TO ttp_worker");
    c.psql(
        "GRANT SELECT, INSERT ON ttp_lab_qes, ttp_lab_qc_results, ttp_lab_takeovers TO ttp_worker",
    );
    let worker_url = url.replace("user=ttp", "user=ttp_worker");
    // ... with a password (SCRAM) that it reads from a libpq password file.
    c.psql("ALTER ROLE ttp_worker PASSWORD 'lab-secret'");
    let hba = c.data.join("pg_hba.conf");
    let rules = std::fs::read_to_string(&hba).unwrap();
    std::fs::write(&hba, format!("local all ttp_worker scram-sha-256\n{rules}")).unwrap();
    c.psql("SELECT pg_reload_conf()");
    let passfile = dir.join("pgpass");
    std::fs::write(
        &passfile,
        format!(
            "{}:{}:postgres:ttp_worker:lab-secret\n",
            c.dir.display(),
            c.port
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &passfile,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let o = ttp(&[
        "lab",
        "status",
        "--lab",
        &format!("{worker_url} password=wrong"),
    ]);
    assert_refused(&o, "password authentication failed");
    assert!(
        !stderr(&o).contains("wrong"),
        "the password is never printed"
    );

    // A worker that could not measure claims nothing.
    let o = {
        use std::os::unix::process::CommandExt;
        Command::new(ttp_bin())
            .args([
                "lab",
                "worker",
                "--lab",
                &url,
                "--host-label",
                "alpha",
                "--once",
            ])
            .uid(65534)
            .gid(65534)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    assert_refused(&o, "needs root");
    assert_eq!(c.psql("SELECT sum(attempts) FROM ttp_lab_tasks"), "0");

    // Two workers, one per label, concurrently.
    let workers: Vec<_> = HOSTS
        .iter()
        .map(|h| {
            let lab = if *h == "beta" { &worker_url } else { &url };
            Command::new(ttp_bin())
                .env("PGPASSFILE", &passfile)
                .args(["lab", "worker", "--lab", lab, "--host-label", h, "--once"])
                .args(["--worker-name", &format!("w-{h}"), "--json"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start a worker")
        })
        .collect();
    for w in workers {
        let o = w.wait_with_output().unwrap();
        assert!(o.status.success(), "worker: {}", stderr(&o));
        // Standard output is the worker's JSON alone (run's reports are
        // its log, on standard error).
        let out = stdout(&o);
        let v: serde_json::Value = serde_json::from_str(&out).expect("worker JSON summary");
        assert_eq!(v["done"], 3, "{out}");
        assert!(stderr(&o).contains("TTPv2"), "run's reports in the log");
    }

    // Every task done exactly once, by the worker of its label.
    assert_eq!(
        c.psql("SELECT host_label || ':' || state || ':' || attempts || ':' || claimed_by FROM ttp_lab_tasks ORDER BY host_label, key"),
        ["alpha:done:1:w-alpha"; 3]
            .into_iter()
            .chain(["beta:done:1:w-beta"; 3])
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(
        c.psql("SELECT count(*), count(DISTINCT task_id) FROM ttp_lab_qc_results"),
        "6|6"
    );
    // Each command ran n times per label and once more for run's default
    // warm-up (docs/ttpv2.md, "Warm-up executions"), no more: the
    // fixture's own log.
    for (name, cpu_ms, n) in COMMANDS {
        let log = std::fs::read_to_string(dir.join(name).join("spin.log")).unwrap();
        assert_eq!(log.lines().count() as u32, 2 * (n + 1), "{name}: {log}");
        for l in log.lines() {
            let cpu_ns: u64 = l.split_whitespace().nth(1).unwrap().parse().unwrap();
            assert!(cpu_ns >= cpu_ms * 1_000_000, "{name} burnt {cpu_ns} ns");
        }
        // Every QE is in the lab, once, for both labels, and equals the
        // record of the Q@C result.
        for h in HOSTS {
            let rows = c.psql(&format!(
                "SELECT q.qe, q.record->>'time_meas_ms', r.result->'qes'->(q.qe - 1)->>'time_meas_ms' \
                 FROM ttp_lab_qes q JOIN ttp_lab_tasks t ON t.id = q.task_id \
                 JOIN ttp_lab_qc_results r ON r.task_id = t.id \
                 WHERE t.key = '{name}' AND t.host_label = '{h}' ORDER BY q.qe"
            ));
            let lines: Vec<&str> = rows.lines().collect();
            assert_eq!(lines.len() as u32, n, "{name} on {h}: {rows}");
            for (i, l) in lines.iter().enumerate() {
                let f: Vec<&str> = l.split('|').collect();
                assert_eq!(f[0], (i + 1).to_string());
                assert_eq!(f[1], f[2], "QE row = the result's QE: {l}");
                // Wall time of a single-threaded process is at least
                // its CPU time.
                let ms: f64 = f[1].parse().unwrap();
                assert!(ms >= cpu_ms as f64, "{name} QE {} took {ms} ms", i + 1);
            }
            let result = c.psql(&format!(
                "SELECT r.result->'labels'->>'command', jsonb_array_length(r.result->'qes') FROM ttp_lab_qc_results r \
                 JOIN ttp_lab_tasks t ON t.id = r.task_id WHERE t.key = '{name}' AND t.host_label = '{h}'"
            ));
            assert_eq!(result, format!("{name}|{n}"));
        }
    }
    // QEs are recorded as they are measured, not only at the end: QE 1 of
    // spin1000 is in the lab before its Q@C result, which needs QE 2's
    // second of CPU time more. The follower polls every 200 ms, so this
    // fails only if it is kept off a CPU for the ~800 ms left.
    for h in HOSTS {
        assert_eq!(
            c.psql(&format!(
                "SELECT q.measured_at < r.finished_at - interval '300 ms' FROM ttp_lab_qes q \
                 JOIN ttp_lab_tasks t ON t.id = q.task_id JOIN ttp_lab_qc_results r ON r.task_id = t.id \
                 WHERE t.key = 'spin1000' AND t.host_label = '{h}' AND q.qe = 1"
            )),
            "t",
            "QE 1 on {h} recorded before the result"
        );
    }
    assert_eq!(
        c.psql("SELECT count(*) FROM ttp_lab_hosts WHERE worker IN ('w-alpha', 'w-beta') AND last_seen > first_seen AND facts ? 'cores'"),
        "2"
    );

    // The status agrees with the tables.
    let o = ttp(&["lab", "status", "--lab", &url, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let qes_per_label: u32 = COMMANDS.iter().map(|c| c.2).sum();
    for (r, h) in rows.iter().zip(HOSTS) {
        assert_eq!(r["experiment"], "spin");
        assert_eq!(r["host_label"], h);
        assert_eq!(
            (&r["pending"], &r["running"], &r["done"], &r["failed"]),
            (&0.into(), &0.into(), &3.into(), &0.into()),
            "{r}"
        );
        assert_eq!(r["qes_measured"], qes_per_label, "{r}");
        // The median of a label's three Q@Cs is at least the CPU time of
        // the middle one (2 × 60 ms); nothing is left, so the ETA is 0.
        let median = r["median_qc_s"].as_f64().unwrap();
        assert!(median >= 0.12, "{r}");
        assert_eq!(r["eta_s"], 0.0, "{r}");
        assert_eq!(
            (&r["abandoned_attempts"], &r["taken_over"]),
            (&0.into(), &0.into()),
            "{r}"
        );
    }
    // The table says the same: pending running done failed QEs per row.
    let o = ttp(&["lab", "status", "--lab", &url]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for h in HOSTS {
        let row = text
            .lines()
            .find(|l| l.split_whitespace().take(2).eq(["spin", h]))
            .unwrap_or_else(|| panic!("no row for {h}: {text}"));
        let counts: Vec<&str> = row.split_whitespace().skip(2).take(5).collect();
        assert_eq!(
            counts,
            ["0", "0", "3", "0", &qes_per_label.to_string()],
            "{row}"
        );
    }
    assert_refused(
        &ttp(&["lab", "status", "--lab", &url, "--experiment", "nope"]),
        "no experiment",
    );
    // Nothing is pending any more: a worker exits 0 at once.
    let o = ttp(&[
        "lab",
        "worker",
        "--lab",
        &url,
        "--host-label",
        "alpha",
        "--once",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("0 tasks done"), "{}", stdout(&o));
    // A task whose command this host cannot run is failed with run's
    // message; the worker says so and exits 1.
    let broken = dir.join("broken.toml");
    std::fs::write(
        &broken,
        "name = \"broken\"\nhosts = [\"gamma\"]\n[[command]]\nname = \"missing\"\nargv = [\"/nonexistent/ttp-lab-cmd\"]\nn = 2\n",
    )
    .unwrap();
    let o = ttp(&["lab", "submit", broken.to_str().unwrap(), "--lab", &url]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = ttp(&[
        "lab",
        "worker",
        "--lab",
        &url,
        "--host-label",
        "gamma",
        "--once",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("/nonexistent/ttp-lab-cmd"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        c.psql("SELECT state, attempts, error LIKE '%/nonexistent/ttp-lab-cmd%' FROM ttp_lab_tasks WHERE experiment = 'broken'"),
        "failed|1|t"
    );
    let o = ttp(&[
        "lab",
        "status",
        "--lab",
        &url,
        "--experiment",
        "broken",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["rows"][0]["failed"], 1, "{v}");
    assert_eq!(v["rows"][0]["qes_measured"], 0, "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Many claimers on one host label at once, through the queue itself (a
/// trivial executor instead of `run`): every task is claimed and finished
/// exactly once, and a finish by a worker that does not hold the task is
/// refused.
#[test]
fn concurrent_claims_on_one_label_take_each_task_once() {
    if !root_or_skip("concurrent_claims_on_one_label_take_each_task_once") {
        return;
    }
    use ttp_user::lab::{Lab, queue, schema, spec::LabSpec};
    let _serial = serial();
    let c = Cluster::start("labq");
    let url = c.conninfo();
    const TASKS: usize = 200;
    const CLAIMERS: usize = 6;
    let mut text = String::from("name = \"q\"\nhosts = [\"x\"]\n");
    for i in 0..TASKS {
        text += &format!("[[command]]\nname = \"c{i}\"\nargv = [\"/bin/true\"]\nn = 1\n");
    }
    let spec = LabSpec::parse(&text).unwrap();
    let mut lab = Lab::connect(&url).unwrap();
    schema::init(&mut lab).unwrap();
    assert_eq!(
        queue::submit(&mut lab, &spec).unwrap(),
        queue::Submitted::New(TASKS)
    );
    // A held task shows in the status as running, by its holder.
    let held = queue::claim(&mut lab, "x", "holder", 60.0, false)
        .unwrap()
        .unwrap();
    let o = Command::new(ttp_bin())
        .args(["lab", "status", "--lab", &url, "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["rows"][0]["running"], 1, "{v}");
    assert_eq!(v["rows"][0]["pending"], TASKS - 1, "{v}");
    assert_eq!(v["running"][0]["claimed_by"], "holder", "{v}");
    assert!(v["rows"][0]["eta_s"].is_null(), "no Q@C done yet: {v}");
    assert_eq!(v["running"][0]["task"], held.id, "{v}");
    let left = v["running"][0]["lease_left_s"].as_f64().unwrap();
    assert!(left > 0.0 && left <= 60.0, "{v}");
    assert!(queue::finish(&mut lab, &held, "holder", &[], Ok("{}")).unwrap());
    // The same finish again (retried after a lost answer) is this
    // worker's, and records nothing twice.
    assert!(queue::finish(&mut lab, &held, "holder", &[], Ok("{}")).unwrap());
    assert_eq!(c.psql("SELECT count(*) FROM ttp_lab_qc_results"), "1");
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(CLAIMERS));
    let handles: Vec<_> = (0..CLAIMERS)
        .map(|w| {
            let (url, barrier) = (url.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mut lab = Lab::connect(&url).unwrap();
                let me = format!("w{w}");
                let mut mine = Vec::new();
                barrier.wait();
                while let Some(t) = queue::claim(&mut lab, "x", &me, 60.0, false).unwrap() {
                    let qe = vec![(1, "{\"qe\": 1}".to_string())];
                    assert!(queue::finish(&mut lab, &t, &me, &qe, Ok("{}")).unwrap());
                    mine.push(t.id);
                }
                mine
            })
        })
        .collect();
    let mut all: Vec<i64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.push(held.id);
    assert_eq!(all.len(), TASKS, "claims in all");
    all.sort();
    all.dedup();
    assert_eq!(all.len(), TASKS, "no task claimed twice");
    assert_eq!(
        c.psql("SELECT count(*) FILTER (WHERE state = 'done' AND attempts = 1), count(*) FROM ttp_lab_tasks"),
        format!("{TASKS}|{TASKS}")
    );
    assert_eq!(
        c.psql("SELECT count(*), count(DISTINCT task_id) FROM ttp_lab_qc_results"),
        format!("{TASKS}|{TASKS}")
    );
    // A worker that does not hold a task cannot end it.
    let t = queue::Claimed {
        id: all[0],
        experiment: "q".into(),
        key: "c0".into(),
        attempt: 2,
        payload: String::new(),
        taken_over: None,
    };
    assert!(!queue::finish(&mut lab, &t, "intruder", &[], Ok("{}")).unwrap());
    assert!(!queue::release(&mut lab, &t, "intruder").unwrap());
    assert_eq!(
        c.psql("SELECT count(*) FROM ttp_lab_qc_results"),
        TASKS.to_string()
    );
}

/// `lab worker --no-run` (the queue benchmark's trivial executor) pointed
/// at a lab with a real experiment: it claims only the tasks of the queue
/// benchmark (`no_run = true`) and leaves the real task pending, never
/// claimed; an ordinary worker measures the real task and leaves the
/// benchmark's alone; `lab status` shows the benchmark as not run, and
/// `analyze --lab` and `lab export` refuse it. Would catch a no-run worker
/// that ends a task meant to be measured (a result with no QEs), or a
/// benchmark's unmeasured tasks read as results. Truths: the lab's rows
/// read with psql and the n of the spec the test wrote.
#[test]
fn a_no_run_worker_cannot_end_a_real_task() {
    if !root_or_skip("a_no_run_worker_cannot_end_a_real_task") {
        return;
    }
    let _serial = serial();
    let lab = LabServer::initialised("labnorun");
    lab.submit(
        &(String::from("name = \"real\"\nhosts = [\"x\"]\n")
            + &spin_command("spin", 30, 2, None, "")),
    );
    let bench = "name = \"queue\"\nno_run = true\nhosts = [\"x\"]\n\
                 [[command]]\nname = \"t1\"\nargv = [\"/bin/true\"]\nn = 1\n\
                 [[command]]\nname = \"t2\"\nargv = [\"/bin/true\"]\nn = 1\n";
    let o = lab.submit_as("bench.toml", bench, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("queue benchmark"), "{}", stdout(&o));
    let tasks = "SELECT experiment, key, state, attempts FROM ttp_lab_tasks ORDER BY id";

    // One task of the benchmark, and the real one is first in the queue.
    let o = wait_or_kill(
        lab.worker("x", &["--once", "--no-run", "--json", "--max-tasks", "1"]),
        60,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["done"], 1, "{v}");
    assert_eq!(
        lab.psql(tasks),
        "real|spin|pending|0\nqueue|t1|done|1\nqueue|t2|pending|0"
    );
    // Without --max-tasks it takes what is left of the benchmark and
    // still never the real task.
    let o = wait_or_kill(lab.worker("x", &["--once", "--no-run", "--json"]), 60);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["done"], 1, "{v}");
    assert_eq!(
        lab.psql(tasks),
        "real|spin|pending|0\nqueue|t1|done|1\nqueue|t2|done|1"
    );
    assert_eq!(
        lab.psql("SELECT count(*) FROM ttp_lab_qc_results r JOIN ttp_lab_tasks t ON t.id = r.task_id WHERE t.experiment = 'real'"),
        "0"
    );

    // An ordinary worker measures the real task: n = 2 QEs.
    let o = wait_or_kill(lab.worker("x", &["--once", "--json"]), 300);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["done"], 1, "{v}");
    assert_eq!(
        lab.psql("SELECT t.state, r.attempt, jsonb_array_length(r.result->'qes') FROM ttp_lab_tasks t JOIN ttp_lab_qc_results r ON r.task_id = t.id WHERE t.experiment = 'real'"),
        "done|1|2"
    );

    // A benchmark submitted after the real task ran is not claimed by an
    // ordinary worker either.
    let o = lab.submit_as(
        "bench2.toml",
        &bench.replace("\"queue\"", "\"queue2\""),
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = wait_or_kill(lab.worker("x", &["--once", "--json"]), 60);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["done"], 0, "{v}");
    assert_eq!(
        lab.psql("SELECT count(*) FILTER (WHERE state = 'pending' AND attempts = 0) FROM ttp_lab_tasks WHERE experiment = 'queue2'"),
        "2"
    );

    // The benchmark's tasks are done, but nothing of it is a result.
    let o = ttp(&[
        "lab",
        "status",
        "--lab",
        &lab.url,
        "--json",
        "--experiment",
        "queue",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        (&v["rows"][0]["done"], &v["rows"][0]["no_run"]),
        (&2.into(), &true.into()),
        "{v}"
    );
    let o = ttp(&["lab", "status", "--lab", &lab.url]);
    assert!(
        stdout(&o).contains("experiment queue is a queue benchmark"),
        "{}",
        stdout(&o)
    );
    assert!(!stdout(&o).contains("experiment real is"), "{}", stdout(&o));
    let o = ttp(&["analyze", "--lab", &lab.url, "--experiment", "queue"]);
    assert_refused(&o, "queue benchmark");
    let out = lab.dir.join("export");
    let o = ttp(&[
        "lab",
        "export",
        "--lab",
        &lab.url,
        "--experiment",
        "queue",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_refused(&o, "queue benchmark");
    assert!(!out.join("queue.x.study").exists());
}
