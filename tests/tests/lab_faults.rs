//! Lab workers stopped, killed or cut off in the middle of a Q@C, against
//! a real PostgreSQL lab server started by the test (root; see
//! common::root_or_skip and common::pg): Ctrl-C releases the task, a
//! closed connection is opened again, a task whose worker was killed is
//! taken over after its lease, and a waiting worker started before the
//! lab picks its task up once the lab is up (docs/lab.md, "Queue",
//! "Leases", "Waiting"). Truths: the lab's tables read with psql, the n of
//! the spec the test wrote, and the workers' own reports.
use crate::common;

use common::{
    lab::{LabServer, signal, spin_command, wait_or_kill},
    pg::{stderr, stdout, ttp},
    *,
};

/// A lab server with one experiment of one command on one host label:
/// `fixture-spin --cpu-ms CPU_MS`, n QEs. Set-up shared by the tests of
/// workers stopped, killed or cut off in the middle of a Q@C.
struct OneTask {
    lab: LabServer,
    label: &'static str,
}

impl std::ops::Deref for OneTask {
    type Target = LabServer;
    fn deref(&self) -> &LabServer {
        &self.lab
    }
}

impl OneTask {
    fn new(name: &str, label: &'static str, cpu_ms: u64, n: u32) -> OneTask {
        let lab = LabServer::initialised(name);
        lab.submit(
            &(format!("name = \"{name}\"\nhosts = [\"{label}\"]\n")
                + &spin_command("spin", cpu_ms, n, None, "")),
        );
        OneTask { lab, label }
    }

    /// A worker of the label, in the background, with more arguments.
    fn spawn_worker(&self, extra: &[&str]) -> std::process::Child {
        self.lab.worker(self.label, extra)
    }

    /// Waits until the first QE is in the lab.
    fn wait_first_qe(&self) {
        let t0 = std::time::Instant::now();
        while self.c.psql("SELECT count(*) FROM ttp_lab_qes") == "0" {
            assert!(t0.elapsed().as_secs() < 120, "no QE recorded");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// Ctrl-C of a worker in the middle of a Q@C: the task goes back to
/// pending with the QEs measured so far kept as an abandoned attempt; the
/// next worker measures the Q@C whole, and only its attempt is the result.
#[test]
fn interrupted_worker_releases_its_task() {
    if !root_or_skip("interrupted_worker_releases_its_task") {
        return;
    }
    let _serial = serial();
    let lab = OneTask::new("labint", "delta", 1500, 3);
    let worker = lab.spawn_worker(&["--once"]);
    // After the first QE, QE 2 runs for 1.5 s of CPU.
    lab.wait_first_qe();
    signal(&worker, libc::SIGINT);
    let o = worker.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("pending again"), "{}", stderr(&o));
    assert_eq!(
        lab.psql("SELECT state, attempts, claimed_by IS NULL FROM ttp_lab_tasks"),
        "pending|1|t"
    );
    let abandoned: u32 = lab
        .psql("SELECT count(*) FROM ttp_lab_qes WHERE attempt = 1")
        .parse()
        .unwrap();
    assert!((1..3).contains(&abandoned), "{abandoned} QEs of attempt 1");
    assert_eq!(lab.psql("SELECT count(*) FROM ttp_lab_qc_results"), "0");

    let o = lab.spawn_worker(&["--once"]).wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        lab.psql("SELECT state, attempts FROM ttp_lab_tasks"),
        "done|2"
    );
    assert_eq!(
        lab.psql("SELECT attempt, jsonb_array_length(result->'qes') FROM ttp_lab_qc_results"),
        "2|3"
    );
    assert_eq!(
        lab.psql("SELECT count(*) FROM ttp_lab_qes WHERE attempt = 2"),
        "3"
    );
    assert_eq!(
        lab.psql("SELECT count(*) FROM ttp_lab_qes WHERE attempt = 1"),
        abandoned.to_string(),
        "the abandoned attempt's QEs are kept"
    );
}

/// The worker's lab connection closed by the server while `run` measures
/// (here: its backend terminated, as a restart or an idle timeout would):
/// the worker connects again and records the Q@C; nothing is lost.
#[test]
fn worker_reconnects_after_its_connection_is_closed() {
    if !root_or_skip("worker_reconnects_after_its_connection_is_closed") {
        return;
    }
    let _serial = serial();
    let lab = OneTask::new("labre", "eps", 1500, 2);
    let worker = lab.spawn_worker(&["--once"]);
    lab.wait_first_qe();
    // QE 2 runs for 1.5 s of CPU: end the worker's main connection now.
    assert_eq!(
        lab.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'ttp-ebpf lab'"),
        "1"
    );
    let o = worker.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the lab answers again"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        lab.psql("SELECT state, attempts FROM ttp_lab_tasks"),
        "done|1"
    );
    assert_eq!(
        lab.psql("SELECT count(*) FROM ttp_lab_qes WHERE attempt = 1"),
        "2"
    );
    assert_eq!(
        lab.psql("SELECT attempt, jsonb_array_length(result->'qes') FROM ttp_lab_qc_results"),
        "1|2"
    );
}

