//! Windows: what Linux itself reports (/proc, schedstat, taskstats) over the
//! same window as the ledger, and how the two agree.
pub mod cold_cache;
pub mod crosscheck;
pub mod emp_runs;
pub mod fleet;
pub mod procs;
pub mod qe;
pub mod qe_blame;
pub mod session;
