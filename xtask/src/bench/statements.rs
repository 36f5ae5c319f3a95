//! `cargo xtask bench statements`: what `ttp-ebpf statements` costs a
//! PostgreSQL server under `pgbench -c 4 -S` or, with `--tpcb`, under
//! pgbench's TPC-B-like default script (goal at both: ≤ 3 % fewer TPS),
//! beside what pg_stat_statements costs the same server.
//!
//! TPS on a shared 2-vCPU machine moves by factors between rounds, so the
//! figure that decides is CPU per transaction, which does not depend on how
//! much of the machine the round got: the utime + stime of every process of
//! the server (the postmaster, its live children, and the backends that
//! ended in the round through the postmaster's cutime + cstime, read once
//! they have been reaped) and of pgbench (`/usr/bin/time`), divided by the
//! transactions pgbench made. At saturation TPS ∝ 1 / (CPU per
//! transaction), so the ratio of CPU per transaction with and without the
//! probes estimates the TPS loss. The uprobe traps, the socket tracepoints
//! and the BPF programs run in the backends, so they are in the backends'
//! stime; ttp's own userspace CPU (draining the records) is shown beside it
//! and added in the "with ttp's own CPU" ratio.
//!
//! Per round, in an order rotated from round to round, pgbench runs:
//! without any tracer; against a second cluster initialised with the same
//! data (`pgbench -i` at the same scale) and started with
//! pg_stat_statements preloaded (its extension created once), no tracer
//! running: its CPU is that cluster's server's, its ratio is to the
//! round's run on the first cluster; under the floor, bpftrace with uprobes
//! at `query__start` and `query__done` that only count their hits, so the
//! trap itself is measured apart from ttp's programs; under `statements`
//! (its default: boundaries at the client socket, kernel tracepoints, no
//! trap a statement); under `statements --usdt` (the boundaries at the USDT
//! probes with the executor pair, 4 traps a `-S` statement, and the
//! ledger); under `statements --usdt --simple-only` (the floor's two
//! sites); under empty tp_btf programs on `sock_recv_length` and
//! `sock_send_length` (xtask/floor/empty_socket.bpf.c: the floor of any
//! boundary at the socket, the tracepoints' dispatch at every socket read
//! and write of the machine); with delay accounting on and no tracer (the
//! socket default switches it on for its window); and, with
//! `--detail-all`, under `statements --detail all`.
//! Under `--tpcb` each round first does, outside its measurement, what
//! pgbench does before a run without `-n` (VACUUM of pgbench_branches and
//! pgbench_tellers, TRUNCATE of pgbench_history) on the round's cluster, so
//! that both clusters, which see different numbers of rounds, start each
//! round from the same state.
//! The rounds of the default (`socket`) run with `compute_query_id = on`
//! (set for the round and reset after it): the kernel sums the statements
//! only where the server computes query ids, as pg_stat_statements' cluster
//! does, so that computing them is charged to both.
//! Medians of the per-round ratios with their spread (lowest and highest
//! round), and ttp's default beside pg_stat_statements round by round; TPS
//! is printed too, for what it is worth on a busy machine.
use std::{
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};

use super::{
    floor::{Floor, Hook},
    pg::{Delayacct, Server, children, server_ticks, ticks_per_second},
    procs::{cpu_ticks, interrupt, median, start_tracer},
    uprobe_floor::UprobeFloor,
};
use crate::{setup, util};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Variant {
    Without = 0,
    /// pg_stat_statements preloaded, on the second cluster; no tracer.
    Pgss = 1,
    /// bpftrace counting hits at `query__start` and `query__done`.
    Floor = 2,
    /// `statements`: boundaries at the client socket (the default).
    Socket = 3,
    /// `statements --usdt`: boundaries at the USDT probes, the executor
    /// pair, the ledger.
    Usdt = 4,
    /// `statements --usdt --simple-only`: the same two sites as the floor.
    SimpleOnly = 5,
    /// `statements --detail all` (with `--detail-all` only).
    DetailAll = 6,
    /// Empty tp_btf programs on `sock_recv_length` and `sock_send_length`:
    /// the floor of boundaries at the socket.
    SocketFloor = 7,
    /// No tracer, delay accounting on (`kernel.task_delayacct = 1`, which
    /// the socket default switches on for its window).
    Delayacct = 8,
    /// `statements --each`: socket boundaries with a record a statement
    /// through the ring (the default before the kernel summed them).
    SocketEach = 9,
}

/// Variants a round can hold (the index of their figures).
const N: usize = 10;

