//! EMP output: the terminal report and the SVG plots. The JSON documents
//! are the protocol's own result types serialised (`ttp.emp/1`,
//! `ttp.emp-profile/1`, `ttp.emp-sample-size/1`).
pub mod plot;
pub mod terminal;
