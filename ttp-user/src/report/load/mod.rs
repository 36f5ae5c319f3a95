//! Renderings of a `load` run (`ttp.load/1`) beyond its terminal report.
pub mod svg;
