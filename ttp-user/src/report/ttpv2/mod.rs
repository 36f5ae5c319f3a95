//! TTPv2 results (`ttp.run/1`, `ttp.analyze/1`) rendered: the terminal
//! report, and charts per Q@C and of time against a scanned parameter.
pub mod paragraph;
pub(crate) mod scan_svg;
pub(crate) mod svg;
pub mod text;
