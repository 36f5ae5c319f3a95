//! `cargo xtask bench statements`: what `ttp-ebpf statements` costs a
//! PostgreSQL server under `pgbench -c 4 -S` (goal: ≤ 3 % fewer TPS).
//!
//! TPS on a shared 2-vCPU machine moves by factors between rounds, so the
//! figure that decides is CPU per transaction, which does not depend on how
//! much of the machine the round got: the utime + stime of every process of
//! the server (the postmaster, its live children, and the backends that
//! ended in the round through the postmaster's cutime + cstime, read once
//! they have been reaped) and of pgbench (`/usr/bin/time`), divided by the
//! transactions pgbench made. At saturation TPS ∝ 1 / (CPU per
//! transaction), so the ratio of CPU per transaction with and without the
//! probes estimates the TPS loss. The uprobe traps and the BPF program run
//! in the backends, so they are in the backends' stime; ttp's own
//! userspace CPU (draining the records) is shown beside it and added in the
//! "with ttp's own CPU" ratio.
//!
//! Per round, in an order rotated from round to round: pgbench without
//! ttp, under `statements` (default probe set), under `statements --detail
//! all`, under `statements --simple-only` (only `query__start` and
//! `query__done`), and under the floor: bpftrace with uprobes at those two
//! USDT sites that only count their hits, so the trap itself is measured
//! apart from ttp's programs.
//! Medians of the per-round ratios; TPS is printed too, for what it is
//! worth on a busy machine.
use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};

use super::{cpu_ticks, interrupt, median, pg::Server, start_tracer};
use crate::{setup, util};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Variant {
    Without = 0,
    Default = 1,
    Detail = 2,
    /// bpftrace counting hits at `query__start` and `query__done`.
    Floor = 3,
    /// `statements --simple-only`: the same two sites as the floor.
    SimpleOnly = 4,
}

/// Variants in a round.
const N: usize = 5;

const VARIANTS: [Variant; N] = [
    Variant::Without,
    Variant::Default,
    Variant::Detail,
    Variant::Floor,
    Variant::SimpleOnly,
];

/// One pgbench round's figures.
#[derive(Default, Clone, Copy)]
struct Round {
    tps: f64,
    transactions: f64,
    /// Server + pgbench CPU, seconds.
    cpu_s: f64,
    /// ttp's own userspace + kernel CPU over the round, seconds.
    ttp_cpu_s: f64,
    /// Probe hits per statement and ns inside the program per hit.
    hits_per_stmt: f64,
    probe_ns: f64,
}

impl Round {
    fn us_per_tx(&self) -> f64 {
        self.cpu_s * 1e6 / self.transactions
    }
    fn us_per_tx_all(&self) -> f64 {
        (self.cpu_s + self.ttp_cpu_s) * 1e6 / self.transactions
    }
}

pub fn bench(rounds: u32, seconds: u32, clients: u32) -> anyhow::Result<()> {
    setup::ensure_packages(&["postgresql", "time"], "the server and pgbench")?;
    setup::ensure_packages(&["bpftrace"], "bpftrace's bare uprobes are the floor")?;
    if !util::is_root() {
        bail!(
            "the statements benchmark loads uprobes: run it as root (sudo -E cargo xtask bench statements)"
        );
    }
    util::cargo(&["build", "--release", "-p", "ttp-user"])?;
    let ttp = util::target_dir().join("release/ttp-ebpf");
    let server = start_server()?;
    rounds_of(&server, &ttp, rounds, seconds, clients)
}

