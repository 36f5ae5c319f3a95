//! The output of `vprofile` (VProfiler, shared paper 004): the text report
//! and the icicle chart of a `ttp.vprofile/1` document
//! (ttp-vprofile/src/document.rs), live and read back alike.
mod svg;
mod text;

pub use svg::icicle;
pub use text::vprofile_text;

#[cfg(test)]
mod tests;
