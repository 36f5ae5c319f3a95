//! `cargo xtask bench vprofile`: what `ttp-ebpf vprofile`'s uprobes cost the
//! measured program, beside a bpftrace script that records the same
//! durations.
//!
//! The program is the `tight` mode of tests/fixtures/vprof-target: a root
//! function calling three children, each a fixed burn of CPU, and no system
//! calls, so the probes' cost is all that differs between runs. Per round,
//! in an order rotated from round to round, it runs N root invocations
//! - bare;
//! - under `ttp-ebpf vprofile --pid P --children vt_a,vt_b,vt_c --rounds 1`
//!   (uprobe + uretprobe on the root, a uprobe at each call instruction and
//!   at its return address: 8 hits per invocation, one ring-buffer record
//!   per invocation);
//! - under bpftrace, with uprobe + uretprobe on the root and on each child
//!   (8 hits per invocation), summing the children per thread and printing
//!   one line per invocation.
//!
//! The probed runs start their loop only once a breakpoint is in the root's
//! first byte, plus 300 ms for the other probes, and say whether it was
//! still there at the end; a run without it is an error, not a figure.
use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};

use super::procs::{Sleeper, libc_kill, median};
use crate::{setup, util};

/// Probe hits per root invocation, for both tools.
const HITS_PER_INVOCATION: f64 = 8.0;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Variant {
    Bare = 0,
    Ttp = 1,
    Bpftrace = 2,
}

/// One run of the target: its loop's elapsed ns.
struct Run {
    elapsed_ns: f64,
    probed_at_end: bool,
}

pub fn bench(rounds: u32, invocations: u64) -> anyhow::Result<()> {
    setup::ensure_packages(&["bpftrace"], "bpftrace is the comparison")?;
    if !util::is_root() {
        bail!(
            "the vprofile benchmark loads uprobes: run it as root (sudo -E cargo xtask bench vprofile)"
        );
    }
    let mounted_tracefs = setup::mount_tracefs()?;
    let result = rounds_of(rounds, invocations);
    if mounted_tracefs {
        setup::umount_tracefs();
    }
    result
}

fn rounds_of(rounds: u32, invocations: u64) -> anyhow::Result<()> {
    util::cargo(&["build", "--release", "-p", "ttp-user"])?;
    let ttp = util::target_dir().join("release/ttp-ebpf");
    let target = build_target()?;
    let json = std::env::temp_dir().join(format!("ttp-bench-vprof-{}.json", std::process::id()));

    println!(
        "round  bare ms  ttp ms  slowdown  ttp ns/hit  in-BPF ns/hit  bpftrace ms  slowdown  bpftrace ns/hit"
    );
    let variants = [Variant::Bare, Variant::Ttp, Variant::Bpftrace];
    let (mut ttp_slow, mut bt_slow, mut ttp_hit, mut bt_hit, mut bpf_ns) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in 0..rounds as usize {
        let mut ms = [0.0f64; 3];
        for k in 0..variants.len() {
            let v = variants[(k + r) % variants.len()];
            let run = match v {
                Variant::Bare => run_target(&target, invocations, false, |_| None)?,
                Variant::Ttp => run_target(&target, invocations, true, |pid| {
                    let _ = std::fs::remove_file(&json);
                    let mut cmd = Command::new(&ttp);
                    cmd.args(["vprofile", "--pid", &pid.to_string(), "--binary"])
                        .arg(&target)
                        .args(["--root", "vt_root_tight", "--children", "vt_a,vt_b,vt_c"])
                        .args(["--rounds", "1", "--duration", "600s", "--json"])
                        .arg(&json);
                    // It ends its round by itself once the process is gone.
                    Some((cmd, false))
                })?,
                Variant::Bpftrace => run_target(&target, invocations, true, |pid| {
                    let mut cmd = Command::new("bpftrace");
                    cmd.args(["-p", &pid.to_string(), "-e", &bpftrace_script(&target)]);
                    Some((cmd, true))
                })?,
            };
            if v != Variant::Bare && !run.probed_at_end {
                bail!("{v:?}: the root's breakpoint was gone before the loop ended");
            }
            if v == Variant::Ttp {
                let report: serde_json::Value = serde_json::from_slice(
                    &std::fs::read(&json).context("ttp-ebpf vprofile wrote no JSON")?,
                )?;
                let m = &report["measurement"];
                bpf_ns.push(m["probe_overhead_ns_per_hit"].as_f64().unwrap_or(f64::NAN));
                let measured = report["invocations"].as_u64().unwrap_or(0);
                if measured + 1000 < invocations {
                    bail!("ttp measured {measured} of {invocations} invocations: {m}");
                }
            }
            ms[v as usize] = run.elapsed_ns / 1e6;
            // Let the tracer's teardown (uprobe detach) finish first.
            std::thread::sleep(Duration::from_millis(500));
        }
        let [bare, t, b] = ms;
        let per_hit =
            |probed: f64| (probed - bare) * 1e6 / invocations as f64 / HITS_PER_INVOCATION;
        ttp_slow.push(t / bare);
        bt_slow.push(b / bare);
        ttp_hit.push(per_hit(t));
        bt_hit.push(per_hit(b));
        println!(
            "{r:>5}  {bare:>7.1}  {t:>6.1}  {:>8.2}  {:>10.0}  {:>13.0}  {b:>11.1}  {:>8.2}  {:>15.0}",
            t / bare,
            per_hit(t),
            bpf_ns.last().copied().unwrap_or(f64::NAN),
            b / bare,
            per_hit(b)
        );
    }
    let _ = std::fs::remove_file(&json);
    println!();
    println!(
        "ttp vprofile: slowdown {:.2}x, {:.0} ns per probe hit end to end ({:.0} ns of it inside the BPF programs), medians of {rounds} rounds of {invocations} invocations",
        median(&mut ttp_slow),
        median(&mut ttp_hit),
        median(&mut bpf_ns)
    );
    println!(
        "bpftrace, same durations: slowdown {:.2}x, {:.0} ns per probe hit end to end",
        median(&mut bt_slow),
        median(&mut bt_hit)
    );
    println!("command: cargo xtask bench vprofile --rounds {rounds} --invocations {invocations}");
    Ok(())
}

