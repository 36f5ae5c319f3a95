//! `bench soak --duration D`: `ttp-ebpf attach --all --interval 1s` for D,
//! sampled every `--every` seconds from outside: its resident memory
//! (VmRSS), the CPU it used since the previous sample (utime + stime), the
//! entries of its thread-account map (`bpftool map dump` of its own
//! `THREADS` map, found through its /proc/PID/fdinfo) beside the machine's
//! thread count (/proc/loadavg). Writes target/soak/soak.csv and soak.svg
//! (the project's chart legend, ttp-user/src/report/chart.rs) and prints
//! the figures docs/benchmarks.md records, with the losses attach reported.
//!
//! Beside it, `--churn N` short processes a second (`/bin/true`, started
//! and reaped one after another): a machine where processes keep starting
//! and ending is the case in which attach's memory could grow. With
//! `--storm-every T`, a fork storm (5 000 processes of 4 threads) every T
//! from 30 s in: the bursts of exit records that used to leave a step of
//! RSS behind each.
use std::{
    fmt::Write as _,
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use plotters::prelude::*;

use super::procs::{Tracer, cpu_ticks, start_tracer};
use crate::util;

#[path = "../../../ttp-user/src/report/chart.rs"]
#[allow(dead_code)]
mod chart;

struct Sample {
    t_s: f64,
    rss_kib: u64,
    /// CPU use since the previous sample, percent of one CPU.
    cpu_pct: f64,
    entries: Option<u64>,
    machine_threads: Option<u64>,
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn machine_threads() -> Option<u64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .nth(3)?
        .split_once('/')?
        .1
        .parse()
        .ok()
}

fn bpftool_json(args: &[&str]) -> Option<serde_json::Value> {
    let out = Command::new("bpftool").arg("-j").args(args).output().ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

/// Id of the `THREADS` map among the fds of process `pid`.
fn threads_map_id(pid: u32) -> Option<String> {
    for fd in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .ok()?
        .flatten()
    {
        let info = std::fs::read_to_string(fd.path()).unwrap_or_default();
        let Some(id) = info
            .lines()
            .find_map(|l| l.strip_prefix("map_id:"))
            .map(|v| v.trim().to_string())
        else {
            continue;
        };
        let show = bpftool_json(&["map", "show", "id", &id]);
        // With accounts indexed by tid (docs/ledger.md) the hash has one
        // entry and is unused: nothing to sample.
        if show.is_some_and(|v| v["name"] == "THREADS" && v["max_entries"].as_u64() > Some(1)) {
            return Some(id);
        }
    }
    None
}

fn entries(map_id: &str) -> Option<u64> {
    Some(
        bpftool_json(&["map", "dump", "id", map_id])?
            .as_array()?
            .len() as u64,
    )
}

/// Runs a fork storm every `every` (the first 30 s in) until `stop`;
/// returns the seconds since `t0` at which each started.
fn storms(
    exe: std::path::PathBuf,
    every: Duration,
    t0: Instant,
    stop: Arc<AtomicBool>,
) -> Vec<f64> {
    let mut at = Vec::new();
    let mut next = Duration::from_secs(30);
    while !stop.load(Ordering::Relaxed) {
        if t0.elapsed() < next {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        at.push(t0.elapsed().as_secs_f64());
        let _ = Command::new(&exe)
            .args(["--procs", "5000", "--threads", "4", "--parallel", "8"])
            .stdout(Stdio::null())
            .status();
        next += every;
    }
    at
}

/// Starts `per_s` `/bin/true` processes a second until `stop`; counts them.
fn churn(per_s: u32, stop: Arc<AtomicBool>, started: Arc<AtomicU64>) {
    let gap = Duration::from_secs(1) / per_s.max(1);
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if Command::new("/bin/true")
            .stdout(Stdio::null())
            .status()
            .is_ok()
        {
            started.fetch_add(1, Ordering::Relaxed);
        }
        next += gap;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
}

pub fn bench(
    duration: Duration,
    every: Duration,
    churn_per_s: u32,
    keep_exited: Option<u64>,
    storm_every: Option<Duration>,
) -> anyhow::Result<()> {
    crate::setup::ensure_packages(&["bpftool"], "bpftool reads the map's occupancy")?;
    util::cargo(&["build", "--release", "-p", "ttp-user"])?;
    if storm_every.is_some() {
        util::cargo(&[
            "build",
            "--release",
            "-p",
            "ttp-tests",
            "--bin",
            "fixture-forkstorm",
        ])?;
    }
    let ttp = util::target_dir().join("release/ttp-ebpf");
    let dir = util::target_dir().join("soak");
    std::fs::create_dir_all(&dir)?;
    let json = dir.join("attach.json");
    let mut cmd = Command::new(&ttp);
    cmd.args(["attach", "--all", "--interval", "1s", "-q", "--json"])
        .arg(&json);
    if let Some(k) = keep_exited {
        cmd.args(["--keep-exited", &k.to_string()]);
    }
    let tracer: Tracer = start_tracer(cmd, "ledger attached")?;
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicU64::new(0));
    let churner = (churn_per_s > 0).then(|| {
        let (s, n) = (Arc::clone(&stop), Arc::clone(&started));
        std::thread::spawn(move || churn(churn_per_s, s, n))
    });
    let pid = tracer.child.id();
    let map_id = threads_map_id(pid);
    if map_id.is_none() {
        eprintln!(
            "soak: no THREADS hash in use by pid {pid} (accounts indexed by tid are a fixed \
             array, sized at load); occupancy not sampled"
        );
    }
    let hz = 100.0; // USER_HZ: /proc/PID/stat ticks
    let t0 = Instant::now();
    let stormer = storm_every.map(|e| {
        let exe = util::target_dir().join("release/fixture-forkstorm");
        let s = Arc::clone(&stop);
        std::thread::spawn(move || storms(exe, e, t0, s))
    });
    let mut samples = Vec::new();
    let mut last = (t0, cpu_ticks(pid));
    while t0.elapsed() < duration {
        std::thread::sleep(every.min(duration.saturating_sub(t0.elapsed())));
        let now = Instant::now();
        let ticks = cpu_ticks(pid);
        let dt = now.duration_since(last.0).as_secs_f64();
        samples.push(Sample {
            t_s: now.duration_since(t0).as_secs_f64(),
            rss_kib: rss_kib(pid),
            cpu_pct: (ticks.saturating_sub(last.1)) as f64 / hz / dt.max(1e-9) * 100.0,
            entries: map_id.as_deref().and_then(entries),
            machine_threads: machine_threads(),
        });
        last = (now, ticks);
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(c) = churner {
        let _ = c.join();
    }
    let storm_at = stormer.and_then(|s| s.join().ok()).unwrap_or_default();
    let (hwm_kib, _) = tracer.stop()?;
    let doc = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    let lost = doc.as_ref().map(|v| v["lost"].clone());

    let mut csv = String::from("t_s,rss_kib,cpu_pct,threads_entries,machine_threads\n");
    for s in &samples {
        let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
        writeln!(
            csv,
            "{:.1},{},{:.3},{},{}",
            s.t_s,
            s.rss_kib,
            s.cpu_pct,
            opt(s.entries),
            opt(s.machine_threads)
        )?;
    }
    std::fs::write(dir.join("soak.csv"), csv)?;
    let svg = dir.join("soak.svg");
    plot(&samples, &svg.to_string_lossy()).map_err(anyhow::Error::msg)?;

    // Figures: after the first minute (start-up allocations settle).
    let settled: Vec<&Sample> = samples.iter().filter(|s| s.t_s >= 60.0).collect();
    println!(
        "soak: attach --all --interval 1s for {:?}, sampled every {every:?}",
        duration
    );
    if let (Some(a), Some(b)) = (settled.first(), settled.last())
        && b.t_s > a.t_s
    {
        let growth = (b.rss_kib as f64 - a.rss_kib as f64) / 1024.0 / ((b.t_s - a.t_s) / 3600.0);
        let cpu: Vec<f64> = settled.iter().map(|s| s.cpu_pct).collect();
        let mean_cpu = cpu.iter().sum::<f64>() / cpu.len() as f64;
        let max_cpu = cpu.iter().cloned().fold(0.0, f64::max);
        println!(
            "  RSS {:.1} MiB at {:.0} s, {:.1} MiB at {:.0} s: {growth:+.2} MiB/h; peak (VmHWM) {:.1} MiB",
            a.rss_kib as f64 / 1024.0,
            a.t_s,
            b.rss_kib as f64 / 1024.0,
            b.t_s,
            hwm_kib as f64 / 1024.0
        );
        println!(
            "  CPU after the first minute: mean {mean_cpu:.2} %, max {max_cpu:.2} % of one CPU"
        );
        let e: Vec<u64> = settled.iter().filter_map(|s| s.entries).collect();
        let m: Vec<u64> = settled.iter().filter_map(|s| s.machine_threads).collect();
        if let (Some(emin), Some(emax)) = (e.iter().min(), e.iter().max()) {
            println!(
                "  THREADS entries {emin}–{emax} (machine threads {}–{})",
                m.iter().min().unwrap_or(&0),
                m.iter().max().unwrap_or(&0)
            );
        }
    } else {
        println!("  (shorter than a minute: no settled figures)");
    }
    // The second half: after the rows of ended processes reached their
    // limit at the churn rates this is run with (docs/benchmarks.md).
    let half: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.t_s >= duration.as_secs_f64() / 2.0)
        .collect();
    if let (Some(a), Some(b)) = (half.first(), half.last())
        && b.t_s > a.t_s
    {
        let growth = (b.rss_kib as f64 - a.rss_kib as f64) / 1024.0 / ((b.t_s - a.t_s) / 3600.0);
        println!(
            "  second half: RSS {:.1} → {:.1} MiB ({:.0}–{:.0} s): {growth:+.2} MiB/h",
            a.rss_kib as f64 / 1024.0,
            b.rss_kib as f64 / 1024.0,
            a.t_s,
            b.t_s
        );
    }
    println!(
        "  churn: {} processes started beside attach",
        started.load(Ordering::Relaxed)
    );
    if let Some(&first) = storm_at.first() {
        // RSS just before the first storm, and the lowest and highest
        // sample after it: a storm that leaves memory behind raises the
        // lowest above the first figure.
        let before = samples.iter().rev().find(|s| s.t_s < first);
        let after: Vec<u64> = samples
            .iter()
            .filter(|s| s.t_s > first)
            .map(|s| s.rss_kib)
            .collect();
        let mib = |k: u64| k as f64 / 1024.0;
        println!(
            "  {} fork storms of 25 000 thread exits (at {:?} s): RSS {:.1} MiB before the first, \
             {:.1}–{:.1} MiB after",
            storm_at.len(),
            storm_at
                .iter()
                .map(|t| t.round() as u64)
                .collect::<Vec<_>>(),
            before.map_or(0.0, |s| mib(s.rss_kib)),
            mib(after.iter().copied().min().unwrap_or(0)),
            mib(after.iter().copied().max().unwrap_or(0)),
        );
    }
    if let Some(v) = &doc {
        let rows = v["processes"].as_array().map_or(0, |a| a.len());
        let groups = v["exited_groups"].as_array();
        let folded: u64 = groups.map_or(0, |g| {
            g.iter().filter_map(|g| g["processes"].as_u64()).sum()
        });
        println!(
            "  attach's summary: {rows} process rows, {folded} ended processes summed in {} command groups",
            groups.map_or(0, |g| g.len())
        );
    }
    if let Some(l) = lost {
        println!("  losses attach reported: {l}");
    }
    println!(
        "  samples: {}; plot: {}",
        dir.join("soak.csv").display(),
        svg.display()
    );
    Ok(())
}

fn plot(samples: &[Sample], path: &str) -> Result<(), String> {
    let e = |x: DrawingAreaErrorKind<_>| x.to_string();
    let root = SVGBackend::new(path, (900, 720)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let panels = root.split_evenly((3, 1));
    let t_max = samples.last().map_or(1.0, |s| s.t_s / 60.0).max(1e-3);
    let blue = RGBColor(31, 119, 180);
    let orange = RGBColor(255, 127, 14);
    type Series = Vec<(Vec<(f64, f64)>, String, RGBColor)>;
    let mib: Series = vec![(
        samples
            .iter()
            .map(|s| (s.t_s / 60.0, s.rss_kib as f64 / 1024.0))
            .collect(),
        "ttp RSS, MiB".into(),
        blue,
    )];
    let cpu: Series = vec![(
        samples.iter().map(|s| (s.t_s / 60.0, s.cpu_pct)).collect(),
        "ttp CPU, % of one CPU".into(),
        blue,
    )];
    let occ: Series = vec![
        (
            samples
                .iter()
                .filter_map(|s| Some((s.t_s / 60.0, s.entries? as f64)))
                .collect(),
            "THREADS map entries".into(),
            blue,
        ),
        (
            samples
                .iter()
                .filter_map(|s| Some((s.t_s / 60.0, s.machine_threads? as f64)))
                .collect(),
            "machine threads".into(),
            orange,
        ),
    ];
    for (area, (series, title)) in panels.iter().zip([
        (mib, "Resident memory"),
        (cpu, "CPU use between samples"),
        (occ, "Thread accounts vs threads alive"),
    ]) {
        let (plot_area, legend) = chart::split(area, 220);
        let y_max = series
            .iter()
            .flat_map(|(p, _, _)| p.iter().map(|&(_, y)| y))
            .fold(0.0, f64::max)
            .max(1e-3)
            * 1.15;
        let mut c = ChartBuilder::on(&plot_area)
            .caption(title, ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..t_max, 0.0..y_max)
            .map_err(e)?;
        c.configure_mesh()
            .x_desc("minutes since attach")
            .draw()
            .map_err(e)?;
        for (points, _, color) in &series {
            c.draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(e)?;
        }
        let rows: Vec<(String, chart::Key)> = series
            .iter()
            .map(|(_, label, color)| (label.clone(), chart::Key::Line(*color)))
            .collect();
        chart::draw(&legend, &rows, 30)?;
    }
    root.present().map_err(e)?;
    Ok(())
}
