//! Saved results rendered again (`ttp-ebpf report`): a JSON file written by
//! any command is read back by the module of its `"schema"` and shown as
//! the terminal report, a Markdown table, CSV, or the plots of its kind.
//!
//! Adding a result kind is one row of [`SCHEMAS`] (its name, what writes
//! it, how it loads; docs/report.md's table names the same) and one
//! [`Rendered`] impl, next to the module that writes the kind.
pub mod attach;
mod attach_text;
pub mod blame;
mod compare;
mod emp;
mod load_report;
pub mod recorded;
mod schemas;
pub mod statements;
mod table;
mod trace;
mod ttpv2;
mod vprofile;

use std::path::{Path, PathBuf};

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

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("the file has no \"schema\" field: it is not a ttp result")]
    NoSchema,
    #[error(
        "schema {schema:?} is not one this ttp-ebpf can render (known: {known}); it may come from a newer version"
    )]
    UnknownSchema { schema: String, known: String },
    #[error("not a valid {schema} document: {source}")]
    Invalid {
        schema: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("plot {what}: {detail}")]
    Plot { what: String, detail: String },
}

/// A saved result, ready to be shown again.
pub trait Rendered {
    /// One line saying what the result is (title of the Markdown output).
    fn title(&self) -> String;
    /// The terminal report.
    fn text(&self) -> String;
    /// The main measures: one row per process, QE, run, …
    fn table(&self) -> Table;
    /// Markdown: the title and the table; kinds with a headline result add
    /// it below.
    fn markdown(&self) -> String {
        format!("**{}**\n\n{}", self.title(), self.table().markdown())
    }
    /// Writes the plots of this kind into `dir`; returns the files (empty
    /// when the kind has none).
    fn plots(&self, dir: &Path) -> Result<Vec<PathBuf>, RenderError> {
        let _ = dir;
        Ok(Vec::new())
    }
}

/// Prints a result's terminal report. A command prints what it has just
/// measured through the same [`Rendered`] impl that `report` shows its saved
/// file with, so the two cannot drift apart.
pub fn print(doc: &dyn Rendered) {
    print!("{}", doc.text());
}

/// The renderer of a saved result, chosen by its `"schema"` in
/// [`SCHEMAS`].
pub fn load(v: Value) -> Result<Box<dyn Rendered>, RenderError> {
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

/// Writes `text` to `dir/name`, creating `dir`.
pub(crate) fn write_plot(dir: &Path, name: &str, text: &str) -> Result<PathBuf, RenderError> {
    let path = dir.join(name);
    ttp_sys::sys::atomic::create_dir_all(dir)
        .and_then(|_| ttp_sys::sys::atomic::write(&path, text.as_bytes()))
        .map_err(|source| RenderError::Write {
            path: path.clone(),
            source,
        })?;
    Ok(path)
}

#[cfg(test)]
mod saved_tests;
#[cfg(test)]
mod tests;
