//! The arguments of `ttp-ebpf run` (TTPv2, EMP, `--postgres`, several
//! commands and scans) and the checks of them every way of running shares.
use std::{path::PathBuf, time::Duration};

use anyhow::Context;
use clap::{Args, ValueEnum};

use ttp_emp::PtSource;
use ttp_sys::{
    error::{parse_duration, usage},
    sys::affinity::CpuList,
};

/// The measurement protocol of `run`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Protocol {
    /// Tucson Timing Protocol v2: programs and queries that mix CPU and I/O.
    #[default]
    Ttpv2,
    /// Execution-time Measurement Protocol: compute-bound programs, timed
    /// by their process time (docs/emp.md).
    Emp,
}

/// Options of `--protocol emp`.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "EMP (--protocol emp)")]
pub struct EmpArgs {
    /// Daemon cut-off profile from `ttp-ebpf calibrate` (EMPv5's first
    /// sanity check); without it only the ±2σ check is applied.
    #[arg(long, value_name = "PROFILE")]
    pub cutoffs: Option<PathBuf>,
    /// Write emp_series.svg (ET and PT per run, dropped runs marked) into DIR.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Write the raw runs (schema ttp.emp-runs/1: ET, PT from both sources,
    /// every daemon's PT) to FILE after every run, for `analyze
    /// --sample-size` and `calibrate --from`.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Source of the program's PT: the scheduler's runtime (ns, steal
    /// excluded), the kernel ledger's on-CPU time (ns) or taskstats
    /// ac_utime plus ac_stime (µs, tick-sampled); auto takes the runtime,
    /// then the ledger, then taskstats (docs/emp.md).
    #[arg(long, value_enum, default_value_t = PtSource::Auto)]
    pub pt_source: PtSource,
}

impl EmpArgs {
    /// Refuses EMP options under `--protocol ttpv2`.
    pub(crate) fn reject_outside_emp(&self) -> anyhow::Result<()> {
        let given = [
            ("--cutoffs", self.cutoffs.is_some()),
            ("--plot", self.plot.is_some()),
            ("--record", self.record.is_some()),
            ("--pt-source", self.pt_source != PtSource::Auto),
        ];
        match given.iter().find(|(_, g)| *g) {
            Some((name, _)) => usage(format!("{name} belongs to --protocol emp; add it")),
            None => Ok(()),
        }
    }
}

