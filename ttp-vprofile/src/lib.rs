//! VProfiler (paper 004, Sec. 3): which functions explain the variance of a
//! root function's latency, found on an unmodified binary.
//!
//! The data flows: [`elf`] (symbols, code, imports) → [`callgraph`] (direct
//! calls, children, heights) → [`ttp_variance`] (per-invocation durations → the
//! variance tree of eq. 1) → [`select`] (factors, specificity eq. 2,
//! responsibility eq. 3, Algorithm 1) → [`breakdown`] (Algorithm 2, round by
//! round, driven by [`driver`] through the probes of [`plan`]) →
//! [`document`] (the result, JSON `ttp.vprofile/1`); its text and chart
//! are rendered in report/vprofile/.
pub mod breakdown;
pub mod callgraph;
pub(crate) mod calls;
pub mod document;
pub mod driver;
pub mod elf;
mod elf_error;
mod extent;
pub mod plan;
pub(crate) mod select;
pub mod symbols;
pub mod uprobe;

#[cfg(test)]
mod algorithm2_tests;
#[cfg(any(test, feature = "test-support"))]
pub mod fake_graph;
#[cfg(any(test, feature = "test-support"))]
pub mod fixture;
#[cfg(test)]
mod fixture_tests;
#[cfg(any(test, feature = "test-support"))]
pub mod fixture_variance_tests;
#[cfg(test)]
mod symbols_tests;
