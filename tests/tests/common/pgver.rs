//! The PostgreSQL releases of the version matrix (tests/tests/pg_versions.rs):
//! where `cargo xtask setup` cached them (xtask/src/pg_versions.rs), a
//! backend's status entry read as `statements` reads it, and the serve
//! metrics the matrix waits for.
#![allow(dead_code)]
use std::{
    os::unix::fs::FileExt,
    path::PathBuf,
    time::{Duration, Instant},
};

use super::pg::Cluster;

/// The cache xtask/src/pg_versions.rs fills (`TTP_PG_CACHE` overrides).
pub fn cache() -> PathBuf {
    std::env::var_os("TTP_PG_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/ttp/postgresql"))
}

/// The bin directory of PostgreSQL `major` (server, initdb, pg_ctl and
/// the clients), or `None` with a message when it was not fetched.
/// Under CI=true a missing release is a failure: setup fetches them.
pub fn release_bin(major: u32) -> Option<PathBuf> {
    let bin = cache().join(major.to_string()).join("bin");
    if bin.join("postgres").is_file() && bin.join("pgbench").exists() {
        return Some(bin);
    }
    let why = format!(
        "PostgreSQL {major} is not in {}: run `sudo cargo xtask setup` (it fetches 14–18 once)",
        cache().display()
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{why}");
    }
    eprintln!("SKIPPED: {why}");
    None
}

/// What tests/fixtures/pg-planid/ttp_planid.c mixes into a statement's
/// query id to make its plan id.
pub const PLANID_XOR: i64 = 0x7474_7000_0000_0001;

/// tests/fixtures/pg-planid/ttp_planid.c built against the release's own
/// server headers (PostgreSQL 18's wheel ships them) into a directory the
/// server's user can read: the module to add to
/// `shared_preload_libraries`. It gives each planned statement the plan
/// id `queryid ^ PLANID_XOR`, as pg_stat_plans gives one from the plan's
/// shape.
pub fn planid_module(bin: &std::path::Path) -> PathBuf {
    let include = bin.join("../include/server");
    assert!(
        include.join("optimizer/planner.h").is_file(),
        "no server headers in {}",
        include.display()
    );
    let dir = std::env::temp_dir().join(format!("ttp-planid-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("module dir");
    let so = dir.join("ttp_planid.so");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/pg-planid/ttp_planid.c");
    let out = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-I"])
        .arg(&include)
        .arg("-o")
        .arg(&so)
        .arg(&src)
        .output()
        .expect("cc");
    assert!(
        out.status.success(),
        "building {}: {}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    so
}

/// The fields of a backend's `PgBackendStatus` that `statements` reads,
/// taken as its programs take them: `MyBEEntry` in the backend, then the
/// entry at the offsets of the layout ttp chose for the server.
#[derive(Debug)]
pub struct Entry {
    pub pid: u32,
    /// The state less the layout's shift (14's numbering: idle = 1).
    pub state: u32,
    pub activity_start: i64,
    pub database: u32,
    pub user: u32,
    pub query_id: i64,
    pub plan_id: Option<i64>,
    pub text: String,
}

/// The status entry of `backend`, a child of the postmaster `pm` that
/// runs `binary`, through the source `find` gives.
pub fn entry_of(
    pm: u32,
    binary: &std::path::Path,
    backend: u32,
) -> (ttp_ledger::probe::pg_status::StatusSource, Entry) {
    let src = ttp_ledger::probe::pg_status::find(
        pm,
        &ttp_ledger::probe::symbols::Image::read(binary).expect("the server binary"),
    )
    .expect("the status entries");
    (src, read_entry(&src, backend))
}

pub fn read_entry(src: &ttp_ledger::probe::pg_status::StatusSource, backend: u32) -> Entry {
    let mem = std::fs::File::open(format!("/proc/{backend}/mem")).expect("the backend's memory");
    let read = |at: u64, n: usize| {
        let mut b = vec![0u8; n];
        mem.read_exact_at(&mut b, at).expect("readable");
        b
    };
    let word = |at: u64| u64::from_ne_bytes(read(at, 8).try_into().unwrap());
    let int = |at: u64| u32::from_ne_bytes(read(at, 4).try_into().unwrap());
    let entry = word(src.entry_global);
    assert_ne!(entry, 0, "backend {backend} has no status entry");
    let l = src.layout;
    let text_at = word(entry + u64::from(l.activity));
    let text = read(text_at, 256);
    let end = text
        .iter()
        .position(|&b| b == 0)
        .expect("a terminated text");
    Entry {
        pid: int(entry + 4),
        state: int(entry + u64::from(l.state)).saturating_sub(l.state_shift),
        activity_start: word(entry + u64::from(l.activity_start)) as i64,
        database: int(entry + u64::from(l.activity_start) + 16),
        user: int(entry + u64::from(l.activity_start) + 20),
        query_id: word(entry + u64::from(l.query_id)) as i64,
        plan_id: l.plan_id.map(|p| word(entry + u64::from(p)) as i64),
        text: String::from_utf8_lossy(&text[..end]).into_owned(),
    }
}

/// What pg_stat_activity says of `backend`: (state, query_start in µs
/// since 2000-01-01 as the server stores it, database oid, user oid,
/// query id, query).
pub fn activity_of(c: &Cluster, backend: u32) -> (String, i64, u32, u32, i64, String) {
    let row = c.psql(&format!(
        "SELECT state, (extract(epoch FROM query_start - '2000-01-01 00:00:00+00') * 1000000)::bigint, datid, usesysid, query_id, query FROM pg_stat_activity WHERE pid = {backend}"
    ));
    let f: Vec<&str> = row.splitn(6, '|').collect();
    assert_eq!(f.len(), 6, "pg_stat_activity of {backend}: {row}");
    (
        f[0].into(),
        f[1].parse().unwrap(),
        f[2].parse().unwrap(),
        f[3].parse().unwrap(),
        f[4].parse().unwrap(),
        f[5].into(),
    )
}

/// The value of the first sample of `name` in a Prometheus exposition
/// whose labels contain every part of `sel` (parts separated by `|`).
pub fn sample(text: &str, name: &str, sel: &str) -> Option<f64> {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with('{') || r.starts_with(' '))
                && sel.split('|').all(|part| l.contains(part))
        })
        .find_map(|l| l.rsplit_once(' ')?.1.parse().ok())
}

pub fn metrics(port: u16) -> String {
    let (status, body) = super::serve::get(port, "/metrics", None);
    assert_eq!(status, 200, "{body}");
    body
}

/// Waits until `name{sel}` is `want`; fails past it or after 40 s.
pub fn wait_for(port: u16, name: &str, sel: &str, want: f64) {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let v = sample(&metrics(port), name, sel);
        if v == Some(want) {
            return;
        }
        assert!(
            v.is_none_or(|v| v < want),
            "{name}{{{sel}}} is {v:?}, past {want}"
        );
        assert!(
            Instant::now() < deadline,
            "{name}{{{sel}}} is {v:?}, waited for {want}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}
