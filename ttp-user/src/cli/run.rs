//! `ttp-ebpf run`: repeated executions of a command, timed with the Tucson
//! Timing Protocol v2 (TTPv2, Sec. 8): each execution is one QE measured in
//! the order of Fig. 5, the N QEs form one Q@C, and Steps 1–5 turn them into
//! one number with its sanity checks.
use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Context;
use clap::Args;

use super::run_plan;
use crate::{
    commands::{self, Plan},
    report::{
        atomic,
        render::{self, Rendered},
    },
};
use ttp_ledger::collect::machine::MachineFacts;
use ttp_sys::{
    error::{UsageError, parse_duration, usage},
    sys::{affinity::CpuList, invoker::Invoker, signals::StopFlag, spawn::RunAs},
};
use ttp_ttpv2::{analysis::RunDocument, model::QcInput};
use ttp_window::window::session::{MeasurementSession, SessionOptions};

/// Run a command repeatedly and time it with the Tucson Timing Protocol v2:
/// per-process user, system and block-I/O time from /proc and the kernel
/// ledger, the paper's sanity checks and drops, Time_calc = (U + S + IO_calc)
/// × tick with IO_calc = BlockIO − 0.5 × IOWait, the median over retained
/// executions, and the exact time from the ledger beside it.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Measurement protocol.
    #[arg(long, value_enum, default_value_t = super::run_emp::Protocol::Ttpv2)]
    pub protocol: super::run_emp::Protocol,
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
    pub emp: super::run_emp::EmpArgs,
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

/// The sentence the Sec. 9 paragraph (6) carries for `--cpu`.
pub(crate) fn pinned_statement(pin: &CpuList) -> String {
    let n = pin.cpus().len();
    format!(
        "the command was pinned to CPU{} {pin} with sched_setaffinity before exec (--cpu), the other CPUs staying online",
        if n == 1 { "" } else { "s" }
    )
}

/// Whether the command line asks for several commands or a scan (which
/// `--postgres` does not measure; `--protocol emp` measures several
/// commands, not scans).
fn asks_for_several(args: &RunArgs) -> bool {
    args.command.iter().any(|a| a == run_plan::SEPARATOR)
        || !args.parameter_scan.is_empty()
        || !args.parameter_list.is_empty()
        || args.command_names.len() > 1
}

/// The command line of a TTPv2 `run` of commands, validated once into the
/// plan that `commands::measure` runs (as hyperfine's
/// `Options::from_cli_arguments`).
fn plan(args: &RunArgs) -> anyhow::Result<Plan> {
    let labels = parse_labels(&args.labels)?;
    let commands = run_plan::split_commands(&args.command, &args.command_names)?;
    for c in &commands {
        check_command(&c.argv)?;
    }
    let parameter = if !args.parameter_scan.is_empty() {
        Some(run_plan::scan_values(
            &args.parameter_scan,
            args.parameter_step_size.as_deref(),
        )?)
    } else if !args.parameter_list.is_empty() {
        Some(run_plan::list_values(&args.parameter_list)?)
    } else {
        None
    };
    let qcs = run_plan::qc_specs(
        &commands,
        parameter.as_ref(),
        &labels,
        args.prepare.as_deref(),
        args.plan_cmd.as_deref(),
    )?;
    if qcs.len() > 1 && args.trace.is_some() {
        return usage(
            "--trace follows one Q@C: leave it out with several commands or a parameter scan",
        );
    }
    let pin = match &args.cpu {
        Some(list) => Some(cpu_list(list)?),
        None => None,
    };
    if args.blame && args.blame_window.is_zero() {
        return usage("--blame-window must be longer than 0, e.g. --blame-window 50ms");
    }
    let run_as = if args.as_root {
        RunAs::Current
    } else {
        RunAs::User(Invoker::detect().map_err(|e| UsageError::new(e.to_string()))?)
    };
    Ok(Plan {
        qcs,
        n: args.n,
        parameter: parameter.map(|p| p.name),
        several_commands: commands.len() > 1,
        timeout: args.timeout,
        backoff: args.backoff,
        transient_exit: args.transient_exit.clone(),
        show_output: args.show_output,
        query_process: args.query_process.clone(),
        utilities: args.utilities.clone(),
        pin,
        run_as,
        cold_cache: args
            .cold_cache
            .then(ttp_window::window::cold_cache::ColdCache::new),
        warmup: args.warmup(),
    })
}

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    match route(&args)? {
        Route::Emp => super::run_emp::run(args),
        Route::Postgres(conninfo) => super::run_pg::run(args, &conninfo),
        Route::Commands => run_commands(args),
    }
}

