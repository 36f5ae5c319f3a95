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

use super::{Tracer, cpu_ticks, start_tracer};
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

fn vm_kib(pid: u32, field: &str) -> u64 {
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
