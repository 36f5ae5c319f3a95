//! `bench serve --duration D`: `ttp-ebpf serve --group-by unit --interval
//! 10s` (the release build) scraped every 10 s over HTTP, as Prometheus
//! would, for D. Prints its userspace CPU use from ready to the end (the
//! utime and stime of the whole process, every thread) as a share of one
//! core, its peak resident memory (VmHWM) and its last VmRSS, and the size
//! of a scrape: the figures docs/benchmarks.md records.
use std::{
    io::{Read, Write},
    net::TcpStream,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::Context;

use super::{
    pg,
    procs::{Tracer, cpu_ticks, start_tracer},
};
use crate::util;

/// One `GET /metrics` as Prometheus sends it; returns the body's size and
/// its sample lines.
fn scrape(port: u16) -> anyhow::Result<(usize, usize)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).context("connecting to serve")?;
    s.write_all(
        b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/openmetrics-text;version=1.0.0\r\nConnection: close\r\n\r\n",
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let body = text.split_once("\r\n\r\n").map_or("", |b| b.1);
    let samples = body.lines().filter(|l| !l.starts_with('#')).count();
    Ok((body.len(), samples))
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A `/proc/PID/status` field in KiB (0 when unreadable).
pub(super) fn vm_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

pub fn bench(duration: Duration) -> anyhow::Result<()> {
    util::cargo(&["build", "--release", "-p", "ttp-user"])?;
    let ttp = util::target_dir().join("release/ttp-ebpf");
    let port = free_port()?;
    let listen = format!("127.0.0.1:{port}");
    let mut cmd = Command::new(&ttp);
    cmd.args([
        "serve",
        "--group-by",
        "unit",
        "--interval",
        "10s",
        "--listen",
        &listen,
    ]);
    let tracer: Tracer = start_tracer(cmd, "serving the ledger")?;
    let pid = tracer.child.id();
    let t0 = Instant::now();
    let mut scrapes = 0u32;
    let mut last = (0, 0);
    while t0.elapsed() < duration {
        std::thread::sleep(Duration::from_secs(10));
        last = scrape(port)?;
        scrapes += 1;
    }
    let wall = t0.elapsed().as_secs_f64();
    let rss_kib = vm_kib(pid, "VmRSS:");
    let ticks_now = cpu_ticks(pid);
    let user_hz = 100.0;
    let cpu_s = ticks_now.saturating_sub(tracer.ticks_at_ready) as f64 / user_hz;
    let (hwm_kib, _) = tracer.stop()?;
    println!("command: ttp-ebpf serve --group-by unit --interval 10s, scraped every 10 s");
    println!("duration: {wall:.0} s, {scrapes} scrapes");
    println!(
        "userspace CPU from ready: {cpu_s:.2} s = {:.3} % of one core",
        100.0 * cpu_s / wall
    );
    println!(
        "peak RSS (VmHWM): {:.1} MiB; RSS at the end: {:.1} MiB",
        hwm_kib as f64 / 1024.0,
        rss_kib as f64 / 1024.0
    );
    println!("last scrape: {} bytes, {} samples", last.0, last.1);
    Ok(())
}

/// One variant of `bench serve --postgres`: serve's arguments beside the
/// listen address, `None` for no serve.
const PG_VARIANTS: [(&str, Option<&[&str]>); 3] = [
    ("no serve", None),
    ("serve", Some(&["--group-by", "unit", "--interval", "10s"])),
    (
        "serve --postgres",
        Some(&["--group-by", "unit", "--interval", "10s", "--postgres"]),
    ),
];

/// What one variant of one round measured.
struct PgRound {
    tps: f64,
    /// serve's userspace CPU from ready to the end, % of one core.
    cpu_pct: Option<f64>,
    hwm_mib: Option<f64>,
    samples: Option<usize>,
    /// serve's CPU from ready to the end over pgbench's transactions
    /// (statements: -S is one a transaction), ns.
    ns_per_statement: Option<f64>,
}

/// `bench serve --postgres`: see the variant's help. pgbench runs for
/// `duration` in every variant; serve is scraped every 10 s meanwhile.
pub fn bench_postgres(duration: Duration, rounds: u32) -> anyhow::Result<()> {
    util::cargo(&["build", "--release", "-p", "ttp-user"])?;
    let ttp = util::target_dir().join("release/ttp-ebpf");
    // Query ids computed: serve reads the kernel's sums (without them it
    // takes a record a statement; docs/serve.md).
    let server = pg::Server::start(
        "serve",
        "-c shared_buffers=16MB -c autovacuum=off -c compute_query_id=on",
    )?;
    let data = server.data.display().to_string();
    let mut init = Command::new(server.bin.join("pgbench"));
    init.args(["-i", "-q", "-s", "2", "-d", &server.url("postgres")]);
    util::status(&mut init)?;
    let mut table: Vec<Vec<PgRound>> = (0..PG_VARIANTS.len()).map(|_| Vec::new()).collect();
    for round in 0..rounds {
        // Rotated: each variant runs first in some round.
        for k in 0..PG_VARIANTS.len() {
            let i = (k + round as usize) % PG_VARIANTS.len();
            let (name, args) = PG_VARIANTS[i];
            eprintln!("round {}/{rounds}: {name}", round + 1);
            table[i].push(pg_round(&ttp, &server, &data, args, duration)?);
        }
    }
    println!(
        "bench serve --postgres: pgbench -n -S -c 4 -T {} on a throw-away server (scale 2), serve scraped every 10 s; {rounds} rounds, variants rotated",
        duration.as_secs()
    );
    println!(
        "| variant | TPS per round | serve CPU, % of one core | serve CPU a statement, ns | serve peak RSS, MiB | samples a scrape |"
    );
    println!("|---|---|---|---|---|---|");
    for (i, (name, _)) in PG_VARIANTS.iter().enumerate() {
        let col =
            |f: &dyn Fn(&PgRound) -> String| table[i].iter().map(f).collect::<Vec<_>>().join(" / ");
        let opt = |v: Option<f64>, d: usize| v.map_or("—".into(), |v| format!("{v:.d$}"));
        println!(
            "| {name} | {} | {} | {} | {} | {} |",
            col(&|r| format!("{:.0}", r.tps)),
            col(&|r| opt(r.cpu_pct, 3)),
            col(&|r| opt(r.ns_per_statement, 1)),
            col(&|r| opt(r.hwm_mib, 1)),
            col(&|r| r.samples.map_or("—".into(), |n| n.to_string())),
        );
    }
    Ok(())
}

fn pg_round(
    ttp: &std::path::Path,
    server: &pg::Server,
    data: &str,
    args: Option<&[&str]>,
    duration: Duration,
) -> anyhow::Result<PgRound> {
    let port = free_port()?;
    let tracer = match args {
        Some(a) => {
            let listen = format!("127.0.0.1:{port}");
            let mut cmd = Command::new(ttp);
            cmd.arg("serve").args(a);
            if a.contains(&"--postgres") {
                cmd.arg(data);
            }
            cmd.args(["--listen", &listen]);
            Some(start_tracer(cmd, "serving the ledger")?)
        }
        None => None,
    };
    let t0 = Instant::now();
    let mut bench = Command::new(server.bin.join("pgbench"))
        .args([
            "-n",
            "-S",
            "-c",
            "4",
            "-T",
            &duration.as_secs().to_string(),
            "-d",
        ])
        .arg(server.url("postgres"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("pgbench")?;
    let mut samples = None;
    while bench.try_wait()?.is_none() {
        std::thread::sleep(Duration::from_secs(10));
        if tracer.is_some() && bench.try_wait()?.is_none() {
            samples = Some(scrape(port)?.1);
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    let mut out = String::new();
    bench
        .stdout
        .take()
        .context("pgbench stdout")?
        .read_to_string(&mut out)?;
    let tps = out
        .lines()
        .find(|l| l.starts_with("tps = "))
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no tps in pgbench's output: {out}"))?;
    let transactions: f64 = out
        .lines()
        .find_map(|l| l.strip_prefix("number of transactions actually processed: "))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no transactions in pgbench's output: {out}"))?;
    let (cpu_pct, hwm_mib, ns_per_statement) = match tracer {
        Some(t) => {
            let (hwm_kib, ticks) = t.stop()?;
            let cpu_s = ticks as f64 / 100.0;
            (
                Some(100.0 * cpu_s / wall),
                Some(hwm_kib as f64 / 1024.0),
                Some(cpu_s * 1e9 / transactions.max(1.0)),
            )
        }
        None => (None, None, None),
    };
    Ok(PgRound {
        tps,
        cpu_pct,
        hwm_mib,
        samples,
        ns_per_statement,
    })
}
