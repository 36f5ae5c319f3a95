//! Shared by the privileged integration tests.
#![allow(dead_code)]
mod beside;
pub mod held;
pub mod io_wake;
pub mod lab;
pub mod perf_own;
pub mod pg;
pub mod pgver;
pub mod realpg;
pub mod serve;
use std::{
    io::{BufRead, BufReader, Write},
    path::PathBuf,
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    sync::{Mutex, MutexGuard},
};

#[allow(unused_imports)] // used by the ledger tests only
pub use beside::load_beside;

/// True when the test may load eBPF. Not root: under CI=true that is a
/// failure (privileged tests must run there), elsewhere the test is skipped
/// with a message.
pub fn root_or_skip(test: &str) -> bool {
    // SAFETY: no arguments.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: privileged test needs root and CI=true forbids skipping it");
    }
    eprintln!("SKIPPED {test}: needs root to load eBPF (run `sudo cargo xtask test`)");
    false
}

/// Measurements from different tests must not overlap: each one asserts
/// that nothing else of its own used the disk or the CPU.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn fixture(name: &str) -> PathBuf {
    match name {
        "fixture-mixed" => PathBuf::from(env!("CARGO_BIN_EXE_fixture-mixed")),
        "fixture-forker" => PathBuf::from(env!("CARGO_BIN_EXE_fixture-forker")),
        "fixture-blame" => PathBuf::from(env!("CARGO_BIN_EXE_fixture-blame")),
        "fixture-noise" => PathBuf::from(env!("CARGO_BIN_EXE_fixture-noise")),
        "fixture-spin" => PathBuf::from(env!("CARGO_BIN_EXE_fixture-spin")),
        "fixture-noisyd" => PathBuf::from(env!("CARGO_BIN_EXE_fixture-noisyd")),
        "fixture-cpu-noise" => PathBuf::from(env!("CARGO_BIN_EXE_fixture-cpu-noise")),
        "fixture-forkstorm" => PathBuf::from(env!("CARGO_BIN_EXE_fixture-forkstorm")),
        "fixture-threads" => PathBuf::from(env!("CARGO_BIN_EXE_fixture-threads")),
        "fixture-syscalls" => PathBuf::from(env!("CARGO_BIN_EXE_fixture-syscalls")),
        other => panic!("unknown fixture {other}"),
    }
}

/// The ttp-ebpf binary of the same build (cargo builds every bin of the
/// workspace before the tests when run through `cargo xtask test`).
pub fn ttp_bin() -> PathBuf {
    let p = fixture("fixture-mixed").with_file_name("ttp-ebpf");
    assert!(
        p.exists(),
        "{} missing: run `cargo build -p ttp-user` first",
        p.display()
    );
    p
}