/// The variants of every round, in the order rotated from round to round.
const VARIANTS: [Variant; 9] = [
    Variant::Without,
    Variant::Pgss,
    Variant::Floor,
    Variant::SocketFloor,
    Variant::Delayacct,
    Variant::Socket,
    Variant::SocketEach,
    Variant::Usdt,
    Variant::SimpleOnly,
];

/// `--only`'s values: every variant but the run without a tracer, by its
/// name in the per-round table.
impl clap::ValueEnum for Variant {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            Variant::Pgss,
            Variant::Floor,
            Variant::SocketFloor,
            Variant::Delayacct,
            Variant::Socket,
            Variant::SocketEach,
            Variant::Usdt,
            Variant::SimpleOnly,
            Variant::DetailAll,
        ]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.short()))
    }
}

impl Variant {
    /// Its name in the per-round table.
    fn short(self) -> &'static str {
        match self {
            Variant::Without => "none",
            Variant::Pgss => "pgss",
            Variant::Floor => "floor",
            Variant::Socket => "socket",
            Variant::SocketEach => "socket-each",
            Variant::Usdt => "usdt",
            Variant::SimpleOnly => "usdt-simple",
            Variant::DetailAll => "detail-all",
            Variant::SocketFloor => "sock-floor",
            Variant::Delayacct => "delayacct",
        }
    }

    /// Its name in the summary.
    fn label(self) -> &'static str {
        match self {
            Variant::Without => "no tracer (baseline)",
            Variant::Pgss => "pg_stat_statements (preloaded, second cluster with the same data)",
            Variant::Floor => "floor: bpftrace uprobes counting query__start/done hits",
            Variant::Socket => "ttp statements (socket boundaries, summed in the kernel, default)",
            Variant::SocketEach => {
                "ttp statements --each (socket boundaries, a record a statement)"
            }
            Variant::Usdt => {
                "ttp statements --usdt (USDT boundaries with the executor pair, ledger)"
            }
            Variant::SimpleOnly => "ttp statements --usdt --simple-only (query__start/done)",
            Variant::DetailAll => {
                "ttp statements --detail all (socket boundaries, every wait probe)"
            }
            Variant::SocketFloor => {
                "socket floor: empty tp_btf programs on sock_recv_length/sock_send_length"
            }
            Variant::Delayacct => "delay accounting on, no tracer",
        }
    }

    /// `ttp-ebpf statements`' flags, or `None` where ttp does not run.
    fn ttp_flags(self) -> Option<&'static [&'static str]> {
        match self {
            Variant::Without
            | Variant::Pgss
            | Variant::Floor
            | Variant::SocketFloor
            | Variant::Delayacct => None,
            Variant::Socket => Some(&[]),
            Variant::SocketEach => Some(&["--each"]),
            Variant::Usdt => Some(&["--usdt"]),
            Variant::SimpleOnly => Some(&["--usdt", "--simple-only"]),
            Variant::DetailAll => Some(&["--detail", "all"]),
        }
    }
}

/// What pgbench runs in every round.
#[derive(Clone, Copy)]
pub struct Load {
    /// pgbench's TPC-B-like default script instead of `-S`.
    pub tpcb: bool,
    pub seconds: u32,
    pub clients: u32,
}

impl Load {
    /// pgbench's arguments, without the connection's.
    pub(super) fn args(self) -> Vec<String> {
        let mut a = vec!["-n".to_string()];
        if !self.tpcb {
            a.push("-S".into());
        }
        a.extend([
            "-c".into(),
            self.clients.to_string(),
            "-T".into(),
            self.seconds.to_string(),
        ]);
        a
    }

    /// Statements a transaction: `-S` is one SELECT; the TPC-B-like
    /// script is BEGIN, three UPDATEs, a SELECT, an INSERT and END.
    pub(super) fn statements_per_tx(self) -> f64 {
        if self.tpcb { 7.0 } else { 1.0 }
    }
}

/// One pgbench round's figures.
#[derive(Default, Clone, Copy)]
pub(super) struct Round {
    tps: f64,
    pub(super) transactions: f64,
    /// Server + pgbench CPU, seconds.
    pub(super) cpu_s: f64,
    /// ttp's own userspace + kernel CPU over the round, seconds.
    pub(super) ttp_cpu_s: f64,
    /// Statements traced: ttp's count, or the transactions' for the floor;
    /// 0 where nothing traces.
    statements: f64,
    /// Uprobe hits, socket tracepoint runs in the backends.
    hits: f64,
    socket_events: f64,
    /// ns inside the program per uprobe hit (NaN where not measured).
    probe_ns: f64,
}

