//! Saved results rendered again (`ttp-ebpf report`): a JSON file written by
//! any command is read back by the module of its `"schema"` and shown as
//! the terminal report, a Markdown table, CSV, or the plots of its kind.
//!
//! Adding a result kind is one arm in [`load`] and one [`Rendered`] impl,
//! next to the module that writes the kind.
pub mod attach;
mod attach_text;
pub mod blame;
mod compare;
mod emp;
mod load_report;
pub mod recorded;
pub mod statements;
mod table;
mod trace;
mod ttpv2;
mod vprofile;

use std::path::{Path, PathBuf};

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

/// Schemas [`load`] knows, for the error message.
pub const SCHEMAS: &[&str] = &[
    "ttp.attach/1",
    "ttp.run/1",
    "ttp.analyze/1",
    "ttp.emp/1",
    "ttp.emp-profile/1",
    "ttp.emp-sample-size/1",
    "ttp.blame/1",
    "ttp.compare/1",
    "ttp.load/1",
    "ttp.trace/1",
    "ttp.vprofile/1",
    "ttp.emp-runs/1",
    "ttp.check/1",
    "ttp.inc/1",
    "ttp.statements/1",
];

fn typed<T: serde::de::DeserializeOwned>(schema: &str, v: Value) -> Result<T, RenderError> {
    serde_json::from_value(v).map_err(|source| RenderError::Invalid {
        schema: schema.into(),
        source,
    })
}

/// The renderer of a saved result, chosen by its `"schema"`.
pub fn load(v: Value) -> Result<Box<dyn Rendered>, RenderError> {
    let schema = v
        .get("schema")
        .and_then(Value::as_str)
        .ok_or(RenderError::NoSchema)?
        .to_string();
    let s = schema.as_str();
    Ok(match s {
        "ttp.attach/1" => Box::new(typed::<attach::AttachDoc>(s, v)?),
        "ttp.run/1" => Box::new(ttpv2::Run(typed(s, v)?)),
        "ttp.analyze/1" => Box::new(ttpv2::Analyze(typed(s, v)?)),
        "ttp.emp/1" => Box::new(emp::Outcome(typed(s, v)?)),
        "ttp.emp-profile/1" => Box::new(emp::Calibration(typed(s, v)?)),
        "ttp.emp-sample-size/1" => Box::new(emp::SampleSize(typed(s, v)?)),
        "ttp.blame/1" => Box::new(blame::Blame::new(typed(s, v)?)),
        "ttp.compare/1" => Box::new(compare::Compared(typed(s, v)?)),
        "ttp.load/1" => Box::new(typed::<ttp_load::document::LoadDocument>(s, v)?),
        "ttp.trace/1" => Box::new(trace::TraceSummary::from_value(v)?),
        "ttp.vprofile/1" => Box::new(vprofile::Vprofile(typed(s, v)?)),
        "ttp.emp-runs/1" => Box::new(recorded::Runs(typed(s, v)?)),
        "ttp.check/1" => Box::new(recorded::Check(typed(s, v)?)),
        "ttp.inc/1" => Box::new(recorded::Inc(typed(s, v)?)),
        "ttp.statements/1" => Box::new(statements::Statements(typed(s, v)?, statements::TOP)),
        _ => {
            return Err(RenderError::UnknownSchema {
                schema,
                known: SCHEMAS.join(", "),
            });
        }
    })
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