/// A fixture started with --wait-stdin: it has printed "ready" and waits
/// for `go()`.
pub struct Held {
    pub child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Held {
    pub fn start(name: &str, args: &[&str]) -> Self {
        let mut child = Command::new(fixture(name))
            .args(args)
            .arg("--wait-stdin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start fixture");
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("fixture output");
        assert_eq!(line.trim(), "ready", "fixture did not start");
        Self {
            child,
            stdin,
            stdout,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn go(&mut self) {
        let s = self.stdin.as_mut().expect("stdin");
        s.write_all(b"go\n").expect("release fixture");
        s.flush().expect("flush");
    }

    /// The fixture's next output line (blocks until it is done working).
    pub fn line(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("fixture output");
        line
    }

    /// The fixture's next output line, returned once the fixture is asleep
    /// again (waiting on stdin): a fixture preempted between its print and
    /// its read would otherwise gain run-queue wait and runtime between two
    /// readers' images on a busy machine, which neither reader controls.
    pub fn line_then_asleep(&mut self) -> String {
        let line = self.line();
        self.wait_asleep();
        line
    }

    /// Waits (at most 5 s) until the fixture is blocked ('S' in
    /// /proc/PID/stat), so that its schedstat and any other reader's image
    /// of it stay still until it is released.
    pub fn wait_asleep(&self) {
        let path = format!("/proc/{}/stat", self.pid());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            let state = std::fs::read_to_string(&path).ok().and_then(|s| {
                let after = s.rsplit_once(')')?.1;
                after.trim_start().chars().next()
            });
            if state == Some('S') {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("fixture {} did not go back to sleep within 5 s", self.pid());
    }

    pub fn lines_to_end(mut self) -> Vec<String> {
        drop(self.stdin.take());
        let lines: Vec<String> = self.stdout.lines().map_while(Result::ok).collect();
        let _ = self.child.wait();
        lines
    }

    /// The numbers the fixture printed one a line until it exited (the
    /// pids fixture-forker reports), other lines skipped.
    pub fn numbers_to_end<T: std::str::FromStr>(self) -> Vec<T> {
        self.lines_to_end()
            .iter()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    pub fn finish(mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// /proc/PID/schedstat: (sum_exec_runtime ns, run_delay ns).
pub fn schedstat(pid: u32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).expect("schedstat");
    let v: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
    (v[0], v[1])
}

/// A count from one of /proc/PID's `key: value` files (`io`, `status`).
pub fn proc_field(pid: u32, file: &str, key: &str) -> u64 {
    let path = format!("/proc/{pid}/{file}");
    let s = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    s.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("{path} has no {key}"))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{path} {key}: {e}"))
}

/// /proc/PID/io read_bytes.
pub fn proc_read_bytes(pid: u32) -> u64 {
    proc_field(pid, "io", "read_bytes")
}

/// Machine-wide iowait ticks from /proc/stat's "cpu" line.
pub fn proc_stat_iowait_ticks() -> u64 {
    let s = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let cpu = s.lines().next().expect("cpu line");
    cpu.split_whitespace()
        .nth(5)
        .expect("iowait")
        .parse()
        .unwrap()
}

/// Bytes a fixture read with O_DIRECT: `fixture_bytes` is a floor, not the
/// exact figure, because a page of the fixture's own binary or libraries
/// faulted in from disk inside the window is the process's I/O too (seen:
/// +8 KiB after another test dropped the page cache). The exact truth is
/// /proc/PID/io, which the tests compare with `assert_eq!` separately.
pub fn read_bytes_cover(read: u64, fixture_bytes: u64) -> bool {
    read >= fixture_bytes && read - fixture_bytes <= 1 << 20
}

pub fn within(a: f64, b: f64, rel: f64, abs: f64) -> bool {
    (a - b).abs() <= (b.abs() * rel).max(abs)
}

/// Pins process `pid` to `cpu`.
pub fn pin(pid: u32, cpu: usize) {
    // SAFETY: a zeroed cpu_set_t with one bit set, valid pointer and size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(pid as i32, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// A background process killed on drop.
pub struct Background(pub Child);

impl Background {
    pub fn start(name: &str, args: &[&str]) -> Self {
        Self(
            Command::new(fixture(name))
                .args(args)
                .stdout(Stdio::null())
                .spawn()
                .expect("start background fixture"),
        )
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs ttp-ebpf with `args`; returns (exit code, stdout, stderr).
pub fn ttp(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(ttp_bin())
        .args(args)
        .output()
        .expect("run ttp-ebpf");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Starts ttp-ebpf with `args` and waits until its ledger is attached.
pub fn ttp_attached(args: &[&str]) -> Child {
    let mut child = Command::new(ttp_bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ttp-ebpf");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            err.read_line(&mut line).expect("ttp stderr") > 0,
            "ttp-ebpf ended before attaching"
        );
        if line.contains("ledger attached") || line.contains("boundaries at the client socket") {
            break;
        }
    }
    std::thread::spawn(move || for _ in err.lines() {});
    child
}

pub fn json_file(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("result file")).expect("valid JSON")
}

pub fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("ttp-test-{}-{name}", std::process::id()))
}

/// /proc/stat's total cpu line: (steal ticks, all ticks).
pub fn proc_stat_steal() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let v: Vec<u64> = s
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|x| x.parse().unwrap())
        .collect();
    (v[7], v.iter().sum())
}

/// The share of CPU time stolen by the hypervisor between two readings.
/// The ledger's on-CPU time is wall time on a CPU; schedstat excludes
/// steal, so comparisons allow twice this share.
pub fn steal_between(a: (u64, u64), b: (u64, u64)) -> f64 {
    let all = b.1.saturating_sub(a.1);
    if all == 0 {
        0.0
    } else {
        b.0.saturating_sub(a.0) as f64 / all as f64
    }
}

/// What `fixture-forkstorm --out FILE` reaped: (pid, CPU time in µs from
/// wait4's rusage), one per process.
pub fn fixture_rusage(path: &std::path::Path) -> Vec<(u64, u64)> {
    std::fs::read_to_string(path)
        .expect("fixture's rusage file")
        .lines()
        .map(|l| {
            let (p, us) = l.split_once(' ').unwrap();
            (p.parse().unwrap(), us.parse().unwrap())
        })
        .collect()
}

/// Nanoseconds stolen by the hypervisor, all CPUs together, between two
/// readings of /proc/stat (which shows them in USER_HZ ticks).
pub fn steal_ns_between(a: (u64, u64), b: (u64, u64)) -> f64 {
    b.0.saturating_sub(a.0) as f64 * 1e9 / user_hz() as f64
}

/// Bytes read and written on every whole disk so far (/proc/diskstats
/// sectors × 512; partitions and virtual devices left out so nothing is
/// counted twice).
pub fn disks_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/diskstats").expect("/proc/diskstats");
    s.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let name = *f.get(2)?;
            let whole = std::path::Path::new("/sys/block").join(name).exists();
            let virt = ["loop", "ram", "dm-", "zram", "sr"]
                .iter()
                .any(|p| name.starts_with(p));
            (whole && !virt).then(|| {
                let sectors = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
                (sectors(5) + sectors(9)) * 512
            })
        })
        .sum()
}

