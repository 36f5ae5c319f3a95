//! `cargo xtask bench statements --paired`: the cost of a tracer measured
//! on two clusters loaded at the same time, so that the machine's noise
//! falls on both sides of the ratio alike.
//!
//! On this shared VM the CPU a transaction takes moves by ±10–20 % from one
//! round to the next (steal, other guests), several times the few percent
//! that decide between the tracers, when the variants take turns
//! (statements.rs). Here each round runs pgbench against two clusters with
//! the same data at once, one with the variant and one without, and the
//! figure is the ratio of their CPU per transaction within that round.
//! Two plain clusters and one with pg_stat_statements preloaded serve
//! the pairs:
//!
//! - `a/a`: two plain clusters, nothing traced: what the method itself
//!   reads when there is nothing to find (its bias and spread);
//! - `pgss`: the pg_stat_statements cluster against a plain one;
//! - `socket`: `statements` attached to one plain cluster, the other plain
//!   one beside it. The other cluster's backends pass through the same
//!   socket tracepoints and return at the filter, so this ratio is ttp's
//!   cost above the socket floor; the floor itself is the sequential
//!   rounds' `sock-floor` and the empty programs' run cost.
//!
//! The plain clusters swap roles from round to round, so that whatever
//! differs between two clusters (where their files and buffers lie) falls
//! on both sides of the ratio over the rounds; the pairs' order rotates.
use std::{
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};

use super::{
    pg::{Server, children, server_ticks, ticks_per_second},
    procs::{cpu_ticks, interrupt, median, start_tracer},
    statements::{Load, Round, start_server, tpcb_reset},
};
use crate::util;

/// The pairs of a round.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pair {
    AA,
    Pgss,
    Socket,
}

impl Pair {
    fn short(self) -> &'static str {
        match self {
            Pair::AA => "a/a",
            Pair::Pgss => "pgss",
            Pair::Socket => "socket",
        }
    }
    fn label(self) -> &'static str {
        match self {
            Pair::AA => "a/a: two plain clusters, nothing traced (the method's own reading)",
            Pair::Pgss => "pg_stat_statements preloaded, against a plain cluster at the same time",
            Pair::Socket => {
                "ttp statements (default) on one plain cluster, against another at the same time (above the socket floor)"
            }
        }
    }
}

const PAIRS: [Pair; 3] = [Pair::AA, Pair::Pgss, Pair::Socket];

pub fn bench(rounds: u32, load: Load) -> anyhow::Result<()> {
    if !util::is_root() {
        bail!(
            "the paired statements benchmark loads eBPF: run it as root (sudo -E cargo xtask bench statements --paired)"
        );
    }
    util::cargo(&["build", "--release", "-p", "ttp-user"])?;
    let ttp = util::target_dir().join("release/ttp-ebpf");
    let plain = [start_server("pp1", "")?, start_server("pp2", "")?];
    let pgss = start_server("pp-pgss", "-c shared_preload_libraries=pg_stat_statements")
        .context("starting the cluster with pg_stat_statements preloaded")?;
    pgss.psql("postgres", "CREATE EXTENSION pg_stat_statements")?;
    let json = std::env::temp_dir().join(format!("ttp-bench-paired-{}.json", std::process::id()));
    println!(
        "pgbench {} against two clusters at once in every pair (scale 2, shared_buffers 16MB, autovacuum off)",
        load.args().join(" ")
    );
    println!(
        "round  pair     with µs/tx  without µs/tx  ratio  with ttp's CPU   tx with   tx without"
    );
    let mut ratios: Vec<Vec<(f64, f64)>> = vec![Vec::new(); PAIRS.len()];
    for r in 0..rounds as usize {
        for k in 0..PAIRS.len() {
            let pair = PAIRS[(k + r) % PAIRS.len()];
            // Plain clusters swap roles every round.
            let (p, q) = (&plain[r % 2], &plain[(r + 1) % 2]);
            let (with, without, traced) = match pair {
                Pair::AA => (p, q, false),
                Pair::Pgss => (&pgss, p, false),
                Pair::Socket => (p, q, true),
            };
            let (w, wo) = round(with, without, traced.then_some(ttp.as_path()), load, &json)?;
            let ratio = w.us_per_tx() / wo.us_per_tx();
            let ratio_all = w.us_per_tx_all() / wo.us_per_tx();
            println!(
                "{r:>5}  {:<7}  {:>10.2}  {:>13.2}  {ratio:>5.3}  {ratio_all:>14.3}  {:>7.0}  {:>10.0}",
                pair.short(),
                w.us_per_tx(),
                wo.us_per_tx(),
                w.transactions,
                wo.transactions
            );
            ratios[pair as usize].push((ratio, ratio_all));
        }
    }
    let _ = std::fs::remove_file(&json);
    println!();
    for pair in PAIRS {
        let v = &ratios[pair as usize];
        let mut a: Vec<f64> = v.iter().map(|x| x.0).collect();
        let mut b: Vec<f64> = v.iter().map(|x| x.1).collect();
        let (lo, hi) = a
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), x| (l.min(*x), h.max(*x)));
        let mut line = format!(
            "{}: CPU per transaction ×{:.4} (rounds {lo:.3}–{hi:.3})",
            pair.label(),
            median(&mut a)
        );
        if pair == Pair::Socket {
            line += &format!(", with ttp's own CPU ×{:.4}", median(&mut b));
        }
        println!("{line}; medians of {rounds} rounds");
    }
    println!(
        "command: sudo -E cargo xtask bench statements --paired --rounds {rounds} --seconds {} --clients {}{}",
        load.seconds,
        load.clients,
        if load.tpcb { " --tpcb" } else { "" }
    );
    Ok(())
}

