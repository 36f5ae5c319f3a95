//! ttp: how long a program or query really took, and why.
//!
//! Data flows one way through the modules:
//! probe (eBPF ledger) → accounts (threads → processes) → window (images
//! around one execution) → protocol (TTPv2, EMP, variance, blame, load) →
//! report (terminal, JSON, SVG, traces). `collect` reads what Linux itself
//! reports (/proc, schedstat, taskstats) for the cross-checks.
pub use ttp_ledger::{accounts, collect, probe};
pub use ttp_protocol::protocol;
pub use ttp_sys::{error, sys};
pub use ttp_window::window;

pub mod cli;
pub mod commands;
pub mod lab;
pub mod pg;
pub mod report;
