//! Output shared by every command: the formats every result file is
//! written in (`format/`, one file per format, written atomically and
//! announced through `atomic`), the terminal reports and charts of each
//! kind of result (one folder per protocol), and saved results rendered
//! again by schema (`render/`).
pub(crate) mod atomic;
pub(crate) mod attach;
pub(crate) mod blame;
pub(crate) mod chart;
pub(crate) mod compare;
pub(crate) mod emp;
pub(crate) mod exit_stats;
pub mod format;
pub(crate) mod load;
pub(crate) mod losses;
pub(crate) mod probe_cost;
pub(crate) mod progress;
pub mod render;
pub(crate) mod statements;
pub mod trace;
pub mod ttpv2;
pub(crate) mod units;
pub(crate) mod vprofile;
