//! Commands as a measured target of TTPv2 (as `pg/` is for a statement of
//! PostgreSQL): the typed plan of a `run` of commands (`plan.rs`), one
//! QE's attempts with the run's `--plan-cmd`, `--prepare`, cold cache and
//! transient failures (`attempts.rs`), and the rounds that interleave the
//! Q@Cs' QEs through the one Q@C procedure (`rounds.rs`,
//! `protocol::ttpv2::procedure`). The command line parses `run`'s
//! arguments into a [`Plan`]; nothing here reads them.
mod attempts;
mod plan;
mod rounds;

pub use plan::{Plan, QcSpec};
pub use rounds::{Measured, QeSpan, measure};