fn rounds_of(
    server: &Server,
    ttp: &Path,
    rounds: u32,
    seconds: u32,
    clients: u32,
) -> anyhow::Result<()> {
    let json = std::env::temp_dir().join(format!("ttp-bench-stmt-{}.json", std::process::id()));
    println!(
        "pgbench -c {clients} -S -T {seconds} against a throw-away cluster (scale 2, shared_buffers 16MB), postmaster {}",
        server.postmaster()?
    );
    println!(
        "round  variant   TPS      tx        CPU s   µs/tx  ttp CPU s  hits/stmt  in-BPF ns/hit"
    );
    let mut all: Vec<[Round; N]> = Vec::new();
    for r in 0..rounds as usize {
        let mut row = [Round::default(); N];
        for k in 0..VARIANTS.len() {
            let v = VARIANTS[(k + r) % VARIANTS.len()];
            let x = one_round(server, ttp, v, seconds, clients, &json)?;
            println!(
                "{r:>5}  {:<8} {:>6.0}  {:>8.0}  {:>7.2}  {:>6.2}  {:>9.2}  {:>9.2}  {:>13}",
                format!("{v:?}"),
                x.tps,
                x.transactions,
                x.cpu_s,
                x.us_per_tx(),
                x.ttp_cpu_s,
                x.hits_per_stmt,
                ns_or_dash(x.probe_ns)
            );
            row[v as usize] = x;
        }
        all.push(row);
    }
    let _ = std::fs::remove_file(&json);
    println!();
    let base = |r: &[Round; N]| r[Variant::Without as usize];
    for v in [
        Variant::Floor,
        Variant::SimpleOnly,
        Variant::Default,
        Variant::Detail,
    ] {
        let i = v as usize;
        let mut cpu: Vec<f64> = all
            .iter()
            .map(|r| r[i].us_per_tx() / base(r).us_per_tx())
            .collect();
        let mut cpu_all: Vec<f64> = all
            .iter()
            .map(|r| r[i].us_per_tx_all() / base(r).us_per_tx())
            .collect();
        let mut tps: Vec<f64> = all.iter().map(|r| r[i].tps / base(r).tps).collect();
        let mut hits: Vec<f64> = all.iter().map(|r| r[i].hits_per_stmt).collect();
        let mut in_bpf: Vec<f64> = all.iter().map(|r| r[i].probe_ns).collect();
        // End-to-end cost of one hit: the extra CPU per transaction over the
        // hits per transaction (one statement per -S transaction).
        let mut per_hit: Vec<f64> = all
            .iter()
            .map(|r| (r[i].us_per_tx() - base(r).us_per_tx()) * 1e3 / r[i].hits_per_stmt)
            .collect();
        let (cpu_m, cpu_all_m) = (median(&mut cpu), median(&mut cpu_all));
        println!(
            "{}: CPU per transaction ×{cpu_m:.4} (estimated TPS loss at saturation {:.1} %; with ttp's own CPU ×{cpu_all_m:.4}, {:.1} %), TPS ratio ×{:.3}, {:.2} hits per statement, {:.0} ns per hit end to end ({} ns inside the program); medians of {rounds} rounds",
            match v {
                Variant::Floor => "floor: bpftrace counting query__start/done hits",
                Variant::SimpleOnly => "statements --simple-only (query__start/done)",
                Variant::Default => "statements (default probes, with the executor pair)",
                _ => "statements --detail all",
            },
            (1.0 - 1.0 / cpu_m) * 100.0,
            (1.0 - 1.0 / cpu_all_m) * 100.0,
            median(&mut tps),
            median(&mut hits),
            median(&mut per_hit),
            ns_or_dash(median(&mut in_bpf)),
        );
    }
    Ok(())
}

