//! ttp-user's integration tests, one binary: each file of this folder is a
//! module, so the crate's tests link once instead of once per file.
//! Run one file's tests with `cargo test -p ttp-user --test suite FILE::`.
mod common;

mod collect_live;
mod imports;
mod layering;
mod malformed_input;
mod sizes;
mod spawn_live;
mod ttpv2_analyze;
