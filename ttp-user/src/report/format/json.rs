//! JSON: the document pretty-printed with a newline at the end, as every
//! `--json` file and `report --format json` have it.
use ttp_sys::sys::export::{ExportError, Exporter};

/// A serialisable result as JSON.
pub struct Json<'a, T: serde::Serialize + ?Sized>(pub &'a T);

impl<T: serde::Serialize + ?Sized> Exporter for Json<'_, T> {
    fn serialize(&self) -> Result<Vec<u8>, ExportError> {
        let mut bytes =
            serde_json::to_vec_pretty(self.0).map_err(|e| ExportError(e.to_string()))?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}
