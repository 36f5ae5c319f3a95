//! The lowest layer of ttp: its error type and the machine's own state
//! (privileges, setup checks, sysctls, cgroups, what ttp changes and
//! restores). Every other crate of the workspace builds on it; it imports
//! none of them (docs/architecture.md, "Crates").
pub mod error;
pub mod sys;
