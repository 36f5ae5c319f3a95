//! Calibration of the daemon cut-offs (Sec. 4.5.1, Steps 1–8).
//!
//! Step 1 (many runs of a program long enough to meet infrequent daemons)
//! is the run loop's; [`analyze`] does Steps 2–6 on its runs; Step 7 is a
//! second, longer calibration analysed the same way; [`build_profile`]
//! does Step 8 and yields the profile `run --protocol emp` applies.
pub mod analysis;
mod cutoffs;
mod daemons;
mod pairs;
pub mod procedure;

pub use self::{
    analysis::{CalibrationAnalysis, CalibrationConfig, MIN_RUNS, analyze},
    cutoffs::build_profile,
    daemons::{
        CentralDaemon, InfrequentDaemon, LongExecution, PeriodKind, Periodicity, periodicity,
    },
    pairs::{ClassifiedRun, DualExecution, EtFence, LShape, PairKind, RunClass, Symmetry},
};
#[cfg(any(test, feature = "test-support"))]
#[path = "tests.rs"]
pub mod tests;