impl Round {
    pub(super) fn us_per_tx(&self) -> f64 {
        self.cpu_s * 1e6 / self.transactions
    }
    pub(super) fn us_per_tx_all(&self) -> f64 {
        (self.cpu_s + self.ttp_cpu_s) * 1e6 / self.transactions
    }
    fn hits_per_stmt(&self) -> f64 {
        self.hits / self.statements
    }
    fn socket_per_stmt(&self) -> f64 {
        self.socket_events / self.statements
    }
    /// Uprobe hits and socket tracepoint runs a transaction.
    fn events_per_tx(&self) -> f64 {
        (self.hits + self.socket_events) / self.transactions
    }
}

pub fn bench(rounds: u32, load: Load, detail_all: bool, only: &[Variant]) -> anyhow::Result<()> {
    let mut variants = VARIANTS.to_vec();
    if detail_all || only.contains(&Variant::DetailAll) {
        variants.push(Variant::DetailAll);
    }
    if !only.is_empty() {
        variants.retain(|v| *v == Variant::Without || only.contains(v));
    }
    setup::ensure_packages(
        &["postgresql", "time"],
        "the server, pgbench and pg_stat_statements",
    )?;
    setup::ensure_packages(&["bpftrace"], "bpftrace's bare uprobes are the floor")?;
    if !util::is_root() {
        bail!(
            "the statements benchmark loads uprobes: run it as root (sudo -E cargo xtask bench statements)"
        );
    }
    util::cargo(&["build", "--release", "-p", "ttp-user"])?;
    let ttp = util::target_dir().join("release/ttp-ebpf");
    let floor = Floor::build(Hook::Socket)?;
    let server = start_server("pg", "")?;
    let pgss = start_server("pg-pgss", "-c shared_preload_libraries=pg_stat_statements")
        .context("starting the second cluster, with pg_stat_statements preloaded")?;
    pgss.psql("postgres", "CREATE EXTENSION pg_stat_statements")?;
    let tools = Tools { ttp, floor };
    rounds_of(&server, &pgss, &tools, &variants, rounds, load)
}

/// What the rounds run beside pgbench.
struct Tools {
    ttp: std::path::PathBuf,
    /// The empty socket programs.
    floor: Floor,
}

