//! The Tucson Timing Protocol, version 2 (TTPv2; Currim, Snodgrass, Suh,
//! Zhang, "DBMS Metrology: Measuring Query Time", ACM TODS 2016), applied to
//! measured query executions.
//!
//! Data flows: [`model`] (what was measured per QE) → [`calc`] (Step 4 per
//! QE: eq. 1–3 and the exact ledger time) → [`checks`] (Step 1) →
//! [`drops`] (Steps 2–3) → [`post`] (Step 5) → [`analysis`] (the result and
//! the JSON documents) → [`paragraph`] (Sec. 9: its facts and figures, which
//! ttp-user's report layer words and hands back as a [`paragraph::Wording`]). [`import`] reads saved
//! runs and external CSV data; [`correlations`] tests the causal model of
//! Sec. 5. The terminal report and the charts are drawn in ttp-user's
//! `report::ttpv2`.
//!
//! The `run` command fills a [`model::QcInput`] (one [`model::QeRecord`] per
//! QE) and [`paragraph::MachineFacts`] (with
//! [`classify::identify_query_process`] for `--query-process NAME`), then calls
//! [`analysis::RunDocument::new`] (with the paragraph's wording) after each
//! QE and writes it.
pub mod analysis;
pub(crate) mod calc;
pub mod checks;
pub mod classify;
pub mod correlations;
pub(crate) mod drops;
pub(crate) mod ephemeral;
pub mod import;
pub mod model;
pub mod paragraph;
pub mod paragraph_deviations;
pub(crate) mod post;
pub mod procedure;
pub(crate) mod recovery;
pub mod stats;
pub mod study;
#[cfg(any(test, feature = "test-support"))]
pub mod testutil;
#[cfg(test)]
mod worked_example;

pub use analysis::{Analysis, AnalyzeDocument, QcResult, RunDocument, analyse};
pub use classify::identify_query_process;
pub use model::{QcInput, Setup};
