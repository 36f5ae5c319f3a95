//! What an EMP run of one program (run_emp.rs) or of several
//! (run_emp_several.rs) settles before the first run, and how its runs
//! become the outcome.
use std::path::PathBuf;

use anyhow::Context;

use super::run_args::{RunArgs, cpu_list};
use ttp_emp::{EmpConfig, EmpOutcome, EmpRun, EmpSetup, Profile, apply};
use ttp_sys::{
    error::UsageError,
    sys::{
        invoker::Invoker,
        setup_check::{live::LiveProbes, run_checks},
        signals::StopFlag,
        spawn::RunAs,
    },
};

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
    pub(crate) fn new(args: &RunArgs) -> anyhow::Result<EmpStart> {
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
            Some(list) => Some(cpu_list(list)?),
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