/// One CPU's idle and iowait sleep time as the kernel keeps them
/// (tick_sched, printed in /proc/timer_list): ns-exact sums of the idle
/// stretches that have ended. /proc/stat's idle and iowait are the same sums
/// rounded down to ticks of 1/USER_HZ s (get_cpu_idle_time_us,
/// nsec_to_clock_t).
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelIdle {
    pub idle_ns: u64,
    pub iowait_ns: u64,
    /// Times the CPU went into its idle state (`idle_calls`:
    /// tick_nohz_idle_stop_tick, once per pass of the idle loop).
    pub idle_calls: u64,
}

/// One CPU's idle accounting read three ways at one moment: the kernel's ns
/// sums, /proc/stat's ticks and the ledger's account closed as of the read.
#[derive(Debug, Clone, Copy, Default)]
pub struct IdleRead {
    pub kernel: KernelIdle,
    /// /proc/stat's `cpuN` idle and iowait, in ticks.
    pub stat_idle_ticks: u64,
    pub stat_iowait_ticks: u64,
    /// /proc/stat's `cpuN` irq, softirq and steal, in ticks.
    pub stat_irq_ticks: u64,
    pub stat_softirq_ticks: u64,
    pub stat_steal_ticks: u64,
    /// The ledger's idle and iowait ns of the CPU at the read.
    pub ledger_idle_ns: u64,
    pub ledger_iowait_ns: u64,
}

/// Per CPU [`IdleRead`], each taken by this thread pinned to that CPU (root
/// only). A CPU with a runnable thread never enters its idle state, so from
/// the pinning to the last of the three reads the CPU is not idle: no
/// stretch is open, the kernel's sums hold every stretch that ended, and
/// none of the three can move in between. They describe the same instant,
/// however long the machine's load delays the reads. The thread's affinity
/// is restored afterwards.
pub fn idle_reads(ledger: &ttp_ledger::probe::Ledger) -> std::collections::BTreeMap<u32, IdleRead> {
    // SAFETY: cpu_set_t values of the right size, valid pointers.
    let saved = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0
        );
        set
    };
    let set_affinity = |set: &libc::cpu_set_t| {
        // SAFETY: as above.
        let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) };
        assert_eq!(r, 0, "sched_setaffinity");
    };
    let mut out = std::collections::BTreeMap::new();
    for cpu in 0..online_cpus() {
        // SAFETY: a zeroed cpu_set_t with one bit set.
        let one = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu as usize, &mut set);
            set
        };
        set_affinity(&one);
        let timer_list = std::fs::read_to_string("/proc/timer_list").expect("/proc/timer_list");
        let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
        let cpus = ledger.cpu_accounts().expect("ledger CPU accounts");
        let now = monotonic_ns();
        let mut r = IdleRead {
            kernel: timer_list_idle(&timer_list, cpu).expect("tick_sched sums in /proc/timer_list"),
            ..IdleRead::default()
        };
        let name = format!("cpu{cpu} ");
        let fields: Vec<u64> = stat
            .lines()
            .find_map(|l| l.strip_prefix(&name))
            .expect("cpu line in /proc/stat")
            .split_whitespace()
            .map(|f| f.parse().expect("/proc/stat number"))
            .collect();
        // user nice system idle iowait irq softirq steal …
        r.stat_idle_ticks = fields[3];
        r.stat_iowait_ticks = fields[4];
        r.stat_irq_ticks = fields[5];
        r.stat_softirq_ticks = fields[6];
        r.stat_steal_ticks = fields[7];
        if let Some((_, c)) = cpus.iter().find(|(id, _)| *id == cpu) {
            let t = ttp_ledger::accounts::close_cpu(c, now);
            r.ledger_idle_ns = t.idle_ns;
            r.ledger_iowait_ns = t.iowait_ns;
        }
        out.insert(cpu, r);
    }
    set_affinity(&saved);
    out
}

