//! `ttp-ebpf check`: is this machine set up for timing?
use std::{path::PathBuf, time::Duration};

use clap::Args as ClapArgs;

use ttp_sys::sys::{
    run_state::restore_leftovers,
    setup_check::{Status, fix, live::LiveProbes, run_checks},
};

/// Check the set-up steps of EMPv1–v4 and TTPv2 Step 0: kernel and BTF,
/// tracefs, taskstats and delay accounting, CPUs and SMT, frequency scaling
/// and turbo, clock synchronisation, virtualisation and steal time,
/// non-critical daemons and busy processes, HZ and USER_HZ.
///
/// Each item is pass, warn or fail, with its remedy. Nothing is changed
/// unless --fix is given. Exit status 1 when an item fails.
#[derive(Debug, ClapArgs)]
pub(crate) struct Args {
    /// Apply the fixes marked "fix:" (mount tracefs, enable delay
    /// accounting, performance governor, turbo off). They persist until
    /// reboot: ttp does not undo them. Needs root.
    #[arg(long)]
    pub fix: bool,
    /// Write the result as JSON (schema ttp.check/1).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Length of the window over which steal time and per-process CPU use
    /// are sampled.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = humantime::parse_duration)]
    pub sample: Duration,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.sample > Duration::from_secs(60) {
        return ttp_sys::error::usage(
            "--sample longer than 60 s is not useful; use e.g. --sample 1s",
        );
    }
    let root = PathBuf::from("/");
    // Before the checks, so that they see the machine as it was before the
    // instance that left it changed.
    let leftovers = restore_leftovers();
    let mut report = run_checks(root.clone(), &LiveProbes, args.sample);
    if args.fix {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return ttp_sys::error::usage("--fix changes kernel settings: run it with sudo");
        }
        let fixes = fix::apply(&root, &report.items);
        // A live measurement would put its recorded value back when it ends
        // and undo the fix: the fixed value becomes the one it restores.
        let delayacct_fixed = fixes
            .iter()
            .any(|f| f.item == "delay_accounting" && f.error.is_none());
        if delayacct_fixed && let Err(e) = ttp_sys::sys::delayacct::tracked().keep_as_original("1")
        {
            log::warn!(
                "a running ttp may switch delay accounting off when it ends ({e}); run `sysctl -w kernel.task_delayacct=1` after it"
            );
        }
        report = run_checks(root, &LiveProbes, args.sample);
        report.fixes = fixes;
    }
    report.leftovers = leftovers;
    // Shown as `report` shows the saved file, which tells that --fix ran
    // from `fixes`: with --fix every fixable item has an outcome there.
    let shown = crate::report::render::recorded::Check(report);
    crate::report::render::print(&shown);
    let report = shown.0;
    if let Some(path) = &args.json {
        crate::report::format::write_unannounced_file(
            path,
            &crate::report::format::json::Json(&report),
        )?;
    }
    let failed = report.count(Status::Fail);
    if failed > 0 {
        anyhow::bail!(
            "{failed} set-up item(s) failed; apply the remedies above and run `ttp-ebpf check` again"
        );
    }
    Ok(())
}
