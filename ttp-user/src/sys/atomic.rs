//! Atomic file writes: to a temporary file in the same directory, flushed,
//! then renamed over the target. A reader (or a crash) sees either the
//! previous complete file or the new complete one.
use std::{
    fs,
    io::{self, Write},
    path::Path,
};

/// Writes `bytes` to `path` atomically.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Serialises `value` as pretty JSON (with a trailing newline) and writes it
/// atomically.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    bytes.push(b'\n');
    write(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a writer that leaves the temporary file behind or does not
    /// replace an existing file.
    #[test]
    fn replaces_existing_file_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("ttp-atomic-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.json");
        write(&path, b"old").unwrap();
        write_json(&path, &serde_json::json!({"a": 1})).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "{\n  \"a\": 1\n}\n");
        let leftovers: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp."))
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
