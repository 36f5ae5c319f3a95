//! Output shared by every command: atomic result files, and (in submodules
//! per format) terminal tables, JSON, SVG plots.
pub mod atomic;
pub mod attach;
pub mod blame;
pub mod chart;
pub mod compare;
pub mod emp;
pub(crate) mod exit_stats;
pub mod load;
pub mod losses;
pub mod probe_cost;
pub mod progress;
pub mod render;
pub mod statements;
pub mod trace;
pub mod ttpv2;
pub mod units;
pub mod vprofile;
