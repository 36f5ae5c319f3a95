//! The ledger: the eBPF object and its loader (`probe`), what Linux reports
//! itself for the cross-checks (`collect`: /proc, schedstat, taskstats), and
//! the threads' accounts folded into processes (`accounts`).
//! It builds on `ttp-sys` only (docs/architecture.md, "Crates").

pub mod accounts;
pub mod collect;
pub mod probe;
