//! `cargo xtask bench statements-memory`: ttp's resident memory while
//! `statements` (its default: summed in the kernel) measures a PostgreSQL
//! server under `pgbench -n -S -M prepared` at full rate, until the server
//! has run `--statements` statements (issue 47's goals: RSS after 10⁷
//! statements within 10 % of RSS after 10⁵; RSS at 40 s within 10 % of RSS
//! at 10 s).
//!
//! One throw-away cluster with `compute_query_id = on` (the sums need the
//! server's query ids). `statements` runs until Ctrl-C; its VmRSS is read
//! from /proc every second beside pgbench's per-second progress (`-P 1`,
//! whose transactions, one statement each, are summed for the count so
//! far). At the end ttp is stopped as a user would stop it, its JSON gives
//! the statements it counted, and its VmHWM is its peak, the final report
//! included.
use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::Context;

use super::{
    pg,
    procs::{interrupt, start_tracer},
    serve::vm_kib,
    statements::start_server,
};
use crate::util;

/// One second's sample: seconds since pgbench started, statements so far
/// (pgbench's progress), ttp's VmRSS in KiB.
type Sample = (f64, f64, u64);

pub fn bench(statements: u64, clients: u32) -> anyhow::Result<()> {
    util::cargo(&["build", "--release", "-p", "ttp-user"])?;
    let ttp = util::target_dir().join("release/ttp-ebpf");
    let server: pg::Server = start_server("pg-mem", "-c compute_query_id=on")?;
    let pm = server.postmaster()?;
    let json = std::env::temp_dir().join(format!("ttp-bench-mem-{}.json", std::process::id()));
    let mut cmd = Command::new(&ttp);
    cmd.args([
        "statements",
        "--pid",
        &pm.to_string(),
        "--top",
        "5",
        "--json",
    ])
    .arg(&json);
    let tracer = start_tracer(cmd, "measuring")?;
    let ttp_pid = tracer.child.id();
    let mut bench = Command::new(server.bin.join("pgbench"))
        .args(["-n", "-S", "-M", "prepared", "-P", "1", "-T", "36000"])
        .args(["-c", &clients.to_string(), "-j", "2"])
        .args(server.connect_args())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting pgbench")?;
    let t0 = Instant::now();
    let done = Arc::new(Mutex::new(0f64));
    let stderr = bench.stderr.take().context("pgbench's stderr")?;
    let counted = done.clone();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            // "progress: 5.0 s, 24113.8 tps, lat ..." (one-second steps)
            if let Some(tps) = l
                .strip_prefix("progress: ")
                .and_then(|r| r.split(", ").nth(1))
                .and_then(|r| r.strip_suffix(" tps"))
                .and_then(|v| v.parse::<f64>().ok())
            {
                *counted.lock().unwrap() += tps;
            }
        }
    });
    let mut samples: Vec<Sample> = Vec::new();
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let n = *done.lock().unwrap();
        samples.push((t0.elapsed().as_secs_f64(), n, vm_kib(ttp_pid, "VmRSS:")));
        if n >= statements as f64 {
            break;
        }
        if let Some(status) = bench.try_wait()? {
            anyhow::bail!("pgbench ended ({status}) before {statements} statements");
        }
    }
    interrupt(&mut bench)?;
    let hwm = vm_kib(ttp_pid, "VmHWM:");
    let last_rss = vm_kib(ttp_pid, "VmRSS:");
    let mut child = tracer.child;
    interrupt(&mut child)?;
    let doc: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&json).context("ttp-ebpf statements wrote no JSON")?,
    )?;
    let _ = std::fs::remove_file(&json);
    let counted = doc["statements"].as_f64().unwrap_or(0.0);
    let keys = &doc["counts"]["keys"];
    let at = |pick: &dyn Fn(&Sample) -> bool| samples.iter().find(|s| pick(s)).copied();
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "bench statements-memory: pgbench -n -S -M prepared -c {clients} -j 2 on a throw-away cluster (scale 2, compute_query_id = on), ttp-ebpf statements (release build) until {statements} statements; ttp counted {counted:.0} statements in {keys} keys"
    );
    println!("| point | seconds | statements (pgbench) | ttp VmRSS, MiB |");
    println!("|---|---|---|---|");
    let row = |name: &str, s: Option<Sample>| {
        if let Some((t, n, rss)) = s {
            println!("| {name} | {t:.0} | {n:.0} | {:.1} |", mib(rss));
        }
        s
    };
    let first = row("10⁵ statements", at(&|s| s.1 >= 1e5));
    let s10 = row("10 s", at(&|s| s.0 >= 10.0));
    let s40 = row("40 s", at(&|s| s.0 >= 40.0));
    let end = row("end", samples.last().copied());
    println!(
        "ttp's VmHWM (peak, before the final report) {:.1} MiB, VmRSS {:.1} MiB",
        mib(hwm),
        mib(last_rss)
    );
    let ratio = |a: Option<Sample>, b: Option<Sample>| match (a, b) {
        (Some(a), Some(b)) if a.2 > 0 => {
            format!("{:+.1} %", (b.2 as f64 / a.2 as f64 - 1.0) * 100.0)
        }
        _ => "—".into(),
    };
    println!(
        "RSS at 40 s against 10 s: {}; at the end against 10⁵ statements: {}",
        ratio(s10, s40),
        ratio(first, end)
    );
    println!(
        "command: sudo -E cargo xtask bench statements-memory --statements {statements} --clients {clients}"
    );
    Ok(())
}
