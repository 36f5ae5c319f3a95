//! Result files (in the formats of `report/format/`): written atomically (`sys::atomic`: a reader or a crash sees
//! the previous complete file or the new complete one), then named on stderr
//! as `wrote PATH`, so that every command says the same thing about the
//! files it leaves.
use std::{
    io,
    path::{Path, PathBuf},
};

use ttp_sys::sys::atomic::write;

/// A result file that could not be written; shown as "writing PATH: cause".
#[derive(Debug, thiserror::Error)]
#[error("writing {}", path.display())]
pub struct WriteError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

/// Says on stderr that `path` was written.
pub(crate) fn announce(path: &Path) {
    eprintln!("wrote {}", path.display());
}

/// Writes `bytes` to `path` atomically and announces it.
pub(crate) fn write_result(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    write_unannounced(path, bytes)?;
    announce(path);
    Ok(())
}

/// Writes `bytes` to `path` atomically, without the `wrote PATH` line.
pub(crate) fn write_unannounced(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    write(path, bytes).map_err(|source| WriteError {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches an error that loses the path or the cause.
    #[test]
    fn failed_write_names_the_path_and_the_cause() {
        let path = Path::new("/nonexistent-ttp-dir/out.json");
        let e = write_result(path, b"1").unwrap_err();
        assert_eq!(e.to_string(), "writing /nonexistent-ttp-dir/out.json");
        assert_eq!(e.source.kind(), io::ErrorKind::NotFound);
    }
}
