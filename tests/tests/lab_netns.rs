//! The lab across hosts on a network (root; see common::root_or_skip and
//! common::pg): three workers, each in a network namespace of its own made
//! by the test and joined to the lab server by a veth pair, so each is a
//! separate host on the network and reaches the lab over TCP; two host
//! labels; a command spec with a fixture and `experiment`'s query spec
//! (2 queries × 3 cardinalities, n = 6) against a throw-away DBMS under
//! test, a database of its own per worker. Truths: the server's own log of
//! where each connection came from (log_connections), the lab's rows read
//! with psql, the rows the DBMS under test returned (its command tag)
//! against the cardinality, and `analyze` of the exported studies.
use crate::common;

use std::process::{Command, Stdio};

use common::{
    lab::{LabServer, spin_command},
    pg::{Cluster, stderr, stdout, ttp},
    *,
};

/// Network namespaces with a veth pair each: namespace i holds
/// 10.231.i.2, the host side 10.231.i.1. Removed on drop (the pair goes
/// with its namespace), also when the test fails.
struct Hosts(Vec<String>);

fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("ip");
    assert!(
        o.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

impl Hosts {
    fn make(n: usize) -> Hosts {
        let tag = std::process::id() % 10000;
        let mut hosts = Hosts(Vec::new());
        for i in 1..=n {
            let ns = format!("ttp-lab-{tag}-{i}");
            let (h, p) = (format!("tl{tag}h{i}"), format!("tl{tag}n{i}"));
            ip(&["netns", "add", &ns]);
            hosts.0.push(ns.clone());
            ip(&["link", "add", &h, "type", "veth", "peer", "name", &p]);
            ip(&["link", "set", &p, "netns", &ns]);
            ip(&["addr", "add", &format!("10.231.{i}.1/24"), "dev", &h]);
            ip(&["link", "set", &h, "up"]);
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("10.231.{i}.2/24"),
                "dev",
                &p,
            ]);
            ip(&["-n", &ns, "link", "set", &p, "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
        }
        hosts
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for ns in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

#[test]
fn three_workers_on_three_network_hosts() {
    if !root_or_skip("three_workers_on_three_network_hosts") {
        return;
    }
    let _serial = serial();
    let hosts = Hosts::make(3);
    let lab = LabServer::start_with(
        "labnet",
        "-c listen_addresses='10.231.1.1,10.231.2.1,10.231.3.1' -c log_connections=on",
    );
    let c = &lab.c;
    let hba = c.data.join("pg_hba.conf");
    let rules = std::fs::read_to_string(&hba).unwrap();
    std::fs::write(&hba, format!("{rules}host all all 10.231.0.0/16 trust\n")).unwrap();
    c.psql("SELECT pg_reload_conf()");
    lab.init();
    let (local, dir) = (&lab.url, &lab.dir);
    let mut spec = String::from("name = \"net\"\nhosts = [\"alpha\", \"beta\"]\n");
    for card in [10, 20, 40] {
        let labels = format!("{{ query = \"spin\", cardinality = \"{card}\" }}");
        spec += &spin_command(&format!("spin{card}"), card, 6, None, &labels);
    }
    lab.submit(&spec);
    // The query spec: `experiment`'s, with hosts. Each worker has a
    // database of its own on the DBMS under test (a task replaces its
    // tables). q1 returns every row of the variable table, q2 half.
    let dut = Cluster::start("labdut");
    for i in 1..=3 {
        dut.psql(&format!("CREATE DATABASE w{i}"));
    }
    let qspec = String::from(
        r#"name = "scan"
hosts = ["alpha", "beta"]
connection = "host=/nonexistent port=1 user=ttp dbname=postgres"
n = 6
cardinalities = [100, 200, 400]
[data]
generate = "SELECT g AS id, md5(random()::text) AS pad FROM generate_series(1, {max_cardinality}) g"
[[query]]
name = "all"
sql = "SELECT id, pad FROM ttp_var"
[[query]]
name = "even"
sql = "SELECT id FROM ttp_var WHERE id % 2 = 0"
"#,
    );
    let o = lab.submit_as("scan.toml", &qspec, &["--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        v["tasks"], 12,
        "2 queries × 3 cardinalities × 2 host labels"
    );
    // The same spec again changes nothing; a changed one is refused.
    let o = lab.submit_as("scan.toml", &qspec, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("nothing changed"), "{}", stdout(&o));
    let o = lab.submit_as("scan.toml", &qspec.replace("n = 6", "n = 5"), &[]);
    common::lab::assert_refused(&o, "different spec");
    assert_eq!(
        c.psql("SELECT count(*) FROM ttp_lab_tasks WHERE experiment = 'scan'"),
        "12"
    );

    // Workers 1 and 2 are alpha, 3 is beta; each reaches the lab from its
    // own namespace, at the host side of its own veth pair.
    let labels = ["alpha", "alpha", "beta"];
    let workers: Vec<_> = hosts
        .0
        .iter()
        .zip(labels)
        .enumerate()
        .map(|(k, (ns, label))| {
            let i = k + 1;
            let url = format!(
                "host=10.231.{i}.1 port={} user=ttp dbname=postgres sslmode=disable",
                c.port
            );
            Command::new("nsenter")
                .arg(format!("--net=/run/netns/{ns}"))
                .arg(ttp_bin())
                .args([
                    "lab",
                    "worker",
                    "--lab",
                    &url,
                    "--host-label",
                    label,
                    "--once",
                ])
                .args(["--worker-name", &format!("w{i}"), "--json"])
                .args([
                    "--postgres",
                    &format!(
                        "host={} port={} user=ttp dbname=w{i}",
                        dut.dir.display(),
                        dut.port
                    ),
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start a worker in its namespace")
        })
        .collect();
    let mut done = 0;
    for w in workers {
        let o = w.wait_with_output().unwrap();
        assert!(o.status.success(), "worker: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        done += v["done"].as_u64().unwrap();
    }
    assert_eq!(
        done,
        6 + 12,
        "3 commands and 2 queries × 3 cardinalities, × 2 host labels, each done once"
    );

    // Every task done once, by a worker of its label, with all its QEs.
    assert_eq!(
        c.psql(
            "SELECT experiment || ':' || host_label || ':' || count(*) || ':' || bool_and(state = 'done' AND attempts = 1) \
             FROM ttp_lab_tasks GROUP BY experiment, host_label ORDER BY experiment, host_label"
        ),
        "net:alpha:3:true\nnet:beta:3:true\nscan:alpha:6:true\nscan:beta:6:true"
    );
    for l in c
        .psql("SELECT DISTINCT host_label || ':' || claimed_by FROM ttp_lab_tasks ORDER BY 1")
        .lines()
    {
        assert!(["alpha:w1", "alpha:w2", "beta:w3"].contains(&l), "{l}");
    }
    assert_eq!(
        c.psql("SELECT count(*), count(DISTINCT task_id) FROM ttp_lab_qc_results"),
        "18|18"
    );
    // QEs 1 … 6 of every Q@C, in the attempt its result names.
    assert_eq!(
        c.psql(
            "SELECT count(*), bool_and(n = 6 AND lo = 1 AND hi = 6) FROM (SELECT count(*) AS n, min(q.qe) AS lo, max(q.qe) AS hi \
             FROM ttp_lab_qes q JOIN ttp_lab_qc_results r ON r.task_id = q.task_id AND r.attempt = q.attempt GROUP BY q.task_id) x"
        ),
        "18|t"
    );
    // Each query Q@C ran against its cardinality: the rows the server
    // returned (its command tag) are the cardinality, half of it for q2.
    let rows = c.psql(
        "SELECT t.key || ' ' || t.host_label || ' ' || (r.result->'postgres'->>'rows') FROM ttp_lab_tasks t \
         JOIN ttp_lab_qc_results r ON r.task_id = t.id WHERE t.experiment = 'scan' ORDER BY t.id",
    );
    let mut seen = std::collections::BTreeSet::new();
    for l in rows.lines() {
        let f: Vec<&str> = l.split(' ').collect();
        let card: u64 = f[0].strip_prefix("cardinality=").unwrap().parse().unwrap();
        let want = if f[1] == "query=all" { card } else { card / 2 };
        assert_eq!(f[3].parse::<u64>().unwrap(), want, "{l}");
        assert!(seen.insert((f[0], f[1], f[2])), "{l} twice");
    }
    assert_eq!(seen.len(), 12, "{rows}");
    // Every worker made the maximal table from the spec's one seed: the
    // same rows on every host.
    let sums: std::collections::BTreeSet<String> = (1..=3)
        .map(|i| {
            let out = std::process::Command::new(dut.bin.join("psql"))
                .args(["-X", "-A", "-t", "-d"])
                .arg(format!(
                    "host={} port={} user=ttp dbname=w{i}",
                    dut.dir.display(),
                    dut.port
                ))
                .args([
                    "-c",
                    "SELECT count(*) || ':' || md5(string_agg(pad, ',' ORDER BY id)) FROM ttp_max",
                ])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        })
        .collect();
    assert_eq!(sums.len(), 1, "{sums:?}");
    assert!(sums.iter().all(|s| s.starts_with("400:")), "{sums:?}");
    assert_eq!(
        c.psql(
            "SELECT string_agg(worker || '@' || host_label, ',' ORDER BY worker) FROM ttp_lab_hosts"
        ),
        "w1@alpha,w2@alpha,w3@beta"
    );
    // The server saw each worker come from its own host.
    let log = std::fs::read_to_string(c.dir.join("log")).unwrap();
    for i in 1..=3 {
        assert!(
            log.contains(&format!("connection received: host=10.231.{i}.2 ")),
            "no connection from 10.231.{i}.2 in the server's log"
        );
    }

    // analyze --lab equals analyze of the exported studies.
    let out = dir.join("export");
    let o = ttp(&[
        "lab",
        "export",
        "--lab",
        local,
        "--experiment",
        "net",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let files = ["alpha", "beta"].map(|h| out.join(format!("net.{h}.study")).display().to_string());
    let from_lab = ttp(&["analyze", "--lab", local, "--experiment", "net"]);
    let from_files = ttp(&["analyze", &files[0], &files[1]]);
    assert!(from_lab.status.success(), "{}", stderr(&from_lab));
    assert_eq!(stdout(&from_lab), stdout(&from_files));
    // The same for the query experiment, whose Q@Cs are grouped by query
    // for the monotonicity checks over cardinality (TTPv2 Sec. 8.6).
    let o = ttp(&[
        "lab",
        "export",
        "--lab",
        local,
        "--experiment",
        "scan",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let files =
        ["alpha", "beta"].map(|h| out.join(format!("scan.{h}.study")).display().to_string());
    let from_lab = ttp(&["analyze", "--lab", local, "--experiment", "scan"]);
    let from_files = ttp(&["analyze", &files[0], &files[1]]);
    assert!(from_lab.status.success(), "{}", stderr(&from_lab));
    assert_eq!(stdout(&from_lab), stdout(&from_files));
    assert!(
        stdout(&from_lab).contains("query=even"),
        "{}",
        stdout(&from_lab)
    );
    drop(dut);
    drop(lab);
    drop(hosts);
}
