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
pub(crate) mod emp;
mod failure;
mod plan;
mod rounds;
mod run;

pub use plan::{Plan, QcSpec};
pub use run::{Run, measure, pinned_statement};
