//! ttp: how long a program or query really took, and why.
//!
//! Data flows one way through the modules:
//! probe (eBPF ledger) → accounts (threads → processes) → window (images
//! around one execution) → protocol (TTPv2, EMP, variance, blame, load) →
//! report (terminal, JSON, SVG, traces). `collect` reads what Linux itself
//! reports (/proc, schedstat, taskstats) for the cross-checks.

pub mod cli;
pub(crate) mod commands;
pub mod lab;
pub mod pg;
pub mod report;
