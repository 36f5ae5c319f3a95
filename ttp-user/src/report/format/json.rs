//! JSON: the document pretty-printed with a newline at the end, as every
//! `--json` file and `report --format json` have it.
use ttp_sys::sys::export::{ExportError, Exporter};

/// A serialisable result as JSON.
pub(crate) struct Json<'a, T: serde::Serialize + ?Sized>(pub &'a T);

impl<T: serde::Serialize + ?Sized> Exporter for Json<'_, T> {
    fn serialize(&self) -> Result<Vec<u8>, ExportError> {
        let mut bytes =
            serde_json::to_vec_pretty(self.0).map_err(|e| ExportError(e.to_string()))?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}

/// JSON Lines: a header object on the first line, then one object per
/// line (the study files of `lab export`, which `analyze` reads).
pub(crate) struct JsonLines<'a, H: serde::Serialize, T: serde::Serialize> {
    pub header: &'a H,
    pub rows: &'a [T],
}

impl<H: serde::Serialize, T: serde::Serialize> Exporter for JsonLines<'_, H, T> {
    fn serialize(&self) -> Result<Vec<u8>, ExportError> {
        let err = |e: serde_json::Error| ExportError(e.to_string());
        let mut bytes = serde_json::to_vec(self.header).map_err(err)?;
        bytes.push(b'\n');
        for row in self.rows {
            bytes.extend(serde_json::to_vec(row).map_err(err)?);
            bytes.push(b'\n');
        }
        Ok(bytes)
    }
}