/// Which procedure measures a `run`.
enum Route {
    /// EMP over commands (cli/run_emp.rs).
    Emp,
    /// TTPv2 over one statement of a PostgreSQL server (cli/run_pg.rs).
    Postgres(String),
    /// TTPv2 over one or more commands, interleaved (here).
    Commands,
}

/// Checks the arguments that decide the procedure, and picks it.
fn route(args: &RunArgs) -> anyhow::Result<Route> {
    let emp = args.protocol == super::run_emp::Protocol::Emp;
    let scan = !args.parameter_scan.is_empty() || !args.parameter_list.is_empty();
    if scan && emp {
        return usage(
            "parameter scans are measured with TTPv2 (its monotonicity checks order the values); with --protocol emp give the commands separated by :::",
        );
    }
    if args.postgres.is_some() && emp {
        return usage("--postgres measures with TTPv2; --protocol emp applies to commands");
    }
    if emp && args.warmup.is_some() {
        return usage(
            "--warmup applies to TTPv2; --protocol emp makes its own warm-up run before its measured runs (docs/emp.md): leave --warmup out",
        );
    }
    if emp {
        if args.export_markdown.is_some() && !args.command.iter().any(|a| a == run_plan::SEPARATOR)
        {
            return usage(
                "--export-markdown writes TTPv2 reports; with --protocol emp use `ttp-ebpf report FILE --format markdown` on its --json",
            );
        }
        return Ok(Route::Emp);
    }
    args.emp.reject_outside_emp()?;
    if args.n == 0 {
        return usage("-n must be at least 1");
    }
    if let Some(conninfo) = args.postgres.clone() {
        if asks_for_several(args) || args.export_markdown.is_some() {
            return usage(
                "--postgres measures one statement: --command-name, :::, --parameter-scan, -L and --export-markdown apply to commands",
            );
        }
        return Ok(Route::Postgres(conninfo));
    }
    Ok(Route::Commands)
}