/// Run a command repeatedly and time it with the Tucson Timing Protocol v2:
/// per-process user, system and block-I/O time from /proc and the kernel
/// ledger, the paper's sanity checks and drops, Time_calc = (U + S + IO_calc)
/// × tick with IO_calc = BlockIO − 0.5 × IOWait, the median over retained
/// executions, and the exact time from the ledger beside it.
///
/// While it measures, delay accounting is switched on and, on a VM whose
/// balloon hands free memory back to its host, that reporting is held off
/// (its order at the largest the kernel takes), so that no QE pays for
/// memory the host took back; both are restored when it ends, and by the
/// next ttp command after a kill (docs/ttpv2.md, docs/check.md).
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Measurement protocol.
    #[arg(long, value_enum, default_value_t = Protocol::Ttpv2)]
    pub protocol: Protocol,
    /// Number of executions (QEs).
    #[arg(short = 'n', long = "executions", default_value_t = 10)]
    pub n: u32,
    /// Before each execution, after --plan-cmd and --prepare, sync and drop
    /// the page cache (Sec. 3.1).
    #[arg(long)]
    pub cold_cache: bool,
    /// Warm-up executions of each command before its QE 1, with the same
    /// steps before each (--plan-cmd, --prepare, --cold-cache): measured
    /// and shown, not kept. They take the one-time costs of a first
    /// execution (memory the hypervisor took back, first touches) so QE 1
    /// starts under the conditions of the others (docs/ttpv2.md). One by
    /// default. With --postgres: the statement executed N times over the
    /// measuring connection before QE 1. Not with --protocol emp, which
    /// makes its own warm-up run.
    #[arg(long, value_name = "N")]
    pub warmup: Option<u32>,
    /// Shell command run before each execution (e.g. a DBMS cache flush or
    /// restart), as the same user as the command.
    #[arg(long, value_name = "CMD")]
    pub prepare: Option<String>,
    /// Shell command whose output is the execution plan, captured before
    /// each execution (the unique-plan check X2).
    #[arg(long, value_name = "CMD")]
    pub plan_cmd: Option<String>,
    /// The query process is the process of this name with the highest
    /// U + S that appears in every execution (Sec. 7.2); default: the
    /// command's own process tree.
    #[arg(long, value_name = "NAME")]
    pub query_process: Option<String>,
    /// Names of utility processes (e.g. the DBMS's other processes).
    #[arg(long = "utility", value_name = "NAME")]
    pub utilities: Vec<String>,
    /// Kill an execution that runs longer than this (QE13).
    #[arg(long, default_value = "20m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// A KEY=VALUE label of this Q@C (repeatable), e.g. cardinality=1000.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// Write the run (schema ttp.run/1; ttp.emp/1 with --protocol emp) to
    /// FILE, rewritten after every QE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a chart of the per-QE times (SVG).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Write a Perfetto-compatible trace of the command's processes (Chrome
    /// Trace Event JSON) with one slice per QE on a protocol track.
    #[arg(long, value_name = "FILE", conflicts_with = "postgres")]
    pub trace: Option<PathBuf>,
    /// Also measure wake latency (`wake_latency_ns` in the ledger figures:
    /// wall clock from each wake-up to the switch-in) by loading a program
    /// on every wake-up of the machine (docs/ledger.md). `--trace` implies
    /// it.
    #[arg(long, conflicts_with = "postgres")]
    pub wake_latency: bool,
    /// Also measure the interrupt time inside the query's on-CPU time
    /// (`irq_ns`: hard and soft interrupt handlers that ran while its
    /// threads were on a CPU, which this kernel charges to them) by
    /// loading programs on every interrupt of the machine; the report
    /// then gives the on-CPU time without interrupts beside the kernel's
    /// (docs/ttpv2.md). The local timer is counted (x86), IPIs are not.
    #[arg(long, conflicts_with = "postgres")]
    pub irq_time: bool,
    /// Run the command as root instead of the invoking user (SUDO_UID).
    #[arg(long)]
    pub as_root: bool,
    /// Explain each QE's blocked time: which concurrent processes, kernel
    /// threads or unknown causes slowed the command (iQCAR blame, as
    /// `ttp-ebpf blame`), kept per QE in the JSON and listed in the report.
    #[arg(long, conflicts_with = "postgres")]
    pub blame: bool,
    /// The blame's window δt (with --blame).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "50ms", requires = "blame")]
    pub blame_window: std::time::Duration,
    /// Measure a statement on the PostgreSQL server of this machine
    /// instead of a command: key=value pairs or a postgresql:// URL
    /// (docs/postgres.md). The query process is the backend serving ttp's
    /// connection.
    #[arg(long, value_name = "CONNSTR")]
    pub postgres: Option<String>,
    /// --postgres: the statement to measure, prepared once and executed
    /// once per QE; its plan is captured before each QE.
    #[arg(long, value_name = "SQL", requires = "postgres")]
    pub sql: Option<String>,
    /// --postgres --cold-cache: shell command that restarts the server
    /// (run as root), e.g. 'systemctl restart postgresql'; default: pg_ctl
    /// restart of the running server's data directory.
    #[arg(long, value_name = "CMD", requires = "postgres")]
    pub restart_cmd: Option<String>,
    /// First back-off after a transient failure (--postgres: connection
    /// lost, server restarting; a command: see --transient-exit), doubled at
    /// each of up to ten retries, after which the run pauses (Sec. 3.2.3).
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub backoff: Duration,
    /// Exit statuses of the command, --plan-cmd or --prepare that mean a
    /// transient failure (e.g. a lost connection): the QE is not kept and
    /// is retried after --backoff (comma-separated or repeated). A command
    /// that fails to start for a reason of the moment (EAGAIN, ENOMEM,
    /// ETXTBSY) is always retried.
    #[arg(
        long,
        value_name = "CODES",
        value_delimiter = ',',
        conflicts_with = "postgres"
    )]
    pub transient_exit: Vec<i32>,
    /// Pin the measured command to these CPUs (a cpulist such as 1, 0,2 or
    /// 0-3, as taskset -c takes): sched_setaffinity in the child before
    /// exec, inherited by everything it starts (with --protocol emp, every
    /// run); with --postgres, the backend serving ttp's connection, before
    /// each QE. The report states it. --prepare and --plan-cmd are not
    /// pinned.
    #[arg(long = "cpu", value_name = "LIST")]
    pub cpu: Option<String>,
    /// Print the command's standard output (by default it is discarded,
    /// as hyperfine does, so the report is not mixed with it; standard
    /// error is always shown).
    #[arg(long)]
    pub show_output: bool,
    /// Name the commands in reports, labels (name=NAME) and comparisons,
    /// in the order they are given (repeatable; hyperfine's option). A
    /// command after `:::` may also be named there: `::: --command-name
    /// NEW -- CMD2`. Default with several commands: the command line.
    #[arg(long = "command-name", visible_alias = "name", value_name = "NAME")]
    pub command_names: Vec<String>,
    /// Scan a parameter: one Q@C per value MIN, MIN + STEP, … ≤ MAX,
    /// labelled NAME=VALUE, with `{NAME}` replaced in the command,
    /// --prepare and --plan-cmd; the Q@Cs' QEs are interleaved, and the
    /// parameter plays the cardinality in QC3/QC4 and POST2/POST3.
    #[arg(long, num_args = 3, value_names = ["NAME", "MIN", "MAX"], conflicts_with = "parameter_list")]
    pub parameter_scan: Vec<String>,
    /// --parameter-scan: the step (default 1; with -D, decimals are
    /// allowed).
    #[arg(short = 'D', long, value_name = "STEP", requires = "parameter_scan")]
    pub parameter_step_size: Option<String>,
    /// Scan a list of values: -L NAME=v1,v2,… (or hyperfine's -L NAME
    /// v1,v2,…), one Q@C per value as --parameter-scan.
    #[arg(short = 'L', long, num_args = 1..=2, value_names = ["NAME=VALUES"])]
    pub parameter_list: Vec<String>,
    /// Also write the report's tables as Markdown to FILE (hyperfine's
    /// option): per Q@C its QEs and result, and the comparison of the
    /// commands.
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
    #[command(flatten)]
    pub emp: EmpArgs,
    /// The command to measure; several commands are separated by `:::`
    /// (`-- ./old ARGS ::: ./new ARGS`) and run interleaved, QE i of each
    /// before QE i + 1 of any.
    #[arg(
        trailing_var_arg = true,
        required_unless_present = "postgres",
        value_name = "CMD"
    )]
    pub command: Vec<String>,
}

