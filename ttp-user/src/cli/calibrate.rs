//! `ttp-ebpf calibrate`: the daemon cut-offs of EMPv5 (paper 001, Sec.
//! 4.5.1, Steps 1–8) measured on this machine and saved as a profile.
use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::Context;
use clap::Args as ClapArgs;

use super::emp_live::{self, LivePlan};
use crate::{
    error::{UsageError, usage},
    protocol::emp::{
        EmpRun, Profile,
        calibrate::{CalibrationConfig, MIN_RUNS, analyze, build_profile},
    },
    report::{atomic, emp as emp_report, units::parse_duration},
    sys::{invoker::Invoker, signals::StopFlag, spawn::RunAs},
};

/// Find the infrequent, long-running daemons of this machine and a process-
/// time cut-off for each (EMP Sec. 4.5.1), for `run --protocol emp --cutoffs`.
///
/// Runs the program many times (Step 1; by default INC, the paper's
/// compute-bound loop, sized to --inc-seconds of CPU on this machine), pairs
/// consecutive runs into dual executions (Step 2), separates the central
/// cluster from the L-samples (Step 3), finds the daemons whose executions
/// pushed runs out of the cluster (Steps 4–6) and computes their cut-offs
/// (Step 8). With --pair this calibration is the second, longer one of
/// Step 7 and is merged with the one already in --out.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Measured runs, after one discarded warm-up run. The paper uses 800
    /// (Step 1) and 40 for the long calibration (Step 7).
    #[arg(long, default_value_t = 800)]
    pub runs: u32,
    /// CPU seconds of one run of the default program, INC (the paper's
    /// INC128 is 128 s; Step 7's INC16384 about 4.5 hours).
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    pub inc_seconds: f64,
    /// Step 7: this is the long calibration; pair it with the (short)
    /// calibration stored in the --out profile and rewrite that profile with
    /// the cut-offs of both (Step 8).
    #[arg(long)]
    pub pair: bool,
    /// The profile file to write (schema ttp.emp-profile/1).
    #[arg(long, value_name = "PROFILE", default_value = "emp-profile.json")]
    pub out: PathBuf,
    /// Write dual_execution.svg (every pair; the L shape) and
    /// dual_execution_central.svg (the central cluster) into DIR.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Write the raw runs (schema ttp.emp-runs/1) to FILE while measuring
    /// (at most once a second, and after the last run).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Analyse runs recorded earlier (--record) instead of measuring.
    #[arg(long, value_name = "RUNS.json", conflicts_with_all = ["record", "command"])]
    pub from: Option<PathBuf>,
    /// Kill a run that takes longer than this.
    #[arg(long, default_value = "20m", value_parser = parse_duration)]
    pub timeout: Duration,
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

fn measure(args: &Args) -> anyhow::Result<(Vec<String>, Vec<EmpRun>, Vec<String>)> {
    let mut notes = Vec::new();
    let command = if args.command.is_empty() {
        if !(args.inc_seconds.is_finite() && args.inc_seconds > 0.0 && args.inc_seconds <= 86_400.0)
        {
            return usage("--inc-seconds must be between 0 and 86400, e.g. --inc-seconds 1");
        }
        let (cmd, note) = emp_live::inc_command(args.inc_seconds)?;
        eprintln!("{note}");
        notes.push(note);
        cmd
    } else {
        args.command.clone()
    };
    let run_as = if args.as_root {
        RunAs::Current
    } else {
        RunAs::User(Invoker::detect().map_err(|e| UsageError::new(e.to_string()))?)
    };
    let stop = StopFlag::install().context("installing signal handlers")?;
    let plan = LivePlan {
        pin: None,
        command: &command,
        runs: args.runs,
        timeout: Some(args.timeout),
        run_as,
        quiet: true,
        unit: "runs",
    };
    let mut last_write: Option<Instant> = None;
    let live = emp_live::measure(&plan, &stop, |runs, _bar| {
        if let Some(path) = &args.record {
            let last = runs.len() as u32 == args.runs + 1;
            if last || last_write.is_none_or(|t| t.elapsed() >= RECORD_EVERY) {
                emp_live::write_record(path, &command, runs)?;
                last_write = Some(Instant::now());
            }
        }
        Ok(())
    })?;
    if let Some(path) = &args.record
        && !live.runs.is_empty()
    {
        emp_live::write_record(path, &command, &live.runs)?;
        crate::report::atomic::announce(path);
    }
    if let Some(e) = live.failure {
        return Err(e.context("the calibration program could not be run"));
    }
    notes.extend(live.notes);
    if live.interrupted {
        notes.push(format!(
            "interrupted after {} of {} runs; the calibration covers those",
            live.runs.len().saturating_sub(1),
            args.runs
        ));
    }
    Ok((command, live.runs, notes))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if (args.runs as usize) < MIN_RUNS {
        return usage(format!(
            "--runs must be at least {MIN_RUNS} (the paper uses 800)"
        ));
    }
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
    let (command, runs, notes) = match &args.from {
        Some(path) => {
            let r = emp_live::read_record(path)?;
            (r.command, r.runs, Vec::new())
        }
        None => measure(&args)?,
    };
    // The warm-up run stays out of the pairs: dual executions start at run 1.
    let measured: Vec<EmpRun> = runs.into_iter().filter(|r| !r.flags.warm_up).collect();
    let cfg = CalibrationConfig::default();
    let analysis = analyze(&command, &measured, &cfg)?;
    let profile = match short {
        Some(short) => build_profile(short, Some(analysis), cfg.sigma_k),
        None => build_profile(analysis, None, cfg.sigma_k),
    };
    atomic::write_json_result(&args.out, &profile)?;
    let shown = crate::report::render::Calibration(profile);
    crate::report::render::print(&shown);
    let profile = shown.0;
    for n in &notes {
        println!("note: {n}");
    }
    if let Some(dir) = &args.plot {
        for p in emp_report::write_calibration_plots(dir, &profile)? {
            crate::report::atomic::announce(&p);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::protocol::emp::calibrate::tests::synthetic_runs;

    fn args(from: &Path, out: &Path, pair: bool) -> Args {
        Args {
            runs: 800,
            inc_seconds: 1.0,
            pair,
            out: out.to_path_buf(),
            plot: None,
            record: None,
            from: Some(from.to_path_buf()),
            timeout: Duration::from_secs(60),
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
        emp_live::write_record(&rec, &["prog".into()], &synthetic_runs()).unwrap();
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
        assert_eq!(crate::error::exit_code(&e), 2);
        assert!(e.to_string().contains("--pair"), "{e}");
    }
}