fn rounds_of(
    server: &Server,
    pgss: &Server,
    tools: &Tools,
    variants: &[Variant],
    rounds: u32,
    load: Load,
) -> anyhow::Result<()> {
    let json = std::env::temp_dir().join(format!("ttp-bench-stmt-{}.json", std::process::id()));
    println!(
        "pgbench {} against two throw-away clusters (scale 2, shared_buffers 16MB, autovacuum off): postmaster {} without and under the tracers, postmaster {} with pg_stat_statements preloaded",
        load.args().join(" "),
        server.postmaster()?,
        pgss.postmaster()?
    );
    println!(
        "kernel.task_delayacct = {} before the rounds (ttp statements at the socket switches it on for its window, then restores it)",
        std::fs::read_to_string("/proc/sys/kernel/task_delayacct")
            .map_or_else(|_| "?".into(), |s| s.trim().to_string())
    );
    println!(
        "round  variant         TPS        tx    CPU s   µs/tx  ttp CPU s  hits/stmt  sock ev/stmt  in-BPF ns/hit"
    );
    let mut all: Vec<[Round; N]> = Vec::new();
    for r in 0..rounds as usize {
        let mut row = [Round::default(); N];
        for k in 0..variants.len() {
            let v = variants[(k + r) % variants.len()];
            let cluster = if v == Variant::Pgss { pgss } else { server };
            let x = one_round(cluster, tools, v, load, &json)?;
            println!(
                "{r:>5}  {:<11}  {:>6.0}  {:>8.0}  {:>7.2}  {:>6.2}  {:>9.2}  {:>9}  {:>12}  {:>13}",
                v.short(),
                x.tps,
                x.transactions,
                x.cpu_s,
                x.us_per_tx(),
                x.ttp_cpu_s,
                or_dash(x.hits_per_stmt(), 2),
                or_dash(x.socket_per_stmt(), 2),
                or_dash(x.probe_ns, 0)
            );
            row[v as usize] = x;
        }
        all.push(row);
    }
    let _ = std::fs::remove_file(&json);
    println!();
    let base = |r: &[Round; N]| r[Variant::Without as usize];
    let loss = |ratio: f64| (1.0 - 1.0 / ratio) * 100.0;
    for &v in variants.iter().filter(|&&v| v != Variant::Without) {
        let i = v as usize;
        let mut cpu: Vec<f64> = all
            .iter()
            .map(|r| r[i].us_per_tx() / base(r).us_per_tx())
            .collect();
        let mut tps: Vec<f64> = all.iter().map(|r| r[i].tps / base(r).tps).collect();
        let cpu_spread = with_spread(&mut cpu);
        let cpu_m = median(&mut cpu);
        let mut line = format!(
            "{}: CPU per transaction {cpu_spread} (estimated TPS loss at saturation {:.1} %",
            v.label(),
            loss(cpu_m)
        );
        if v.ttp_flags().is_some() {
            let mut cpu_all: Vec<f64> = all
                .iter()
                .map(|r| r[i].us_per_tx_all() / base(r).us_per_tx())
                .collect();
            let cpu_all_spread = with_spread(&mut cpu_all);
            let cpu_all_m = median(&mut cpu_all);
            line += &format!(
                "; with ttp's own CPU {cpu_all_spread}, {:.1} %",
                loss(cpu_all_m)
            );
        }
        line += &format!("), TPS ratio ×{:.3}", median(&mut tps));
        if v.ttp_flags().is_some() || v == Variant::Floor {
            let mut hits: Vec<f64> = all.iter().map(|r| r[i].hits_per_stmt()).collect();
            let mut sock: Vec<f64> = all.iter().map(|r| r[i].socket_per_stmt()).collect();
            let mut in_bpf: Vec<f64> = all.iter().map(|r| r[i].probe_ns).collect();
            // End-to-end cost of one event (a uprobe hit or a socket
            // tracepoint run): the extra CPU per transaction over the
            // events per transaction.
            let mut per_event: Vec<f64> = all
                .iter()
                .map(|r| (r[i].us_per_tx() - base(r).us_per_tx()) * 1e3 / r[i].events_per_tx())
                .collect();
            line += &format!(
                ", {:.2} uprobe hits and {:.2} socket events per statement, {:.0} ns per event end to end ({} ns inside the program per hit)",
                median(&mut hits),
                median(&mut sock),
                median(&mut per_event),
                or_dash(median(&mut in_bpf), 0),
            );
        }
        println!("{line}; medians of {rounds} rounds");
    }
    // The comparison: ttp's default (the server's CPU and ttp's
    // own) against pg_stat_statements, round by round.
    if variants.contains(&Variant::Socket) && variants.contains(&Variant::Pgss) {
        let (s, p) = (Variant::Socket as usize, Variant::Pgss as usize);
        let mut diff: Vec<f64> = all
            .iter()
            .map(|r| (r[s].us_per_tx_all() - r[p].us_per_tx()) / base(r).us_per_tx())
            .collect();
        let below = diff.iter().filter(|d| **d <= 0.0).count();
        let m = median(&mut diff);
        println!(
            "ttp statements (sums, with its own CPU) − pg_stat_statements, CPU per transaction over the baseline's: median {:+.4} (rounds {:+.4} to {:+.4}); ttp at or below pg_stat_statements in {below} of {rounds} rounds",
            m,
            diff[0],
            diff[diff.len() - 1]
        );
    }
    println!(
        "command: sudo -E cargo xtask bench statements --rounds {rounds} --seconds {} --clients {}{}{}{}",
        load.seconds,
        load.clients,
        if load.tpcb { " --tpcb" } else { "" },
        if variants.contains(&Variant::DetailAll) {
            " --detail-all"
        } else {
            ""
        },
        if VARIANTS.iter().all(|v| variants.contains(v)) {
            String::new()
        } else {
            let names: Vec<_> = variants[1..].iter().map(|v| v.short()).collect();
            format!(" --only {}", names.join(","))
        }
    );
    Ok(())
}

