//! `ttp-ebpf vprofile`: which functions explain the variance of a function's
//! latency (VProfiler, paper 004), on an unmodified binary through uprobes.
//!
//! [`prepare`] validates the options and builds the call graph (no root
//! needed); [`run_with`] runs the rounds against an
//! [`InvocationSource`] (the uprobe loader) and writes the outputs.
use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Context;

use crate::report::format::{Outputs, json::Json, svg::Svg};

use ttp_ledger::probe::{probe_error_ctx, symbols::DebugSearch};
use ttp_sys::{
    error::{UsageError, usage},
    sys::{
        invoker::Invoker,
        signals::StopFlag,
        spawn::{HeldChild, RunAs, RunningChild, SpawnError},
    },
};
use ttp_vprofile::{
    breakdown::BreakdownConfig,
    callgraph::{CallGraph, ChildKey},
    document::VprofileReport,
    driver::{self, InvocationSource, Stop},
    elf::{ElfError, ElfImage},
    uprobe::{UprobeSource, VprofProbeError},
};

/// Find the functions responsible for the variance of a function's
/// execution time, in a running program, without recompiling it.
///
/// Uprobes time the root function and each call it makes; the variance of
/// the root's duration is split into the variances and covariances of its
/// children (and of its own code, img_ROOT), and the most responsible
/// functions are broken down further, round by round.
///
/// Example: `sudo ttp-ebpf vprofile --pid 4242 --root PortalRun --duration 20s`
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The process to measure (else give a command after `--`).
    #[arg(long, conflicts_with = "command")]
    pub pid: Option<u32>,
    /// The executable or shared library the root function is in
    /// (default: the executable of the process of `--pid`, or the
    /// command's, found on PATH).
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// The root function: a name (`PortalRun`), a versioned name
    /// (`memcpy@GLIBC_2.2.5`) or an address (`0x4011d6`).
    #[arg(long, value_name = "FUNC")]
    pub root: String,
    /// Children of the root to measure: `auto` (every function it calls
    /// directly) or a comma-separated list.
    #[arg(long, default_value = "auto", value_name = "auto|F1,F2,…")]
    pub children: String,
    /// Count direct calls to code without a symbol (the static functions of
    /// a binary that keeps only .dynsym and whose debug file is not found)
    /// as children named sub_ADDRESS from the first round. Without it they
    /// become children once an img_FUNC that holds them is selected.
    #[arg(long)]
    pub unnamed_children: bool,
    /// Where separate debug files are (gdb's debug-file-directory):
    /// DIR/.build-id/xx/yyyy.debug and the .gnu_debuglink file under
    /// DIR/<the binary's directory>. Repeatable; /usr/lib/debug when not
    /// given. Servers in DEBUGINFOD_URLS are asked after these.
    #[arg(long = "debug-dir", value_name = "DIR")]
    pub debug_dirs: Vec<PathBuf>,
    /// At most this many factors are selected (k of Algorithm 1).
    #[arg(long, default_value_t = 3)]
    pub k: usize,
    /// Minimum contribution of a selected factor, as a share of Var(root):
    /// `5%` or `0.05`.
    #[arg(long, default_value = "5%", value_parser = parse_share)]
    pub threshold: f64,
    /// A child explaining at least this share of its parent's variance makes
    /// the parent unimportant (m of Algorithm 2).
    #[arg(long, default_value = "0.8", value_parser = parse_share)]
    pub min_child_share: f64,
    /// Measurement rounds at most (1: break down the root only).
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Measure each round for this long (e.g. 10s).
    #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "invocations")]
    pub duration: Option<Duration>,
    /// Measure each round until this many root invocations completed.
    #[arg(long)]
    pub invocations: Option<usize>,
    /// Write the result as JSON (schema ttp.vprofile/1).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Draw the variance tree as an SVG icicle chart.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Run the command after `--` as root instead of the invoking user
    /// (SUDO_UID).
    #[arg(long, requires = "command")]
    pub as_root: bool,
    /// Command to start and measure (after `--`).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `5%` → 0.05, `0.05` → 0.05; must lie in (0, 1].
