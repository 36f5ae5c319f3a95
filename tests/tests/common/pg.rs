//! A throw-away PostgreSQL server for the tests: installed from Debian's
//! packages when missing, initdb'd into a temporary directory and run as
//! an unprivileged user (the server refuses root), listening only on a unix
//! socket in that directory, on a free port; stopped and removed on drop.
#![allow(dead_code)]
use std::{
    collections::BTreeMap,
    io::Write,
    os::unix::{fs::chown, process::CommandExt},
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

/// The newest installed PostgreSQL's bin directory, installing the
/// `postgresql` package first when none is (root only).
pub fn ensure_postgres() -> PathBuf {
    if let Some(b) = find_bin() {
        return b;
    }
    eprintln!("PostgreSQL not installed: apt-get install -y postgresql");
    let ok = Command::new("apt-get")
        .args(["update", "-qq"])
        .status()
        .is_ok_and(|s| s.success())
        && Command::new("apt-get")
            .args(["install", "-y", "-qq", "postgresql"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success());
    assert!(
        ok,
        "installing PostgreSQL (apt-get install -y postgresql) failed"
    );
    find_bin().expect("postgresql installed but no /usr/lib/postgresql/*/bin/initdb")
}

fn find_bin() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, b)| b)
}

/// uid and gid the server runs as: Debian's `postgres` user (created by
/// the package), else `nobody`.
pub fn server_user() -> (u32, u32) {
    for name in ["postgres", "nobody"] {
        let c = std::ffi::CString::new(name).unwrap();
        // SAFETY: getpwnam with a valid C string; the result is read at once.
        let pw = unsafe { libc::getpwnam(c.as_ptr()) };
        if !pw.is_null() {
            // SAFETY: non-null passwd entry.
            return unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
        }
    }
    panic!("no postgres or nobody user to run the test server as");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

pub struct Cluster {
    pub dir: PathBuf,
    pub data: PathBuf,
    pub port: u16,
    pub bin: PathBuf,
    uid: u32,
    gid: u32,
    /// More server options (`-c name=value …`), from [`Cluster::start_with`].
    extra_opts: String,
}

impl Cluster {
    /// initdb and start a server with small shared buffers (so a table of
    /// a few tens of MB is read from disk) and autovacuum off (no
    /// background statistics change while a test measures).
    pub fn start(name: &str) -> Cluster {
        Self::start_with(name, "")
    }

    /// [`Cluster::start`] with more server options (`-c name=value …`).
    pub fn start_with(name: &str, extra_opts: &str) -> Cluster {
        Self::start_in(name, extra_opts, ensure_postgres())
    }

    /// [`Cluster::start_with`] with the server programs of `bin` (initdb,
    /// pg_ctl, postgres, psql, pgbench).
    pub fn start_in(name: &str, extra_opts: &str, bin: PathBuf) -> Cluster {
        let (uid, gid) = server_user();
        let dir = std::env::temp_dir().join(format!(
            "ttp-pg-{name}-{}-{}",
            std::process::id(),
            free_port()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        chown(&dir, Some(uid), Some(gid)).expect("chown temp dir");
        let c = Cluster {
            data: dir.join("data"),
            dir,
            port: free_port(),
            bin,
            uid,
            gid,
            extra_opts: extra_opts.to_string(),
        };
        let out = c.as_server(
            &c.bin.join("initdb"),
            &[
                "-D",
                c.data.to_str().unwrap(),
                "-U",
                "ttp",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        c.start_server();
        c
    }

    fn as_server(&self, program: &Path, args: &[&str]) -> Output {
        Command::new(program)
            .args(args)
            .current_dir(&self.dir)
            .uid(self.uid)
            .gid(self.gid)
            .stdin(Stdio::null())
            .output()
            .expect("run as the server's user")
    }

    pub fn start_server(&self) {
        let opts = format!(
            "-k {} -p {} -c listen_addresses='' -c shared_buffers=16MB -c autovacuum=off {}",
            self.dir.display(),
            self.port,
            self.extra_opts
        );
        self.pg_ctl_waiting(&["start", "-o", &opts]);
    }

    /// `pg_ctl restart` (fast shutdown, then a new postmaster with the
    /// same options).
    pub fn restart_server(&self) {
        self.pg_ctl_waiting(&["restart", "-m", "fast"]);
    }

    /// `pg_ctl ARGS` on this cluster, waiting up to 60 s, its log in the
    /// cluster's directory (shown when it fails).
    fn pg_ctl_waiting(&self, args: &[&str]) {
        let log = self.dir.join("log");
        let out = self.as_server(
            &self.bin.join("pg_ctl"),
            &[
                args,
                &[
                    "-D",
                    self.data.to_str().unwrap(),
                    "-w",
                    "-t",
                    "60",
                    "-l",
                    log.to_str().unwrap(),
                ],
            ]
            .concat(),
        );
        assert!(
            out.status.success(),
            "pg_ctl {args:?}: {} {}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    pub fn stop_server(&self) {
        let _ = self.as_server(
            &self.bin.join("pg_ctl"),
            &[
                "stop",
                "-D",
                self.data.to_str().unwrap(),
                "-m",
                "immediate",
                "-w",
            ],
        );
    }

    pub fn conninfo(&self) -> String {
        format!(
            "host={} port={} user=ttp dbname=postgres",
            self.dir.display(),
            self.port
        )
    }

    /// The running postmaster's pid (first line of postmaster.pid).
    pub fn postmaster_pid(&self) -> u32 {
        std::fs::read_to_string(self.data.join("postmaster.pid"))
            .expect("postmaster.pid")
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .expect("pid in postmaster.pid")
    }

    /// A generated table `t` of `rows` rows (id, k uniform in 0..rows, pad
    /// ~ 80 bytes a row; the same rows for the same seed), analysed and
    /// checkpointed; returns its size in bytes (pg_relation_size).
    pub fn make_table(&self, rows: u64) -> u64 {
        self.psql(&format!(
            "SELECT setseed(0.5); CREATE TABLE t AS SELECT g AS id, (random() * {rows})::int AS k, md5(random()::text) AS pad FROM generate_series(1, {rows}) g"
        ));
        self.psql("VACUUM ANALYZE t");
        self.psql("CHECKPOINT");
        self.psql("SELECT pg_relation_size('t')")
            .parse()
            .expect("pg_relation_size")
    }

    /// `ttp-ebpf run --postgres` on this server, started in the background
    /// (stdout discarded, stderr piped) with `extra` arguments after the
    /// connection.
    pub fn spawn_run(&self, extra: &[&str]) -> std::process::Child {
        Command::new(super::ttp_bin())
            .args(["run", "--postgres", &self.conninfo()])
            .args(extra)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start ttp-ebpf run --postgres")
    }

    /// Runs SQL with psql; returns its unaligned, tuples-only output.
    pub fn psql(&self, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d"])
            .arg(self.conninfo())
            .args(["-c", sql])
            .output()
            .expect("psql");
        assert!(
            out.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

/// `ttp-ebpf ARGS` with no input, its whole output kept (the PostgreSQL
/// tests look at the exit code, standard output and standard error).
pub fn ttp(args: &[&str]) -> Output {
    Command::new(super::ttp_bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run ttp-ebpf")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The backend that served each QE of a `run --postgres` result, in QE
/// order (`postgres.backend_pids`).
pub fn backend_pids(doc: &serde_json::Value) -> Vec<u64> {
    doc["postgres"]["backend_pids"]
        .as_array()
        .expect("postgres.backend_pids")
        .iter()
        .map(|v| v.as_u64().expect("a backend pid"))
        .collect()
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop_server();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `statements --pid PM --duration D --json DIR/NAME [extra]` on cluster
/// `c`, started and attached; returns the child and the JSON path.
pub fn statements_attached(
    c: &Cluster,
    pm: u32,
    duration: &str,
    name: &str,
    extra: &[&str],
) -> (std::process::Child, std::path::PathBuf) {
    let json = c.dir.join(name);
    let pm = pm.to_string();
    let mut args = vec![
        "statements",
        "--pid",
        &pm,
        "--duration",
        duration,
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let ttp = super::ttp_attached(&args);
    (ttp, json)
}

/// pg_stat_statements of cluster `c` per fingerprint of its normalised
/// text: (calls, total_exec_time ns); its own reads left out.
pub fn pgss_by_fingerprint(c: &Cluster) -> BTreeMap<String, (u64, f64)> {
    let mut m: BTreeMap<String, (u64, f64)> = Default::default();
    let rows = c.psql(
        "SELECT calls, total_exec_time, query FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'",
    );
    for line in rows.lines() {
        let mut it = line.splitn(3, '|');
        let calls: u64 = it.next().unwrap().parse().unwrap();
        let ms: f64 = it.next().unwrap().parse().unwrap();
        let key = ttp_statements::fingerprint::fingerprint(it.next().unwrap());
        let e = m.entry(key).or_default();
        e.0 += calls;
        e.1 += ms * 1e6;
    }
    m
}

/// The sample sd over the mean of the execution times pg_stat_statements
/// of cluster `c` keeps for the statement whose text contains `text` (it
/// keeps the population sd).
pub fn pgss_exec_time_cv(c: &Cluster, text: &str) -> f64 {
    let row = c.psql(&format!(
        "SELECT calls, mean_exec_time, stddev_exec_time FROM pg_stat_statements WHERE query LIKE '%{text}%' AND query NOT LIKE '%pg_stat_statements%'"
    ));
    let v: Vec<f64> = row.split('|').map(|f| f.parse().unwrap()).collect();
    let n = v[0];
    v[2] * (n / (n - 1.0)).sqrt() / v[1]
}

/// The sample sd over the mean of `x`.
pub fn sd_over_mean(x: &[f64]) -> f64 {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    (x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt() / mean
}

/// pgbench's tables at scale 1 (100 000 accounts), made by pgbench itself.
pub fn pgbench_tables(c: &Cluster) {
    let out = Command::new(c.bin.join("pgbench"))
        .args(["-i", "-s", "1", "-q", "-d"])
        .arg(c.conninfo())
        .output()
        .expect("pgbench -i");
    assert!(
        out.status.success(),
        "pgbench -i: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// pg_stat_statements created and pgbench's tables (scale 1) made in `c`,
/// which was started with `shared_preload_libraries=pg_stat_statements`.
pub fn with_pgss_and_pgbench(c: &Cluster) {
    c.psql("CREATE EXTENSION pg_stat_statements");
    pgbench_tables(c);
}

/// psql reading commands from a pipe (one session).
pub struct Session {
    child: std::process::Child,
}

impl Session {
    pub fn open(c: &Cluster) -> Self {
        Self::open_as(c, "psql")
    }
    /// A session whose backend shows `application_name = app`.
    pub fn open_as(c: &Cluster, app: &str) -> Self {
        let child = Command::new(c.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-d"])
            .arg(format!("{} application_name={app}", c.conninfo()))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("psql");
        Session { child }
    }
    pub fn send(&mut self, sql: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{sql}").unwrap();
        stdin.flush().unwrap();
    }
    pub fn close(mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// The first non-empty answer to `sql`, asked every 5 ms for up to 20 s.
pub fn poll(c: &Cluster, sql: &str) -> String {
    let t = Instant::now();
    loop {
        let v = c.psql(sql);
        if !v.is_empty() {
            return v;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "timed out waiting for: {sql}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A psql session named `app` that has run `setup` and `SELECT 1;` and is
/// idle, with its backend's pid.
pub fn idle_session(c: &Cluster, app: &str, setup: &[&str]) -> (Session, u32) {
    let mut s = Session::open_as(c, app);
    for sql in setup {
        s.send(sql);
    }
    s.send("SELECT 1;");
    let backend = poll(
        c,
        &format!(
            "SELECT pid FROM pg_stat_activity WHERE application_name = '{app}' AND state = 'idle'"
        ),
    )
    .parse()
    .unwrap();
    (s, backend)
}

/// pg_stat_statements per fingerprint: (calls, total_exec_time ns), with
/// the monotonic instants before and after the read.
pub fn pgss(c: &Cluster) -> (u64, BTreeMap<String, (u64, f64)>, u64) {
    let t0 = super::monotonic_ns();
    let m = pgss_by_fingerprint(c);
    (t0, m, super::monotonic_ns())
}

/// Children of the postmaster that serve the test's user (backends), with
/// their schedstat runtime.
pub fn backends_runtime(postmaster: u32) -> BTreeMap<u32, u64> {
    let mut m = BTreeMap::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let ppid: u32 = after.split(' ').nth(1).unwrap().parse().unwrap();
        // A backend that exits between the two reads is left out: its
        // runtime went with it.
        if ppid == postmaster
            && let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/schedstat"))
            && let Some(Ok(ran)) = s.split_whitespace().next().map(str::parse::<u64>)
        {
            m.insert(pid, ran);
        }
    }
    m
}

/// Waits, up to `limit`, until no client backend of `c` is still running
/// a statement it began before `since` (pg_stat_activity's `query_start`,
/// set when the backend reports the statement running, before its
/// executor starts), and fails the test if one still is. A probe attached
/// at `since` saw every statement begun after it; one under way at `since`
/// (a lock wait of seconds on a loaded machine) would be in
/// pg_stat_statements' count and time but not in the probe's.
pub fn await_statements_begun_before(c: &Cluster, since: std::time::SystemTime, limit: Duration) {
    let epoch = since
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let sql = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND state = 'active' AND pid <> pg_backend_pid() AND query_start < to_timestamp({epoch:.6})"
    );
    let t = Instant::now();
    while c.psql(&sql) != "0" {
        assert!(
            t.elapsed() < limit,
            "statements begun before {since:?} still running after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// pg_stat_statements' query ids of cluster `c` per fingerprint of its
/// normalised text (several where the same text was planned apart, e.g.
/// per user); its own reads left out.
pub fn pgss_queryids(c: &Cluster) -> BTreeMap<String, Vec<i64>> {
    let mut m: BTreeMap<String, Vec<i64>> = Default::default();
    let rows = c.psql(
        "SELECT queryid, query FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'",
    );
    for line in rows.lines() {
        let mut it = line.splitn(2, '|');
        let id: i64 = it.next().unwrap().parse().unwrap();
        let key = ttp_statements::fingerprint::fingerprint(it.next().unwrap());
        m.entry(key).or_default().push(id);
    }
    m
}

/// Server options that load pg_stat_statements (`Cluster::start_with`).
pub const PGSS: &str = "-c shared_preload_libraries=pg_stat_statements";

/// The seven statements of pgbench's TPC-B-like script, as fingerprints.
pub const TPCB: [&str; 7] = [
    "begin",
    "update pgbench_accounts set abalance = abalance + $1 where aid = $2",
    "select abalance from pgbench_accounts where aid = $1",
    "update pgbench_tellers set tbalance = tbalance + $1 where tid = $2",
    "update pgbench_branches set bbalance = bbalance + $1 where bid = $2",
    "insert into pgbench_history (tid, bid, aid, delta, mtime) values ($1, $2, $3, $4, current_timestamp)",
    "end",
];

/// QE8 (App. E (8)) drops a QE whose query process has a BlockIO delay
/// (/proc's `delayacct_blkio_ticks`) beyond Time_meas, as it must. Beside
/// CPU-bound load this kernel's delay accounting can record a wait from a
/// stale start (a dequeue EEVDF deferred; docs/ledger.md), and the backend
/// then shows more BlockIO than the QE lasted (seen twice beside two CPU
/// burners and a disk writer). That is the reference's fault, not ttp's,
/// when the ledger's own iowait of that process, measured at the
/// switches, fits in the QE: true when every process over the line has
/// `iowait_ns` ≤ Time_meas.
pub fn blkio_beyond_the_ledgers_wait(qe: &serde_json::Value) -> bool {
    let tick_ms = 1000.0 / super::user_hz() as f64;
    let meas_ms = qe["time_meas_ms"].as_f64().unwrap();
    let over: Vec<&serde_json::Value> = qe["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["class"] == "query")
        .filter(|p| {
            p["blkio_ticks"]
                .as_f64()
                .is_some_and(|b| b * tick_ms > meas_ms)
        })
        .collect();
    let fits = !over.is_empty()
        && over
            .iter()
            .all(|p| p["iowait_ns"].as_f64().is_some_and(|w| w / 1e6 <= meas_ms));
    if fits {
        eprintln!(
            "QE {}: QE8 on a BlockIO delay beyond Time_meas {meas_ms} ms that the ledger's iowait does not show: {:?}",
            qe["qe"],
            over.iter()
                .map(|p| (
                    p["pid"].clone(),
                    p["blkio_ticks"].clone(),
                    p["iowait_ns"].clone()
                ))
                .collect::<Vec<_>>()
        );
    }
    fits
}
