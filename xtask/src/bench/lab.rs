//! `bench lab`: the lab's queue under load. For each N (default 1, 8 and
//! 64), a fresh database on one throw-away local PostgreSQL server gets
//! `lab init` and a queue benchmark of 2 000 tasks (`lab submit` of a
//! spec with `no_run = true`, the only tasks a no-run worker claims), and N
//! `ttp-ebpf lab worker --once --no-run` processes (the release build)
//! work through it. `--no-run` is the worker's trivial executor: each task
//! is claimed, and finished with a one-field result, through the worker's
//! own loop and lab/queue.rs's claim and finish, without starting `run`
//! (whose eBPF loading, not the queue, would be timed otherwise). Printed
//! per N: claims per second (tasks ÷ the lab server's time from the first
//! claim to the last finish), the wall time, percentiles of the claim's
//! round trip as each worker timed it, and the load average beside them;
//! and, checked with SQL on the lab, that every task was done exactly once.
use std::{
    fmt::Write as _,
    path::Path,
    process::{Command, Stdio},
    time::Instant,
};

use anyhow::{Context, bail, ensure};

use super::pg::Server;
use crate::util;

const TASKS: usize = 2000;
const LABEL: &str = "bench";

/// `ttp-ebpf ARGS`, failing with its standard error.
fn ttp(ttp: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(ttp).args(args).stdin(Stdio::null()).output()?;
    if !out.status.success() {
        bail!(
            "ttp-ebpf {}: {}",
            args.first().copied().unwrap_or(""),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A queue benchmark of `TASKS` commands on one host label: `no_run =
/// true`, the marker without which a `--no-run` worker claims nothing
/// (docs/lab.md, "No-run experiments"); it never starts the commands, so
/// they only have to be valid.
fn spec(name: &str) -> String {
    let mut s = format!("name = \"{name}\"\nno_run = true\nhosts = [\"{LABEL}\"]\n");
    for i in 0..TASKS {
        let _ = write!(
            s,
            "[[command]]\nname = \"t{i:04}\"\nargv = [\"/bin/true\"]\nn = 1\n"
        );
    }
    s
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The nearest-rank percentile `p` (0–100) of sorted `v`.
fn percentile(v: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// One worker's `ttp.lab-worker/1` summary.
struct Summary {
    worker: String,
    done: u64,
    claims_s: Vec<f64>,
}

fn summary(stdout: &str) -> anyhow::Result<Summary> {
    let doc: serde_json::Value = serde_json::from_str(stdout.trim())
        .with_context(|| format!("worker summary {stdout:?}"))?;
    let claims_s = doc["claim_latencies_s"]
        .as_array()
        .context("no claim_latencies_s in the worker's summary")?
        .iter()
        .filter_map(|v| v.as_f64())
        .collect();
    Ok(Summary {
        worker: doc["worker"].as_str().unwrap_or_default().to_string(),
        done: doc["done"].as_u64().context("no done in the summary")?,
        claims_s,
    })
}

pub fn bench(workers: &[usize]) -> anyhow::Result<()> {
    ensure!(
        util::is_root(),
        "bench lab runs `lab worker`, which needs root (as `run`): run it with sudo"
    );
    util::cargo(&["build", "--release", "-p", "ttp-user"])?;
    let bin = util::target_dir().join("release/ttp-ebpf");
    let max = workers.iter().copied().max().unwrap_or(1);
    // The server's own defaults (fsync, synchronous_commit on: every claim
    // and finish waits for its WAL flush, as on a real lab), except enough
    // connections for every worker.
    let server = Server::start("lab", &format!("-c max_connections={}", max + 20))?;
    println!(
        "command: cargo xtask bench lab --workers {}",
        workers
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    println!(
        "lab: a local PostgreSQL server ({}), Unix socket, server defaults; {TASKS} tasks per run, each N on a fresh database",
        server.bin.display()
    );
    for &n in workers {
        run_one(&server, &bin, n)?;
    }
    Ok(())
}

fn run_one(server: &Server, bin: &Path, n: usize) -> anyhow::Result<()> {
    let db = format!("lab{n}");
    server.psql("postgres", &format!("CREATE DATABASE {db}"))?;
    let url = server.url(&db);
    ttp(bin, &["lab", "init", "--lab", &url])?;
    let name = format!("bench{n}");
    let spec_path = server.dir.join(format!("{name}.toml"));
    std::fs::write(&spec_path, spec(&name))?;
    ttp(
        bin,
        &[
            "lab",
            "submit",
            &spec_path.display().to_string(),
            "--lab",
            &url,
        ],
    )?;
    let load_before = loadavg();
    let t0 = Instant::now();
    let mut children = Vec::with_capacity(n);
    for k in 0..n {
        let log = std::fs::File::create(server.dir.join(format!("{name}-w{k}.log")))?;
        let child = Command::new(bin)
            .args(["lab", "worker", "--lab", &url, "--host-label", LABEL])
            .args(["--once", "--no-run", "--json", "--worker-name"])
            .arg(format!("w{k}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .context("starting a lab worker")?;
        children.push(child);
    }
    let mut sums = Vec::with_capacity(n);
    for (k, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output()?;
        if !out.status.success() {
            let log = std::fs::read_to_string(server.dir.join(format!("{name}-w{k}.log")))
                .unwrap_or_default();
            bail!(
                "worker w{k} failed ({}): {}",
                out.status,
                log.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
            );
        }
        sums.push(summary(&String::from_utf8_lossy(&out.stdout))?);
    }
    let wall_s = t0.elapsed().as_secs_f64();
    let load_after = loadavg();

    // Every task done exactly once: each claimed once (attempt 1), done,
    // with one result written by the worker that holds it in that
    // attempt, no takeover; and each worker's own count of its tasks is
    // the lab's.
    let row = server.psql(
        &db,
        "SELECT count(*), count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE attempts = 1), \
           (SELECT count(*) FROM ttp_lab_qc_results), (SELECT count(DISTINCT task_id) FROM ttp_lab_qc_results), \
           (SELECT count(*) FROM ttp_lab_qc_results r JOIN ttp_lab_tasks t \
              ON t.id = r.task_id AND t.attempts = r.attempt AND t.claimed_by = r.worker), \
           (SELECT count(*) FROM ttp_lab_takeovers), \
           extract(epoch FROM max(finished_at) - min(started_at))::float8 \
         FROM ttp_lab_tasks",
    )?;
    let f: Vec<&str> = row.split_whitespace().collect();
    ensure!(f.len() == 8, "unexpected check row {row:?}");
    let count = |i: usize| f[i].parse::<usize>().unwrap_or(usize::MAX);
    let want = [TASKS, TASKS, TASKS, TASKS, TASKS, TASKS, 0];
    let got: Vec<usize> = (0..7).map(count).collect();
    ensure!(
        got == want,
        "N={n}: not every task done exactly once: tasks, done, claimed once, results, distinct tasks in results, results of the holding attempt, takeovers = {got:?}, want {want:?}"
    );
    let per_worker = server.psql(
        &db,
        "SELECT worker, count(*) FROM ttp_lab_qc_results GROUP BY worker",
    )?;
    let lab_counts: std::collections::BTreeMap<String, u64> = per_worker
        .lines()
        .filter_map(|l| {
            let (w, c) = l.split_once(' ')?;
            Some((w.to_string(), c.parse().ok()?))
        })
        .collect();
    for s in &sums {
        let lab = lab_counts.get(&s.worker).copied().unwrap_or(0);
        ensure!(
            lab == s.done && s.claims_s.len() as u64 == s.done,
            "worker {}: says {} done and timed {} claims, the lab has {lab} results of it",
            s.worker,
            s.done,
            s.claims_s.len()
        );
    }
    let span_s: f64 = f[7].parse().context("first claim to last finish")?;
    let mut lat: Vec<f64> = sums
        .iter()
        .flat_map(|s| s.claims_s.iter().copied())
        .collect();
    lat.sort_by(f64::total_cmp);
    let ms = |p: f64| percentile(&lat, p) * 1e3;
    let (lo, hi) = sums.iter().fold((u64::MAX, 0), |(lo, hi), s| {
        (lo.min(s.done), hi.max(s.done))
    });
    println!(
        "N={n:>2}: {TASKS} tasks, first claim to last finish {span_s:.2} s = {:.0} claims/s (wall, workers started to all ended: {wall_s:.2} s); \
         claim round trip p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms; tasks per worker {lo}..{hi}; \
         every task done exactly once (SQL); load average before {load_before}, after {load_after}",
        TASKS as f64 / span_s,
        ms(50.0),
        ms(90.0),
        ms(99.0),
        ms(100.0),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches an off-by-one in the nearest-rank percentile.
    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 5.0);
        assert_eq!(percentile(&v, 90.0), 9.0);
        assert_eq!(percentile(&v, 99.0), 10.0);
        assert_eq!(percentile(&v, 100.0), 10.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
    }

    #[test]
    fn the_spec_has_every_task() {
        let s = spec("b");
        assert_eq!(s.matches("[[command]]").count(), TASKS);
        assert!(s.contains("name = \"t1999\""));
        assert!(
            s.contains("\nno_run = true\n"),
            "a --no-run worker claims nothing else"
        );
    }
}
