//! Windows: what Linux itself reports (/proc, schedstat, taskstats) over the
//! same window as the ledger, and how the two agree; one QE measured in the
//! order of TTPv2's Fig. 5 and the record it fills.
pub mod blame_record;
pub mod bracket;
pub mod cold_cache;
pub mod context;
pub mod crosscheck;
pub mod procs;
mod qe;
pub mod record;
pub mod session;
pub mod target;
pub mod trace_record;