/// CPU `cpu`'s tick_sched sums in the text of /proc/timer_list.
fn timer_list_idle(text: &str, cpu: u32) -> Option<KernelIdle> {
    let mut k = KernelIdle::default();
    let mut this = false;
    let mut found = 0;
    for line in text.lines().map(str::trim) {
        if let Some(n) = line.strip_prefix("cpu: ") {
            this = n.trim().parse::<u32>().ok() == Some(cpu);
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let ns = || value.trim().strip_suffix(" nsecs")?.parse::<u64>().ok();
        match key.trim() {
            ".idle_sleeptime" if this => k.idle_ns = ns()?,
            ".iowait_sleeptime" if this => k.iowait_ns = ns()?,
            ".idle_calls" if this => k.idle_calls = value.trim().parse().ok()?,
            _ => continue,
        }
        found += 1;
    }
    (found == 3).then_some(k)
}

/// Ticks per second of /proc/stat (USER_HZ).
pub fn user_hz() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) as u64 }
}

/// CLOCK_MONOTONIC in ns (the ledger's clock).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPUs online (what /proc/stat's counters cover).
fn online_cpus() -> u32 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) as u32 }
}

/// The ledger's accounts as of now.
pub fn image(ledger: &ttp_ledger::probe::Ledger) -> ttp_ledger::accounts::Image {
    ttp_ledger::accounts::Image::from_snapshot(&ledger.snapshot().expect("snapshot"))
}

/// Compiles tests/fixtures/vprof-target the way its header says, into `out`.
pub fn build_vprof_target(out: &std::path::Path) {
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/vprof-target/vprof_target.c"
    );
    let ok = Command::new("cc")
        .args(["-O1", "-fno-inline", "-g", "-o"])
        .arg(out)
        .arg(src)
        .status()
        .expect("run cc")
        .success();
    assert!(ok, "cc failed on {src}");
}

/// Blame's own-service split of a victim's disk wait (ttp's extension
/// beside iQCAR's eq. 10), checked in a `blame --json` document: it covers
/// the disk's blocked time, own + behind = blocked, only processes in
/// `io_pids` (those that did disk I/O, the victim left out) are blamed for
/// the wait behind others, never more than that wait, and nobody when no
/// other process used the disk. Returns (blocked, own, behind) in ns.
pub fn check_disk_split(
    r: &serde_json::Value,
    io_pids: &std::collections::BTreeSet<u64>,
) -> (f64, f64, f64) {
    let f = |v: &serde_json::Value| v.as_f64().unwrap_or(0.0);
    let split = &r["disk_split"];
    assert!(split.is_object(), "no disk split in the report: {r}");
    let (blocked, own, behind) = (
        f(&split["blocked_ns"]),
        f(&split["own_service_ns"]),
        f(&split["behind_others_ns"]),
    );
    let disk_blocked = r["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["resource"] == "disk")
        .map(|x| f(&x["blocked_ns"]))
        .expect("disk resource");
    assert_eq!(
        blocked, disk_blocked,
        "the split covers the disk's blocked time"
    );
    assert_eq!(
        own + behind,
        blocked,
        "own {own} + behind {behind} vs {blocked}"
    );
    let mut given = 0.0;
    for c in split["culprits"].as_array().unwrap() {
        given += f(&c["behind_blame_ns"]);
        if let Some(pid) = c["pid"].as_u64() {
            assert!(
                io_pids.contains(&pid),
                "pid {pid} blamed in the split view without disk I/O of its own: {c}"
            );
        }
    }
    assert!(
        given <= behind * (1.0 + 1e-9) + 1.0,
        "blamed {given} of {behind} behind others"
    );
    if io_pids.is_empty() {
        assert!(
            split["culprits"]
                .as_array()
                .unwrap()
                .iter()
                .all(|c| !c["pid"].is_u64()),
            "nobody else used the disk, yet: {}",
            split["culprits"]
        );
    }
    (blocked, own, behind)
}
