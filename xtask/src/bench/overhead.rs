//! `cargo xtask bench overhead`: the ledger's wall-clock cost under pinned
//! `perf bench sched pipe`, beside bpftrace and (with `--floor`) the empty
//! programs, in interleaved rounds; the kernel's BPF statistics give each
//! program's cost.

use std::{
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context, bail};

use super::{
    cost, floor,
    procs::{Sleeper, median, prefixed, sched_pipe, start_ready, start_tracer},
};
use crate::{setup, util};

pub(super) fn overhead(
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
        Some((
            floor::Floor::build(floor::Hook::Ledger)?,
            floor::Floor::build(floor::Hook::Classic)?,
        ))
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
    floor: Option<&(floor::Floor, floor::Floor)>,
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
    let mut classic_ratios = Vec::new();
    let mut over_classic = Vec::new();
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
        println!("       (then: empty classic tracepoints µs/op  ratio  ttp vs them)");
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
        variants.extend([Variant::Floor, Variant::FloorStats, Variant::FloorClassic]);
    }
    for r in 0..rounds {
        let mut us = [0.0f64; 8];
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
                Variant::Floor | Variant::FloorStats | Variant::FloorClassic => {
                    let (tp_btf, classic) = floor.expect("variant only with --floor");
                    let f = if v == Variant::FloorClassic {
                        classic
                    } else {
                        tp_btf
                    };
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
        let [base, with, t, b, bl, fl, fs, fc] = us;
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
            classic_ratios.push(fc / base);
            over_classic.push(with / fc);
            line += &format!("  {fc:>14.3}  {:>5.3}  {:>6.3}", fc / base, with / fc);
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
        println!(
            "median ratio with empty classic tracepoint programs there: {:.3}; ttp over them: {:.3}",
            median(&mut classic_ratios),
            median(&mut over_classic)
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
    /// Empty classic tracepoint programs at the same tracepoints.
    FloorClassic = 7,
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
