//! `ttp-ebpf calibrate`: the daemon cut-offs of EMPv5 (paper 001, Sec.
//! 4.5.1, Steps 1–8) measured on this machine and saved as a profile.
use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::Context;
use clap::Args as ClapArgs;

use crate::{
    commands::emp::{self as emp_runs, LivePlan},
    report::{emp as emp_report, format},
};
use ttp_emp::{
    EmpRun, Profile,
    calibrate::{
        CalibrationAnalysis, CalibrationConfig, MIN_RUNS, analyze, build_profile,
        procedure::{PAPER_LONG, PAPER_SHORT, Phase, Procedure, QUICK_SCALE},
    },
};
use ttp_sys::{
    error::{UsageError, parse_duration, usage},
    sys::{invoker::Invoker, signals::StopFlag, spawn::RunAs},
};

/// Find the infrequent, long-running daemons of this machine and a process-
/// time cut-off for each (EMP Sec. 4.5.1), for `run --protocol emp --cutoffs`.
///
/// By default the paper's procedure: Step 1, 800 runs of INC128 (INC sized
/// to 128 s of CPU on this machine), then Step 7, 40 runs of INC16384, over
/// nine days in all; --quick runs it at 1/1024 of the task lengths. Runs
/// are paired into dual executions (Step 2), the central cluster is
/// separated from the L-samples (Step 3), the daemons whose executions
/// pushed runs out of the cluster are found (Steps 4–6) and their cut-offs
/// computed from both calibrations (Step 8). With --pair this calibration
/// is Step 7 alone, merged with the one already in --out.
#[derive(Debug, ClapArgs)]
pub(crate) struct Args {
    /// Measured runs of Step 1, after one discarded warm-up run (default
    /// 800, the paper's; with --pair, 40, the paper's Step 7).
    #[arg(long)]
    pub runs: Option<u32>,
    /// CPU seconds of one Step 1 run of INC (default 128: the paper's
    /// INC128; with --pair, 16384).
    #[arg(long, value_name = "SECONDS")]
    pub inc_seconds: Option<f64>,
    /// Runs of Step 7's long calibration of INC, right after Step 1
    /// (default 40, the paper's; 0 leaves Step 7 for a later --pair).
    #[arg(long, value_name = "RUNS")]
    pub long_runs: Option<u32>,
    /// CPU seconds of one Step 7 run of INC (default 16384: INC16384).
    #[arg(long, value_name = "SECONDS")]
    pub long_inc_seconds: Option<f64>,
    /// The paper's procedure (800 + 40 runs) at 1/1024 of its task lengths:
    /// INC0.125 and INC16, about 13 minutes of CPU.
    #[arg(long, conflicts_with_all = ["inc_seconds", "long_inc_seconds", "runs", "long_runs", "pair", "from", "command"])]
    pub quick: bool,
    /// Step 7: this is the long calibration; pair it with the (short)
    /// calibration stored in the --out profile and rewrite that profile with
    /// the cut-offs of both (Step 8).
    #[arg(long)]
    pub pair: bool,
    /// The profile file to write (schema ttp.emp-profile/1), after Step 1
    /// and again after Step 7.
    #[arg(long, value_name = "PROFILE", default_value = "emp-profile.json")]
    pub out: PathBuf,
    /// Write dual_execution.svg (every pair; the L shape) and
    /// dual_execution_central.svg (the central cluster) into DIR.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Write the raw runs (schema ttp.emp-runs/1) to FILE while measuring
    /// (at most once a second, and after the last run); Step 7's runs go to
    /// FILE with `.step7` before its extension.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Analyse runs recorded earlier (--record) instead of measuring.
    #[arg(long, value_name = "RUNS.json", conflicts_with_all = ["record", "command"])]
    pub from: Option<PathBuf>,
    /// Kill a run that takes longer than this (default: 20 minutes, or
    /// twice the longest INC task length when that is longer).
    #[arg(long, value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Run the program as root instead of the invoking user (SUDO_UID).
    #[arg(long)]
    pub as_root: bool,
    /// The program to calibrate with (default: INC). Its standard output is
    /// discarded.
    #[arg(trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// How often the record is rewritten while measuring.
const RECORD_EVERY: Duration = Duration::from_secs(1);

fn check_seconds(what: &str, s: f64) -> anyhow::Result<f64> {
    if s.is_finite() && s > 0.0 && s <= 86_400.0 {
        Ok(s)
    } else {
        usage(format!(
            "{what} must be between 0 and 86400 seconds of CPU, e.g. {what} 1"
        ))
    }
}

/// The run sets to measure (Step 1 and, for INC, Step 7; with --pair,
/// Step 7 alone), checked before anything runs.
/// INC's iteration on this machine: CPU ns and increments.
type Iteration = Option<(u64, u64)>;

fn phases(args: &Args) -> anyhow::Result<(Vec<Phase>, Iteration)> {
    let long_asked = args.long_runs.is_some() || args.long_inc_seconds.is_some();
    let check_runs = |what: &str, n: u32| {
        if (n as usize) < MIN_RUNS {
            usage(format!(
                "{what} must be at least {MIN_RUNS} (the paper uses {})",
                if what == "--runs" && !args.pair {
                    800
                } else {
                    40
                }
            ))
        } else {
            Ok(n)
        }
    };
    if !args.command.is_empty() {
        if long_asked {
            return usage(
                "--long-runs and --long-inc-seconds size INC's Step 7; for your program, pair a longer run later with `calibrate --pair -- LONGER CMD`",
            );
        }
        let step = if args.pair { 7 } else { 1 };
        let default = if args.pair {
            PAPER_LONG.0
        } else {
            PAPER_SHORT.0
        };
        let runs = check_runs("--runs", args.runs.unwrap_or(default))?;
        return Ok((vec![Phase::command(step, runs, &args.command)], None));
    }
    if args.pair && long_asked {
        return usage(
            "with --pair, --runs and --inc-seconds size the Step 7 calibration; leave out --long-runs and --long-inc-seconds",
        );
    }
    let scale = if args.quick { QUICK_SCALE } else { 1.0 };
    let mut want: Vec<(u8, u32, f64)> = Vec::new();
    if args.pair {
        want.push((
            7,
            check_runs("--runs", args.runs.unwrap_or(PAPER_LONG.0))?,
            check_seconds("--inc-seconds", args.inc_seconds.unwrap_or(PAPER_LONG.1))?,
        ));
    } else {
        want.push((
            1,
            check_runs("--runs", args.runs.unwrap_or(PAPER_SHORT.0))?,
            check_seconds(
                "--inc-seconds",
                args.inc_seconds.unwrap_or(PAPER_SHORT.1 * scale),
            )?,
        ));
        let long_runs = args.long_runs.unwrap_or(PAPER_LONG.0);
        if long_runs > 0 {
            want.push((
                7,
                check_runs("--long-runs", long_runs)?,
                check_seconds(
                    "--long-inc-seconds",
                    args.long_inc_seconds.unwrap_or(PAPER_LONG.1 * scale),
                )?,
            ));
        }
    }
    let cal = ttp_emp::inc::calibrate();
    let phases = want
        .into_iter()
        .map(|(step, runs, secs)| Phase::inc(step, runs, secs, cal.loops_for(secs)))
        .collect();
    Ok((phases, Some((cal.outer_cpu_ns, cal.inner))))
}

/// `FILE.json` → `FILE.step7.json`.
fn step7_path(p: &Path) -> PathBuf {
    let ext = p.extension().map(|e| e.to_string_lossy().into_owned());
    p.with_extension(match ext {
        Some(e) => format!("step7.{e}"),
        None => "step7".into(),
    })
}

/// One run set as measured: the command, its runs (the warm-up first),
/// notes, and whether Ctrl-C stopped it.
type Measured = (Vec<String>, Vec<EmpRun>, Vec<String>, bool);

/// Measures one run set.
fn measure(
    args: &Args,
    phase: &Phase,
    record: Option<&Path>,
    stop: &StopFlag,
) -> anyhow::Result<Measured> {
    let command = match phase.loops {
        Some(loops) => inc_argv(loops)?,
        None => args.command.clone(),
    };
    let run_as = if args.as_root {
        RunAs::Current
    } else {
        RunAs::User(Invoker::detect().map_err(|e| UsageError::new(e.to_string()))?)
    };
    // INC16384 runs 4.5 hours: the default timeout must not kill it.
    let timeout = args.timeout.unwrap_or_else(|| {
        Duration::from_secs_f64((phase.task_seconds.unwrap_or(0.0) * 2.0).max(1200.0))
    });
    let plan = LivePlan {
        pin: None,
        command: &command,
        runs: phase.runs,
        timeout: Some(timeout),
        run_as,
        quiet: true,
    };
    let mut last_write: Option<Instant> = None;
    let bar = crate::report::progress::Progress::new(plan.runs_of(1), "runs");
    let live = emp_runs::measure(&plan, stop, &|m| bar.notice(m), |runs| {
        if let Some(run) = runs.last() {
            bar.set_message(emp_runs::progress_message(run, None));
        }
        if let Some(path) = record {
            let last = runs.len() as u32 == phase.runs + 1;
            if last || last_write.is_none_or(|t| t.elapsed() >= RECORD_EVERY) {
                ttp_emp::EmpRuns::write(path, &command, runs)?;
                last_write = Some(Instant::now());
            }
        }
        bar.inc(1);
        Ok(())
    });
    bar.finish_and_clear();
    let live = live?;
    if let Some(path) = record
        && !live.runs.is_empty()
    {
        ttp_emp::EmpRuns::write(path, &command, &live.runs)?;
        crate::report::atomic::announce(path);
    }
    if let Some(e) = live.failure {
        return Err(e.context("the calibration program could not be run"));
    }
    let mut notes = live.notes;
    if live.interrupted {
        notes.push(format!(
            "interrupted after {} of {} runs of Step {}; the calibration covers those",
            live.runs.len().saturating_sub(1),
            phase.runs,
            phase.step
        ));
    }
    Ok((command, live.runs, notes, live.interrupted))
}

/// Steps 2–6 on the measured runs (the warm-up left out: dual executions
/// start at run 1).
fn analysed(
    command: &[String],
    runs: Vec<EmpRun>,
) -> Result<CalibrationAnalysis, ttp_emp::EmpError> {
    let measured: Vec<EmpRun> = runs.into_iter().filter(|r| !r.flags.warm_up).collect();
    analyze(command, &measured, &CalibrationConfig::default())
}

/// Writes and prints the profile.
fn finish(args: &Args, profile: Profile, notes: &[String]) -> anyhow::Result<()> {
    format::write(&args.out, &format::json::Json(&profile))?;
    let shown = crate::report::render::Calibration(profile);
    crate::report::render::print(&shown);
    let profile = shown.0;
    for n in notes {
        println!("note: {n}");
    }
    if let Some(dir) = &args.plot {
        for p in emp_report::write_calibration_plots(dir, &profile)? {
            crate::report::atomic::announce(&p);
        }
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let sigma_k = CalibrationConfig::default().sigma_k;
    // Step 7 needs the short calibration: read it before measuring.
    let short = if args.pair {
        let p = Profile::load(&args.out).map_err(|e| {
            UsageError::new(format!(
                "--pair merges with the calibration in {}: {e}",
                args.out.display()
            ))
        })?;
        match p.calibrations.into_iter().next() {
            Some(c) => Some(c),
            None => {
                return usage(format!(
                    "{} holds no calibration to pair with; run calibrate without --pair first",
                    args.out.display()
                ));
            }
        }
    } else {
        None
    };
    if let Some(path) = &args.from {
        if args.runs.is_some_and(|n| (n as usize) < MIN_RUNS) {
            return usage(format!("--runs must be at least {MIN_RUNS}"));
        }
        let r = ttp_emp::EmpRuns::load(path).map_err(|e| UsageError::new(e.to_string()))?;
        let analysis = analysed(&r.command, r.runs)?;
        let profile = match short {
            Some(short) => build_profile(short, Some(analysis), sigma_k),
            None => build_profile(analysis, None, sigma_k),
        };
        return finish(&args, profile, &[]);
    }
    let (phases, iteration) = phases(&args)?;
    let mut procedure = Procedure::new(phases.clone(), iteration);
    eprint!("{}", procedure.statement());
    let stop = StopFlag::install().context("installing signal handlers")?;
    let mut notes = Vec::new();
    let mut short = short;
    for (k, phase) in phases.iter().enumerate() {
        if stop.raised() {
            notes.push(format!("Step {} not run (interrupted)", phase.step));
            break;
        }
        let record = args
            .record
            .as_ref()
            .map(|r| if k == 0 { r.clone() } else { step7_path(r) });
        let t0 = Instant::now();
        let (command, runs, mut n, interrupted) = measure(&args, phase, record.as_deref(), &stop)?;
        notes.append(&mut n);
        let done = &mut procedure.phases[k];
        done.completed_runs = runs.iter().filter(|r| !r.flags.warm_up).count() as u32;
        done.elapsed_s = t0.elapsed().as_secs_f64();
        let analysis = match analysed(&command, runs) {
            Ok(a) => a,
            // Ctrl-C in Step 7 before enough runs: Step 1's profile stands.
            Err(e) if interrupted && short.is_some() => {
                notes.push(format!("Step {} left out of the profile: {e}", phase.step));
                break;
            }
            Err(e) => return Err(e.into()),
        };
        let mut profile = match short.take() {
            Some(s) => build_profile(s, Some(analysis), sigma_k),
            None => build_profile(analysis, None, sigma_k),
        };
        profile.procedure = Some(procedure.clone());
        if interrupted && k + 1 < phases.len() {
            notes.push(format!("Step {} not run (interrupted)", phases[k + 1].step));
        }
        if k + 1 < phases.len() && !interrupted {
            // Step 1's profile is saved before Step 7's long runs.
            format::write(&args.out, &format::json::Json(&profile))?;
            short = profile.calibrations.into_iter().next();
            continue;
        }
        return finish(&args, profile, &notes);
    }
    if args.pair {
        for n in &notes {
            eprintln!("note: {n}");
        }
        eprintln!("{} left unchanged", args.out.display());
        return Ok(());
    }
    // Step 7 interrupted or not started: the profile of Step 1 alone.
    let Some(short) = short else {
        return usage("interrupted before the first calibration run: nothing measured");
    };
    let mut profile = build_profile(short, None, sigma_k);
    profile.procedure = Some(procedure);
    finish(&args, profile, &notes)
}

/// The default program of `calibrate`: INC (`ttp-ebpf inc --loops C`,
/// EMP Fig. 7, Sec. 4.5.1 Step 1), `loops` derived on this machine for the
/// task length (`ttp_emp::inc::Calibration::loops_for`).
fn inc_argv(loops: u64) -> anyhow::Result<Vec<String>> {
    let exe: PathBuf = std::env::current_exe().context("locating the ttp-ebpf binary for INC")?;
    Ok(vec![
        exe.to_string_lossy().into_owned(),
        "inc".into(),
        "--loops".into(),
        loops.to_string(),
    ])
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use ttp_emp::calibrate::tests::synthetic_runs;

    fn args(from: &Path, out: &Path, pair: bool) -> Args {
        Args {
            runs: None,
            inc_seconds: None,
            long_runs: None,
            long_inc_seconds: None,
            quick: false,
            pair,
            out: out.to_path_buf(),
            plot: None,
            record: None,
            from: Some(from.to_path_buf()),
            timeout: None,
            as_root: false,
            command: vec![],
        }
    }

    /// A recorded run set goes through Steps 2–8 into a profile file, and
    /// --pair stores the second calibration beside the first. Catches the
    /// record/profile plumbing losing runs or the short calibration (the
    /// synthetic set's rhn_check cut-off is 225 ms: (0 + 450) / 2).
    #[test]
    fn calibrates_a_recorded_run_set_and_pairs_a_second() {
        let dir = std::env::temp_dir().join(format!("ttp-cal-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rec = dir.join("runs.json");
        let out = dir.join("profile.json");
        ttp_emp::EmpRuns::write(&rec, &["prog".into()], &synthetic_runs()).unwrap();
        run(args(&rec, &out, false)).unwrap();
        let p = Profile::load(&out).unwrap();
        assert_eq!(p.calibrations.len(), 1);
        assert_eq!(p.calibrations[0].usable_runs, 200);
        assert_eq!(p.calibrations[0].command, ["prog"]);
        let rhn = p.daemons.iter().find(|d| d.name == "rhn_check").unwrap();
        assert_eq!(rhn.cutoff_for(1_000_000_000), Some(225_000_000));
        run(args(&rec, &out, true)).unwrap();
        assert_eq!(Profile::load(&out).unwrap().calibrations.len(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// --pair without a profile to pair with is a usage error naming the
    /// remedy. Catches a long calibration run for hours and then lost.
    #[test]
    fn pair_without_a_profile_is_refused_first() {
        let missing = std::env::temp_dir().join("ttp-no-such-profile.json");
        let e = run(args(&missing, &missing, true)).unwrap_err();
        assert_eq!(ttp_sys::error::exit_code(&e), 2);
        assert!(e.to_string().contains("--pair"), "{e}");
    }
}
