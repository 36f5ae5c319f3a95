//! Benchmarks. Each prints its figures and the exact command behind them;
//! docs/benchmarks.md records them. The machines are shared and noisy, so
//! every comparison is made side by side in one run: interleaved rounds, and
//! the median of the per-round ratios.
use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use clap::Subcommand;

use crate::{setup, util};

mod cost;
mod floor;
mod lab;
mod pg;
mod serve;
mod soak;
mod statements;
mod vprofile;

#[derive(Subcommand)]
pub enum Which {
    /// Cost of `attach --all` on a context-switch-heavy load: `perf bench
    /// sched pipe` with both ends pinned to one CPU, with and without ttp,
    /// interleaved rounds; also attach-to-ready latency, RSS and CPU use.
    Overhead {
        /// Interleaved rounds (each: one run without ttp, one with).
        #[arg(long, default_value_t = 9)]
        rounds: u32,
        /// Messages per `perf bench sched pipe` run.
        #[arg(long, default_value_t = 100_000)]
        loops: u32,
        /// Also measure bpftrace summing on-CPU time per pid on sched_switch.
        #[arg(long)]
        bpftrace: bool,
        /// Also measure the floor: an empty tp_btf program at each
        /// tracepoint the default ledger hooks, alone and with the kernel's
        /// BPF statistics on (then their per-program table too). Builds
        /// them with clang and libbpf.
        #[arg(long)]
        floor: bool,
        /// Also measure `attach --pid P --trace FILE` on an unrelated
        /// sleeping process P: the cost of tracing for everything else.
        #[arg(long)]
        trace_one: bool,
        /// Also measure `attach --all` of another ttp-ebpf binary (e.g. a
        /// release build of an earlier commit) in the same rounds, so a
        /// change's effect is compared side by side on this noisy machine.
        #[arg(long, value_name = "TTP_EBPF")]
        baseline: Option<std::path::PathBuf>,
        /// More arguments for the baseline's `attach --all` (e.g.
        /// `--baseline target/release/ttp-ebpf --baseline-args=--wake-latency`
        /// compares this build with and without the wake-up hook).
        #[arg(
            long,
            value_name = "ARGS",
            requires = "baseline",
            allow_hyphen_values = true
        )]
        baseline_args: Option<String>,
    },
    /// Cost of `vprofile`'s uprobes to the measured program, beside a
    /// bpftrace script recording the same durations: slowdown and ns per
    /// probe hit, interleaved rounds.
    Vprofile {
        /// Interleaved rounds (each: bare, ttp, bpftrace).
        #[arg(long, default_value_t = 9)]
        rounds: u32,
        /// Root invocations per run.
        #[arg(long, default_value_t = 200_000)]
        invocations: u64,
    },
    /// Cost of `statements` to a PostgreSQL server under `pgbench -S` (or,
    /// with --tpcb, pgbench's TPC-B-like default script): CPU per
    /// transaction (server + pgbench) and TPS without a tracer, with
    /// pg_stat_statements preloaded (a second cluster with the same data),
    /// with bpftrace's bare uprobes at query__start/done (the floor), with
    /// `statements` (its default: boundaries at the client socket), with
    /// `statements --usdt` and with `statements --usdt --simple-only`,
    /// interleaved rounds.
    Statements {
        /// Interleaved rounds (each: without, pg_stat_statements, floor,
        /// socket floor, delay accounting alone, default, --usdt, --usdt
        /// --simple-only; --detail all with --detail-all).
        #[arg(long, default_value_t = 5)]
        rounds: u32,
        /// Seconds per pgbench run.
        #[arg(long, default_value_t = 10)]
        seconds: u32,
        /// pgbench clients.
        #[arg(long, default_value_t = 4)]
        clients: u32,
        /// Run pgbench's TPC-B-like default script (BEGIN, three UPDATEs, a
        /// SELECT, an INSERT, END) instead of -S (select only).
        #[arg(long)]
        tpcb: bool,
        /// Also measure `statements --detail all` (socket boundaries and
        /// every wait probe, the per-page and per-lock ones included).
        #[arg(long)]
        detail_all: bool,
        /// Only these variants besides the run without a tracer, by their
        /// names in the table (e.g. `pgss,sock-floor,socket`): more rounds
        /// in the same time for the figures that decide.
        #[arg(long, value_delimiter = ',')]
        only: Vec<statements::Variant>,
    },
    /// `serve --group-by unit --interval 10s`, scraped every 10 s for a
    /// while: its userspace CPU share, peak RSS and scrape size.
    Serve {
        /// How long to run (e.g. 10m); with --postgres, each variant of
        /// each round.
        #[arg(long, default_value = "10m", value_parser = parse_duration)]
        duration: Duration,
        /// Under `pgbench -n -S -c 4` on a throw-away server, in
        /// interleaved rounds: no serve, `serve`, `serve --postgres
        /// PGDATA`; serve's CPU and memory and the server's TPS.
        #[arg(long)]
        postgres: bool,
        /// Rounds with --postgres.
        #[arg(long, default_value_t = 2)]
        rounds: u32,
    },
    /// The lab's queue: N `lab worker` processes with a trivial executor
    /// (`--no-run`: claim and finish, no `run`) against one local
    /// PostgreSQL lab server, 2 000 tasks per N: claims per second, claim
    /// round-trip percentiles, every task checked done exactly once.
    Lab {
        /// Worker counts, one run each on a fresh lab database.
        #[arg(long, value_delimiter = ',', default_value = "1,8,64")]
        workers: Vec<usize>,
    },
    /// A long run of `attach --all --interval 1s`: ttp's RSS, CPU use and
    /// thread-map occupancy over time, as figures and an SVG plot
    /// (target/soak/).
    Soak {
        /// How long to run (e.g. 15m, 1h).
        #[arg(long, default_value = "15m", value_parser = parse_duration)]
        duration: Duration,
        /// Sample every this long.
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        every: Duration,
        /// Start this many short processes a second beside attach (0:
        /// none), so the rows of ended processes fill up.
        #[arg(long, default_value_t = 20)]
        churn: u32,
        /// Passed to `attach --keep-exited` (default: attach's own).
        #[arg(long)]
        keep_exited: Option<u64>,
        /// Every this long (from 30 s in), a fork storm beside attach:
        /// 5 000 processes of 4 threads (tests' fixture-forkstorm, 8 alive
        /// at once), 25 000 thread exits in a few seconds.
        #[arg(long, value_parser = parse_duration)]
        storm_every: Option<Duration>,
    },
}

