//! The processes the benches start and measure (a tracer until it is
//! ready, a sleeper, a pipe of switches) and the median of rounds.
use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};

pub(super) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// usecs/op of one pinned `perf bench sched pipe`.
pub(super) fn sched_pipe(loops: u32) -> anyhow::Result<f64> {
    let out = Command::new("taskset")
        .args([
            "-c",
            "1",
            "perf",
            "bench",
            "sched",
            "pipe",
            "-l",
            &loops.to_string(),
        ])
        .output()
        .context("running perf bench (package linux-perf)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|l| l.contains("usecs/op"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no usecs/op in perf output: {text}"))
}

/// A tracer running in the background, stopped with SIGINT on drop.
pub(super) struct Tracer {
    pub(super) child: Child,
    pub(super) ready_ms: f64,
    /// utime+stime ticks when it became ready (start-up work excluded).
    pub(super) ticks_at_ready: u64,
}

pub(super) fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let f: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

impl Tracer {
    pub(super) fn stop(mut self) -> anyhow::Result<(u64, u64)> {
        let pid = self.child.id() as i32;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let hwm_kib = status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let ticks = cpu_ticks(pid as u32).saturating_sub(self.ticks_at_ready);
        interrupt(&mut self.child)?;
        Ok((hwm_kib, ticks))
    }
}

/// Ends a tracer as a user's Ctrl-C would (ttp writes its JSON then).
/// bpftrace 0.17 was seen to miss the first SIGINT and wait forever: after
/// 15 s it gets another, and after 20 s it is killed.
pub(super) fn interrupt(child: &mut Child) -> anyhow::Result<()> {
    let pid = child.id() as i32;
    let t0 = Instant::now();
    let mut resent = false;
    // SAFETY: signalling our own child.
    unsafe { libc_kill(pid, 2) };
    while child.try_wait()?.is_none() {
        let waited = t0.elapsed();
        if waited > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            bail!("tracer {pid} did not end within 20 s of SIGINT; killed");
        }
        if waited > Duration::from_secs(15) && !resent {
            // SAFETY: as above.
            unsafe { libc_kill(pid, 2) };
            resent = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

unsafe extern "C" {
    #[link_name = "kill"]
    pub(super) fn libc_kill(pid: i32, sig: i32) -> i32;
}

pub(super) fn start_tracer(mut cmd: Command, ready_marker: &str) -> anyhow::Result<Tracer> {
    let t0 = Instant::now();
    let mut child = cmd
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .context("starting tracer")?;
    let stderr = child.stderr.take().expect("piped");
    let mut lines = BufReader::new(stderr).lines();
    let deadline = t0 + Duration::from_secs(60);
    let ready_ms = loop {
        let Some(Ok(line)) = lines.next() else {
            bail!("tracer ended before it was ready")
        };
        if line.contains(ready_marker) {
            // ttp reports its own attach-to-ready time ("attached in X ms"):
            // BTF, map creation, verification and attach of every program.
            break line
                .split("attached in ")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or_else(|| t0.elapsed().as_secs_f64() * 1e3);
        }
        if Instant::now() > deadline {
            bail!("tracer not ready after 60 s");
        }
    };
    // Keep draining stderr so the tracer never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    let ticks_at_ready = cpu_ticks(child.id());
    Ok(Tracer {
        child,
        ready_ms,
        ticks_at_ready,
    })
}

/// " ARGS", or nothing.
pub(super) fn prefixed(args: &str) -> String {
    if args.is_empty() {
        String::new()
    } else {
        format!(" {args}")
    }
}

/// A child killed when dropped.
pub(super) struct Sleeper(pub(super) Child);

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A tracer started with `cmd`, once it printed `marker` on stdout
/// (`what` names it in errors).
pub(super) fn start_ready(mut cmd: Command, marker: &str, what: &str) -> anyhow::Result<Tracer> {
    let t0 = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {what}"))?;
    let stdout = child.stdout.take().expect("piped");
    let mut lines = BufReader::new(stdout).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains(marker) => break,
            Some(Ok(_)) => {}
            _ => bail!("{what} ended before it was ready"),
        }
        if t0.elapsed() > Duration::from_secs(60) {
            bail!("{what} not ready after 60 s");
        }
    }
    std::thread::spawn(move || for _ in lines {});
    let ticks_at_ready = cpu_ticks(child.id());
    Ok(Tracer {
        child,
        ready_ms: t0.elapsed().as_secs_f64() * 1e3,
        ticks_at_ready,
    })
}
