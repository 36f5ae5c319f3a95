//! Text: a result's terminal report and its Markdown (a title, the main
//! table and the headline result), as `report --format text|markdown`
//! shows them and `--export-markdown` writes them.
use ttp_sys::sys::export::{ExportError, Exporter};

use crate::report::render::Rendered;

/// The terminal report.
pub(crate) struct Text<'a>(pub &'a dyn Rendered);

impl Exporter for Text<'_> {
    fn serialize(&self) -> Result<Vec<u8>, ExportError> {
        Ok(self.0.text().into_bytes())
    }
}

/// The Markdown table and headline.
pub(crate) struct Markdown<'a>(pub &'a dyn Rendered);

impl Exporter for Markdown<'_> {
    fn serialize(&self) -> Result<Vec<u8>, ExportError> {
        Ok(self.0.markdown().into_bytes())
    }
}
