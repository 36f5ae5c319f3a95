//! A worker that comes back after its task was taken over (root; see
//! common::root_or_skip and common::pg): worker A is frozen (SIGSTOP)
//! while it measures, its lease expires, worker B takes the task over;
//! when A is thawed its heartbeat finds the task gone and its run stops
//! after the QE in progress instead of measuring every QE left. Truths:
//! the lab's rows read with psql (A's attempt keeps fewer QEs than n, B's
//! result is the only one) and A's own report.
use crate::common;

use std::time::{Duration, Instant};

use common::{
    lab::{LabServer, signal, spin_command, wait_or_kill},
    pg::{Cluster, stderr},
    *,
};

const N: u32 = 10;

fn worker(lab: &LabServer, name: &str) -> std::process::Child {
    lab.worker(
        "alpha",
        &["--once", "--lease", "3s", "--worker-name", name, "--json"],
    )
}

/// Polls `sql` until it prints "t", for at most `secs`.
fn wait_for(c: &Cluster, sql: &str, secs: u64) {
    let until = Instant::now() + Duration::from_secs(secs);
    while c.psql(sql) != "t" {
        assert!(Instant::now() < until, "waited {secs} s for: {sql}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_worker_whose_task_was_taken_over_stops_its_run() {
    if !root_or_skip("a_worker_whose_task_was_taken_over_stops_its_run") {
        return;
    }
    let _serial = serial();
    let lab = LabServer::initialised("labtake");
    let c = &lab.c;
    let spec = String::from("name = \"long\"\nhosts = [\"alpha\"]\n")
        + &spin_command("spin", 500, N, Some(&lab.dir), "");
    lab.submit(&spec);

    let a = worker(&lab, "w-a");
    // A has measured a QE: freeze it. Its QE in progress (a child of its
    // own) ends, and no heartbeat comes.
    wait_for(c, "SELECT count(*) >= 1 FROM ttp_lab_qes", 120);
    signal(&a, libc::SIGSTOP);
    let frozen_with = c.psql("SELECT count(*) FROM ttp_lab_qes WHERE attempt = 1");
    wait_for(c, "SELECT lease_until < now() FROM ttp_lab_tasks", 30);
    let b = worker(&lab, "w-b");
    wait_for(c, "SELECT count(*) = 1 FROM ttp_lab_takeovers", 30);
    signal(&a, libc::SIGCONT);

    let oa = wait_or_kill(a, 120);
    assert!(oa.status.success(), "A: {}", stderr(&oa));
    let ea = stderr(&oa);
    assert!(ea.contains("was taken over by another worker"), "{ea}");
    let va: serde_json::Value = serde_json::from_slice(&oa.stdout).expect("A's summary");
    assert_eq!(
        (&va["done"], &va["lost_to_takeover"]),
        (&0.into(), &1.into()),
        "{va}"
    );
    let ob = wait_or_kill(b, 300);
    assert!(ob.status.success(), "B: {}", stderr(&ob));

    // A stopped: its attempt keeps the QEs it had when frozen, plus at
    // most the one thawed in between, and far fewer than n.
    let a_qes: u32 = c
        .psql("SELECT count(*) FROM ttp_lab_qes WHERE attempt = 1")
        .parse()
        .unwrap();
    let frozen_with: u32 = frozen_with.parse().unwrap();
    eprintln!("A: {frozen_with} QEs when frozen, {a_qes} recorded in all (n = {N})");
    assert!(
        a_qes <= frozen_with + 2 && a_qes < N,
        "A measured {a_qes} QEs"
    );
    // One result, B's, with every QE.
    assert_eq!(
        c.psql("SELECT t.state || ':' || t.attempts || ':' || r.worker || ':' || r.attempt || ':' || jsonb_array_length(r.result->'qes') \
                FROM ttp_lab_tasks t JOIN ttp_lab_qc_results r ON r.task_id = t.id"),
        format!("done:2:w-b:2:{N}")
    );
    assert_eq!(
        c.psql("SELECT count(*) FROM ttp_lab_qes WHERE attempt = 2"),
        N.to_string()
    );
}
