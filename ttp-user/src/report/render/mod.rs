//! Saved results rendered again (`ttp-ebpf report`): a JSON file written by
//! any command is read back by the module of its `"schema"` and shown as
//! the terminal report, a Markdown table, CSV, or the plots of its kind.
//!
//! Adding a result kind is one row of [`SCHEMAS`] (its name, what writes
//! it, how it loads; docs/report.md's table names the same) and one
//! [`Rendered`] impl, next to the module that writes the kind.
pub(crate) mod attach;
mod attach_doc;
mod attach_text;
pub(crate) mod blame;
mod compare;
mod emp;
mod load_report;
pub(crate) mod recorded;
pub(crate) mod rendered;
mod schemas;
pub(crate) mod statements;
pub(crate) mod table;
mod trace;
mod ttpv2;
mod vprofile;

pub use rendered::{RenderError, Rendered};
pub use schemas::{SCHEMAS, Schema};
use serde_json::Value;
pub use table::Table;

pub use self::{
    blame::Blame,
    compare::Compared,
    emp::{Calibration, Outcome, SampleSize},
    recorded::Inc,
    ttpv2::{Analyze, Run},
    vprofile::Vprofile,
};

/// Output formats of `ttp-ebpf report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The terminal report, as the command printed it.
    Text,
    /// The JSON document itself, pretty-printed.
    Json,
    /// A Markdown table of the main measures, for papers and notebooks.
    Markdown,
    /// The main measures, one row per process, QE or run.
    Csv,
}

/// Prints a result's terminal report. A command prints what it has just
/// measured through the same [`Rendered`] impl that `report` shows its saved
/// file with, so the two cannot drift apart.
pub(crate) fn print(doc: &dyn Rendered) {
    print!("{}", doc.text());
}

/// The renderer of a saved result, chosen by its `"schema"` in
/// [`SCHEMAS`].
pub(crate) fn load(v: Value) -> Result<Box<dyn Rendered>, RenderError> {
    let name = v
        .get("schema")
        .and_then(Value::as_str)
        .ok_or(RenderError::NoSchema)?;
    match schemas::schema(name) {
        Some(s) => (s.load)(v),
        None => Err(RenderError::UnknownSchema {
            schema: name.to_string(),
            known: schemas::known(),
        }),
    }
}

#[cfg(test)]
mod saved_tests;
#[cfg(test)]
mod tests;