/// `90s`, `15m`, `1h`, or plain seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| format!("not a duration: {s}"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("unknown unit in {s} (s, m or h)")),
    };
    Ok(Duration::from_secs(secs))
}

pub fn run(which: Which) -> anyhow::Result<()> {
    match which {
        Which::Overhead {
            rounds,
            loops,
            bpftrace,
            floor,
            trace_one,
            baseline,
            baseline_args,
        } => overhead(
            rounds,
            loops,
            bpftrace,
            floor,
            trace_one,
            baseline.as_deref(),
            baseline_args.as_deref().unwrap_or(""),
        ),
        Which::Vprofile {
            rounds,
            invocations,
        } => vprofile::bench(rounds, invocations),
        Which::Soak {
            duration,
            every,
            churn,
            keep_exited,
            storm_every,
        } => soak::bench(duration, every, churn, keep_exited, storm_every),
        Which::Serve {
            duration,
            postgres: false,
            ..
        } => serve::bench(duration),
        Which::Serve {
            duration,
            postgres: true,
            rounds,
        } => serve::bench_postgres(duration, rounds),
        Which::Statements {
            rounds,
            seconds,
            clients,
            tpcb,
            detail_all,
            only,
        } => statements::bench(
            rounds,
            statements::Load {
                tpcb,
                seconds,
                clients,
            },
            detail_all,
            &only,
        ),
        Which::Lab { workers } => lab::bench(&workers),
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// usecs/op of one pinned `perf bench sched pipe`.
fn sched_pipe(loops: u32) -> anyhow::Result<f64> {
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
struct Tracer {
    child: Child,
    ready_ms: f64,
    /// utime+stime ticks when it became ready (start-up work excluded).
    ticks_at_ready: u64,
}

fn cpu_ticks(pid: u32) -> u64 {
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
    fn stop(mut self) -> anyhow::Result<(u64, u64)> {
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
fn interrupt(child: &mut Child) -> anyhow::Result<()> {
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
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

fn start_tracer(mut cmd: Command, ready_marker: &str) -> anyhow::Result<Tracer> {
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

fn overhead(
    rounds: u32,
    loops: u32,
    with_bpftrace: bool,
    with_floor: bool,
    trace_one: bool,
    baseline: Option<&std::path::Path>,
    baseline_args: &str,
) -> anyhow::Result<()> {
    if let Some(b) = baseline
        && !b.is_file()
    {
        bail!(
            "--baseline {}: no such file; give the path of a built ttp-ebpf binary",
            b.display()
        );
    }
    setup::ensure_packages(&["linux-perf"], "perf bench sched pipe is the load")?;
    let mut mounted_tracefs = false;
    if with_bpftrace {
        setup::ensure_packages(&["bpftrace"], "bpftrace is the comparison")?;
        mounted_tracefs = setup::mount_tracefs()?;
    }
    let floor = if with_floor {
        Some(floor::Floor::build(floor::Hook::Ledger)?)
    } else {
        None
    };
    let result = overhead_rounds(
        rounds,
        loops,
        with_bpftrace,
        floor.as_ref(),
        trace_one,
        baseline,
        baseline_args,
    );
    if mounted_tracefs {
        setup::umount_tracefs();
    }
    result
}

fn overhead_rounds(
    rounds: u32,
    loops: u32,
    with_bpftrace: bool,
    floor: Option<&floor::Floor>,
    trace_one: bool,
    baseline: Option<&std::path::Path>,
    baseline_args: &str,
) -> anyhow::Result<()> {
    util::cargo(&["build", "--release", "-p", "ttp-user"])?;
    let ttp = util::target_dir().join("release/ttp-ebpf");
    // The traced process: asleep for the whole benchmark, unrelated to the
    // sched-pipe pair, so its trace holds almost nothing and what is
    // measured is the cost of tracing being on for everyone else.
    let sleeper = if trace_one {
        Some(Sleeper(
            Command::new("sleep")
                .arg("100000")
                .spawn()
                .context("starting the traced sleep")?,
        ))
    } else {
        None
    };
    let trace_file =
        std::env::temp_dir().join(format!("ttp-bench-trace-{}.json", std::process::id()));
    let attach_json =
        std::env::temp_dir().join(format!("ttp-bench-attach-{}.json", std::process::id()));
    let mut programs = cost::ProgramTable::default();
    let mut base_programs = cost::ProgramTable::default();
    // The empty programs' statistics, from the loader as it ends.
    let mut floor_programs = cost::ProgramTable::default();
    let floor_stats =
        std::env::temp_dir().join(format!("ttp-bench-floor-{}.txt", std::process::id()));
    let mut bl_ratios = Vec::new();
    let mut vs_bl = Vec::new();
    let mut ratios = Vec::new();
    let mut tr_ratios = Vec::new();
    let mut tr_vs_all = Vec::new();
    let mut bt_ratios = Vec::new();
    let mut floor_ratios = Vec::new();
    let mut floor_stats_ratios = Vec::new();
    let mut over_floor = Vec::new();
    let mut ready = Vec::new();
    let mut rss = Vec::new();
    let mut cpu_pct = Vec::new();
    println!(
        "round  base µs/op  ttp µs/op  ratio{}{}",
        if trace_one {
            "  trace-one µs/op  ratio  vs --all"
        } else {
            ""
        },
        if with_bpftrace {
            "  bpftrace µs/op  ratio"
        } else {
            ""
        }
    );
    // In the order of the columns each round prints.
    if baseline.is_some() {
        println!("       (then: baseline µs/op  ratio  ttp vs baseline)");
    }
    if floor.is_some() {
        println!("       (then: empty hook µs/op  ratio  with BPF stats µs/op  ratio  ttp vs it)");
    }
    // Each round measures every variant once, in an order rotated from
    // round to round, so that no variant always runs first (or right after
    // a tracer exits) on this noisy machine.
    let mut variants = vec![Variant::Base, Variant::All];
    if sleeper.is_some() {
        variants.push(Variant::TraceOne);
    }
    if with_bpftrace {
        variants.push(Variant::Bpftrace);
    }
    if baseline.is_some() {
        variants.push(Variant::Baseline);
    }
    if floor.is_some() {
        variants.extend([Variant::Floor, Variant::FloorStats]);
    }
    for r in 0..rounds {
        let mut us = [0.0f64; 7];
        for k in 0..variants.len() {
            let v = variants[(k + r as usize) % variants.len()];
            us[v as usize] = match v {
                Variant::Base => sched_pipe(loops)?,
                Variant::All => {
                    let (with, hwm, pct) =
                        attach_all(&ttp, &[], &attach_json, loops, &mut programs)?;
                    ready.push(with.1);
                    rss.push(hwm);
                    cpu_pct.push(pct);
                    with.0
                }
                Variant::Baseline => {
                    let bin = baseline.expect("variant only with --baseline");
                    let extra: Vec<&str> = baseline_args.split_whitespace().collect();
                    attach_all(bin, &extra, &attach_json, loops, &mut base_programs)?
                        .0
                        .0
                }
                Variant::TraceOne => {
                    let pid = sleeper.as_ref().map_or(0, |s| s.0.id()).to_string();
                    let mut cmd = Command::new(&ttp);
                    cmd.args(["attach", "--pid", &pid, "--quiet", "--trace"])
                        .arg(&trace_file);
                    let tracer = start_tracer(cmd, "ledger attached")?;
                    let t = sched_pipe(loops)?;
                    tracer.stop()?;
                    t
                }
                Variant::Bpftrace => {
                    let mut cmd = Command::new("bpftrace");
                    cmd.args([
                        "-e",
                        "BEGIN { printf(\"bpftrace ready\\n\"); } tracepoint:sched:sched_switch { if (@start[args->prev_pid]) { @oncpu[args->prev_pid] = sum(nsecs - @start[args->prev_pid]); } @start[args->next_pid] = nsecs; }",
                    ]);
                    // bpftrace prints BEGIN output on stdout; wait for it there.
                    let t = start_ready(cmd, "bpftrace ready", "bpftrace")?;
                    let b = sched_pipe(loops)?;
                    let _ = t.stop();
                    b
                }
                Variant::Floor | Variant::FloorStats => {
                    let f = floor.expect("variant only with --floor");
                    let stats = v == Variant::FloorStats;
                    let t = f.start(stats, stats.then_some(floor_stats.as_path()))?;
                    let b = sched_pipe(loops)?;
                    let _ = t.stop();
                    if stats {
                        floor_programs.add_rows(&floor::read_stats(&floor_stats)?);
                    }
                    b
                }
            };
            if v != Variant::Base {
                // Let the tracer's teardown (detaching, freeing maps) finish
                // before the next measurement.
                std::thread::sleep(Duration::from_millis(500));
            }
        }
        let [base, with, t, b, bl, fl, fs] = us;
        ratios.push(with / base);
        let mut line = format!("{r:>5}  {base:>10.3}  {with:>9.3}  {:>5.3}", with / base);
        if sleeper.is_some() {
            tr_ratios.push(t / base);
            tr_vs_all.push(t / with);
            line += &format!("  {t:>15.3}  {:>5.3}  {:>8.3}", t / base, t / with);
        }
        if with_bpftrace {
            bt_ratios.push(b / base);
            line += &format!("  {b:>14.3}  {:>5.3}", b / base);
        }
        if baseline.is_some() {
            bl_ratios.push(bl / base);
            vs_bl.push(with / bl);
            line += &format!("  {bl:>14.3}  {:>5.3}  {:>6.3}", bl / base, with / bl);
        }
        if floor.is_some() {
            floor_ratios.push(fl / base);
            floor_stats_ratios.push(fs / base);
            over_floor.push(with / fs);
            line += &format!(
                "  {fl:>14.3}  {:>5.3}  {fs:>14.3}  {:>5.3}  {:>6.3}",
                fl / base,
                fs / base,
                with / fs
            );
        }
        println!("{line}");
    }
    println!();
    println!(
        "median ratio with ttp attach --all: {:.3} ({} rounds of {loops} messages)",
        median(&mut ratios),
        rounds
    );
    if trace_one {
        println!(
            "median ratio with ttp attach --pid SLEEPER --trace FILE: {:.3} vs no ttp, {:.3} vs attach --all",
            median(&mut tr_ratios),
            median(&mut tr_vs_all)
        );
        let _ = std::fs::remove_file(&trace_file);
    }
    if with_bpftrace {
        println!(
            "median ratio with bpftrace on-CPU sums: {:.3}",
            median(&mut bt_ratios)
        );
    }
    if floor.is_some() {
        println!(
            "median ratio with empty programs at the ledger's tracepoints: {:.3}; with BPF statistics on: {:.3}; ttp over the latter (the ledger's own work): {:.3}",
            median(&mut floor_ratios),
            median(&mut floor_stats_ratios),
            median(&mut over_floor)
        );
    }
    println!(
        "attach-to-ready (as ttp reports it: BTF, maps, verification, attach): median {:.1} ms",
        median(&mut ready)
    );
    println!("userspace peak RSS: median {:.1} MiB", median(&mut rss));
    println!(
        "userspace CPU at 1 s interval, under this load: median {:.2} % of a core",
        median(&mut cpu_pct)
    );
    if baseline.is_some() {
        println!(
            "median ratio with the baseline's attach --all: {:.3}; this build vs the baseline: {:.3}",
            median(&mut bl_ratios),
            median(&mut vs_bl)
        );
    }
    programs.print();
    floor_programs.print_titled(
        "the empty programs at the same tracepoints (the floor, statistics held on for the whole run)",
    );
    let _ = std::fs::remove_file(&floor_stats);
    if let Some(b) = baseline {
        println!("baseline {}{}:", b.display(), prefixed(baseline_args));
        base_programs.print();
    }
    println!(
        "command: cargo xtask bench overhead --rounds {rounds} --loops {loops}{}{}{}{}{}",
        if with_bpftrace { " --bpftrace" } else { "" },
        if floor.is_some() { " --floor" } else { "" },
        if trace_one { " --trace-one" } else { "" },
        baseline.map_or(String::new(), |b| format!(" --baseline {}", b.display())),
        if baseline_args.is_empty() {
            String::new()
        } else {
            format!(" --baseline-args='{baseline_args}'")
        }
    );
    drop(sleeper);
    Ok(())
}

/// What runs beside the benchmark (index into a round's figures).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    Base = 0,
    All = 1,
    TraceOne = 2,
    Bpftrace = 3,
    Baseline = 4,
    /// Empty tp_btf programs at the ledger's tracepoints.
    Floor = 5,
    /// The same, with the kernel's BPF statistics on.
    FloorStats = 6,
}

/// One `perf bench sched pipe` under `bin attach --all`: ((µs/op,
/// attach-to-ready ms), peak RSS MiB, userspace CPU %); the probes' cost
/// over the window goes into `programs`.
fn attach_all(
    bin: &std::path::Path,
    extra: &[&str],
    attach_json: &std::path::Path,
    loops: u32,
    programs: &mut cost::ProgramTable,
) -> anyhow::Result<((f64, f64), f64, f64)> {
    let mut cmd = Command::new(bin);
    cmd.args(["attach", "--all", "--interval", "1s", "--quiet", "--json"])
        .arg(attach_json)
        .args(extra);
    let tracer = start_tracer(cmd, "ledger attached")?;
    let ready_ms = tracer.ready_ms;
    let t0 = Instant::now();
    let with = sched_pipe(loops)?;
    // Let the 1 s interval loop run a few times for the CPU figure.
    std::thread::sleep(Duration::from_secs(4));
    let secs = t0.elapsed().as_secs_f64();
    let (hwm, ticks) = tracer.stop()?;
    // Written on Ctrl-C: the probes' cost over the window.
    programs.add(attach_json)?;
    let _ = std::fs::remove_file(attach_json);
    Ok((
        (with, ready_ms),
        hwm as f64 / 1024.0,
        ticks as f64 / 100.0 / secs * 100.0,
    ))
}

/// " ARGS", or nothing.
fn prefixed(args: &str) -> String {
    if args.is_empty() {
        String::new()
    } else {
        format!(" {args}")
    }
}

/// A child killed when dropped.
struct Sleeper(Child);

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A tracer started with `cmd`, once it printed `marker` on stdout
/// (`what` names it in errors).
fn start_ready(mut cmd: Command, marker: &str, what: &str) -> anyhow::Result<Tracer> {
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