/// TTPv2 over the plan's commands: one session, the Q@Cs' QEs interleaved,
/// then the report of one Q@C or of several.
fn run_commands(args: RunArgs) -> anyhow::Result<()> {
    let plan = plan(&args)?;
    let stop = StopFlag::install().context("installing signal handlers")?;
    let mut session = MeasurementSession::open(SessionOptions {
        trace: args.trace.is_some(),
        delay_accounting: true,
        taskstats_exits: true,
        wake_latency: args.wake_latency,
        ..Default::default()
    })?;
    let mut recorder = match &args.trace {
        Some(_) => Some(
            ttp_window::window::trace_record::Recorder::start(&mut session.ledger, &[])
                .context("starting the trace")?,
        ),
        None => None,
    };
    let mut machine = session.machine_facts(args.cold_cache);
    if let Some(pin) = &plan.pin {
        machine.deviations.push(pinned_statement(pin));
    }
    let mut qcs = plan.qc_inputs(session.user_hz as u32, &machine);
    let blame = args.blame.then(|| ttp_blame::qe::QeBlameStarter {
        window_ns: u64::try_from(args.blame_window.as_nanos()).unwrap_or(u64::MAX),
    });
    let mut ctx = session.qe_context(plan.run_as.clone());
    ctx.recorder = recorder
        .as_mut()
        .map(|r| r as &mut dyn ttp_window::window::context::FollowProcess);
    plan.configure(&mut ctx);
    ctx.beside = blame
        .as_ref()
        .map(|b| b as &dyn ttp_window::window::context::BesideQe);
    let measured = measure(&mut ctx, &args, &plan, &mut qcs, &machine, &stop)?;
    let (failure, spans, warmups) = (measured.failure, measured.spans, measured.warmups);
    drop(ctx);
    let recording = match recorder {
        Some(r) => Some(r.finish(&session.ledger).context("finishing the trace")?),
        None => None,
    };
    drop(session);
    // A command that could not start at all: the error alone, no report.
    for qc in &mut qcs {
        if qc.qes.iter().all(|q| q.spawn_error.is_some()) {
            qc.qes.clear();
        }
    }
    if qcs.iter().all(|qc| qc.qes.is_empty()) {
        return match failure {
            Some(e) => Err(e),
            None => usage("interrupted before the first execution: nothing measured"),
        };
    }
    if qcs.len() > 1 {
        super::run_several::finish(&args, &plan, &qcs, &machine)?;
    } else {
        finish_one(&args, &qcs[0], &machine, recording, &spans, &warmups)?;
    }
    match failure {
        Some(e) => {
            Err(e.context("the command could not be run; the executions measured before are kept"))
        }
        None => Ok(()),
    }
}

/// The plan's rounds (`commands::measure`) with a progress bar, the JSON
/// rewritten after every QE so that an interrupted run keeps its QEs, and
/// restarts and retries said whether or not the bar is drawn.
fn measure(
    ctx: &mut ttp_window::window::context::QeContext<'_>,
    args: &RunArgs,
    plan: &Plan,
    qcs: &mut [QcInput],
    machine: &MachineFacts,
    stop: &StopFlag,
) -> anyhow::Result<commands::Measured> {
    let bar = crate::report::progress::bar(u64::from(plan.n) * qcs.len() as u64, "QE");
    let notify = |m: String| {
        if bar.is_hidden() {
            eprintln!("{m}");
        } else {
            bar.println(m);
        }
    };
    let mut on_qe = |qcs: &[QcInput], j: usize, who: &str| {
        bar.set_position(qcs.iter().map(|q| q.qes.len() as u64).sum());
        if let Some(r) = qcs[j].qes.last() {
            bar.set_message(format!("{who}: {:.1} ms", r.time_meas_ms));
        }
        match &args.json {
            Some(path) => save(path, qcs, machine),
            None => Ok(()),
        }
    };
    let end = commands::measure(ctx, plan, qcs, stop, &mut on_qe, &notify);
    bar.finish_and_clear();
    end
}

/// Writes the run's JSON: one Q@C as `ttp.run/1`, several as
/// `ttp.analyze/1` (what `analyze` writes, so `report` and `compare` read
/// it). Rewritten after every QE, so an interrupted run keeps its QEs.
fn save(path: &Path, qcs: &[QcInput], machine: &MachineFacts) -> anyhow::Result<()> {
    match qcs {
        [qc] => ttp_sys::sys::atomic::write_json(path, &RunDocument::new(qc, Some(machine))),
        _ => ttp_sys::sys::atomic::write_json(path, &super::run_several::document(qcs, machine)),
    }
    .with_context(|| format!("writing {}", path.display()))
}

