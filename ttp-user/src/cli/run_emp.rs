//! `ttp-ebpf run --protocol emp`: a compute-bound program timed with EMP
//! (paper 001, Fig. 8): the EMPv1–v4 set-up read from a `check` snapshot
//! (Step 1; the report claims "EMPv5" only when all four hold), one
//! discarded warm-up run, N runs measured under the
//! kernel ledger, EMPv5's outlier removal (daemon cut-offs from a
//! calibration profile, then ±2σ on PT, Sec. 4.5), and the average PT of the
//! retained runs (Step 4).
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};

use super::run::RunArgs;
use crate::{
    commands::emp::{self as emp_runs, LivePlan},
    report::{emp as emp_report, format},
};
use ttp_emp::{EmpConfig, EmpOutcome, EmpRun, EmpSetup, Profile, PtSource, apply};
use ttp_sys::{
    error::{UsageError, usage},
    sys::{
        invoker::Invoker,
        setup_check::{live::LiveProbes, run_checks},
        signals::StopFlag,
        spawn::RunAs,
    },
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

/// TTPv2 options that EMP does not use.
fn reject_ttpv2_options(a: &RunArgs) -> anyhow::Result<()> {
    let given = [
        (
            "--cold-cache",
            a.cold_cache,
            "EMP measures with a warm cache (Sec. 4)",
        ),
        (
            "--prepare",
            a.prepare.is_some(),
            "it goes with --cold-cache",
        ),
        (
            "--plan-cmd",
            a.plan_cmd.is_some(),
            "plans are a TTPv2 check",
        ),
        (
            "--query-process",
            a.query_process.is_some(),
            "EMP's program is the command's own process tree",
        ),
        (
            "--utility",
            !a.utilities.is_empty(),
            "under EMP every other process is a daemon",
        ),
        ("--label", !a.labels.is_empty(), "labels name a TTPv2 Q@C"),
        ("--svg", a.svg.is_some(), "use --plot DIR"),
        (
            "--transient-exit",
            !a.transient_exit.is_empty(),
            "EMP sets a failed run aside and goes on",
        ),
    ];
    match given.iter().find(|(_, g, _)| *g) {
        Some((name, _, why)) => usage(format!(
            "{name} is a TTPv2 option ({why}); drop it or use --protocol ttpv2"
        )),
        None => Ok(()),
    }
}

pub(super) fn outcome(
    runs: &[EmpRun],
    profile: Option<&Profile>,
    cfg: &EmpConfig,
    args: &RunArgs,
    setup: &EmpSetup,
) -> Result<EmpOutcome, ttp_emp::EmpError> {
    let mut o = apply(runs, profile, cfg)?;
    o.command = args.command.clone();
    o.profile_path = args.emp.cutoffs.clone();
    o.setup = Some(setup.clone());
    Ok(o)
}

/// How long the set-up snapshot samples CPU use and steal time (the
/// default of `ttp-ebpf check --sample`).
pub(super) const SETUP_SAMPLE: std::time::Duration = std::time::Duration::from_secs(1);

/// What an EMP run of one or several programs settles before the first
/// of them runs: the calibration profile, who runs the programs, the PT
/// source, Fig. 8 Step 1's set-up snapshot, the stop flag and the CPUs.
pub(super) struct EmpStart {
    pub profile: Option<Profile>,
    pub run_as: RunAs,
    pub cfg: EmpConfig,
    pub setup: EmpSetup,
    pub stop: StopFlag,
    pub pin: Option<ttp_sys::sys::affinity::CpuList>,
}

impl EmpStart {
    pub fn new(args: &RunArgs) -> anyhow::Result<EmpStart> {
        let profile = match &args.emp.cutoffs {
            Some(p) => Some(Profile::load(p).map_err(|e| UsageError::new(e.to_string()))?),
            None => None,
        };
        let run_as = if args.as_root {
            RunAs::Current
        } else {
            RunAs::User(Invoker::detect().map_err(|e| UsageError::new(e.to_string()))?)
        };
        let cfg = EmpConfig {
            pt_source: args.emp.pt_source,
            ..EmpConfig::default()
        };
        // Fig. 8 Step 1: the EMPv1–v4 set-up, as `check` reports it, before
        // the first run (so the snapshot does not see the programs).
        let setup = EmpSetup::from_check(run_checks(PathBuf::from("/"), &LiveProbes, SETUP_SAMPLE));
        let stop = StopFlag::install().context("installing signal handlers")?;
        let pin = match &args.cpu {
            Some(list) => Some(super::run::cpu_list(list)?),
            None => None,
        };
        Ok(EmpStart {
            profile,
            run_as,
            cfg,
            setup,
            stop,
            pin,
        })
    }
}

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    if args.n == 0 {
        return usage("-n must be at least 1 (the paper's EMPv6 suggests 10)");
    }
    reject_ttpv2_options(&args)?;
    let commands = super::run_plan::split_commands(&args.command, &args.command_names)?;
    if commands.len() > 1 {
        return super::run_emp_several::run(&args, &commands);
    }
    let EmpStart {
        profile,
        run_as,
        cfg,
        setup,
        stop,
        pin,
    } = EmpStart::new(&args)?;
    let plan = LivePlan {
        pin: pin.clone(),
        command: &args.command,
        runs: args.n,
        timeout: Some(args.timeout),
        run_as,
        quiet: false,
    };
    let bar = crate::report::progress::Progress::new(plan.runs_of(1), "runs");
    let live = emp_runs::measure(&plan, &stop, &|m| bar.notice(m), |runs| {
        if let Some(run) = runs.last() {
            bar.set_message(emp_runs::progress_message(run, None));
        }
        if let Some(path) = &args.emp.record {
            ttp_emp::EmpRuns::write(path, &args.command, runs)?;
        }
        // The result so far, once a run beyond the warm-up exists.
        if let Some(path) = &args.json
            && let Ok(o) = outcome(runs, profile.as_ref(), &cfg, &args, &setup)
        {
            format::write_unannounced_file(path, &format::json::Json(&o))?;
        }
        bar.inc(1);
        Ok(())
    });
    bar.finish_and_clear();
    let live = live?;
    if live.runs.is_empty() {
        return match live.failure {
            Some(e) => Err(e),
            None => usage("interrupted before the first run: nothing measured"),
        };
    }
    let mut o = match outcome(&live.runs, profile.as_ref(), &cfg, &args, &setup) {
        Ok(o) => o,
        Err(e) => {
            let e = anyhow::Error::new(e);
            return Err(match live.failure {
                Some(f) => f.context(e.to_string()),
                None => e,
            });
        }
    };
    o.notes.extend(live.notes);
    if let Some(pin) = &pin {
        o.notes.push(crate::commands::pinned_statement(pin));
    }
    if live.interrupted {
        o.notes.push(format!(
            "interrupted: {} of {} runs measured; the result covers those",
            live.runs.len().saturating_sub(1),
            args.n
        ));
    }
    if let Some(path) = &args.json {
        format::write(path, &format::json::Json(&o))?;
    }
    if let Some(path) = &args.emp.record {
        crate::report::atomic::announce(path);
    }
    let shown = crate::report::render::Outcome(o);
    crate::report::render::print(&shown);
    let o = shown.0;
    if let Some(dir) = &args.emp.plot {
        for p in emp_report::write_run_plots(dir, &o)? {
            crate::report::atomic::announce(&p);
        }
    }
    match live.failure {
        Some(e) => {
            Err(e.context("the command could not be run; the runs measured before are kept"))
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    fn run_args(words: &[&str]) -> super::RunArgs {
        let argv = ["ttp-ebpf", "run"].iter().chain(words);
        match Cli::try_parse_from(argv)
            .expect("valid command line")
            .command
        {
            Command::Run(a) => a,
            _ => unreachable!(),
        }
    }

    fn usage_message(words: &[&str]) -> String {
        let e = crate::cli::run::run(run_args(words)).expect_err("refused");
        assert_eq!(ttp_sys::error::exit_code(&e), 2, "{e}");
        e.to_string()
    }

    /// Options of the other protocol are refused before anything is
    /// measured, with what to do. Catches --cold-cache or --warmup silently
    /// ignored under EMP (which measures warm, after its own warm-up run)
    /// or --cutoffs ignored under TTPv2.
    #[test]
    fn options_of_the_other_protocol_are_refused() {
        let m = usage_message(&["--protocol", "emp", "--cold-cache", "--", "true"]);
        assert!(m.contains("--cold-cache is a TTPv2 option"), "{m}");
        let m = usage_message(&["--protocol", "emp", "--svg", "x.svg", "--", "true"]);
        assert!(m.contains("--plot DIR"), "{m}");
        let m = usage_message(&["--cutoffs", "p.json", "--", "true"]);
        assert!(m.contains("--protocol emp"), "{m}");
        let m = usage_message(&["--protocol", "emp", "-n", "0", "--", "true"]);
        assert!(m.contains("-n must be at least 1"), "{m}");
        // EMP makes its own warm-up run: a second one is not silently
        // ignored.
        let m = usage_message(&["--protocol", "emp", "--warmup", "2", "--", "true"]);
        assert!(m.contains("--warmup applies to TTPv2"), "{m}");
    }

    /// A profile that cannot be read stops the command before it measures.
    /// Catches a measurement of many runs whose first check then fails.
    #[test]
    fn unreadable_profile_is_a_usage_error() {
        let m = usage_message(&[
            "--protocol",
            "emp",
            "--cutoffs",
            "/nonexistent/ttp-profile.json",
            "--",
            "true",
        ]);
        assert!(m.contains("cannot read the EMP profile"), "{m}");
    }
}