/// The root's duration and each child's, summed per invocation and printed
/// as one line, as ttp's record carries them.
fn bpftrace_script(target: &Path) -> String {
    let t = target.display();
    let mut s = format!(
        "uprobe:{t}:vt_root_tight {{ @t0[tid] = nsecs; @sa[tid] = 0; @sb[tid] = 0; @sc[tid] = 0; }}\n"
    );
    for c in ["a", "b", "c"] {
        s += &format!(
            "uprobe:{t}:vt_{c} {{ @e{c}[tid] = nsecs; }}\nuretprobe:{t}:vt_{c} {{ @s{c}[tid] += nsecs - @e{c}[tid]; }}\n"
        );
    }
    s += &format!(
        "uretprobe:{t}:vt_root_tight {{ printf(\"%d %d %d %d\\n\", nsecs - @t0[tid], @sa[tid], @sb[tid], @sc[tid]); }}\n"
    );
    s
}

/// Runs the target once; `tracer(pid)` gives the command to attach to it,
/// and whether it must be interrupted (SIGINT) to end.
fn run_target(
    target: &Path,
    invocations: u64,
    wait_for_probes: bool,
    tracer: impl FnOnce(u32) -> Option<(Command, bool)>,
) -> anyhow::Result<Run> {
    let mut child = Command::new(target)
        .args(["tight", &invocations.to_string()])
        .arg(if wait_for_probes { "wait" } else { "-" })
        .stdout(Stdio::piped())
        .spawn()
        .context("starting vprof-target")?;
    let stdout = child.stdout.take().expect("piped");
    let mut child = Sleeper(child);
    let mut tracer = match tracer(child.0.id()) {
        Some((mut cmd, interrupt)) => Some((
            Sleeper(
                cmd.stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .context("starting the tracer")?,
            ),
            interrupt,
        )),
        None => None,
    };
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .context("reading vprof-target's result")?;
    let _ = child.0.wait();
    if let Some((t, interrupt)) = tracer.as_mut() {
        if *interrupt {
            // SAFETY: signalling our own child.
            unsafe { libc_kill(t.0.id() as i32, 2) };
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while t.0.try_wait()?.is_none() {
            if Instant::now() > deadline {
                bail!("the tracer did not end within 30 s of the program");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if !t.0.try_wait()?.is_some_and(|s| s.success()) && !*interrupt {
            bail!("ttp-ebpf vprofile failed; run it by hand to see why");
        }
    }
    let field = |name: &str| {
        line.split_whitespace()
            .skip_while(|w| *w != name)
            .nth(1)
            .and_then(|v| v.parse::<f64>().ok())
            .with_context(|| format!("no {name} in vprof-target's output: {line:?}"))
    };
    Ok(Run {
        elapsed_ns: field("elapsed_ns")?,
        probed_at_end: field("probed_at_end")? == 1.0,
    })
}

/// Builds the fixture the way the tests do (-O1, no inlining, symbols).
fn build_target() -> anyhow::Result<PathBuf> {
    let src = util::root_dir().join("tests/fixtures/vprof-target/vprof_target.c");
    let out = util::target_dir().join("vprof-target-bench");
    util::status(
        Command::new("cc")
            .args(["-O1", "-fno-inline", "-g", "-Wall", "-o"])
            .arg(&out)
            .arg(&src),
    )
    .context("building vprof-target (install a C compiler: apt-get install gcc)")?;
    Ok(out)
}