/// The protocol track's slices of a run of one Q@C: each warm-up
/// execution, named as one (`warm-up 1`, marked not kept), so that its
/// processes are not taken for QE 1's, then each QE kept with its time
/// span.
fn qe_slices(
    doc: &RunDocument,
    spans: &[(u32, u64, u64)],
    warmups: &[(u32, u64, u64)],
) -> Vec<crate::report::trace::QeSlice> {
    let warm = warmups
        .iter()
        .map(|&(w, t0, t1)| crate::report::trace::QeSlice {
            name: format!("warm-up {w}"),
            start_ns: t0,
            end_ns: t1,
            time_meas_ms: doc
                .qc
                .setup
                .warmup
                .get(w as usize - 1)
                .map_or(0.0, |m| m.time_meas_ms),
            time_calc_ms: None,
            dropped: Some("warm-up execution: measured, not kept (--warmup)".into()),
        });
    let qes = doc.qc.qes.iter().filter_map(|q| {
        let &(_, t0, t1) = spans.iter().find(|(n, _, _)| *n == q.record.qe)?;
        Some(crate::report::trace::QeSlice {
            name: format!("QE {}", q.record.qe),
            start_ns: t0,
            end_ns: t1,
            time_meas_ms: q.record.time_meas_ms,
            time_calc_ms: q.calc.time_calc_ms,
            dropped: (!q.dropped_by.is_empty()).then(|| q.dropped_by.join(", ")),
        })
    });
    warm.chain(qes).collect()
}

/// The report of a run of one Q@C: the TTPv2 report, the JSON, the trace,
/// the chart and the Markdown.
fn finish_one(
    args: &RunArgs,
    qc: &QcInput,
    machine: &MachineFacts,
    recording: Option<ttp_window::window::trace_record::Recording>,
    spans: &[(u32, u64, u64)],
    warmups: &[(u32, u64, u64)],
) -> anyhow::Result<()> {
    let doc = RunDocument::new(qc, Some(machine));
    if let Some(path) = &args.json {
        atomic::write_json_result(path, &doc)?;
    }
    if let (Some(path), Some(recording)) = (&args.trace, recording) {
        let mut trace = crate::report::trace::Trace::new(recording, "ttp run (TTPv2)");
        for slice in qe_slices(&doc, spans, warmups) {
            trace.add_qe(slice)?;
        }
        trace.write(path)?;
        crate::report::atomic::announce(path);
    }
    // The report `report` shows for the saved file, with `--blame`'s
    // section when the QEs carry blame (report/render/ttpv2.rs).
    let shown = render::Run(doc);
    render::print(&shown);
    if let Some(path) = &args.svg {
        let svg = crate::report::ttpv2::svg::render_svg(&shown.0.to_analysis())
            .context("drawing the chart")?;
        atomic::write_result(path, svg.as_bytes())?;
    }
    if let Some(path) = &args.export_markdown {
        atomic::write_result(path, shown.markdown().as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use ttp_ttpv2::{
        analysis::RunDocument,
        model::{QcInput, WarmUp},
    };
    use ttp_window::window::record::QeRecord;

    /// The warm-up execution is its own slice on the protocol track,
    /// named as a warm-up and marked not kept, before QE 1's; each QE keeps
    /// its name and span. Catches a warm-up shown as QE 1 or not at all.
    #[test]
    fn warm_up_slice_is_named_apart() {
        let mut qc = QcInput {
            labels: Default::default(),
            source: None,
            command: vec!["true".into()],
            setup: Default::default(),
            qes: vec![QeRecord::new(1, 10.0), QeRecord::new(2, 11.0)],
        };
        qc.setup.warmup.push(WarmUp {
            time_meas_ms: 25.0,
            exit_code: Some(0),
            u_ticks: None,
            s_ticks: None,
            time_exact_ms: None,
        });
        let doc = RunDocument::new(&qc, None);
        let slices = super::qe_slices(&doc, &[(1, 300, 400), (2, 500, 610)], &[(1, 100, 250)]);
        let names: Vec<&str> = slices.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["warm-up 1", "QE 1", "QE 2"]);
        assert_eq!((slices[0].start_ns, slices[0].end_ns), (100, 250));
        assert_eq!(slices[0].time_meas_ms, 25.0);
        assert!(
            slices[0]
                .dropped
                .as_deref()
                .is_some_and(|d| d.contains("not kept"))
        );
        assert_eq!((slices[1].start_ns, slices[1].end_ns), (300, 400));
        assert_eq!(slices[2].time_meas_ms, 11.0);
    }
}