pub(crate) fn parse_labels(labels: &[String]) -> anyhow::Result<ttp_ttpv2::model::Labels> {
    let mut out = ttp_ttpv2::model::Labels::new();
    for l in labels {
        let Some((k, v)) = l.split_once('=') else {
            return usage(format!(
                "label {l:?} is not KEY=VALUE (e.g. --label cardinality=1000)"
            ));
        };
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(out)
}

/// Refuses, before anything is set up, a command that cannot be found or
/// executed (a mistyped name fails with one line, not a report).
pub(crate) fn check_command(command: &[String]) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let Some(name) = command.first() else {
        return usage("no command given: ttp-ebpf run [OPTIONS] -- CMD [ARGS…]");
    };
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let found = if name.contains('/') {
        executable(std::path::Path::new(name))
    } else {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|d| executable(&d.join(name))))
    };
    if found {
        Ok(())
    } else {
        usage(format!(
            "command not found or not executable: {name:?} (check its spelling, or give its path)"
        ))
    }
}

/// `--cpu LIST`, checked against the CPUs ttp itself may use (online and in
/// its own affinity), so a typo fails in one line before anything runs.
pub(crate) fn cpu_list(list: &str) -> anyhow::Result<CpuList> {
    let allowed = CpuList::current().context("reading ttp's own CPU affinity")?;
    CpuList::parse_within(list, &allowed).or_else(|e| usage(e.to_string()))
}
