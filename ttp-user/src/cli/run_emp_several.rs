//! `run --protocol emp -- CMD1 ::: CMD2`: several compute-bound programs
//! timed with EMP (paper 001, Fig. 8), their runs interleaved (docs/run.md):
//! one set-up snapshot, every program's warm-up, then round r runs each
//! program once, the first rotating. Each program gets its own EMPv5
//! outlier removal and result (`ttp.emp/1`, one file per program), then
//! each is compared with the first (ttp-compare: PT and ET by their
//! means, as EMP reports).
use std::path::{Path, PathBuf};

use super::{
    run_args::{RunArgs, check_command},
    run_emp_start::{EmpStart, outcome},
    run_plan::NamedCommand,
};
use crate::{
    commands::emp::{self as emp_runs, LivePlan},
    report::{compare as show, emp as emp_report, format},
};
use ttp_compare::Config;
use ttp_emp::EmpOutcome;
use ttp_sys::error::usage;

/// Where program `i`'s result goes with `--json FILE`: FILE's stem with
/// the program's letter (`out.json` → `out-A.json`, `out-B.json`), so each
/// file is an ordinary `ttp.emp/1` result that `report` and `compare` read.
pub(crate) fn json_path(file: &Path, i: usize) -> PathBuf {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "emp".into());
    let ext = file
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    file.with_file_name(format!("{stem}-{}{ext}", ttp_compare::label(i)))
}

/// Refuses a command that cannot run and two commands of one name.
fn check_commands(commands: &[NamedCommand]) -> anyhow::Result<()> {
    let mut names = std::collections::BTreeSet::new();
    for c in commands {
        check_command(&c.argv)?;
        let name = c.name.clone().unwrap_or_else(|| c.argv.join(" "));
        if !names.insert(name.clone()) {
            return usage(format!(
                "two commands are named {name:?}: give each its own --command-name"
            ));
        }
    }
    Ok(())
}

pub fn run(args: &RunArgs, commands: &[NamedCommand]) -> anyhow::Result<()> {
    if args.emp.record.is_some() || args.emp.plot.is_some() {
        return usage(
            "--record and --plot follow one program: with several commands under --protocol emp, leave them out (report each program's --json file with --plot)",
        );
    }
    check_commands(commands)?;
    // Fig. 8 Step 1, once for the whole run, before the first program.
    let EmpStart {
        profile,
        run_as,
        cfg,
        setup,
        stop,
        pin,
    } = EmpStart::new(args)?;
    let plan = LivePlan {
        pin: pin.clone(),
        command: &commands[0].argv,
        runs: args.n,
        timeout: Some(args.timeout),
        run_as,
        quiet: !args.show_output,
    };
    let outcome_of = |i: usize, runs: &[ttp_emp::EmpRun]| {
        outcome(runs, profile.as_ref(), &cfg, args, &setup).map(|mut o| {
            o.command = commands[i].argv.clone();
            if let Some(p) = &pin {
                o.notes.push(crate::commands::pinned_statement(p));
            }
            o
        })
    };
    let argvs: Vec<&[String]> = commands.iter().map(|c| &c.argv[..]).collect();
    let bar = crate::report::progress::Progress::new(plan.runs_of(argvs.len()), "runs");
    let several = argvs.len() > 1;
    let notify = |m: String| bar.notice(m);
    let lives = emp_runs::measure_interleaved(&plan, &argvs, &stop, &notify, |i, runs| {
        if let Some(run) = runs.last() {
            bar.set_message(emp_runs::progress_message(run, several.then_some(i)));
        }
        if let Some(path) = &args.json
            && let Ok(o) = outcome_of(i, runs)
        {
            format::write_unannounced_file(&json_path(path, i), &format::json::Json(&o))?;
        }
        bar.inc(1);
        Ok(())
    });
    bar.finish_and_clear();
    let lives = lives?;
    let mut failure = None;
    let mut outcomes: Vec<(String, EmpOutcome)> = Vec::new();
    for (i, live) in lives.into_iter().enumerate() {
        let name = commands[i]
            .name
            .clone()
            .unwrap_or_else(|| commands[i].argv.join(" "));
        if let Some(f) = live.failure {
            failure = Some(f.context(format!("command {} ({name})", ttp_compare::label(i))));
        }
        let o = match outcome_of(i, &live.runs) {
            Ok(mut o) => {
                o.notes.extend(live.notes);
                if live.interrupted {
                    o.notes.push(format!(
                        "interrupted: {} of {} runs measured; the result covers those",
                        live.runs.len().saturating_sub(1),
                        args.n
                    ));
                }
                o
            }
            Err(e) => {
                println!("{} ({name}): no EMP result: {e}", ttp_compare::label(i));
                continue;
            }
        };
        if let Some(path) = &args.json {
            format::write(&json_path(path, i), &format::json::Json(&o))?;
        }
        println!("{} — {name}:", ttp_compare::label(i));
        print!("{}", emp_report::terminal::render_outcome(&o));
        outcomes.push((name, o));
    }
    if outcomes.len() == commands.len() {
        let sides: Result<Vec<_>, _> = outcomes
            .iter()
            .map(|(name, o)| {
                serde_json::to_value(o)
                    .map_err(|e| e.to_string())
                    .and_then(|v| ttp_compare::side_of(v).map_err(|e| e.to_string()))
                    .map(|s| (name.clone(), s))
            })
            .collect();
        match sides
            .and_then(|s| ttp_compare::compare(&s, &Config::default()).map_err(|e| e.to_string()))
        {
            Ok(doc) => {
                println!("Comparison of the commands (interleaved runs, the first command as A):");
                print!("{}", show::text(&doc));
                if let Some(path) = &args.export_markdown {
                    let shown = crate::report::render::Compared(doc);
                    format::write(path, &format::text::Markdown(&shown))?;
                }
            }
            Err(why) => println!("The commands are not compared: {why}"),
        }
    }
    match failure {
        Some(e) => Err(e.context("a command could not be run; the runs measured before are kept")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches per-program files that overwrite each other or lose the
    /// extension `report` and editors go by.
    #[test]
    fn one_json_file_per_program() {
        let p = Path::new("/tmp/x/out.json");
        assert_eq!(json_path(p, 0), Path::new("/tmp/x/out-A.json"));
        assert_eq!(json_path(p, 1), Path::new("/tmp/x/out-B.json"));
        assert_eq!(json_path(Path::new("r"), 2), Path::new("r-C"));
    }
}
