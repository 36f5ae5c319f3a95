//! Output shared by every command: the formats every result file is
//! written in (`format/`, one file per format, written atomically and
//! announced through `atomic`), the terminal reports and charts of each
//! kind of result (one folder per protocol), and saved results rendered
//! again by schema (`render/`).
pub mod atomic;
pub mod attach;
pub mod blame;
pub mod chart;
pub mod compare;
pub mod emp;
pub(crate) mod exit_stats;
pub mod format;
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
