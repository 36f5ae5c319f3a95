//! `statements` with its default boundaries, the client socket
//! (ttp-ebpf/src/wire.rs), against throw-away PostgreSQL servers (root;
//! common::pg). Truths: pgbench's own count of what it sent and its
//! per-transaction latency log, pg_stat_statements' calls and
//! total_exec_time, and what the test did to the server (a failing
//! statement, a backend killed with SIGKILL).
use crate::common;

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use common::{
    pg::{
        Cluster, PGSS, TPCB, ensure_postgres, pgss_by_fingerprint, pgss_queryids, server_user,
        with_pgss_and_pgbench,
    },
    *,
};

/// `pgbench ARGS` against `c` (Unix socket, or `host` with `env`), run to
/// its end; panics if it failed.
pub(crate) fn pgbench(c: &Cluster, host: Option<&str>, env: &[(&str, &str)], args: &[&str]) {
    let mut cmd = Command::new(c.bin.join("pgbench"));
    cmd.args(args).arg("-h");
    match host {
        Some(h) => cmd.arg(h),
        None => cmd.arg(&c.dir),
    };
    cmd.args(["-p", &c.port.to_string(), "-U", "ttp", "postgres"])
        .envs(env.iter().copied())
        .current_dir(&c.dir);
    let out = cmd.output().expect("pgbench");
    assert!(
        out.status.success(),
        "pgbench: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `psql -X -d CONNINFO -c SQL` against `c`, to run or spawn.
fn psql(c: &Cluster, sql: &str) -> Command {
    let mut cmd = Command::new(c.bin.join("psql"));
    cmd.args(["-X", "-d"]).arg(c.conninfo()).args(["-c", sql]);
    cmd
}

/// `statements --pid PM --json FILE [extra]` attached, until interrupted.
pub(crate) fn statements(c: &Cluster, name: &str, extra: &[&str]) -> (Child, PathBuf) {
    let json = c.dir.join(name);
    let pm = c.postmaster_pid().to_string();
    let mut args = vec!["statements", "--pid", &pm, "--json", json.to_str().unwrap()];
    args.extend_from_slice(extra);
    (ttp_attached(&args), json)
}

/// Ends `ttp` as Ctrl-C would and returns its report and JSON.
pub(crate) fn stop(ttp: Child, json: &Path) -> (String, serde_json::Value) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(ttp.id() as i32, libc::SIGINT) };
    let out = ttp.wait_with_output().expect("ttp");
    assert!(out.status.success(), "ttp failed");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        json_file(json),
    )
}

pub(crate) fn group<'a>(doc: &'a serde_json::Value, key: &str) -> Option<&'a serde_json::Value> {
    doc["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["key"] == key)
}

pub(crate) fn n(g: &serde_json::Value, k: &str) -> u64 {
    g[k].as_u64().unwrap_or_else(|| panic!("{k} in {g}"))
}

/// Sum of pgbench's per-transaction latencies (its `-l` logs: the third
/// field of every line, µs), ns.
fn pgbench_latency_ns(dir: &Path, prefix: &str) -> (u64, u64) {
    let (mut sum, mut lines) = (0, 0);
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if !e.file_name().to_string_lossy().starts_with(prefix) {
            continue;
        }
        for l in std::fs::read_to_string(e.path()).unwrap().lines() {
            let us: u64 = l.split_whitespace().nth(2).unwrap().parse().unwrap();
            sum += us * 1000;
            lines += 1;
        }
    }
    (sum, lines)
}

