//! Commands as a measured target of TTPv2 (as `pg/` is for a statement of
//! PostgreSQL): the typed plan of a `run` of commands (`plan.rs`), one
//! QE's attempts with the run's `--plan-cmd`, `--prepare`, cold cache and
//! transient failures (`attempts.rs`), the rounds that interleave the
//! Q@Cs' QEs through the one Q@C procedure (`rounds.rs`,
//! `ttp_ttpv2::procedure`), a plan measured in its session from start to
//! end (`run.rs`: what `run -- CMD` and the lab worker call); and EMP's
//! runs of commands (`emp.rs`). The command line parses `run`'s and
//! `calibrate`'s arguments into plans; nothing here reads them.
mod attempts;
pub mod emp;
mod plan;
mod rounds;
mod run;

pub use plan::{Plan, QcSpec};
pub use rounds::{Measured, QeSpan};
pub use run::{OnQe, Run, measure, pinned_statement};

use ttp_sys::error::UsageError;
use ttp_window::window::context::QeError;

/// A QE that could not be measured, as the error that ends the run: a
/// start the user can fix (not found, not executable) is a usage error.
fn qe_failure(e: QeError) -> anyhow::Error {
    match e {
        QeError::Spawn(e) if e.is_usage() => UsageError::new(e.to_string()).into(),
        QeError::Spawn(e) => e.into(),
        QeError::Probe(e) => ttp_ledger::probe::probe_error_ctx(e),
        e @ (QeError::Trace(_) | QeError::Blame(_)) => e.into(),
    }
}
