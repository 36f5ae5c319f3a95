//! `ttp-ebpf run --protocol emp`: a compute-bound program timed with EMP
//! (paper 001, Fig. 8): the EMPv1–v4 set-up read from a `check` snapshot
//! (Step 1; the report claims "EMPv5" only when all four hold), one
//! discarded warm-up run, N runs measured under the
//! kernel ledger, EMPv5's outlier removal (daemon cut-offs from a
//! calibration profile, then ±2σ on PT, Sec. 4.5), and the average PT of the
//! retained runs (Step 4).
use super::{
    run_args::RunArgs,
    run_emp_start::{EmpStart, outcome},
};
use crate::{
    commands::emp::{self as emp_runs, LivePlan},
    report::{emp as emp_report, format},
};
use ttp_sys::error::usage;

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
