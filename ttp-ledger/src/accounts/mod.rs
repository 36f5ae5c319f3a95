//! Accounts: the ledger's thread accounts closed "as of" an instant, keyed
//! safely against pid reuse, and aggregated into processes.
//!
//! A thread's account holds closed intervals plus the open one (its state
//! since `state_since_ns`). [`close`] adds the open interval up to the
//! snapshot's instant, including the part of an open iowait interval that
//! is the CPU's iowait share and the process's own-I/O time, computed from
//! the same per-CPU and disk clocks the kernel programs use.
mod close;
mod image;
mod keys;
mod measures;
mod rows;
mod running;

pub use close::{CpuTimes, close, close_cpu};
pub use image::{Image, ProcessDelta, Window};
pub use keys::{ProcKey, ThreadKey, comm};
pub use measures::{IoMeasures, LedgerColumns, LedgerMeasures};
pub use running::{ClosedWindow, DEFAULT_KEEP_EXITED, ExitedGroup, RunningWindow};

#[cfg(test)]
mod tests;