fn one_round(
    server: &Server,
    ttp: &Path,
    v: Variant,
    seconds: u32,
    clients: u32,
    json: &Path,
) -> anyhow::Result<Round> {
    let pm = server.postmaster()?;
    let floor = if v == Variant::Floor {
        Some(UprobeFloor::start(&server.bin.join("postgres"))?)
    } else {
        None
    };
    let tracer = if matches!(v, Variant::Without | Variant::Floor) {
        None
    } else {
        let _ = std::fs::remove_file(json);
        let mut cmd = Command::new(ttp);
        cmd.args(["statements", "--pid", &pm.to_string(), "--json"])
            .arg(json)
            .args(["--top", "1"]);
        match v {
            Variant::Detail => {
                cmd.args(["--detail", "all"]);
            }
            Variant::SimpleOnly => {
                cmd.arg("--simple-only");
            }
            _ => {}
        }
        Some(start_tracer(cmd, "measuring")?)
    };
    // Let statements under way (none: pgbench is not running) and the
    // attach settle.
    std::thread::sleep(Duration::from_millis(300));
    let children0 = children(pm).len();
    let (s0, t0) = (
        server_ticks(pm),
        tracer.as_ref().map_or(0, |t| cpu_ticks(t.child.id())),
    );
    let time_out = std::env::temp_dir().join(format!("ttp-bench-time-{}", std::process::id()));
    let out = Command::new("/usr/bin/time")
        .arg("-o")
        .arg(&time_out)
        .args(["-f", "%U %S"])
        .arg(server.bin.join("pgbench"))
        .args(["-n", "-S", "-c", &clients.to_string()])
        .args(["-T", &seconds.to_string()])
        .args(server.connect_args())
        .stdin(Stdio::null())
        .output()
        .context("running pgbench")?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        bail!(
            "pgbench failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The round's backends end with pgbench's connections; their CPU is in
    // the postmaster's cutime + cstime once it has reaped them.
    let deadline = Instant::now() + Duration::from_secs(10);
    while children(pm).len() > children0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let s1 = server_ticks(pm);
    let t1 = tracer.as_ref().map_or(0, |t| cpu_ticks(t.child.id()));
    let pgbench_cpu: f64 = std::fs::read_to_string(&time_out)
        .context("reading /usr/bin/time's output")?
        .split_whitespace()
        .filter_map(|v| v.parse::<f64>().ok())
        .sum();
    let _ = std::fs::remove_file(&time_out);
    let tick = ticks_per_second();
    let mut r = Round {
        tps: field(&text, "tps = ")?,
        transactions: field(&text, "number of transactions actually processed: ")?,
        cpu_s: (s1 - s0) as f64 / tick + pgbench_cpu,
        ttp_cpu_s: t1.saturating_sub(t0) as f64 / tick,
        ..Round::default()
    };
    if let Some(t) = tracer {
        let mut child = t.child;
        interrupt(&mut child)?;
        let status = child.wait()?;
        if !status.success() {
            bail!("ttp-ebpf statements failed ({status})");
        }
        let doc: serde_json::Value = serde_json::from_slice(
            &std::fs::read(json).context("ttp-ebpf statements wrote no JSON")?,
        )?;
        let c = &doc["counts"];
        let stmts = doc["statements"].as_f64().unwrap_or(0.0);
        if c["records_lost"].as_u64().unwrap_or(0) > 0 {
            bail!("statements lost records: {c}");
        }
        if stmts < r.transactions {
            bail!(
                "statements recorded {stmts} statements of {} transactions",
                r.transactions
            );
        }
        r.hits_per_stmt = c["hits"].as_f64().unwrap_or(0.0) / stmts;
        r.probe_ns = c["mean_probe_ns"].as_f64().unwrap_or(f64::NAN);
    }
    if let Some(f) = floor {
        let hits = f.stop()?;
        if hits < 2.0 * r.transactions {
            bail!(
                "the floor's uprobes counted {hits} hits for {} transactions",
                r.transactions
            );
        }
        r.hits_per_stmt = hits / r.transactions;
        r.probe_ns = f64::NAN;
    }
    // Let the uprobes' detach finish before the next round.
    std::thread::sleep(Duration::from_millis(500));
    Ok(r)
}

/// bpftrace counting the hits of uprobes at the default probe set's two
/// USDT sites: the trap and an empty-ish program, nothing of ttp.
struct UprobeFloor {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl UprobeFloor {
    fn start(postgres: &Path) -> anyhow::Result<UprobeFloor> {
        let bin = postgres.display();
        let script = format!(
            "BEGIN {{ printf(\"floor ready\\n\"); }} usdt:{bin}:postgresql:query__start, usdt:{bin}:postgresql:query__done {{ @hits = count(); }}"
        );
        let mut child = Command::new("bpftrace")
            .args(["-e", &script])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting bpftrace")?;
        let stdout = child.stdout.take().expect("piped");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        loop {
            match lines.recv_timeout(Duration::from_secs(60)) {
                Ok(l) if l.contains("floor ready") => break,
                Ok(_) => {}
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    bail!("bpftrace's floor probes not ready within 60 s");
                }
            }
        }
        Ok(UprobeFloor { child, lines })
    }

    /// Stops bpftrace and returns the hits it printed.
    fn stop(mut self) -> anyhow::Result<f64> {
        interrupt(&mut self.child)?;
        self.lines
            .iter()
            .find_map(|l| l.strip_prefix("@hits: ")?.trim().parse().ok())
            .context("bpftrace printed no @hits")
    }
}

/// ns rounded, or "—" where not measured (the floor has no program
/// statistics of its own).
fn ns_or_dash(ns: f64) -> String {
    if ns.is_finite() {
        format!("{ns:.0}")
    } else {
        "—".into()
    }
}

fn field(text: &str, key: &str) -> anyhow::Result<f64> {
    text.lines()
        .find_map(|l| l.split(key).nth(1))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no '{key}' in pgbench's output: {text}"))
}

fn ticks_per_second() -> f64 {
    util::output("getconf", &["CLK_TCK"])
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// /proc/PID/stat fields after the command name (field 3 is index 0).
fn stat_fields(pid: u32) -> Vec<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect()
}

fn children(pm: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        // Field 4 (index 1) is the parent.
        if stat_fields(pid).get(1) == Some(&u64::from(pm)) {
            out.push(pid);
        }
    }
    out
}

/// utime + stime of the postmaster and its live children, plus cutime +
/// cstime of the postmaster (its reaped children), in ticks.
fn server_ticks(pm: u32) -> u64 {
    let f = stat_fields(pm);
    let own: u64 = (11..15).map(|i| f.get(i).copied().unwrap_or(0)).sum();
    own + children(pm).into_iter().map(cpu_ticks).sum::<u64>()
}

/// The bench's cluster: a small shared_buffers (the pgbench table at
/// scale 2 outgrows it) and no autovacuum, with pgbench's tables.
fn start_server() -> anyhow::Result<Server> {
    let s = Server::start("pg", "-c shared_buffers=16MB -c autovacuum=off")?;
    let mut init = Command::new(s.bin.join("pgbench"));
    init.args(["-i", "-q", "-s", "2"]).args(s.connect_args());
    util::status(&mut init)?;
    Ok(s)
}

impl Server {
    fn connect_args(&self) -> Vec<String> {
        vec![
            "-h".into(),
            self.dir.display().to_string(),
            "-p".into(),
            self.port.to_string(),
            "-U".into(),
            "ttp".into(),
            "postgres".into(),
        ]
    }
}
