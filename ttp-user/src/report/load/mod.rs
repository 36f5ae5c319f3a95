//! Renderings of a `load` run (`ttp.load/1`) beyond its terminal report.
mod ledger_text;
pub(crate) mod svg;

pub(crate) use ledger_text::ledger_per_second;