/// pgbench against `with` and `without` at once, `ttp statements` attached
/// to `with` where given; each side's CPU per transaction.
fn round(
    with: &Server,
    without: &Server,
    ttp: Option<&Path>,
    load: Load,
    json: &Path,
) -> anyhow::Result<(Round, Round)> {
    if load.tpcb {
        tpcb_reset(with)?;
        tpcb_reset(without)?;
    }
    let (pm_w, pm_wo) = (with.postmaster()?, without.postmaster()?);
    let tracer = match ttp {
        None => None,
        Some(ttp) => {
            let _ = std::fs::remove_file(json);
            let mut cmd = Command::new(ttp);
            cmd.args(["statements", "--pid", &pm_w.to_string(), "--json"])
                .arg(json)
                .args(["--top", "1"]);
            Some(start_tracer(cmd, "measuring")?)
        }
    };
    std::thread::sleep(Duration::from_millis(300));
    let kids = (children(pm_w).len(), children(pm_wo).len());
    let s0 = (server_ticks(pm_w), server_ticks(pm_wo));
    let t0 = tracer.as_ref().map_or(0, |t| cpu_ticks(t.child.id()));
    let tag = std::process::id();
    let time_w = std::env::temp_dir().join(format!("ttp-bench-paired-time-w-{tag}"));
    let time_wo = std::env::temp_dir().join(format!("ttp-bench-paired-time-wo-{tag}"));
    let a = pgbench(with, load, &time_w)?;
    let b = pgbench(without, load, &time_wo)?;
    let (out_w, out_wo) = (a.wait_with_output()?, b.wait_with_output()?);
    let deadline = Instant::now() + Duration::from_secs(10);
    while (children(pm_w).len() > kids.0 || children(pm_wo).len() > kids.1)
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let s1 = (server_ticks(pm_w), server_ticks(pm_wo));
    let t1 = tracer.as_ref().map_or(0, |t| cpu_ticks(t.child.id()));
    let tick = ticks_per_second();
    let side = |out: &std::process::Output, time: &Path, ds: u64| -> anyhow::Result<Round> {
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            bail!(
                "pgbench failed: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let pgbench_cpu: f64 = std::fs::read_to_string(time)
            .context("reading /usr/bin/time's output")?
            .split_whitespace()
            .filter_map(|v| v.parse::<f64>().ok())
            .sum();
        let _ = std::fs::remove_file(time);
        let mut r = Round::default();
        r.cpu_s = ds as f64 / tick + pgbench_cpu;
        r.transactions =
            super::statements::field(&text, "number of transactions actually processed: ")?;
        Ok(r)
    };
    let mut w = side(&out_w, &time_w, s1.0 - s0.0)?;
    let wo = side(&out_wo, &time_wo, s1.1 - s0.1)?;
    w.ttp_cpu_s = t1.saturating_sub(t0) as f64 / tick;
    if let Some(t) = tracer {
        let mut child = t.child;
        interrupt(&mut child)?;
        if !child.wait()?.success() {
            bail!("ttp-ebpf statements failed");
        }
        let doc: serde_json::Value = serde_json::from_slice(
            &std::fs::read(json).context("ttp-ebpf statements wrote no JSON")?,
        )?;
        let expected = w.transactions * load.statements_per_tx();
        if doc["counts"]["counters_unread"].as_u64().unwrap_or(0) > 0 {
            bail!("the programs' counters were not read: {}", doc["counts"]);
        }
        let lost = doc["counts"]["records_lost"].as_u64().unwrap_or(0);
        let seen = doc["statements"].as_f64().unwrap_or(0.0);
        if lost > 0 || seen < expected {
            bail!("statements recorded {seen} of {expected} statements, {lost} records lost");
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    Ok((w, wo))
}

/// pgbench against `server` under /usr/bin/time, started, not waited for.
fn pgbench(server: &Server, load: Load, time: &Path) -> anyhow::Result<Child> {
    Command::new("/usr/bin/time")
        .arg("-o")
        .arg(time)
        .args(["-f", "%U %S"])
        .arg(server.bin.join("pgbench"))
        .args(load.args())
        .args(server.connect_args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting pgbench")
}
