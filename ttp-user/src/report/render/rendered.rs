//! What every kind of saved result provides ([`Rendered`]) and how
//! rendering one fails ([`RenderError`]).
use std::path::{Path, PathBuf};

use super::table::Table;

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
