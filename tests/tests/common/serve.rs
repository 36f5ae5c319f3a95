//! `ttp-ebpf serve` started and stopped by the serve tests, HTTP by hand,
//! and a fixture in a control group of the test's own.
use std::{
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    os::unix::process::CommandExt,
    path::PathBuf,
    process::{Child, ChildStdin, Command, Stdio},
    time::{Duration, Instant},
};

use super::{
    fixture, proc_read_bytes, proc_stat_steal, schedstat, steal_between, temp_path, ttp_bin, within,
};

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// One HTTP GET: (status, body).
pub fn get(port: u16, path: &str, accept: Option<&str>) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{accept}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).expect("response");
    let (head, body) = text.split_once("\r\n\r\n").expect("HTTP response");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status");
    (status, body.to_string())
}

/// `ttp-ebpf serve`, stopped with SIGTERM.
pub struct Serve {
    pub child: Child,
    pub port: u16,
    /// What serve said on stderr so far.
    stderr: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Serve {
    pub fn start(args: &[&str]) -> Self {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let mut child = Command::new(ttp_bin())
            .arg("serve")
            .args(["--listen", &listen])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start serve");
        let mut err = BufReader::new(child.stderr.take().expect("stderr"));
        let said = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                err.read_line(&mut line).expect("serve stderr") > 0,
                "serve ended before serving"
            );
            said.lock().unwrap().push(line.trim_end().to_string());
            if line.contains("serving the ledger") {
                break;
            }
        }
        let kept = std::sync::Arc::clone(&said);
        std::thread::spawn(move || {
            for l in err.lines().map_while(Result::ok) {
                eprintln!("serve: {l}");
                kept.lock().unwrap().push(l);
            }
        });
        Self {
            child,
            port,
            stderr: said,
        }
    }

    /// The lines serve wrote on stderr so far.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// SIGTERM; returns the exit code once it has exited.
    pub fn stop(mut self) -> i32 {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let code = self.child.wait().expect("wait serve").code().unwrap_or(-1);
        std::mem::forget(self);
        code
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The unified (v2) control-group hierarchy's mount point.
pub fn cgroup2_root() -> PathBuf {
    let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    info.lines()
        .find_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            (post.split_whitespace().next()? == "cgroup2")
                .then(|| pre.split_whitespace().nth(4).map(PathBuf::from))
                .flatten()
        })
        .expect("no cgroup2 hierarchy mounted")
}

/// A control group of the test's own, removed on drop.
pub struct Cgroup {
    pub dir: PathBuf,
    /// Its path as /proc/PID/cgroup shows it.
    pub path: String,
}

