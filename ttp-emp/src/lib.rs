//! EMP, the Execution-time Measurement Protocol for compute-bound programs
//! (paper 001, Sec. 3–4): process time (PT) rather than elapsed time (ET),
//! disciplined outlier removal (EMPv5, Sec. 4.5) with daemon cut-offs from
//! a calibration (Sec. 4.5.1), the choice of a small sample size (EMPv6,
//! Sec. 4.6), and INC, the paper's program under test (Fig. 7).
//!
//! Flow: the run loop fills [`EmpRun`]s, each read off one measured
//! execution by [`live::emp_run`]; [`calibrate::analyze`] and
//! [`calibrate::build_profile`] turn a calibration into a [`Profile`];
//! [`apply`] applies EMPv5 to a measurement with that profile;
//! [`sample_size`] runs EMPv6 over a long measurement.
pub mod calibrate;
pub mod error;
pub mod inc;
pub mod input;
pub mod live;
pub mod outliers;
pub mod profile;
pub mod sample_size;
pub mod setup;
pub mod stats;

pub use self::{
    error::EmpError,
    input::{DaemonExec, EmpRun, EmpRuns, ProgramTime, PtSource, RunFlags},
    outliers::{EmpConfig, EmpOutcome, Verdict, apply},
    profile::Profile,
    sample_size::{SampleSizeConfig, SampleSizeReport, sample_size},
    setup::{EmpSetup, version_label},
};