/// After attach, `pgbench -c 4 -t 1500` (TPC-B-like) in each query mode.
/// Every statement of the script is counted exactly 6000 times (pgbench's
/// own count), equal to pg_stat_statements' calls (which were reset just
/// before; under `-M prepared` pg_stat_statements counts BEGIN and END
/// once per backend only, its own undercount, docs/statements.md, so they
/// are held to pgbench's count alone); each statement's summed elapsed is
/// at least its executor time (total_exec_time); and all statements'
/// elapsed is at most pgbench's latency summed over its transactions (a
/// statement lies inside the client's transaction). Catches: a statement
/// missed or counted twice, a Parse-only exchange counted as a statement,
/// a boundary taken at the wrong read or write, texts not read.
#[test]
fn tpcb_statements_exact_in_every_query_mode() {
    if !root_or_skip("tpcb_statements_exact_in_every_query_mode") {
        return;
    }
    let _serial = serial();
    let c = Cluster::start_with("sock-tpcb", PGSS);
    with_pgss_and_pgbench(&c);
    for mode in ["simple", "extended", "prepared"] {
        c.psql("SELECT pg_stat_statements_reset()");
        let (ttp, json) = statements(&c, &format!("tpcb-{mode}.json"), &[]);
        let prefix = format!("pgbench_log_{mode}");
        pgbench(
            &c,
            None,
            &[],
            &[
                "-n",
                "-c",
                "4",
                "-t",
                "1500",
                "-M",
                mode,
                "-l",
                "--log-prefix",
                &prefix,
            ],
        );
        let truth = pgss_by_fingerprint(&c);
        let queryids = pgss_queryids(&c);
        let (_text, doc) = stop(ttp, &json);
        assert_eq!(doc["boundaries"], "socket");
        // pg_stat_statements loaded (compute_query_id = auto): the kernel
        // sums by query id.
        let entry = doc["status_entry"].as_str().unwrap();
        assert!(!entry.contains("no query ids"), "{entry}");
        let (latency_ns, transactions) = pgbench_latency_ns(&c.dir, &prefix);
        assert_eq!(transactions, 6000, "pgbench's log");
        let mut elapsed_ns = 0;
        for key in TPCB {
            let g = group(&doc, key).unwrap_or_else(|| panic!("{mode}: no group {key}"));
            let (calls, exec_ns) = truth.get(key).copied().unwrap_or_default();
            eprintln!(
                "{mode}: {key}: ttp {} calls, {:.1} ms; pg_stat_statements {calls} calls, {:.1} ms",
                n(g, "calls"),
                n(g, "elapsed_ns") as f64 / 1e6,
                exec_ns / 1e6
            );
            assert_eq!(n(g, "calls"), 6000, "{mode}: {key}");
            assert_eq!(n(g, "errors"), 0, "{mode}: {key}");
            // pg_stat_statements is loaded, so the server computes query
            // ids: the kernel keyed the statement by it, and it is the
            // one pg_stat_statements shows for the same text.
            let id = g["queryid"]
                .as_i64()
                .unwrap_or_else(|| panic!("{mode}: {key}: no queryid in {g}"));
            if key != "begin" && key != "end" {
                assert_eq!(g["kernel_key"], "queryid", "{mode}: {key}");
            }
            assert_eq!(
                queryids.get(key).map(Vec::as_slice),
                Some(&[id][..]),
                "{mode}: {key}: ttp's queryid"
            );
            if !(mode == "prepared" && (key == "begin" || key == "end")) {
                assert_eq!(calls, 6000, "{mode}: pg_stat_statements' {key}");
            }
            assert!(
                n(g, "elapsed_ns") as f64 >= exec_ns,
                "{mode}: {key}: elapsed below the executor's time"
            );
            elapsed_ns += n(g, "elapsed_ns");
        }
        assert!(
            elapsed_ns <= latency_ns,
            "{mode}: statements {elapsed_ns} ns > pgbench's transactions {latency_ns} ns"
        );
        let extended = doc["extended_statements"].as_u64().unwrap();
        if mode == "simple" {
            assert_eq!(extended, 0);
        } else {
            assert!(extended >= 42_000, "{mode}: {extended} extended");
        }
    }
}