impl Cgroup {
    pub fn new(name: &str) -> Self {
        let root = cgroup2_root();
        let dir = root.join(format!("ttp-test-{}-{name}", std::process::id()));
        std::fs::create_dir(&dir).expect("create cgroup");
        let path = format!("/{}", dir.strip_prefix(&root).unwrap().display());
        Self { dir, path }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// fixture-mixed started inside `cg` (it joins before exec, so every
/// instruction it runs is the group's), waiting for a line on stdin.
pub fn mixed_in(
    cg: &Cgroup,
    args: &[&str],
) -> (Child, ChildStdin, BufReader<std::process::ChildStdout>) {
    let procs = cg.dir.join("cgroup.procs");
    let mut cmd = Command::new(fixture("fixture-mixed"));
    cmd.args(args)
        .arg("--wait-stdin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    // SAFETY: only a write(2) to a file in the child before exec.
    unsafe {
        cmd.pre_exec(move || std::fs::write(&procs, b"0"));
    }
    let mut child = cmd.spawn().expect("start fixture in its cgroup");
    let stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    (child, stdin, out)
}

/// fixture-mixed in a control group of the test's own (`name`), once it
/// burned 400 ms of CPU and read 32 MiB with O_DIRECT from a file of its
/// own (the shared default file may be recreated by another test while
/// this one reads it) and went back to sleep, so its counters stand still:
/// what the kernel says it did, for a test to compare a group's series with.
pub struct GroupFixture {
    pub cg: Cgroup,
    pub pid: u32,
    /// Its runtime from /proc/PID/schedstat, ns.
    pub sched_ns: u64,
    /// Its read_bytes from /proc/PID/io.
    pub read: u64,
    /// The machine's steal share while it ran (/proc/stat).
    pub steal: f64,
    child: Child,
    stdin: Option<ChildStdin>,
    data: PathBuf,
}

impl GroupFixture {
    pub fn run(name: &str) -> Self {
        let cg = Cgroup::new(name);
        let steal0 = proc_stat_steal();
        let data = temp_path(&format!("{name}-fixture.dat"));
        let data_arg = data.to_str().expect("utf-8 path").to_string();
        let (child, mut stdin, mut out) = mixed_in(
            &cg,
            &["--cpu-ms", "400", "--read-mib", "32", "--file", &data_arg],
        );
        let pid = child.id();
        stdin.write_all(b"go\n").unwrap();
        let mut done = String::new();
        out.read_line(&mut done).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while process_state(pid) != Some('S') {
            assert!(
                Instant::now() < deadline,
                "fixture did not go back to sleep"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let (sched_ns, _) = schedstat(pid);
        let read = proc_read_bytes(pid);
        let steal = steal_between(steal0, proc_stat_steal());
        Self {
            cg,
            pid,
            sched_ns,
            read,
            steal,
            child,
            stdin: Some(stdin),
            data,
        }
    }

    /// A group's on-CPU counter (`on_cpu_s`) and read bytes as `source`
    /// has them against the kernel's: on-CPU within 2 % (plus twice the
    /// steal share, 2 ms) of schedstat, read bytes equal to /proc/PID/io.
    /// The bound is attach's (tests/tests/attach_cli.rs): the ledger counts
    /// the kernel's runtime read at switches, schedstat the same runtime,
    /// and on these VMs a missed switch left one run in six 1.8 % off.
    pub fn check(&self, source: &str, on_cpu_s: f64, bytes: u64) {
        let (sched_ns, read, pid) = (self.sched_ns, self.read, self.pid);
        eprintln!(
            "on-CPU: {source} {on_cpu_s} s, schedstat {} s (steal share {:.4}); read bytes: {source} {bytes}, /proc {read}",
            sched_ns as f64 / 1e9,
            self.steal
        );
        assert!(
            within(
                on_cpu_s * 1e9,
                sched_ns as f64,
                0.02 + 2.0 * self.steal,
                2e6
            ),
            "on-CPU {on_cpu_s} s vs schedstat {sched_ns} ns"
        );
        assert!(
            sched_ns >= 400_000_000,
            "the fixture burned 400 ms: {sched_ns}"
        );
        assert_eq!(bytes, read, "read bytes vs /proc/{pid}/io");
        // At least the fixture's 32 MiB; more when its own binary was
        // faulted in from disk (another test on the machine dropped the page
        // cache: seen, +4.5 MiB). The exact truth is /proc/PID/io, above.
        assert!(read >= 32 << 20, "read bytes {read}");
    }
}

impl Drop for GroupFixture {
    /// Ends the fixture (EOF on its stdin) before its group is removed.
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.data);
    }
}

pub fn process_state(pid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit_once(')')?.1.trim_start().chars().next()
}

/// One value of a PromQL instant query, if the result has one.
pub fn query(port: u16, promql: &str) -> Option<f64> {
    let enc: String = promql
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let (status, body) = get(port, &format!("/api/v1/query?query={enc}"), None);
    assert_eq!(status, 200, "{promql}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("query JSON");
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

/// Whether /usr/bin/prometheus is there; outside CI a missing one skips
/// `test` (said on stderr), under CI=true it fails it.
pub fn prometheus_or_skip(test: &str) -> bool {
    if std::path::Path::new("/usr/bin/prometheus").exists() {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: /usr/bin/prometheus missing: `cargo xtask setup` installs it");
    }
    eprintln!("SKIPPED {test}: /usr/bin/prometheus missing (cargo xtask setup installs it)");
    false
}

/// A real Prometheus server (Debian's package), on loopback, scraping
/// every second, killed on drop.
pub struct Prometheus {
    child: Child,
    pub port: u16,
    _dir: PathBuf,
}

impl Prometheus {
    pub fn start(target_port: u16) -> Self {
        Self::start_with(target_port, "")
    }

    /// With `job` added to the scrape job's settings (YAML at the job's
    /// indentation: `scheme`, `tls_config`, `basic_auth`).
    pub fn start_with(target_port: u16, job: &str) -> Self {
        let dir = temp_path("prometheus");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: ttp\n{job}    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let child = Command::new("/usr/bin/prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus");
        let p = Self {
            child,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", port)).is_err()
            || get(port, "/-/ready", None).0 != 200
        {
            assert!(Instant::now() < deadline, "prometheus not ready in 60 s");
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self._dir);
    }
}