/// `kill -9` of a worker in the middle of a Q@C (lease 3 s, renewed every
/// 0.3 s): a second worker of the label, started at once in waiting mode,
/// cannot take the task while the first one lives, takes it over once the
/// lease has expired, measures it from the start, and the result lands
/// exactly once; the takeover is recorded with both workers and the time.
/// A third worker started while the first one lives and renews its lease
/// gets nothing, though the Q@C runs for longer than the lease.
///
/// Timing: 10 QEs of 1 s of CPU each. After QE 1 is recorded the first
/// worker still has 9 s of CPU to spend, and the test kills it after
/// 3.5 s + the third worker's run; on a busy machine the QEs take longer in
/// wall time, so the margin only grows. (With 3 QEs of 1.5 s, an idle
/// machine let the first worker finish before the kill.)
#[test]
fn killed_workers_task_is_taken_over_after_its_lease() {
    if !root_or_skip("killed_workers_task_is_taken_over_after_its_lease") {
        return;
    }
    let _serial = serial();
    let lab = OneTask::new("labkill", "zeta", 1000, 10);
    let a = lab.spawn_worker(&["--once", "--lease", "3s", "--worker-name", "w-a"]);
    lab.wait_first_qe();
    // QE 1 took 1 s of CPU and the claim is older still: 3.5 s more is
    // past one lease from the claim, so a lease without heartbeat would
    // have expired.
    std::thread::sleep(std::time::Duration::from_millis(3500));
    let o = lab
        .spawn_worker(&["--once", "--worker-name", "w-c"])
        .wait_with_output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("0 tasks done"), "{}", stdout(&o));
    assert_eq!(
        lab.psql("SELECT state, claimed_by, attempts FROM ttp_lab_tasks"),
        "running|w-a|1",
        "not stolen from a live worker (and not yet finished by it)"
    );
    signal(&a, libc::SIGKILL);
    let a_pid = a.id();
    let _ = a.wait_with_output();
    let b = lab.spawn_worker(&[
        "--lease",
        "3s",
        "--poll",
        "500ms",
        "--max-tasks",
        "1",
        "--worker-name",
        "w-b",
        "--json",
    ]);
    let o = wait_or_kill(b, 300);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (&v["done"], &v["taken_over"]),
        (&1.into(), &1.into()),
        "{v}"
    );
    assert!(stderr(&o).contains("taken over from w-a"), "{}", stderr(&o));
    assert_eq!(
        lab.psql("SELECT state, attempts, claimed_by FROM ttp_lab_tasks"),
        "done|2|w-b"
    );
    // The takeover came only after the lease (last heartbeat + 3 s).
    assert_eq!(
        lab.psql("SELECT attempt, from_worker, by_worker, taken_at >= lease_until, taken_at - from_started_at > interval '3 s' FROM ttp_lab_takeovers"),
        "2|w-a|w-b|t|t"
    );
    assert_eq!(
        lab.psql("SELECT count(*), min(attempt), max(jsonb_array_length(result->'qes')) FROM ttp_lab_qc_results"),
        "1|2|10",
        "the result once, from the attempt that finished"
    );
    assert_eq!(
        lab.psql("SELECT count(*) FROM ttp_lab_qes WHERE attempt = 2"),
        "10"
    );
    let abandoned: u32 = lab
        .psql("SELECT count(*) FROM ttp_lab_qes WHERE attempt = 1")
        .parse()
        .unwrap();
    assert!(
        (1..10).contains(&abandoned),
        "{abandoned} QEs of the killed attempt kept"
    );
    let o = ttp(&["lab", "status", "--lab", &lab.url, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &v["rows"][0];
    assert_eq!(
        (&r["done"], &r["abandoned_attempts"], &r["taken_over"]),
        (&1.into(), &1.into(), &1.into()),
        "{v}"
    );
    // The killed worker's run JSON is all it left on this machine.
    for e in std::fs::read_dir(std::env::temp_dir()).unwrap().flatten() {
        if e.file_name()
            .to_string_lossy()
            .starts_with(&format!("ttp-lab-{a_pid}-"))
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// A waiting worker started while the lab server is down says what it
/// waits for, picks the task up once the server is up, and ends with
/// SIGTERM, exit 0.
#[test]
fn waiting_worker_starts_before_the_lab() {
    if !root_or_skip("waiting_worker_starts_before_the_lab") {
        return;
    }
    let _serial = serial();
    let lab = OneTask::new("labdown", "eta", 100, 2);
    lab.c.stop_server();
    let w = lab.spawn_worker(&["--poll", "500ms", "--retry-cap", "2s", "--json"]);
    std::thread::sleep(std::time::Duration::from_secs(3));
    lab.c.start_server();
    let t0 = std::time::Instant::now();
    while lab.psql("SELECT state FROM ttp_lab_tasks") != "done" {
        assert!(t0.elapsed().as_secs() < 120, "the task was not done");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    signal(&w, libc::SIGTERM);
    let o = w.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(e.matches("waiting for the lab").count(), 1, "{e}");
    assert!(e.contains("the lab answers again"), "{e}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (&v["done"], &v["stopped"]),
        (&1.into(), &true.into()),
        "{v}"
    );
    assert_eq!(
        lab.psql("SELECT attempts, jsonb_array_length(r.result->'qes') FROM ttp_lab_tasks t JOIN ttp_lab_qc_results r ON r.task_id = t.id"),
        "1|2"
    );
}