/// A server with `ssl = on` and a self-signed certificate, pgbench over
/// TCP on loopback with `sslmode=require`: the bytes on the socket are
/// encrypted, so the boundaries and the text come from the backend's
/// status entry alone. Calls exact (pgbench's count), text present, and
/// the connections really used TLS (pg_stat_ssl, read while a session is
/// open). Catches a boundary that needs the plain bytes.
#[test]
fn tls_clients_are_counted_with_their_text() {
    if !root_or_skip("tls_clients_are_counted_with_their_text") {
        return;
    }
    let _serial = serial();
    let dir = std::env::temp_dir().join(format!("ttp-sock-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (crt, key) = (dir.join("server.crt"), dir.join("server.key"));
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-keyout",
        ])
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (uid, gid) = server_user();
    for f in [&crt, &key] {
        std::os::unix::fs::chown(f, Some(uid), Some(gid)).unwrap();
        std::fs::set_permissions(f, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    }
    std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).unwrap();
    let opts = format!(
        "-c ssl=on -c ssl_cert_file={} -c ssl_key_file={} -c listen_addresses=127.0.0.1",
        crt.display(),
        key.display()
    );
    let c = Cluster::start_with("sock-tls", &opts);
    with_pgss_and_pgbench(&c);
    let (ttp, json) = statements(&c, "tls.json", &[]);
    pgbench(
        &c,
        Some("127.0.0.1"),
        &[("PGSSLMODE", "require")],
        &["-n", "-S", "-c", "2", "-t", "500"],
    );
    let ssl = Command::new(c.bin.join("psql"))
        .args([
            "-X",
            "-A",
            "-t",
            "-h",
            "127.0.0.1",
            "-p",
            &c.port.to_string(),
            "-U",
            "ttp",
            "-d",
            "postgres",
            "-c",
        ])
        .arg("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .env("PGSSLMODE", "require")
        .output()
        .expect("psql");
    assert_eq!(
        String::from_utf8_lossy(&ssl.stdout).trim(),
        "t",
        "not over TLS"
    );
    let (_text, doc) = stop(ttp, &json);
    let g = group(&doc, "select abalance from pgbench_accounts where aid = $1")
        .expect("the SELECT's group, with its text");
    assert_eq!(
        n(g, "calls"),
        1000,
        "{}",
        serde_json::to_string(&doc["groups"]).unwrap()
    );
    assert!(
        g["example"]
            .as_str()
            .unwrap()
            .starts_with("SELECT abalance")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The installed server binary with its USDT notes removed
/// (`objcopy --remove-section=.note.stapsdt`), in a tree that mirrors the
/// install (PostgreSQL finds share/ and lib/ relative to its binary), with
/// pg_ctl beside it so that it starts this binary.
fn server_without_notes(root: &Path) -> PathBuf {
    let real = ensure_postgres();
    let real = std::fs::canonicalize(&real).unwrap();
    // /usr/lib/postgresql/15/bin → the mirror's usr/lib/postgresql/15/bin
    let rel = real.strip_prefix("/").unwrap();
    let bin = root.join(rel);
    std::fs::create_dir_all(&bin).unwrap();
    let out = Command::new("objcopy")
        .arg("--remove-section=.note.stapsdt")
        .arg(real.join("postgres"))
        .arg(bin.join("postgres"))
        .output()
        .expect("objcopy");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for prog in ["pg_ctl", "initdb"] {
        std::fs::copy(real.join(prog), bin.join(prog)).unwrap();
    }
    for prog in ["psql", "pgbench"] {
        std::os::unix::fs::symlink(real.join(prog), bin.join(prog)).unwrap();
    }
    // bin/../lib, and the share directory at the same distance.
    let version = real.parent().unwrap();
    std::os::unix::fs::symlink(version.join("lib"), bin.parent().unwrap().join("lib")).unwrap();
    let major = version.file_name().unwrap();
    let share = Path::new("/usr/share/postgresql").join(major);
    let mirror_share = root.join("usr/share/postgresql");
    std::fs::create_dir_all(&mirror_share).unwrap();
    std::os::unix::fs::symlink(&share, mirror_share.join(major)).unwrap();
    let (uid, gid) = server_user();
    let mut d = Some(root.to_path_buf());
    while let Some(p) = d {
        let _ = std::os::unix::fs::chown(&p, Some(uid), Some(gid));
        d = p
            .parent()
            .filter(|p| p.starts_with(root))
            .map(Path::to_path_buf);
    }
    bin
}

/// A server built without `--enable-dtrace` (Debian's binary with its
/// notes removed): `statements` measures it. Calls exact (pgbench's
/// count), on-CPU and run-queue split, and the USDT-only columns are
/// absent from the JSON and "n/a" in the report, never 0. Catches a
/// refusal of a server without probes, and waits shown as zero.
#[test]
fn server_without_usdt_notes_is_measured() {
    if !root_or_skip("server_without_usdt_notes_is_measured") {
        return;
    }
    let _serial = serial();
    let root = std::env::temp_dir().join(format!("ttp-nonotes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let bin = server_without_notes(&root);
    let c = Cluster::start_in("sock-nonotes", PGSS, bin.clone());
    let exe = std::fs::read_link(format!("/proc/{}/exe", c.postmaster_pid())).unwrap();
    assert_eq!(exe, bin.join("postgres"), "the server runs the copy");
    with_pgss_and_pgbench(&c);
    let (ttp, json) = statements(&c, "nonotes.json", &[]);
    pgbench(&c, None, &[], &["-n", "-c", "2", "-t", "500"]);
    let (text, doc) = stop(ttp, &json);
    for key in TPCB {
        let g = group(&doc, key).unwrap_or_else(|| panic!("no group {key}"));
        assert_eq!(n(g, "calls"), 1000, "{key}");
        assert!(
            g["waits"].as_object().unwrap().is_empty(),
            "{key}: waits without probes: {}",
            g["waits"]
        );
    }
    let all = |k: &str| -> u64 { TPCB.iter().map(|key| n(group(&doc, key).unwrap(), k)).sum() };
    assert!(all("on_cpu_ns") > 0 && all("runq_wait_ns") > 0, "no split");
    assert!(text.contains("n/a: no USDT probes"), "{text}");
    drop(c);
    let _ = std::fs::remove_dir_all(&root);
}

/// A statement that fails and a backend killed with SIGKILL in the middle
/// of one: the failure is in its group's `errors` (pg_stat_statements does
/// not count it), the killed statement is counted as such
/// (`killed_open`), and the statements around them are all counted, also
/// after the server's crash-restart. Catches an error or a kill that
/// loses, or invents, other statements.
#[test]
fn failing_and_killed_statements_are_counted_as_such() {
    if !root_or_skip("failing_and_killed_statements_are_counted_as_such") {
        return;
    }
    let _serial = serial();
    let c = Cluster::start("sock-kill");
    let (ttp, json) = statements(&c, "kill.json", &[]);
    for _ in 0..5 {
        c.psql("SELECT 42");
    }
    let fail = psql(&c, "SELECT 1/0").output().unwrap();
    assert!(!fail.status.success());
    let mut sleeper = psql(&c, "SELECT pg_sleep(60)")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let backend: i32 = loop {
        let v = c.psql("SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)' AND state = 'active'");
        if let Ok(p) = v.parse() {
            break p;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the sleeper never ran"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    // SAFETY: signalling the test server's backend.
    unsafe { libc::kill(backend, libc::SIGKILL) };
    let _ = sleeper.wait();
    // The postmaster restarts every backend after a crash: wait for it.
    let t = Instant::now();
    loop {
        let ok = psql(&c, "SELECT 42")
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "no restart");
        std::thread::sleep(Duration::from_millis(100));
    }
    for _ in 0..4 {
        c.psql("SELECT 42");
    }
    let (_text, doc) = stop(ttp, &json);
    let failed = group(&doc, "select $1/$2").expect("the failing statement");
    assert_eq!((n(failed, "calls"), n(failed, "errors")), (1, 1));
    assert_eq!(n(group(&doc, "select $1").unwrap(), "calls"), 10);
    let counts = &doc["counts"];
    assert_eq!(counts["killed_open"], 1, "{counts}");
    assert!(
        group(&doc, "select pg_sleep($1)").is_none(),
        "the killed statement grouped"
    );
}

/// A request larger than the backend's 8 kB input buffer, sent with the
/// extended protocol: its Parse arrives in one read and its Execute in a
/// later one. Every execution is one statement (pgbench's count), none is
/// taken for a bare Parse. Catches a walk of the request's messages that
/// stops at the first read.
#[test]
fn a_request_over_several_reads_is_one_statement() {
    if !root_or_skip("a_request_over_several_reads_is_one_statement") {
        return;
    }
    let _serial = serial();
    let c = Cluster::start("sock-long");
    let list: Vec<String> = (1..=4000).map(|i| i.to_string()).collect();
    let script = c.dir.join("long.sql");
    std::fs::write(
        &script,
        format!("SELECT 1 WHERE 1 IN ({});\n", list.join(",")),
    )
    .unwrap();
    let (ttp, json) = statements(&c, "long.json", &[]);
    pgbench(
        &c,
        None,
        &[],
        &[
            "-n",
            "-c",
            "1",
            "-t",
            "50",
            "-M",
            "extended",
            "-f",
            script.to_str().unwrap(),
        ],
    );
    let (_text, doc) = stop(ttp, &json);
    // A plain cluster computes no query ids: the kernel keys the sums by
    // the fingerprint it computes, as the server's configuration says.
    let entry = doc["status_entry"].as_str().unwrap();
    assert!(entry.contains("no query ids"), "{entry}");
    let long: Vec<&serde_json::Value> = doc["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| {
            g["example"]
                .as_str()
                .unwrap()
                .starts_with("SELECT 1 WHERE 1 IN (1,2,3")
        })
        .collect();
    let calls: u64 = long.iter().map(|g| n(g, "calls")).sum();
    assert_eq!(calls, 50, "{:?}", doc["counts"]);
    assert!(long.iter().all(|g| n(g, "truncated") == n(g, "calls")));
    // One text, one fingerprint key (of its first 1024 bytes).
    assert_eq!(long.len(), 1, "{long:?}");
    assert_eq!(long[0]["kernel_key"], "fingerprint", "{}", long[0]);
}

/// 10 000 distinct statements grouped by text on a server without query
/// ids (each text a key of the kernel's own): the kernel's map of keys fills, and every
/// statement beyond it is summed under `other`, counted, never lost: the
/// groups' calls add up to the statements counted, the `other` group holds
/// what the counter says, and every one of the 10 000 is in a group of its
/// own, in `other`, or (its text lost in a burst, counted) in a group
/// named by its key's hash, exactly 10 000 in all. Catches a full map that
/// drops statements, a counter that disagrees with the sums, and a key
/// summed twice.
#[test]
fn a_full_map_sums_the_rest_under_other() {
    if !root_or_skip("a_full_map_sums_the_rest_under_other") {
        return;
    }
    let _serial = serial();
    let c = Cluster::start("sock-keys");
    let script = c.dir.join("distinct.sql");
    let sql: String = (0..10_000)
        .map(|i| format!("SELECT {i} AS c{i};\n"))
        .collect();
    std::fs::write(&script, sql).unwrap();
    // By exact text: a key a text.
    let (ttp, json) = statements(&c, "keys.json", &["--by", "text"]);
    let out = Command::new(c.bin.join("psql"))
        .args(["-X", "-q", "-d"])
        .arg(c.conninfo())
        .arg("-f")
        .arg(&script)
        .stdout(Stdio::null())
        .output()
        .expect("psql");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (text, doc) = stop(ttp, &json);
    let groups = doc["groups"].as_array().unwrap();
    let total: u64 = groups.iter().map(|g| n(g, "calls")).sum();
    assert_eq!(total, n(&doc, "statements"), "groups against the count");
    let counts = &doc["counts"];
    let summed_other = counts["summed_other"].as_u64().unwrap();
    let keys = counts["keys"].as_u64().unwrap();
    assert!(summed_other > 0 && keys <= 4097, "{counts}");
    let other = group(&doc, "other").expect("the other group");
    assert_eq!(n(other, "calls"), summed_other);
    let own: Vec<&serde_json::Value> = groups
        .iter()
        .filter(|g| {
            let key = g["key"].as_str().unwrap();
            key.starts_with("SELECT ") && key.contains(" AS c")
        })
        .collect();
    assert!(own.iter().all(|g| n(g, "calls") == 1));
    // A key whose text found no room in its ring (a burst of new keys)
    // is still summed, in a group named by its hash, and counted.
    let textless: u64 = groups
        .iter()
        .filter(|g| g["key"].as_str().unwrap().starts_with("(text not received"))
        .map(|g| n(g, "calls"))
        .sum();
    let texts_lost = counts["texts_lost"].as_u64().unwrap();
    assert_eq!(textless, texts_lost, "{counts}");
    // The script's count is the truth: psql -X -f sends its statements and
    // nothing else, and no other client connects to this cluster.
    assert_eq!(total, 10_000, "{counts}");
    assert_eq!(
        own.len() as u64 + summed_other + textless,
        10_000,
        "{} own groups, {summed_other} under other: {counts}",
        own.len()
    );
    assert!(text.contains("FULL:"), "{text}");
}

/// Catches `--by backend` keeping every exited backend's key in the
/// kernel's map (a pool that reconnects fills it within 4 096 connections
/// and the rest lands in `other`), and a backend's statements lost when
/// its key is taken out: `pgbench -C` opens a backend a transaction, 300
/// of them, each one SELECT; the map ends with the `other` key and at most
/// a few live backends', and each of the 300 is a group of one statement.
#[test]
fn by_backend_takes_exited_backends_out_of_the_map() {
    if !root_or_skip("by_backend_takes_exited_backends_out_of_the_map") {
        return;
    }
    let _serial = serial();
    let c = Cluster::start("sock-backends");
    common::pg::pgbench_tables(&c);
    let (ttp, json) = statements(&c, "backends.json", &["--by", "backend"]);
    pgbench(&c, None, &[], &["-n", "-S", "-C", "-c", "2", "-t", "150"]);
    // The backends end once their client has gone: wait for them (the
    // postmaster's children are its own processes and these backends).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while client_backends(&c) > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "backends still running"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let (_, doc) = stop(ttp, &json);
    let groups = doc["groups"].as_array().unwrap();
    let backends: Vec<&serde_json::Value> = groups
        .iter()
        .filter(|g| g["key"].as_str().unwrap().starts_with("backend "))
        .collect();
    let calls: u64 = backends.iter().map(|g| n(g, "calls")).sum();
    assert_eq!(calls, n(&doc, "statements"), "every statement in a backend");
    // pgbench's own first connection (it reads the scale) comes on top.
    let one_each = backends.iter().filter(|g| n(g, "calls") == 1).count();
    assert!(
        (300..=302).contains(&one_each),
        "pgbench -C -c 2 -t 150: {one_each} backends of one statement, {} groups",
        backends.len()
    );
    let keys = n(&doc["counts"], "keys");
    assert!(keys <= 5, "{keys} keys left in the kernel's map");
    assert_eq!(n(&doc["counts"], "summed_other"), 0);
}

/// The postmaster's children that serve the test's user (its backends,
/// by their process title `postgres: ttp postgres ...`).
fn client_backends(c: &Cluster) -> usize {
    let pm = c.postmaster_pid();
    let children =
        std::fs::read_to_string(format!("/proc/{pm}/task/{pm}/children")).unwrap_or_default();
    children
        .split_whitespace()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|t| String::from_utf8_lossy(&t).contains(" ttp postgres "))
        })
        .count()
}