fn parse_share(s: &str) -> Result<f64, String> {
    let v = match s.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => s.trim().parse::<f64>(),
    }
    .map_err(|_| format!("`{s}` is not a share: write e.g. 5% or 0.05"))?;
    if v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!("`{s}` must be above 0 and at most 100%"))
    }
}

/// Measures live: the process of `--pid`, or the command after `--`
/// (started here as the invoking user, held before `execve` until the
/// probe programs are loaded, stopped with SIGTERM when the measurement
/// ends).
pub fn run(args: Args) -> anyhow::Result<()> {
    let prepared = prepare(&args)?;
    let stop = StopFlag::install().context("installing signal handlers")?;
    ttp_sys::sys::run_state::restore_leftovers_and_say();
    let held = match args.pid {
        Some(_) => None,
        None => {
            let run_as = if args.as_root {
                RunAs::Current
            } else {
                RunAs::User(Invoker::detect().map_err(|e| UsageError::new(e.to_string()))?)
            };
            let mut cmd = std::process::Command::new(&args.command[0]);
            cmd.args(&args.command[1..]);
            Some(HeldChild::spawn(cmd, run_as).map_err(spawn_error)?)
        }
    };
    let pid = args.pid.or(held.as_ref().map(HeldChild::pid)).unwrap_or(0);
    let mut source = UprobeSource::new(pid).with_stop_flag(stop);
    source.preload().map_err(|e| match e {
        VprofProbeError::Probe(p) => probe_error_ctx(p),
        other => anyhow::Error::new(other),
    })?;
    // The probes' own cost, subtracted from every interval (docs/vprofile.md,
    // "The probes' own cost"); without it the report says so.
    match ttp_vprofile::uprobe::calibrate() {
        Ok(cost) => source = source.with_cost(cost),
        Err(e) => eprintln!("note: {e}; the probes' own cost is not subtracted"),
    }
    let started = match held {
        Some(h) => Some(Started(h.release().map_err(spawn_error)?)),
        None => None,
    };
    let report = run_with(&args, prepared, &mut source, Some(pid))?;
    if source.incomplete_records > 0 {
        eprintln!(
            "note: {} invocations had calls the probes could not track (deeper than {} open calls, or unwound by longjmp/exceptions)",
            source.incomplete_records,
            ttp_common::vprofile::MAX_DEPTH
        );
    }
    if report.measurement.lost_records.is_some_and(|l| l > 0) {
        eprintln!("note: records were lost (ring buffer full); the numbers cover the rest");
    }
    // Each uprobe takes a kernel grace period to detach: the report is out
    // before that.
    drop(source);
    drop(started);
    Ok(())
}

/// A command started by `run`, stopped when the measurement ends.
struct Started(RunningChild);