fn one_round(
    server: &Server,
    tools: &Tools,
    v: Variant,
    load: Load,
    json: &Path,
) -> anyhow::Result<Round> {
    if load.tpcb {
        tpcb_reset(server)?;
    }
    let pm = server.postmaster()?;
    let floor = if v == Variant::Floor {
        Some(UprobeFloor::start(&server.bin.join("postgres"))?)
    } else {
        None
    };
    let socket_floor = if v == Variant::SocketFloor {
        Some(tools.floor.start(false, None)?)
    } else {
        None
    };
    let delayacct = if v == Variant::Delayacct {
        Some(Delayacct::on()?)
    } else {
        None
    };
    // The sums need the server's query ids (without them `statements`
    // sends a record a statement): the rounds of the default compute them,
    // as pg_stat_statements' cluster does, so that their cost is ttp's.
    let query_ids = QueryIds::set(server, v == Variant::Socket)?;
    let tracer = match v.ttp_flags() {
        None => None,
        Some(flags) => {
            let _ = std::fs::remove_file(json);
            let mut cmd = Command::new(&tools.ttp);
            cmd.args(["statements", "--pid", &pm.to_string(), "--json"])
                .arg(json)
                .args(["--top", "1"])
                .args(flags);
            Some(start_tracer(cmd, "measuring")?)
        }
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
        .args(load.args())
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
        probe_ns: f64::NAN,
        ..Round::default()
    };
    let expected = r.transactions * load.statements_per_tx();
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
        if c["counters_unread"].as_u64().unwrap_or(0) > 0 {
            bail!("the programs' counters were not read (their counts are null): {c}");
        }
        if c["records_lost"].as_u64().unwrap_or(0) > 0 {
            bail!("statements lost records: {c}");
        }
        if stmts < expected {
            bail!(
                "statements recorded {stmts} statements of {} transactions ({expected} statements)",
                r.transactions
            );
        }
        if v == Variant::Socket && c["keys"].is_null() {
            bail!("the default's round was not summed in the kernel (no keys): {c}");
        }
        r.statements = stmts;
        r.hits = c["hits"].as_f64().unwrap_or(0.0);
        r.socket_events = c["socket_events"].as_f64().unwrap_or(0.0);
        if r.hits > 0.0 {
            r.probe_ns = c["mean_probe_ns"].as_f64().unwrap_or(f64::NAN);
        }
    }
    if let Some(t) = socket_floor {
        t.stop()?;
        r.statements = expected;
    }
    drop(delayacct);
    drop(query_ids);
    if let Some(f) = floor {
        let hits = f.stop()?;
        if hits < 2.0 * expected {
            bail!(
                "the floor's uprobes counted {hits} hits for {} transactions ({expected} statements)",
                r.transactions
            );
        }
        r.statements = expected;
        r.hits = hits;
    }
    // Let the uprobes' detach finish before the next round.
    std::thread::sleep(Duration::from_millis(500));
    Ok(r)
}

/// `compute_query_id = on` on a cluster for one round, set back to its
/// default when dropped.
struct QueryIds<'a>(Option<&'a Server>);

impl<'a> QueryIds<'a> {
    fn set(server: &'a Server, on: bool) -> anyhow::Result<Self> {
        if !on {
            return Ok(Self(None));
        }
        server.psql("postgres", "ALTER SYSTEM SET compute_query_id = on")?;
        server.psql("postgres", "SELECT pg_reload_conf()")?;
        // The postmaster takes the reload asynchronously; `statements`
        // reads its setting at attach.
        std::thread::sleep(Duration::from_millis(300));
        Ok(Self(Some(server)))
    }
}

impl Drop for QueryIds<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.0 {
            let _ = s.psql("postgres", "ALTER SYSTEM RESET compute_query_id");
            let _ = s.psql("postgres", "SELECT pg_reload_conf()");
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

/// The median of `v` and its spread over the rounds: `×median
/// (×min–×max)`.
fn with_spread(v: &mut [f64]) -> String {
    let m = median(v);
    format!("×{m:.4} (rounds ×{:.4}–×{:.4})", v[0], v[v.len() - 1])
}

/// `x` with `decimals` decimals, or "—" where not measured (no statements
/// traced; the floor and the socket boundaries have no program statistics
/// of their own).
fn or_dash(x: f64, decimals: usize) -> String {
    if x.is_finite() {
        format!("{x:.decimals$}")
    } else {
        "—".into()
    }
}

pub(super) fn field(text: &str, key: &str) -> anyhow::Result<f64> {
    text.lines()
        .find_map(|l| l.split(key).nth(1))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no '{key}' in pgbench's output: {text}"))
}

/// What pgbench does before a TPC-B-like run without -n, kept out of the
/// measurement.
pub(super) fn tpcb_reset(server: &Server) -> anyhow::Result<()> {
    for sql in [
        "VACUUM pgbench_branches",
        "VACUUM pgbench_tellers",
        "TRUNCATE pgbench_history",
    ] {
        server.psql("postgres", sql)?;
    }
    Ok(())
}

/// One of the bench's clusters: a small shared_buffers (the pgbench table
/// at scale 2 outgrows it) and no autovacuum, plus `settings`, with
/// pgbench's tables.
pub(super) fn start_server(name: &str, settings: &str) -> anyhow::Result<Server> {
    let s = Server::start(
        name,
        &format!("-c shared_buffers=16MB -c autovacuum=off {settings}"),
    )?;
    let mut init = Command::new(s.bin.join("pgbench"));
    init.args(["-i", "-q", "-s", "2"]).args(s.connect_args());
    util::status(&mut init)?;
    Ok(s)
}

impl Server {
    pub(super) fn connect_args(&self) -> Vec<String> {
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
