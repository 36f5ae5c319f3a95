//! Every file a command writes, one format per file (as hyperfine's
//! exporters): each format implements `ttp_sys::sys::export::Exporter`
//! (a result → the bytes of its file), and an output request is a format
//! and a path, written atomically through [`crate::report::atomic`].
//!
//! | file | format | results |
//! |---|---|---|
//! | `json.rs` | pretty JSON and a newline; JSON Lines | every `--json` document; `lab export`'s study files |
//! | `text.rs` | the terminal report, Markdown | every [`Rendered`](crate::report::render::Rendered) result |
//! | `svg.rs` | SVG charts | TTPv2, vprofile, statements, load |
//! | `dot.rs` | Graphviz DOT | blame's graph |
//! | `chrome.rs` | Chrome Trace Event Format | `--trace` |
//! | `hgrm.rs` | HdrHistogram percentile text | `load --hgrm` |
//!
//! The OpenMetrics and OTLP exporters of `serve` implement the same trait
//! in `ttp-serve` (`serve/openmetrics.rs`, `serve/otlp.rs`): that crate
//! sits below this one.
pub mod chrome;
pub(crate) mod dot;
pub(crate) mod hgrm;
pub(crate) mod json;
pub(crate) mod svg;
pub mod text;

use std::path::Path;

use ttp_sys::sys::export::{ExportError, Exporter};

use super::atomic::{WriteError, write_result, write_unannounced};

/// A result file that could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error(transparent)]
    Export(#[from] ExportError),
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// Writes `format` to `path` atomically and announces `wrote PATH`.
pub(crate) fn write(path: &Path, format: &dyn Exporter) -> Result<(), OutputError> {
    Ok(write_result(path, &format.serialize()?)?)
}

/// Writes `format` to `path` atomically without a `wrote PATH` line: for a
/// file rewritten while measuring (announced once at the end, if at all),
/// and for the files of the commands that have never announced theirs.
pub fn write_unannounced_file(path: &Path, format: &dyn Exporter) -> Result<(), OutputError> {
    Ok(write_unannounced(path, &format.serialize()?)?)
}

/// Output requests, written in the order they were made (hyperfine's
/// `ExportManager`): a command adds a (format, path) pair for each file
/// the user asked for and writes them all at once.
#[derive(Default)]
pub(crate) struct Outputs<'a> {
    requests: Vec<(&'a Path, Box<dyn Exporter + 'a>, bool)>,
}

impl<'a> Outputs<'a> {
    /// Asks for `format` in `path`, when a path was given; announced.
    pub(crate) fn add(&mut self, path: Option<&'a Path>, format: impl Exporter + 'a) -> &mut Self {
        if let Some(p) = path {
            self.requests.push((p, Box::new(format), true));
        }
        self
    }

    /// The same, without the `wrote PATH` line ([`write_unannounced_file`]).
    pub(crate) fn add_unannounced(
        &mut self,
        path: Option<&'a Path>,
        format: impl Exporter + 'a,
    ) -> &mut Self {
        if let Some(p) = path {
            self.requests.push((p, Box::new(format), false));
        }
        self
    }

    /// Writes every requested file; stops at the first that fails.
    pub(crate) fn write(&self) -> Result<(), OutputError> {
        for (path, format, announce) in &self.requests {
            if *announce {
                write(path, format.as_ref())?;
            } else {
                write_unannounced_file(path, format.as_ref())?;
            }
        }
        Ok(())
    }
}
