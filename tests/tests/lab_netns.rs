//! The lab across hosts on a network (root; see common::root_or_skip and
//! common::pg): three workers, each in a network namespace of its own made
//! by the test and joined to the lab server by a veth pair, so each is a
//! separate host on the network and reaches the lab over TCP; two host
//! labels. Truths: the server's own log of where each connection came
//! from (log_connections), the lab's rows read with psql, and `analyze`
//! of the exported studies.
mod common;

use std::process::{Command, Stdio};

use common::{
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
    let c = Cluster::start_with(
        "labnet",
        "-c listen_addresses='10.231.1.1,10.231.2.1,10.231.3.1' -c log_connections=on",
    );
    let hba = c.data.join("pg_hba.conf");
    let rules = std::fs::read_to_string(&hba).unwrap();
    std::fs::write(&hba, format!("{rules}host all all 10.231.0.0/16 trust\n")).unwrap();
    c.psql("SELECT pg_reload_conf()");
    let dir = temp_path("lab-netns");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let local = c.conninfo();
    assert!(ttp(&["lab", "init", "--lab", &local]).status.success());
    let spin = fixture("fixture-spin");
    let mut spec = String::from("name = \"net\"\nhosts = [\"alpha\", \"beta\"]\n");
    for card in [10, 20, 40] {
        spec += &format!(
            "[[command]]\nname = \"spin{card}\"\nargv = [\"{}\", \"--cpu-ms\", \"{card}\"]\nn = 6\nlabels = {{ query = \"spin\", cardinality = \"{card}\" }}\n",
            spin.display()
        );
    }
    let spec_path = dir.join("spec.toml");
    std::fs::write(&spec_path, spec).unwrap();
    let o = ttp(&[
        "lab",
        "submit",
        spec_path.to_str().unwrap(),
        "--lab",
        &local,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));

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
    assert_eq!(done, 6, "3 commands × 2 host labels, each done once");

    // Every task done once, by a worker of its label, with all its QEs.
    assert_eq!(
        c.psql(
            "SELECT host_label || ':' || count(*) || ':' || bool_and(state = 'done' AND attempts = 1) \
             FROM ttp_lab_tasks GROUP BY host_label ORDER BY host_label"
        ),
        "alpha:3:true\nbeta:3:true"
    );
    for l in c
        .psql("SELECT DISTINCT host_label || ':' || claimed_by FROM ttp_lab_tasks ORDER BY 1")
        .lines()
    {
        assert!(["alpha:w1", "alpha:w2", "beta:w3"].contains(&l), "{l}");
    }
    assert_eq!(
        c.psql("SELECT count(*), count(DISTINCT task_id) FROM ttp_lab_qc_results"),
        "6|6"
    );
    assert_eq!(
        c.psql("SELECT count(*), bool_and(n = 6) FROM (SELECT count(*) AS n FROM ttp_lab_qes GROUP BY task_id) q"),
        "6|t"
    );
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
        &local,
        "--experiment",
        "net",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let files = ["alpha", "beta"].map(|h| out.join(format!("net.{h}.study")).display().to_string());
    let from_lab = ttp(&["analyze", "--lab", &local, "--experiment", "net"]);
    let from_files = ttp(&["analyze", &files[0], &files[1]]);
    assert!(from_lab.status.success(), "{}", stderr(&from_lab));
    assert_eq!(stdout(&from_lab), stdout(&from_files));
    drop(c);
    drop(hosts);
    let _ = std::fs::remove_dir_all(&dir);
}