impl Drop for Started {
    fn drop(&mut self) {
        if !matches!(self.0.try_wait(), Ok(None)) {
            return;
        }
        let _ = self.0.signal(libc::SIGTERM);
        // A program gets 2 s to end on SIGTERM; RunningChild's own drop
        // kills and reaps it if it is still there.
        for _ in 0..200 {
            if !matches!(self.0.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A command that cannot be started is the user's to fix (usage error).
fn spawn_error(e: SpawnError) -> anyhow::Error {
    if e.is_usage() {
        UsageError::new(e.to_string()).into()
    } else {
        e.into()
    }
}

/// Validated options with the binary's call graph.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub elf: ElfImage,
    pub root: usize,
    pub config: BreakdownConfig,
    pub stop: Stop,
    pub only_root_children: Option<Vec<String>>,
    pub unnamed_children: bool,
}

/// Checks the options and the binary; errors are usage errors that say
/// what to do.
pub fn prepare(args: &Args) -> anyhow::Result<Prepared> {
    if args.pid.is_none() && args.command.is_empty() {
        return usage("give the process to measure: --pid PID, or a command after `--`");
    }
    if let Some(pid) = args.pid
        && !Path::new(&format!("/proc/{pid}")).exists()
    {
        return usage(format!("no process {pid}: check the pid (`pgrep NAME`)"));
    }
    if args.k == 0 {
        return usage("--k must be at least 1");
    }
    if args.rounds == 0 {
        return usage("--rounds must be at least 1");
    }
    let stop = match (args.duration, args.invocations) {
        (Some(d), _) if d.is_zero() => return usage("--duration must be longer than 0"),
        (Some(d), _) => Stop::Duration(d),
        (None, Some(n)) if n < 2 => {
            return usage("--invocations must be at least 2 (a variance needs two)");
        }
        (None, Some(n)) => Stop::Invocations(n),
        (None, None) => Stop::Duration(Duration::from_secs(10)),
    };
    let binary = match (&args.binary, args.pid) {
        (Some(b), _) => b.clone(),
        (None, Some(pid)) => process_executable(pid)?,
        (None, None) => command_executable(&args.command[0])?,
    };
    let elf = ElfImage::load_with(&binary, &DebugSearch::from_env(&args.debug_dirs))
        .map_err(elf_usage)?;
    let root = elf.lookup(&args.root).map_err(elf_usage)?;
    let only_root_children = if args.children == "auto" {
        None
    } else {
        let graph = CallGraph::build_with(&elf, root, args.unnamed_children);
        let known: Vec<String> = graph
            .children(root)
            .into_iter()
            .chain(graph.unnamed_children_of(&ChildKey::Local(root)))
            .map(|c| c.name)
            .collect();
        let wanted: Vec<String> = args
            .children
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        if let Some(bad) = wanted.iter().find(|w| !known.contains(w)) {
            return usage(format!(
                "`{bad}` is not a measurable child of {}; its children are: {}",
                args.root,
                known.join(", ")
            ));
        }
        Some(wanted)
    };
    Ok(Prepared {
        elf,
        root,
        config: BreakdownConfig {
            k: args.k,
            threshold_share: args.threshold,
            min_child_share: args.min_child_share,
            max_rounds: args.rounds,
        },
        stop,
        only_root_children,
        unnamed_children: args.unnamed_children,
    })
}

/// The executable process `pid` runs (`/proc/PID/exe`, through the
/// process's root when it runs in another mount namespace, as a server
/// in a container does: ttp_sys executable.rs), or a usage error saying
/// what to do. A function in a shared library needs `--binary`.
fn process_executable(pid: u32) -> anyhow::Result<PathBuf> {
    use ttp_sys::sys::executable::{Executable, of_process};
    match of_process(pid) {
        Ok(Executable::Path(p)) => Ok(p),
        Ok(Executable::Replaced(p)) => usage(format!(
            "the executable of process {pid} was replaced since it started ({} (deleted)): give --binary",
            p.display()
        )),
        Err(e) => usage(format!(
            "cannot read the executable of process {pid} ({e}): run with sudo, or give --binary"
        )),
    }
}

/// The executable a command names: itself when it holds a `/`, else the
/// first match on PATH, as `execvp` finds it.
fn command_executable(command: &str) -> anyhow::Result<PathBuf> {
    if command.contains('/') {
        return Ok(PathBuf::from(command));
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(command))
        .find(|p| p.is_file())
        .map_or_else(
            || {
                usage(format!(
                    "`{command}` is not on PATH: give its path, or --binary"
                ))
            },
            Ok,
        )
}

/// Problems with the binary or the function name are the user's to fix.
fn elf_usage(e: ElfError) -> anyhow::Error {
    ttp_sys::error::UsageError::new(e.to_string()).into()
}

/// Runs the rounds with `source` measuring, prints the text report and
/// writes the requested files.
pub(crate) fn run_with(
    args: &Args,
    prepared: Prepared,
    source: &mut dyn InvocationSource,
    pid: Option<u32>,
) -> anyhow::Result<VprofileReport> {
    let graph = CallGraph::build_with(&prepared.elf, prepared.root, prepared.unnamed_children);
    let report = driver::drive(
        &prepared.elf,
        &graph,
        prepared.config,
        prepared.stop,
        prepared.only_root_children,
        source,
        pid,
    )?;
    let shown = crate::report::render::Vprofile(report);
    crate::report::render::print(&shown);
    let report = shown.0;
    Outputs::default()
        .add_unannounced(args.json.as_deref(), Json(&report))
        .add_unannounced(args.svg.as_deref(), Svg::Vprofile(&report))
        .write()?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use ttp_sys::error::exit_code;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn args(line: &[&str]) -> Args {
        Cli::try_parse_from(std::iter::once("vprofile").chain(line.iter().copied()))
            .expect("parses")
            .args
    }

    /// Catches shares parsed as percent twice or accepted out of range.
    #[test]
    fn shares() {
        assert_eq!(parse_share("5%"), Ok(0.05));
        assert_eq!(parse_share("0.8"), Ok(0.8));
        assert!(parse_share("0").is_err());
        assert!(parse_share("150%").is_err());
        assert!(parse_share("five").is_err());
    }

    /// Bad input is a usage error (exit 2) that names the fix: a pid that
    /// does not exist, a binary that is not ELF, a function that is not in
    /// it. Catches failures reported as measurement errors (exit 1).
    #[test]
    fn bad_input_is_a_usage_error() {
        let err = prepare(&args(&[
            "--pid",
            "999999999",
            "--binary",
            "/bin/sh",
            "--root",
            "main",
        ]))
        .unwrap_err();
        assert_eq!(exit_code(&err), 2);
        assert!(err.to_string().contains("no process 999999999"), "{err}");

        let me = std::process::id().to_string();
        let not_elf = std::env::temp_dir().join(format!("ttp-vprof-not-elf-{me}"));
        std::fs::write(&not_elf, "#!/bin/sh\n").unwrap();
        let err = prepare(&args(&[
            "--pid",
            &me,
            "--binary",
            not_elf.to_str().unwrap(),
            "--root",
            "f",
        ]))
        .unwrap_err();
        assert_eq!(exit_code(&err), 2);
        assert!(err.to_string().contains("not an ELF"), "{err}");
        std::fs::remove_file(&not_elf).unwrap();

        let libc = "/lib/x86_64-linux-gnu/libc.so.6";
        let err = prepare(&args(&[
            "--pid", &me, "--binary", libc, "--root", "perrorr",
        ]))
        .unwrap_err();
        assert_eq!(exit_code(&err), 2);
        assert!(
            err.to_string().contains("perror"),
            "suggests the close name: {err}"
        );

        let err = prepare(&args(&["--binary", libc, "--root", "perror"])).unwrap_err();
        assert!(err.to_string().contains("--pid"), "{err}");
    }

    /// Without `--binary`, `--pid` measures the process's own executable
    /// and a command the file PATH finds for it. Catches a default that
    /// refuses, or that loads another file.
    #[test]
    fn the_binary_defaults_to_the_process_executable() {
        let me = std::process::id().to_string();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let p = prepare(&args(&["--pid", &me, "--root", "main"])).expect("own executable");
        assert_eq!(p.elf.path(), exe);
        let true_cmd = prepare(&args(&["--root", "main", "--", "true"]));
        let on_path = std::env::split_paths(&std::env::var_os("PATH").unwrap())
            .map(|d| d.join("true"))
            .find(|p| p.is_file())
            .unwrap();
        match true_cmd {
            Ok(p) => assert_eq!(p.elf.path(), on_path),
            // A stripped `true`: the error names the file it looked in.
            Err(e) => assert!(e.to_string().contains(on_path.to_str().unwrap()), "{e}"),
        }
        let err = prepare(&args(&["--root", "main", "--", "ttp-no-such-command"])).unwrap_err();
        assert_eq!(exit_code(&err), 2);
        assert!(err.to_string().contains("not on PATH"), "{err}");
    }

    /// `--children` must name real children of the root. Catches a typo
    /// silently measuring nothing.
    #[test]
    fn children_are_checked() {
        let me = std::process::id().to_string();
        let libc = "/lib/x86_64-linux-gnu/libc.so.6";
        let p = prepare(&args(&[
            "--pid",
            &me,
            "--binary",
            libc,
            "--root",
            "perror",
            "--children",
            "dup,fileno",
        ]))
        .unwrap();
        assert_eq!(
            p.only_root_children,
            Some(vec!["dup".into(), "fileno".into()])
        );
        let err = prepare(&args(&[
            "--pid",
            &me,
            "--binary",
            libc,
            "--root",
            "perror",
            "--children",
            "dupp",
        ]))
        .unwrap_err();
        assert_eq!(exit_code(&err), 2);
        assert!(
            err.to_string().contains("fileno"),
            "lists the real children: {err}"
        );
    }
}
