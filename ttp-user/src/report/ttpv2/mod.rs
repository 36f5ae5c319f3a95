//! Charts of TTPv2 results (`ttp.run/1`, `ttp.analyze/1`): per Q@C, and
//! time against a scanned parameter.
pub mod scan_svg;
pub mod svg;
